"""QR-DQN and IQN: the quantile Huber loss, IQN's tau embedding and both targets, by hand; the config
checks; and (`-m slow`) the learning bars of docs/algorithms.md."""

import math

import pytest
import torch

from rlrun.algos.dqn import dqn_learner
from rlrun.errors import ConfigError
from rlrun.nets.networks import QNetwork
from rlrun.nets.quantile import cosine_features, quantile_huber_loss, quantile_midpoints
from rlrun.replay import Batch

TAUS = torch.tensor([0.25, 0.75])


@pytest.mark.parametrize(
    "targets,kappa,expected",
    [
        # u = 0.5 - 0 = 0.5 (weight 0.25) and 0.5 - 1 = -0.5 (weight |0.75 - 1|): Huber 0.125 each
        ([0.5], 1.0, 0.25 * 0.125 + 0.25 * 0.125),
        ([0.5], 0.0, 0.25 * 0.5 + 0.25 * 0.5),  # kappa 0: the pinball loss, weight * |u|
        # u = 3 and 2, both beyond kappa 1: Huber |u| - 0.5 = 2.5 and 1.5
        ([3.0], 1.0, 0.25 * 2.5 + 0.75 * 1.5),
        ([3.0], 0.0, 0.25 * 3.0 + 0.75 * 2.0),
        # kappa 2: u = 3 is linear, 2 * (3 - 1) / 2 = 2; u = 2 is quadratic, 0.5 * 4 / 2 = 1
        ([3.0], 2.0, 0.25 * 2.0 + 0.75 * 1.0),
        # two target samples: the mean over them of the one-target losses
        ([0.5, 3.0], 1.0, (0.0625 + 1.75) / 2),
    ],
)
def test_quantile_huber_loss_by_hand(targets, kappa, expected):
    """Two quantiles 0 and 1 at fractions 0.25 and 0.75."""
    loss = quantile_huber_loss(torch.tensor([[0.0, 1.0]]), torch.tensor([targets]), TAUS, kappa)
    assert loss.shape == (1,)
    assert loss.item() == pytest.approx(expected, rel=1e-6)


def test_quantile_huber_loss_is_minimised_at_the_quantiles():
    """The minimiser of the pinball loss over samples 0..99 at fraction 0.25 is their 25th percentile."""
    samples = torch.arange(100.0).view(1, 100)
    grid = torch.linspace(0, 99, 397).view(-1, 1)
    losses = quantile_huber_loss(grid, samples.expand(len(grid), -1), torch.tensor([0.25]), kappa=0.0)
    assert 24.0 <= grid[losses.argmin()].item() <= 25.0


def test_quantile_midpoints_and_cosine_features():
    torch.testing.assert_close(quantile_midpoints(4), torch.tensor([0.125, 0.375, 0.625, 0.875]))
    feats = cosine_features(torch.tensor([[0.0, 0.5], [1.0, 1 / 3]]), 3)  # cos(pi * i * tau), i = 0, 1, 2
    assert feats.shape == (2, 2, 3)
    expected = torch.tensor([[[1.0, 1.0, 1.0], [1.0, 0.0, -1.0]], [[1.0, -1.0, 1.0], [1.0, 0.5, -0.5]]])
    torch.testing.assert_close(feats, expected, atol=1e-6, rtol=0)


def batch(n=1, action=0, reward=1.0, discount=0.5):
    return Batch(
        torch.zeros(n, 1),
        torch.full((n,), action, dtype=torch.long),
        torch.full((n,), reward),
        torch.zeros(n, 1),
        torch.full((n,), discount),
        torch.arange(n),
        None,
        torch.zeros(n),
    )


def constant_qr(quantiles):
    """A QR-DQN net whose quantiles are `quantiles` (A x N) in every state."""
    n_actions, n = len(quantiles), len(quantiles[0])
    net = QNetwork(1, n_actions, hidden_sizes=[4], num_quantiles=n)
    with torch.no_grad():
        net.head.weight.zero_()
        net.head.bias.copy_(torch.tensor(quantiles).flatten())
    return net


