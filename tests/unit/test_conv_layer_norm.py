"""`network.conv_layer_norm`: a LayerNorm over each convolution's (C, H, W) output, as CleanRL's pqn_atari
builds the Nature CNN (Conv2d, LayerNorm([32, 20, 20]), ReLU, ..., Linear(3136, 512), LayerNorm(512), ReLU)."""

import copy
import math

import pytest
import torch
from torch import nn

from rlrun.errors import ConfigError
from rlrun.nets.networks import QNetwork
from rlrun.nets.stacked import VmapQNetwork, stack_networks


def nature(conv_layer_norm: bool, seed: int = 0) -> QNetwork:
    torch.manual_seed(seed)
    shape = (4, 84, 84)
    return QNetwork(math.prod(shape), 6, hidden_sizes=(512,), encoder="nature_cnn", obs_shape=shape,
                    conv_layer_norm=conv_layer_norm)  # fmt: skip


def test_the_nature_cnn_is_normalised_as_cleanrls_pqn():
    encoder = nature(True).trunk[0]
    kinds = [type(m).__name__ for m in encoder]
    assert kinds == ["Conv2d", "LayerNorm", "ReLU"] * 3 + ["Flatten"]
    assert [list(m.normalized_shape) for m in encoder if isinstance(m, nn.LayerNorm)] == [
        [32, 20, 20], [64, 9, 9], [64, 7, 7],
    ]  # fmt: skip
    x = torch.randint(0, 256, (3, 4, 84, 84), dtype=torch.uint8)
    h = encoder[1](encoder[0](x.float() / 255))  # each sample's first conv output: mean 0, variance 1
    torch.testing.assert_close(h.mean((1, 2, 3)), torch.zeros(3), atol=1e-5, rtol=0)
    torch.testing.assert_close(h.var((1, 2, 3), unbiased=False), torch.ones(3), atol=1e-3, rtol=0)


def test_off_the_network_is_what_it_was_weight_for_weight():
    """Off, the encoder keeps its layout (convolutions at trunk.0.0, .2, .4: saved runs load); on, the same
    draws give the same conv and linear weights, each LayerNorm (no random draw) after its conv."""
    plain, normed = nature(False).state_dict(), nature(True).state_dict()
    assert [k for k in plain if k.startswith("trunk.0.")] == [
        f"trunk.0.{i}.{p}" for i in (0, 2, 4) for p in ("weight", "bias")
    ]
    for before, after in (("0.0", "0.0"), ("0.2", "0.3"), ("0.4", "0.6"), ("1", "1")):
        assert torch.equal(plain[f"trunk.{before}.weight"], normed[f"trunk.{after}.weight"])
    assert torch.equal(plain["head.weight"], normed["head.weight"])


def test_k_agents_are_vmapped_each_its_own_network_even_for_minatars_fused_encoder():
    shape = (4, 10, 10)
    nets = []
    for seed in range(3):
        torch.manual_seed(seed)
        nets.append(QNetwork(400, 3, hidden_sizes=(16,), encoder="minatar_cnn", obs_shape=shape, conv_layer_norm=True))
    stacked = stack_networks(copy.deepcopy(nets))
    assert isinstance(stacked, VmapQNetwork)  # StackedQNetwork fuses MinAtar's plain conv only
    x = torch.rand(3, 5, *shape).round()
    for k, net in enumerate(nets):
        torch.testing.assert_close(stacked(x)[k], net(x[k]), atol=1e-5, rtol=0)


def test_it_needs_a_conv_encoder(compose):
    from rlrun.config.validate import validate

    with pytest.raises(ConfigError, match="network.conv_layer_norm.*network.encoder=mlp"):
        validate(compose("network.conv_layer_norm=true"))
    validate(compose("env=atari", "network.conv_layer_norm=true"))
