"""The acting path: numpy evaluation of CPU MLPs agrees with the torch module it mirrors."""

import numpy as np
import pytest
import torch

from rlrun.algos.acting import GreedyActor, numpy_forward
from rlrun.nets.networks import QNetwork
from rlrun.nets.stacked import StackedQNetwork

MLP_VARIANTS = [
    dict(hidden_sizes=[64, 64]),
    dict(hidden_sizes=[128, 128], layer_norm=True),
    dict(hidden_sizes=[32], dueling=True, layer_norm=True),
    dict(hidden_sizes=[48, 24], activation="tanh", dueling=True),
]


@pytest.mark.parametrize("kwargs", MLP_VARIANTS)
def test_numpy_forward_matches_torch(kwargs):
    torch.manual_seed(0)
    net = QNetwork(6, 3, **kwargs)
    forward = numpy_forward(net)
    assert forward is not None
    obs = np.random.default_rng(0).normal(size=(64, 6)).astype(np.float32)
    with torch.no_grad():
        expected = net(torch.from_numpy(obs)).numpy()
    np.testing.assert_allclose(forward(obs), expected, rtol=1e-5, atol=1e-5)
    actor = GreedyActor(net, torch.device("cpu"))
    assert actor.uses_numpy
    np.testing.assert_array_equal(actor(obs), expected.argmax(axis=1))


def test_numpy_views_follow_training():
    """The numpy path reads the parameters' own memory: after optimizer steps and a load_state_dict it
    still agrees with the module."""
    torch.manual_seed(1)
    net = QNetwork(4, 2, hidden_sizes=[16, 16], layer_norm=True)
    forward = numpy_forward(net)
    opt = torch.optim.Adam(net.parameters(), lr=0.1, fused=True)
    obs = torch.randn(32, 4)
    for _ in range(3):
        opt.zero_grad()
        net(obs).pow(2).mean().backward()
        opt.step()
    other = QNetwork(4, 2, hidden_sizes=[16, 16], layer_norm=True)
    for state in (None, other.state_dict()):
        if state is not None:
            net.load_state_dict(state)
        with torch.no_grad():
            expected = net(obs).numpy()
        np.testing.assert_allclose(forward(obs.numpy()), expected, rtol=1e-5, atol=1e-5)


def test_stacked_numpy_forward_matches_each_agent():
    torch.manual_seed(2)
    nets = [QNetwork(4, 2, hidden_sizes=[32, 32], layer_norm=True, dueling=True) for _ in range(3)]
    stacked = StackedQNetwork.from_networks(nets)
    actor = GreedyActor(stacked, torch.device("cpu"))
    assert actor.uses_numpy
    obs = np.random.default_rng(1).normal(size=(3, 5, 4)).astype(np.float32)
    actions = actor(obs)
    assert actions.shape == (3, 5)
    for k, net in enumerate(nets):
        single = GreedyActor(net, torch.device("cpu"))
        np.testing.assert_array_equal(actions[k], single(obs[k]))
        with torch.no_grad():
            np.testing.assert_array_equal(actions[k], net(torch.from_numpy(obs[k])).argmax(dim=1).numpy())


@pytest.mark.parametrize("kwargs", [dict(noisy=True), dict(num_atoms=11), dict(activation="gelu")])
def test_other_networks_act_through_torch(kwargs):
    torch.manual_seed(3)
    net = QNetwork(4, 2, hidden_sizes=[16], **kwargs)
    actor = GreedyActor(net, torch.device("cpu"))
    assert not actor.uses_numpy
    obs = np.random.default_rng(2).normal(size=(8, 4)).astype(np.float32)
    with torch.no_grad():
        np.testing.assert_array_equal(actor(obs), net(torch.from_numpy(obs)).argmax(dim=1).numpy())


MINATAR_VARIANTS = {
    "dqn": dict(dueling=True),  # env=minatar's network
    "rainbow": dict(dueling=True, noisy=True, num_atoms=51, v_min=-10.0, v_max=100.0),
    "c51-plain": dict(num_atoms=11),
    "qr": dict(num_quantiles=8),
}


@pytest.mark.parametrize("variant", MINATAR_VARIANTS)
def test_minatar_networks_act_in_numpy_as_their_torch_module(variant):
    """MinAtar's conv encoder, noisy layers (their noise while training, mu alone in eval mode) and C51 heads
    in numpy: single and stacked, the same Q-values as torch."""
    kw = dict(hidden_sizes=[128], layer_norm=False, encoder="minatar_cnn", obs_shape=(7, 10, 10))
    nets = []
    for seed in range(3):
        torch.manual_seed(seed)
        nets.append(QNetwork(700, 6, **kw, **MINATAR_VARIANTS[variant]))
    stacked = StackedQNetwork.from_networks(nets)
    obs = (np.random.default_rng(3).random((3, 5, 7, 10, 10)) < 0.3).astype(np.uint8)
    for training in (True, False):
        for k, net in enumerate([*nets, stacked]):
            net.train(training)
            if net.noisy:
                net.reset_noise(None if k < 3 else [torch.Generator().manual_seed(i) for i in range(3)])
            actor = GreedyActor(net, torch.device("cpu"))
            assert actor.uses_numpy
            x = obs if k == 3 else obs[k]
            with torch.no_grad():
                expected = net(torch.from_numpy(x)).numpy()
            np.testing.assert_allclose(numpy_forward(net)(x), expected, rtol=1e-5, atol=1e-5)
            np.testing.assert_array_equal(actor(x), expected.argmax(axis=-1))
            if k == 3:
                np.testing.assert_array_equal(actor.act(x.reshape(15, 7, 10, 10)), expected.argmax(axis=-1).ravel())
