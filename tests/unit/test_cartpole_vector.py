"""rlrun.envs.cartpole: CartPole-v1 as one numpy vector env gives the sync vector env's numbers bit for bit."""

import numpy as np
import pytest

from rlrun.envs.cartpole import CartPoleVectorEnv
from rlrun.envs.vector import finished_episodes, make_vector_env, next_obs_for_storage
from rlrun.errors import ConfigError
from rlrun.storage import checkpoint as ckpt


def pair(num_envs, max_episode_steps=None, vectorization="sync"):
    sync = make_vector_env("CartPole-v1", num_envs, vectorization, max_episode_steps)
    vector = make_vector_env("CartPole-v1", num_envs, "vector", max_episode_steps)
    return sync, vector


def assert_same_step(a, b, step):
    for x, y, name in zip(a[:4], b[:4], ("obs", "rewards", "terminated", "truncated")):
        assert x.dtype == y.dtype, (name, step)
        np.testing.assert_array_equal(x, y, err_msg=f"{name} at step {step}")
    np.testing.assert_array_equal(next_obs_for_storage(a[0], a[4]), next_obs_for_storage(b[0], b[4]))
    assert finished_episodes(a[4]) == finished_episodes(b[4]), step


@pytest.mark.parametrize("max_episode_steps", [None, 30])
def test_the_numpy_env_equals_the_sync_vector_env(max_episode_steps):
    """Same seeds and actions: the same observations, rewards, ends (terminations and, with a 30-step
    limit, truncations), final observations and episode statistics at every step."""
    sync, vector = pair(24, max_episode_steps)
    seeds = list(range(7, 31))
    np.testing.assert_array_equal(sync.reset(seed=seeds)[0], vector.reset(seed=seeds)[0])
    rng = np.random.default_rng(0)
    ended = truncated = 0
    for step in range(1500):
        actions = rng.integers(0, 2, 24) if step % 4 else np.ones(24, dtype=np.int64)
        a, b = sync.step(actions), vector.step(actions)
        assert_same_step(a, b, step)
        ended, truncated = ended + int((a[2] | a[3]).sum()), truncated + int(a[3].sum())
    assert ended > 500
    assert (truncated > 0) == (max_episode_steps is not None)


def test_an_int_seed_and_later_resets_follow_the_sync_env():
    sync, vector = pair(3)
    np.testing.assert_array_equal(sync.reset(seed=5)[0], vector.reset(seed=5)[0])
    for _ in range(100):
        assert_same_step(sync.step(np.zeros(3, dtype=np.int64)), vector.step(np.zeros(3, dtype=np.int64)), 0)
    np.testing.assert_array_equal(sync.reset()[0], vector.reset()[0])  # unseeded: each stream goes on


def test_its_state_survives_a_checkpoint():
    """Physics, step counts and each sub-env's stream come back from `env_state` (what resume restores)."""
    _, vector = pair(6)
    vector.reset(seed=list(range(6)))
    rng = np.random.default_rng(1)
    for _ in range(57):
        vector.step(rng.integers(0, 2, 6))
    saved = ckpt.env_state(vector)
    expected = [vector.step(a) for a in rng.integers(0, 2, (200, 6))]
    _, resumed = pair(6)
    resumed.reset(seed=list(range(6)))
    ckpt.restore_env_state(resumed, saved)
    rng = np.random.default_rng(1)
    rng.integers(0, 2, (57, 6))
    for step, (a, actions) in enumerate(zip(expected, rng.integers(0, 2, (200, 6)))):
        assert_same_step(a, resumed.step(actions), step)


def test_auto_picks_it_for_cartpole_only_from_four_sub_envs():
    """Below 4 sub-envs gymnasium's sync vector env of CartPoleEnvs steps faster (the same numbers)."""
    assert isinstance(make_vector_env("CartPole-v1", 4, "auto").unwrapped, CartPoleVectorEnv)
    assert not isinstance(make_vector_env("CartPole-v1", 3, "auto").unwrapped, CartPoleVectorEnv)
    assert not isinstance(make_vector_env("Acrobot-v1", 4, "auto").unwrapped, CartPoleVectorEnv)
    with pytest.raises(ConfigError, match="env.vectorization"):
        make_vector_env("Acrobot-v1", 2, "vector")
