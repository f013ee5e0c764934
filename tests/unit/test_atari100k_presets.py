"""The Atari 100k presets (+experiment=der_atari100k, drq_eps_atari100k): their keys as Dopamine's gin files
set them, DER's network, and the refusals of the keys they introduced (buffer.augment, sticky actions)."""

from __future__ import annotations

import pytest
import torch

from rlrun.config.validate import validate
from rlrun.errors import ConfigError
from rlrun.nets.networks import QNetwork


def test_der_network_is_two_5x5_stride_5_convs_then_256_units():
    net = QNetwork(4 * 84 * 84, 6, obs_shape=[4, 84, 84], encoder="der_cnn", hidden_sizes=[256], layer_norm=False)
    convs = [m for m in net.modules() if isinstance(m, torch.nn.Conv2d)]
    assert [(c.out_channels, c.kernel_size, c.stride) for c in convs] == [(32, (5, 5), (5, 5)), (64, (5, 5), (5, 5))]
    linears = [m for m in net.modules() if isinstance(m, torch.nn.Linear)]
    assert (linears[0].in_features, linears[0].out_features) == (64 * 3 * 3, 256)  # 84 -> 16 -> 3
    q = net(torch.randint(0, 256, (2, 4, 84, 84), dtype=torch.uint8))
    assert q.shape == (2, 6) and net.input_divisor == 255.0


def test_the_presets_hold_the_protocol_and_their_agents(compose):
    der = compose("+experiment=der_atari100k")
    drq = compose("+experiment=drq_eps_atari100k")
    for cfg in (der, drq):
        validate(cfg)
        assert cfg.total_steps == 100_000 and cfg.env.max_episode_steps == 27_000
        assert cfg.env.atari.repeat_action_probability == 0.0 and cfg.env.frame_stack == 4
        assert (cfg.algo.batch_size, cfg.algo.learning_starts, cfg.algo.train_freq) == (32, 1600, 1)
        assert (cfg.optimizer.lr, cfg.optimizer.eps, cfg.buffer.n_step) == (1e-4, 1.5e-4, 10)
        assert (cfg.eval.interval, cfg.eval.episodes) == (100_000, 100)
        assert cfg.algo.max_grad_norm is None  # Dopamine's optimizer clips no gradient
    assert der.network.noisy and der.network.dueling and der.network.num_atoms == 51
    assert der.buffer._target_.endswith("PrioritizedReplayBuffer") and der.algo.target_update_period == 2000
    assert der.buffer.augment == "none"
    assert der.network.encoder == "der_cnn" and list(der.network.hidden_sizes) == [256]  # van Hasselt et al.'s
    assert drq.network.encoder == "nature_cnn" and list(drq.network.hidden_sizes) == [512]  # Dopamine's
    assert drq.buffer.augment_intensity == 0.05
    assert not drq.network.noisy and drq.network.dueling and drq.network.num_atoms == 1
    assert (drq.buffer.augment, drq.buffer.augment_pad, drq.algo.target_update_period) == ("random_shift", 4, 1)
    assert (drq.exploration.end, drq.exploration.duration) == (0.01, 6600)


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["buffer.augment=flip"], "buffer.augment='flip'"),
        (["buffer.augment=random_shift"], "none with network.encoder=mlp"),
        (["env=atari", "network=der", "buffer.augment=random_shift", "buffer.augment_pad=0"], "buffer.augment_pad=0"),
        (["env=atari", "network=cnn", "env.atari.repeat_action_probability=1.5"], "repeat_action_probability=1.5"),
        (["network=der"], "env.frame_stack"),
        (["env=atari", "buffer.augment_intensity=0.05"], "0 with buffer.augment=none"),
        (["+experiment=drq_eps_atari100k", "buffer.augment_intensity=0.6"], "buffer.augment_intensity=0.6"),
        (["+experiment=drq_eps_atari100k", "buffer.augment_intensity=-0.1"], "buffer.augment_intensity=-0.1"),
    ],
)
def test_bad_values_of_the_new_keys_are_refused_with_the_key_named(compose, overrides, message):
    with pytest.raises(ConfigError, match=message.replace(".", r"\.")):
        validate(compose(*overrides))
