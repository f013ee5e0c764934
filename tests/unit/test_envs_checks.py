"""The discretisation wrapper maps bins to the right continuous actions; Atari preprocessing's shapes, dtypes
and rewards. Every env option trained: tests/integration/test_envs.py."""

import gymnasium as gym
import numpy as np
import pytest

from rlrun.envs.wrappers import DiscretizeAction
from rlrun.errors import ConfigError
from rlrun.training.build import build


def test_pendulum_bins_hit_the_edges_and_the_centre():
    env = DiscretizeAction(gym.make("Pendulum-v1"), bins=5)
    assert env.action_space == gym.spaces.Discrete(5)
    assert [float(env.action(i)[0]) for i in range(5)] == [-2.0, -1.0, 0.0, 1.0, 2.0]
    assert env.action(2).shape == (1,) and env.action(2).dtype == np.float32


def test_two_dimensional_box_enumerates_combinations_row_major():
    class Box2DEnv(gym.Env):
        observation_space = gym.spaces.Box(-1, 1, (1,))
        action_space = gym.spaces.Box(np.array([-1.0, 0.0], dtype=np.float32), np.array([1.0, 10.0], dtype=np.float32))

    env = DiscretizeAction(Box2DEnv(), bins=3)
    assert env.action_space.n == 9
    np.testing.assert_array_equal(env.action(0), [-1.0, 0.0])
    np.testing.assert_array_equal(env.action(1), [-1.0, 5.0])  # last dimension varies fastest
    np.testing.assert_array_equal(env.action(4), [0.0, 5.0])  # the centre
    np.testing.assert_array_equal(env.action(8), [1.0, 10.0])


def test_discretising_a_discrete_env_is_a_config_error(compose):
    with pytest.raises(ConfigError, match="env.action_bins=5"):
        build(compose("env.action_bins=5"))


def test_continuous_env_without_bins_names_the_fix(compose):
    with pytest.raises(ConfigError, match="set env.action_bins=N"):
        build(compose("env=pendulum", "env.action_bins=null"))


def test_atari_preprocessing_shapes_dtypes_and_rewards():
    pytest.importorskip("ale_py")
    pytest.importorskip("cv2")
    from rlrun.envs.vector import finished_episodes, make_vector_env

    atari = {"noop_max": 30, "frame_skip": 4, "screen_size": 84, "terminal_on_life_loss": True}
    envs = make_vector_env("ALE/Breakout-v5", 1, frame_stack=4, atari=atari, clip_reward=1.0)
    assert envs.single_observation_space.shape == (4, 84, 84)
    assert envs.single_observation_space.dtype == np.uint8
    obs, _ = envs.reset(seed=0)
    assert obs.shape == (1, 4, 84, 84) and obs.dtype == np.uint8
    assert (obs[0, 0] == obs[0, 3]).all()  # a new episode's stack repeats its first frame
    envs.close()
    # The same game with and without learning-time clipping: rewards differ, the logged raw score does not.
    clipped = make_vector_env("ALE/Breakout-v5", 1, frame_stack=4, atari=atari, clip_reward=1.0)
    raw = make_vector_env("ALE/Breakout-v5", 1, frame_stack=4, atari=atari)
    clipped.reset(seed=3)
    raw.reset(seed=3)
    rng = np.random.default_rng(0)
    ep_clipped, ep_raw, steps = [], [], 0
    while not ep_raw and steps < 5000:
        a = rng.integers(4, size=1)
        _, r_c, *_, info_c = clipped.step(a)
        _, r_r, *_, info_r = raw.step(a)
        assert r_c[0] == np.clip(r_r[0], -1, 1)
        ep_clipped += finished_episodes(info_c)
        ep_raw += finished_episodes(info_r)
        steps += 1
    assert ep_raw, "losing a life should end a training episode"
    assert ep_clipped == ep_raw  # episode statistics are the raw game score
