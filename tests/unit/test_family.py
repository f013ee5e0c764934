"""C51 projection and loss, noisy layers, by hand."""

import math

import pytest
import torch

from rlrun.algos.dqn import dqn_learner
from rlrun.nets.networks import NoisyLinear, QNetwork
from rlrun.replay import Batch


def constant_c51(probs, n_actions=2):
    """A C51 net whose output distribution is `probs` for every state and action."""
    net = QNetwork(1, n_actions, hidden_sizes=[4], num_atoms=len(probs), v_min=0.0, v_max=len(probs) - 1.0)
    with torch.no_grad():
        net.head.weight.zero_()
        net.head.bias.copy_(torch.log(torch.tensor(probs)).repeat(n_actions))
    return net


def batch(rewards, discounts):
    n = len(rewards)
    return Batch(
        torch.zeros(n, 1),
        torch.zeros(n, dtype=torch.long),
        torch.tensor(rewards),
        torch.zeros(n, 1),
        torch.tensor(discounts),
        torch.arange(n),
        None,
        torch.zeros(n),
    )


def test_c51_projection_by_hand():
    p = [0.1, 0.2, 0.3, 0.3, 0.1]  # support 0, 1, 2, 3, 4
    net = constant_c51(p)
    learner = dqn_learner(net, torch.optim.SGD(net.parameters(), lr=0.0), loss="cross_entropy")
    m = learner.loss.td_target(batch([0.5, 1.0, -3.0, 0.0], [1.0, 0.0, 1.0, 1.0]))
    expected = torch.tensor(
        [
            # r=0.5: atoms shift to 0.5, 1.5, 2.5, 3.5, 4.5 (clipped to 4, an exact hit)
            [0.05, 0.05 + 0.10, 0.10 + 0.15, 0.15 + 0.15, 0.15 + 0.10],
            # terminal, r=1: everything lands exactly on atom 1
            [0.0, 1.0, 0.0, 0.0, 0.0],
            # r=-3: -3, -2, -1, 0 clip to v_min=0; 1 is exact
            [0.1 + 0.2 + 0.3 + 0.3, 0.1, 0.0, 0.0, 0.0],
            # r=0, discount 1: identity
            p,
        ]
    )
    torch.testing.assert_close(m, expected)
    torch.testing.assert_close(m.sum(dim=1), torch.ones(4))


def test_c51_mass_is_conserved_for_random_targets():
    torch.manual_seed(0)
    net = QNetwork(3, 4, hidden_sizes=[16], num_atoms=11, v_min=-5, v_max=5)
    learner = dqn_learner(net, torch.optim.SGD(net.parameters(), lr=0.0), loss="cross_entropy")
    b = Batch(
        torch.randn(64, 3),
        torch.randint(0, 4, (64,)),
        torch.randn(64) * 4,
        torch.randn(64, 3),
        torch.rand(64),
        torch.arange(64),
        None,
        torch.zeros(64),
    )
    m = learner.loss.td_target(b)
    assert (m >= 0).all()
    torch.testing.assert_close(m.sum(dim=1), torch.ones(64))


def test_c51_loss_is_cross_entropy_and_gives_per_priorities():
    p = [0.1, 0.2, 0.3, 0.3, 0.1]
    net = constant_c51(p)
    learner = dqn_learner(net, torch.optim.SGD(net.parameters(), lr=0.0), loss="cross_entropy")
    b = batch([1.0], [0.0])  # target: all mass on atom 1, so CE = -log p[1]
    metrics = learner.update(b)
    assert metrics["td_loss"].item() == pytest.approx(-math.log(0.2), rel=1e-5)
    assert metrics["priority"].item() == pytest.approx(-math.log(0.2), rel=1e-5)
    # Q is the expectation over the support: 0*.1 + 1*.2 + 2*.3 + 3*.3 + 4*.1
    assert metrics["q_mean"].item() == pytest.approx(2.1, rel=1e-5)
    assert net(torch.zeros(1, 1))[0, 0].item() == pytest.approx(2.1, rel=1e-5)


def test_loss_must_fit_the_network():
    with pytest.raises(ValueError, match="cross_entropy"):
        dqn_learner(QNetwork(1, 2, num_atoms=5), torch.optim.SGD([torch.zeros(1)], lr=0.1), loss="huber")
    with pytest.raises(ValueError):
        dqn_learner(QNetwork(1, 2), torch.optim.SGD([torch.zeros(1)], lr=0.1), loss="cross_entropy")


