"""Shared fixtures and test envs for both tiers.

Test tiers are folders: `tests/unit` (no training run, no subprocess, no sweep: `pytest tests/unit`, under a
minute on one core; tests/unit/conftest.py makes a unit test that trains or starts a process fail) and
`tests/integration` (training runs, rlrun commands, sweeps). Plain `pytest` runs both, less the `slow`
learning bars and heavier whole-run checks (`pytest -m slow`).
"""

import os

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces


@pytest.fixture(autouse=True)
def environment_kept():
    """Each test ends with the environment it started with. Libraries called in the test process set
    variables there (torch.compile sets TORCHINDUCTOR_CACHE_DIR): a command started later with such a
    variable runs as a fresh interpreter instead of a child of the tests' fork server (tests/launch.py),
    about 5 s more each."""
    saved = dict(os.environ)
    yield
    if os.environ != saved:
        os.environ.clear()
        os.environ.update(saved)


class CountingEnv(gym.Env):
    """obs = [t] (steps taken this episode); reward = 1 per step; terminates after `terminate_at` steps
    (if set). With gymnasium's TimeLimit on top it truncates instead. Every value is known by hand."""

    def __init__(self, terminate_at=None):
        self.observation_space = spaces.Box(0, 1000, shape=(1,), dtype=np.float32)
        self.action_space = spaces.Discrete(2)
        self.terminate_at = terminate_at
        self.t = 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return np.array([0.0], dtype=np.float32), {}

    def step(self, action):
        self.t += 1
        terminated = self.terminate_at is not None and self.t >= self.terminate_at
        return np.array([float(self.t)], dtype=np.float32), 1.0, terminated, False, {}


gym.register("rlrun_tests/Terminating-v0", entry_point=CountingEnv, kwargs={"terminate_at": 3})
gym.register("rlrun_tests/TimeLimited-v0", entry_point=CountingEnv, max_episode_steps=4)


@pytest.fixture
def compose():
    """Compose the real config with overrides through Hydra's compose API (no output dir, no chdir)."""
    from hydra import compose as hydra_compose, initialize_config_module

    import rlrun.train  # noqa: F401  registers the schemas and resolvers

    def _compose(*overrides):
        with initialize_config_module(config_module="rlrun.conf", version_base="1.3"):
            return hydra_compose(config_name="config", overrides=list(overrides))

    return _compose


class ExplodingEnv(CountingEnv):
    """Rewards become infinite after 100 steps: the learner's loss turns non-finite."""

    def __init__(self):
        super().__init__(terminate_at=10)
        self.total = 0

    def step(self, action):
        self.total += 1
        obs, _, terminated, truncated, info = super().step(action)
        return obs, (np.inf if self.total > 100 else 1.0), terminated, truncated, info


gym.register("rlrun_tests/Exploding-v0", entry_point=ExplodingEnv)
