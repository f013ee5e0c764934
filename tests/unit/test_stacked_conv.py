"""Stacked agents' MinAtar convolutions: each agent's features are its own encoder's."""

import torch

from rlrun.nets.networks import minatar_cnn
from rlrun.nets.stacked_layers import StackedConvEncoder


def encoders(channels: int, agents: int) -> list[torch.nn.Sequential]:
    torch.manual_seed(0)
    return [minatar_cnn(channels) for _ in range(agents)]


def test_on_a_cpu_each_agents_features_are_exactly_its_single_encoders():
    """K plain convolutions on a CPU: the same floats as each agent's single run, in grads too."""
    singles = encoders(channels=10, agents=3)
    stacked = StackedConvEncoder(singles)
    x = torch.randint(0, 2, (3, 32, 10, 10, 10)).float()
    out = stacked(x)
    assert out.shape == (3, 32, 16 * 8 * 8)  # 3x3 without padding
    for k, single in enumerate(singles):
        assert torch.equal(out[k], single(x[k]))
    out.square().sum().backward()
    for k, single in enumerate(singles):
        single(x[k]).square().sum().backward()
        conv = single[0]
        assert torch.equal(stacked.weights[0].grad[k], conv.weight.grad)
        assert torch.equal(stacked.biases[0].grad[k], conv.bias.grad)


def test_the_grouped_convolution_for_a_gpu_computes_the_same_features():
    """The GPU's path (one grouped convolution over the agents' channels), run here on a CPU."""
    stacked = StackedConvEncoder(encoders(channels=4, agents=2))
    x = torch.randint(0, 2, (2, 5, 4, 10, 10)).float()
    assert torch.allclose(stacked._grouped(x), stacked(x), rtol=0, atol=1e-5)