def test_noisy_linear_initialisation_follows_the_paper():
    layer = NoisyLinear(64, 8, sigma0=0.5)
    bound = 1 / math.sqrt(64)
    assert layer.weight_mu.abs().max() <= bound and layer.bias_mu.abs().max() <= bound
    torch.testing.assert_close(layer.weight_sigma, torch.full((8, 64), 0.5 * bound))
    torch.testing.assert_close(layer.bias_sigma, torch.full((8,), 0.5 * bound))


def test_a_noisy_layer_in_training_applies_the_factorised_noisy_weight():
    """w = mu_w + sigma_w * outer(f(eps_out), f(eps_in)), b = mu_b + sigma_b * f(eps_out), written out."""
    torch.manual_seed(0)
    layer = NoisyLinear(6, 3, sigma0=0.5)
    with torch.no_grad():  # sigma as large as mu, so a dropped noise term shows
        layer.weight_sigma.uniform_(-1, 1)
        layer.bias_sigma.uniform_(-1, 1)
    x = torch.randn(4, 6)
    weight = layer.weight_mu + layer.weight_sigma * torch.outer(layer.eps_out, layer.eps_in)
    expected = x @ weight.T + layer.bias_mu + layer.bias_sigma * layer.eps_out
    torch.testing.assert_close(layer(x), expected)


def test_noise_is_resampled_and_eval_uses_mean_weights():
    torch.manual_seed(0)
    net = QNetwork(4, 2, hidden_sizes=[32], noisy=True)
    x = torch.randn(5, 4)
    a = net(x)
    torch.testing.assert_close(net(x), a)  # same noise until resampled
    net.reset_noise()
    assert not torch.allclose(net(x), a)
    net.eval()
    mean_out = net(x)
    net.reset_noise()
    torch.testing.assert_close(net(x), mean_out)  # evaluation ignores the noise
    layer = net.trunk[0]
    torch.testing.assert_close(layer(x), torch.nn.functional.linear(x, layer.weight_mu, layer.bias_mu))


def test_learner_resamples_noise_every_update():
    torch.manual_seed(0)
    net = QNetwork(1, 2, hidden_sizes=[8], noisy=True)
    learner = dqn_learner(net, torch.optim.SGD(net.parameters(), lr=0.0))
    before_online = net.head.eps_out.clone()
    before_target = learner.target.head.eps_out.clone()
    learner.update(batch([1.0], [0.5]))
    assert not torch.equal(net.head.eps_out, before_online)
    assert not torch.equal(learner.target.head.eps_out, before_target)
    assert not torch.equal(net.head.eps_out, learner.target.head.eps_out)  # independent noise


def test_dueling_c51_shapes():
    net = QNetwork(3, 4, hidden_sizes=[8], dueling=True, num_atoms=7)
    assert net.dist_logits(torch.zeros(2, 3)).shape == (2, 4, 7)
    assert net(torch.zeros(2, 3)).shape == (2, 4)


@pytest.mark.parametrize("max_norm", [1e-3, 1e3])
def test_gradient_clipping_scales_the_step_to_max_norm(max_norm):
    """With SGD at lr 1 the parameter change is the (clipped) gradient: its global norm is max_norm when
    the raw norm is above it, and the raw norm (reported as grad_norm) when below."""
    torch.manual_seed(0)
    net = QNetwork(3, 2, hidden_sizes=[8])
    before = [p.detach().clone() for p in net.parameters()]
    learner = dqn_learner(
        net, torch.optim.SGD(net.parameters(), lr=1.0), loss="mse", max_grad_norm=max_norm, target_update_period=10
    )
    gen = torch.Generator().manual_seed(0)
    b = Batch(
        torch.randn(16, 3, generator=gen),
        torch.randint(0, 2, (16,), generator=gen),
        torch.randn(16, generator=gen) * 5,
        torch.randn(16, 3, generator=gen),
        torch.full((16,), 0.9),
        torch.arange(16),
        None,
        torch.zeros(16),
    )
    raw = learner.update(b)["grad_norm"].item()
    step = torch.sqrt(sum(((p.detach() - q) ** 2).sum() for p, q in zip(net.parameters(), before))).item()
    assert raw > 1e-3
    assert step == pytest.approx(min(raw, max_norm), rel=1e-4)