@pytest.mark.parametrize("double,expected", [(True, [1.0, 1.0]), (False, [3.5, 3.5])])
def test_qr_target_uses_double_or_target_argmax(double, expected):
    """Online quantiles make action 0 greedy (mean 2 vs 1); the target net's own (0, 0) vs (5, 5) make
    action 1 its argmax. Double: r + discount * target's quantiles at the online argmax."""
    net = constant_qr([[0.0, 4.0], [1.0, 1.0]])
    learner = dqn_learner(net, torch.optim.SGD(net.parameters(), lr=0.0), loss="quantile_huber", double=double)
    learner.target.head.bias.data = torch.tensor([0.0, 0.0, 5.0, 5.0])
    torch.testing.assert_close(learner.loss.td_target(batch()), torch.tensor([expected]))


def test_qr_update_loss_priority_and_q_by_hand():
    """Action 1's quantiles (1, 1) at fractions 0.25, 0.75 against targets 1 + 0.5 * (0, 4) = (1, 3):
    u = 0 costs nothing, u = 2 costs Huber 1.5 with weight 0.25 (i = 0) or 0.75 (i = 1), each averaged
    over the 2 targets: (0.25 + 0.75) * 1.5 / 2 = 0.75."""
    net = constant_qr([[0.0, 4.0], [1.0, 1.0]])
    learner = dqn_learner(net, torch.optim.SGD(net.parameters(), lr=0.0), loss="quantile_huber")
    metrics = learner.update(batch(action=1))
    assert metrics["td_loss"].item() == pytest.approx(0.75)
    assert metrics["priority"].item() == pytest.approx(0.75)  # PER priority: the per-sample loss
    assert metrics["q_mean"].item() == pytest.approx(1.0)  # Q: the mean of the quantiles
    torch.testing.assert_close(net(torch.zeros(1, 1)), torch.tensor([[2.0, 1.0]]))


def test_kappa_reaches_the_loss():
    net = constant_qr([[0.0, 4.0], [1.0, 1.0]])
    learner = dqn_learner(net, torch.optim.SGD(net.parameters(), lr=0.0), loss="quantile_huber", kappa=0.0)
    # the pinball loss of the same pairs: (0.25 + 0.75) * |2| / 2
    assert learner.update(batch(action=1))["td_loss"].item() == pytest.approx(1.0)


def hand_iqn():
    """An IQN net with Q(a, tau) = (a + 1) * (1 - cos(pi tau)) for the observation 1: the embedding
    phi(tau) = ReLU(1 - cos(pi tau)) times the observation enters the one hidden layer, whose units are
    (phi, 0); head weights (1, 0) and (2, 0)."""
    net = QNetwork(1, 2, hidden_sizes=[2], layer_norm=False, tau_embedding_dim=3, iqn_acting_taus=4)
    with torch.no_grad():
        for p in net.parameters():
            p.zero_()
        net.tau_embedding.weight[0, :2] = torch.tensor([1.0, -1.0])
        net.trunk[0].weight[0, 0] = 1.0
        net.head.weight[:, 0] = torch.tensor([1.0, 2.0])
    return net


def test_iqn_quantiles_shapes_and_values():
    net = hand_iqn()
    taus = torch.tensor([[0.5, 1 / 3, 0.0], [1.0, 0.5, 0.5]])
    out = net.quantile_values(torch.ones(2, 1), taus)
    assert out.shape == (2, 2, 3)  # (B, A, N)
    base = 1 - torch.cos(math.pi * taus)
    torch.testing.assert_close(out, torch.stack([base, 2 * base], dim=1))
    # Q: the mean over the K = 4 evenly spaced acting fractions
    q = (1 - torch.cos(math.pi * quantile_midpoints(4))).mean()
    torch.testing.assert_close(net(torch.ones(1, 1)), torch.tensor([[q, 2 * q]]))


def test_iqn_target_with_fixed_taus(monkeypatch):
    """N' = 2 target fractions 0.5 and 1/3; a* = 1 (Q(1) = 2 Q(0)); target 1 + 0.5 * 2 * (1, 0.5)."""
    net = hand_iqn()
    learner = dqn_learner(net, torch.optim.SGD(net.parameters(), lr=0.0), loss="quantile_huber", iqn_target_taus=2)
    drawn = []

    def fixed(shape, n):
        drawn.append((tuple(shape), n))
        return torch.tensor([0.5, 1 / 3]).expand(*shape, n)

    monkeypatch.setattr(learner.loss, "sample_taus", fixed)
    b = batch()
    b = b._replace(next_obs=torch.ones(1, 1))
    torch.testing.assert_close(learner.loss.td_target(b), torch.tensor([[2.0, 1.5]]))
    assert drawn == [((1,), 2)]


