"""A target copied at every update (period 1, tau 1) is the online net: Double DQN's online forward skipped."""

from __future__ import annotations

import copy

import pytest
import torch

from rlrun.algos.dqn import TDLoss, dqn_learner
from rlrun.algos.update import UpdateStep
from rlrun.nets.networks import QNetwork
from rlrun.replay import Batch


def net(seed: int = 0, noisy: bool = False) -> QNetwork:
    torch.manual_seed(seed)
    return QNetwork(3, 4, hidden_sizes=[16], dueling=True, noisy=noisy)


def batches(n: int) -> list[Batch]:
    g = torch.Generator().manual_seed(1)
    out = []
    for _ in range(n):
        obs, next_obs = torch.randn(8, 3, generator=g), torch.randn(8, 3, generator=g)
        actions = torch.randint(0, 4, (8,), generator=g)
        out.append(
            Batch(
                obs,
                actions,
                torch.randn(8, generator=g),
                next_obs,
                torch.full((8,), 0.9),
                torch.arange(8),
                None,
                torch.zeros(8),
            )
        )
    return out


def by_hand(online: QNetwork, *, double: bool, period: int) -> UpdateStep:
    """The learner as dqn_learner built it before: Double DQN's online argmax computed by its own forward."""
    target = copy.deepcopy(online).requires_grad_(False)
    td = TDLoss(online, target, double=double, loss="huber")
    opt = torch.optim.Adam(online.parameters(), lr=1e-2)
    return UpdateStep(online, opt, td, target=target, tau=1.0, target_update_period=period, max_grad_norm=None)


@pytest.mark.parametrize(
    ("settings", "noisy", "skipped"),
    [
        ({"target_update_period": 1, "tau": 1.0}, False, True),
        ({"target_update_period": 2, "tau": 1.0}, False, False),
        ({"target_update_period": 1, "tau": 0.5}, False, False),
        ({"target_update_period": 1, "tau": [1.0, 1.0]}, False, False),  # per-agent rates (PBT) may change
        ({"target_update_period": 1, "tau": 1.0}, True, False),  # online and target draw their own noise
        ({}, False, False),
    ],
)
def test_double_dqn_keeps_its_online_forward_unless_the_target_is_the_online_net(settings, noisy, skipped):
    online = net(noisy=noisy)
    learner = dqn_learner(online, torch.optim.SGD(online.parameters(), lr=0.1), double=True, **settings)
    assert learner.loss.double is not skipped


def test_skipping_it_trains_the_same_weights_bit_for_bit():
    fast, slow = net(), net()
    learner = dqn_learner(
        fast,
        torch.optim.Adam(fast.parameters(), lr=1e-2),
        double=True,
        loss="huber",
        tau=1.0,
        target_update_period=1,
        max_grad_norm=None,
    )
    reference = by_hand(slow, double=True, period=1)
    for b in batches(30):
        learner.update(b)
        reference.update(b)
    assert all(torch.equal(a, b) for a, b in zip(fast.state_dict().values(), slow.state_dict().values()))


def test_the_comparison_sees_a_target_that_lags():
    # the control: with a target copied every 2nd update, the online argmax matters, so Double DQN and the
    # target's own argmax train different weights
    double, plain = net(), net()
    a, b = by_hand(double, double=True, period=2), by_hand(plain, double=False, period=2)
    for batch in batches(30):
        a.update(batch)
        b.update(batch)
    assert not all(torch.equal(x, y) for x, y in zip(double.state_dict().values(), plain.state_dict().values()))
