"""CartPole-v1 with every sub-env in one set of numpy arrays, giving the numbers of the `sync` vector env.

gymnasium's own `CartPoleVectorEnv` steps all sub-envs with one numpy expression, but it resets them in
NEXT_STEP mode and from one random stream shared by all sub-envs, so its episodes are not those of
`SyncVectorEnv` over `CartPoleEnv`s. `CartPoleVectorEnv` here keeps gymnasium's physics (its `step`, the
same float64 expressions as `CartPoleEnv.step`, whose numpy sin and cos give the same bits on arrays as on
scalars) and changes only the resets: SAME_STEP autoreset, each sub-env with its own generator, seeded
and drawn exactly as a `CartPoleEnv` of the sync vector env would be. Observations, rewards, ends, final
observations and episode statistics then equal the sync vector env's bit for bit
(tests/test_cartpole_vector.py), at a fraction of the cost: a step of 160 sub-envs (a `seeds=10` run)
takes about 1/13 of the sync vector env's time (`python scripts/bench.py envs`).
"""

from __future__ import annotations

from typing import Any, cast

import numpy as np
from gymnasium.envs.classic_control import cartpole
from gymnasium.envs.classic_control.utils import maybe_parse_reset_bounds
from gymnasium.utils import seeding
from gymnasium.vector import AutoresetMode


class CartPoleVectorEnv(cartpole.CartPoleVectorEnv):
    """`num_envs` CartPole-v1 sub-envs in SAME_STEP autoreset mode with one random stream per sub-env."""

    metadata = {**cartpole.CartPoleVectorEnv.metadata, "autoreset_mode": AutoresetMode.SAME_STEP}

    def __init__(self, num_envs: int, max_episode_steps: int = 500):
        super().__init__(num_envs=num_envs, max_episode_steps=max_episode_steps)
        self._generators: list[np.random.Generator | None] = [None] * num_envs
        # The parent's one shared stream: its step draws from it for the sub-envs it resets, none here.
        self._np_random, _ = seeding.np_random(0)

    def _draw_start(self, i: int) -> np.ndarray:
        """Sub-env i's first state of an episode, as `CartPoleEnv.reset` draws it from its own generator."""
        generator = self._generators[i]
        if generator is None:  # never seeded: an unseeded env's fresh stream, as gymnasium's `Env.np_random`
            generator, _ = seeding.np_random()
            self._generators[i] = generator
        return generator.uniform(low=self.low, high=self.high, size=(4,))

    def reset(
        self, *, seed: int | list[int | None] | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        """As `SyncVectorEnv.reset`: an int seeds sub-env i with seed + i, a list one seed per sub-env,
        None keeps each sub-env's stream."""
        if seed is None:
            seeds: list[int | None] = [None] * self.num_envs
        elif isinstance(seed, (int, np.integer)):
            seeds = [int(seed) + i for i in range(self.num_envs)]
        else:
            seeds = list(seed)
            if len(seeds) != self.num_envs:
                raise ValueError(f"{len(seeds)} seeds for {self.num_envs} sub-envs")
        for i, s in enumerate(seeds):
            if s is not None:
                self._generators[i], _ = seeding.np_random(s)
        self.low, self.high = maybe_parse_reset_bounds(options, -0.05, 0.05)
        state = np.stack([self._draw_start(i) for i in range(self.num_envs)], axis=1)  # (4, num_envs)
        self.state = state  # type: ignore[assignment]  # gymnasium types it None (until a reset)
        self.steps_beyond_terminated = None
        self.steps = np.zeros(self.num_envs, dtype=np.int32)
        self.prev_done = np.zeros(self.num_envs, dtype=np.bool_)
        return state.T.astype(np.float32), {}

    def step(self, action: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        # gymnasium's physics; with prev_done all False its NEXT_STEP reset branch does nothing
        obs, reward, terminated, truncated, _ = super().step(action)
        self.prev_done[:] = False
        infos: dict[str, Any] = {}
        done = terminated | truncated
        if done.any():  # SAME_STEP: the step that ends an episode returns the next one's first observation
            state = cast(np.ndarray, self.state)
            ended = np.flatnonzero(done)
            final_obs = np.full(self.num_envs, None, dtype=object)
            for i in ended:
                final_obs[i] = obs[i].copy()
                state[:, i] = self._draw_start(int(i))
            self.steps[ended] = 0
            obs[ended] = state[:, ended].T.astype(np.float32)
            infos = {"final_obs": final_obs, "_final_obs": done.copy(), "final_info": {}, "_final_info": done.copy()}
        return obs, reward.astype(np.float64), terminated, truncated, infos
