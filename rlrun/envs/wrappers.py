"""Env wrappers rlrun adds on top of gymnasium's own."""

from __future__ import annotations

import gymnasium as gym
import numpy as np


class DiscretizeAction(gym.ActionWrapper):
    """A continuous (Box) action space as Discrete(bins ** d): every dimension takes one of `bins` evenly
    spaced values from low to high (both edges included; the centre too when `bins` is odd), and the
    discrete index enumerates their combinations in row-major order (the last dimension varies fastest).
    Meant for low-dimensional Box spaces (Pendulum, MountainCarContinuous, ...).
    """

    def __init__(self, env: gym.Env, bins: int):
        super().__init__(env)
        space = env.action_space
        if not isinstance(space, gym.spaces.Box):
            raise TypeError(f"DiscretizeAction needs a Box action space, got {space}")
        if not (np.all(np.isfinite(space.low)) and np.all(np.isfinite(space.high))):
            raise ValueError(f"DiscretizeAction needs finite bounds, got {space}")
        axes = [np.linspace(lo, hi, bins) for lo, hi in zip(space.low.ravel(), space.high.ravel())]
        grid = np.stack(np.meshgrid(*axes, indexing="ij"), axis=-1).reshape(-1, len(axes))
        self.values = grid.astype(space.dtype).reshape(-1, *space.shape)
        self.action_space = gym.spaces.Discrete(len(self.values))

    def action(self, action) -> np.ndarray:
        return self.values[int(action)]
