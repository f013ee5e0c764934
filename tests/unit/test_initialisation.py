"""`network.init`: the schemes of the code each is named after, on the convolutions as on the linear layers."""

import math

import pytest
import torch
from torch import nn

from rlrun.nets.networks import QNetwork


def nature_cnn_net(init: str, **kw) -> QNetwork:
    torch.manual_seed(0)
    shape = (4, 84, 84)
    return QNetwork(math.prod(shape), 6, hidden_sizes=(512,), encoder="nature_cnn", obs_shape=shape, init=init, **kw)


def layers(net: QNetwork) -> list[nn.Module]:
    return [m for m in net.modules() if isinstance(m, (nn.Conv2d, nn.Linear))]


def test_orthogonal_covers_the_convolutions_with_gain_sqrt2_and_the_output_with_gain_1():
    """CleanRL's layer_init: each layer's weight, as a (out, in x kh x kw) matrix, has orthogonal rows of
    squared norm gain^2; biases zero."""
    net = nature_cnn_net("orthogonal")
    found = layers(net)
    assert [type(m) for m in found] == [nn.Conv2d] * 3 + [nn.Linear] * 2
    for m in found:
        w = m.weight.detach().flatten(1)  # every layer here has fewer outputs than inputs
        gain_sq = 1.0 if m is net.head else 2.0
        torch.testing.assert_close(w @ w.T, gain_sq * torch.eye(w.shape[0]), atol=1e-4, rtol=0)
        assert m.bias.abs().sum() == 0


def test_xavier_is_dopamines_glorot_uniform_without_gain_on_every_layer():
    """Dopamine's networks: uniform on +-sqrt(6 / (fan_in + fan_out)), fan = channels x kernel area, so the
    standard deviation is sqrt(2 / (fan_in + fan_out)) (torch's default for the first conv is 22% wider)."""
    for m in layers(nature_cnn_net("xavier")):
        w = m.weight.detach()
        area = w[0, 0].numel()
        fan_in, fan_out = w.shape[1] * area, w.shape[0] * area
        bound = math.sqrt(6 / (fan_in + fan_out))
        assert w.abs().max() <= bound
        assert w.std().item() == pytest.approx(math.sqrt(2 / (fan_in + fan_out)), rel=0.05), m
        assert m.bias.abs().sum() == 0


def test_noisy_layers_keep_the_papers_initialisation_under_any_scheme():
    plain, noisy = nature_cnn_net("default", noisy=True), nature_cnn_net("orthogonal", noisy=True)
    for name, value in plain.state_dict().items():
        if "mu" in name or "sigma" in name:
            assert torch.equal(noisy.state_dict()[name], value), name
