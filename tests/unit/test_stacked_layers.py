"""Stacked agents' layers on a CPU: each agent computes exactly what its own single network computes."""

import torch

from rlrun.nets.networks import QNetwork, minatar_cnn
from rlrun.nets.stacked import StackedQNetwork
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


def test_each_agents_noise_is_exactly_what_its_single_network_draws():
    """Rainbow's noisy layers: the stacked reset draws per agent and shapes all agents' draws at once."""
    kw = dict(hidden_sizes=[128], num_atoms=51, dueling=True, noisy=True, encoder="minatar_cnn", obs_shape=(4, 10, 10))
    nets = []
    for seed in range(3):
        torch.manual_seed(seed)
        nets.append(QNetwork(400, 6, **kw))
    stacked = StackedQNetwork(nets)
    stacked.reset_noise([torch.Generator().manual_seed(10 + k) for k in range(3)])
    layers = [m for m in stacked.modules() if hasattr(m, "eps_in")]
    for k, net in enumerate(nets):
        net.reset_noise(torch.Generator().manual_seed(10 + k))
        singles = [m for m in net.modules() if hasattr(m, "eps_in")]
        assert len(singles) == len(layers) == 3  # the 128-unit layer, value and advantage
        for single, layer in zip(singles, layers, strict=True):
            assert torch.equal(layer.eps_in[k], single.eps_in) and torch.equal(layer.eps_out[k], single.eps_out)
