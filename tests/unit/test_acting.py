"""The acting path: greedy actions are the argmax of the network's own forward, for every kind of network,
single or stacked, in the flat layout of a run's vector env; a dueling network's streams combine in one place."""

import re
from pathlib import Path

import numpy as np
import pytest
import torch

import rlrun
from rlrun.algos.acting import GreedyActor
from rlrun.nets.heads import dueling
from rlrun.nets.networks import QNetwork
from rlrun.nets.stacked import StackedQNetwork, VmapQNetwork

MLP = dict(obs_dim=6, layer_norm=False)
MINATAR = dict(obs_dim=700, obs_shape=(7, 10, 10), encoder="minatar_cnn", hidden_sizes=[128], layer_norm=False)
VARIANTS = {
    "mlp": (MLP, dict(hidden_sizes=[64, 64])),
    "mlp-layernorm": (MLP, dict(hidden_sizes=[128, 128], layer_norm=True)),
    "mlp-dueling-tanh": (MLP, dict(hidden_sizes=[48, 24], activation="tanh", dueling=True)),
    "mlp-noisy-c51": (MLP, dict(hidden_sizes=[16], noisy=True, num_atoms=11, dueling=True)),
    "mlp-qr": (MLP, dict(hidden_sizes=[16, 16], num_quantiles=7, dueling=True)),
    "mlp-iqn": (MLP, dict(hidden_sizes=[16, 16], tau_embedding_dim=8)),
    "minatar-dqn": (MINATAR, dict(dueling=True)),
    "minatar-rainbow": (MINATAR, dict(dueling=True, noisy=True, num_atoms=51, v_min=-10.0, v_max=100.0)),
}


def _nets(variant: str, agents: int) -> tuple[list[QNetwork], tuple[int, ...]]:
    """`agents` networks of a variant (seeds 0, 1, ...) and their observation shape."""
    base, kwargs = VARIANTS[variant]
    nets = []
    for seed in range(agents):
        torch.manual_seed(seed)
        nets.append(QNetwork(n_actions=3, **{**base, **kwargs}))
    return nets, tuple(base.get("obs_shape", (base["obs_dim"],)))


def _obs(shape: tuple[int, ...], *lead: int) -> np.ndarray:
    rng = np.random.default_rng(3)
    if len(shape) == 1:
        return rng.normal(size=(*lead, *shape)).astype(np.float32)
    return (rng.random((*lead, *shape)) < 0.3).astype(np.uint8)  # MinAtar's 0/1 channels


@pytest.mark.parametrize("variant", VARIANTS)
def test_greedy_actions_are_the_argmax_of_the_network(variant):
    """Single and stacked (fused and vmapped) networks, training and eval mode (noisy layers' noise, or mu
    alone): `actor(obs)` is the argmax of the module's Q-values; `act` takes the vector env's flat layout."""
    nets, shape = _nets(variant, 3)
    obs = _obs(shape, 3, 5)
    for training in (True, False):
        for k, net in enumerate([*nets, StackedQNetwork(nets), VmapQNetwork(nets)]):
            net.train(training)
            x = obs if k >= 3 else obs[k]
            with torch.no_grad():
                expected = net(torch.from_numpy(x)).argmax(dim=-1).numpy()
            actor = GreedyActor(net, torch.device("cpu"))
            actions = actor(x)
            assert actions.dtype == np.int64 and actions.shape == x.shape[: 2 if k >= 3 else 1]
            np.testing.assert_array_equal(actions, expected)
            np.testing.assert_array_equal(actor(torch.from_numpy(x)), expected)
            flat = x.reshape(-1, *shape)
            np.testing.assert_array_equal(actor.act(flat), expected.reshape(-1))


def test_stacked_agents_act_as_their_single_networks():
    nets, shape = _nets("mlp-layernorm", 3)
    obs = _obs(shape, 3, 5)
    actions = GreedyActor(StackedQNetwork(nets), torch.device("cpu"))(obs)
    for k, net in enumerate(nets):
        np.testing.assert_array_equal(actions[k], GreedyActor(net, torch.device("cpu"))(obs[k]))


@pytest.mark.parametrize("variant", ["mlp-dueling-tanh", "mlp-noisy-c51", "mlp-qr", "minatar-dqn"])
def test_dueling_outputs_are_value_plus_advantage_minus_its_mean(variant):
    nets, shape = _nets(variant, 1)
    net = nets[0].eval()
    x = torch.from_numpy(_obs(shape, 4))
    with torch.no_grad():
        h = net._features(x)
        per_action = net.outputs_per_action
        value = net.value(h).view(-1, 1, per_action)
        adv = net.advantage(h).view(-1, 3, per_action)
        expected = value + adv - adv.mean(dim=1, keepdim=True)
        torch.testing.assert_close(net.dist_logits(x), expected)
        torch.testing.assert_close(dueling(value, adv, action_dim=1), expected)


def test_the_dueling_combine_is_written_once():
    """`rlrun.nets.heads.dueling` is the one place that subtracts the mean advantage."""
    source = Path(rlrun.__file__).parent
    hits = [
        f"{path.relative_to(source)}:{n}"
        for path in sorted(source.rglob("*.py"))
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if re.search(r"adv\w*\.mean\(", line)
    ]
    assert hits == ["nets/heads.py:30"], hits