def test_iqn_update_draws_n_and_n_prime_taus_from_the_agents_generator():
    """Two learners with equally seeded generators make the same update; another seed does not."""

    def run(seed):
        torch.manual_seed(0)
        net = QNetwork(3, 2, hidden_sizes=[8], tau_embedding_dim=4)
        gen = torch.Generator().manual_seed(seed)
        learner = dqn_learner(
            net, torch.optim.SGD(net.parameters(), lr=0.1), loss="quantile_huber", noise_generator=gen, iqn_taus=5
        )
        b = Batch(
            torch.randn(6, 3),
            torch.randint(0, 2, (6,)),
            torch.randn(6),
            torch.randn(6, 3),
            torch.full((6,), 0.9),
            torch.arange(6),
            None,
            torch.zeros(6),
        )
        torch.manual_seed(123)  # the global stream must not matter
        learner.update(b)
        return net.head.weight.detach().clone(), gen.initial_seed(), torch.rand(1, generator=gen)

    (w0, _, next0), (w0b, _, next0b), (w1, _, _) = run(0), run(0), run(1)
    assert torch.equal(w0, w0b) and torch.equal(next0, next0b)
    assert not torch.equal(w0, w1)
    # 6 x 5 online taus, then 6 x 8 target taus were drawn: the generator's next number is the 79th
    gen = torch.Generator().manual_seed(0)
    assert torch.equal(torch.rand(6 * 5 + 6 * 8 + 1, generator=gen)[-1:], next0)


def test_loss_must_fit_a_quantile_network():
    with pytest.raises(ValueError, match="quantile_huber"):
        dqn_learner(QNetwork(1, 2, num_quantiles=5), torch.optim.SGD([torch.zeros(1)], lr=0.1), loss="huber")
    with pytest.raises(ValueError, match="quantile"):
        dqn_learner(QNetwork(1, 2), torch.optim.SGD([torch.zeros(1)], lr=0.1), loss="quantile_huber")


@pytest.mark.parametrize(
    "overrides,key",
    [
        (["network=qrdqn", "algo.loss=huber"], "algo.loss"),
        (["network=iqn", "algo.loss=cross_entropy"], "algo.loss"),
        (["algo.loss=quantile_huber"], "algo.loss"),
        (["network=qrdqn", "network.num_atoms=51"], "network.num_quantiles"),
        (["network=iqn", "network.num_quantiles=8"], "network.tau_embedding_dim"),
        (["network=qrdqn", "algo.kappa=-1"], "algo.kappa"),
        (["network=iqn", "algo.iqn_taus=0"], "algo.iqn_taus"),
    ],
)
def test_bad_quantile_configs_are_refused_by_key(compose, overrides, key):
    from rlrun.config.validate import validate

    with pytest.raises(ConfigError) as e:
        validate(compose(*overrides))
    assert e.value.key == key


@pytest.mark.parametrize("network", ["qrdqn", "iqn"])
def test_quantile_options_compose_and_validate(compose, network):
    from rlrun.config.validate import validate

    cfg = compose(f"network={network}", "buffer=per", "network.dueling=true", "network.noisy=true")
    validate(cfg)
    assert cfg.algo.loss == "quantile_huber"


# --- learning bars (docs/algorithms.md): 5 seeds in one process, each agent its single-seed run ----------
BARS = [
    (["network=qrdqn"], "cartpole", 475, 100_000, 4),
    (["network=iqn"], "cartpole", 475, 100_000, 4),
    (["network=qrdqn"], "acrobot", -100, 100_000, 3),
    (["network=iqn"], "acrobot", -100, 100_000, 3),
]


@pytest.mark.slow
@pytest.mark.parametrize("overrides,env,threshold,budget,need", BARS, ids=[f"{o[0]}-{e}" for o, e, *_ in BARS])
def test_quantile_learning_bars(compose, tmp_path, overrides, env, threshold, budget, need):
    import rlrun.train as rt

    quiet = ["eval.interval=0", "log.plot=false", "log.progress_bar=false", "checkpoint.every=0"]
    budgeted = [f"total_steps={budget}", f"env.reward_threshold={threshold}", "stop_on_solve=true"]
    summary = rt.train(compose(f"env={env}", *overrides, "seed=0", "seeds=5", *budgeted, *quiet), tmp_path)
    solved = {seed: agent["solved_step"] for seed, agent in summary["agents"].items()}
    print(overrides, env, "solved steps per seed:", solved)
    assert sum(step is not None for step in solved.values()) >= need, solved
