"""CartPole that raises in step() after a set number of steps (per env instance): the env of
tests/test_entry_paths.py. Imported by the test's subprocesses before rlrun's command runs, as a user's
own package that registers its env would be."""

import gymnasium as gym
from gymnasium.envs.classic_control import CartPoleEnv


class RaisingCartPole(CartPoleEnv):
    def __init__(self, raise_after: int):
        super().__init__()
        self.raise_after, self.calls = raise_after, 0  # not `steps`: rlrun checkpoints that attribute

    def step(self, action):
        self.calls += 1
        if self.calls > self.raise_after:
            raise ValueError(f"simulated failure after {self.raise_after} steps")
        return super().step(action)


# 16 sub-envs: after 6 vector steps (96 env steps, before the first checkpoint at 320), and after 31 (496)
for name, after in (("RaisesEarly", 5), ("RaisesLate", 30)):
    gym.register(f"rlrun_tests/{name}-v0", RaisingCartPole, max_episode_steps=500, kwargs={"raise_after": after})
