"""n-step returns, accumulated per vector env before transitions reach the replay buffer.

For each env we keep the last (up to) n steps. A full window emits one transition
    (s_t, a_t, R = sum_k gamma^k r_{t+k}, s_{t+n}, discount = gamma^n).
When an episode ends at step T every pending start j is flushed with R summed up to T and
    discount = 0 if the episode terminated, gamma^(T - j + 1) if it was truncated (time limit),
so the bootstrap discount is always gamma^(steps actually taken) and no window spans two episodes.
With n = 1 this is exactly the one-step transition.
"""

from __future__ import annotations

import numpy as np


class NStepAccumulator:
    def __init__(self, num_envs: int, n: int, gamma: float, obs_shape, obs_dtype=np.float32):
        self.n, self.gamma, self.num_envs = n, gamma, num_envs
        self.obs = np.zeros((num_envs, n, *obs_shape), dtype=obs_dtype)
        self.actions = np.zeros((num_envs, n), dtype=np.int64)
        self.rewards = np.zeros((num_envs, n), dtype=np.float64)
        self.count = np.zeros(num_envs, dtype=np.int64)  # pending steps per env (oldest at index 0)
        self.powers = gamma ** np.arange(n + 1)

    def step(self, obs, actions, rewards, next_obs, terminated, truncated):
        """Add one vector step; returns the transitions it completes as numpy arrays
        (obs, actions, returns, next_obs, discounts), possibly empty."""
        envs = np.arange(self.num_envs)
        c = self.count
        self.obs[envs, c] = obs
        self.actions[envs, c] = actions
        self.rewards[envs, c] = rewards
        c += 1
        done = np.logical_or(terminated, truncated)
        out_obs, out_act, out_ret, out_next, out_disc = [], [], [], [], []

        full = np.flatnonzero((c == self.n) & ~done)
        if full.size:  # one n-step transition from the oldest pending step, then slide the window
            out_obs.append(self.obs[full, 0])
            out_act.append(self.actions[full, 0])
            out_ret.append(self.rewards[full] @ self.powers[: self.n])
            out_next.append(next_obs[full])
            out_disc.append(np.full(full.size, self.powers[self.n]))
            self.obs[full] = np.roll(self.obs[full], -1, axis=1)
            self.actions[full] = np.roll(self.actions[full], -1, axis=1)
            self.rewards[full] = np.roll(self.rewards[full], -1, axis=1)
            c[full] -= 1

        for i in np.flatnonzero(done):  # flush every pending start of the finished episode
            k = c[i]
            for j in range(k):
                steps = k - j
                out_obs.append(self.obs[i, j][None])
                out_act.append(self.actions[i, j][None])
                out_ret.append(np.array([self.rewards[i, j:k] @ self.powers[:steps]]))
                out_next.append(next_obs[i][None])
                out_disc.append(np.array([0.0 if terminated[i] else self.powers[steps]]))
            c[i] = 0

        if not out_obs:
            return None
        return (np.concatenate(out_obs), np.concatenate(out_act), np.concatenate(out_ret).astype(np.float32),
                np.concatenate(out_next), np.concatenate(out_disc).astype(np.float32))

    def state_dict(self) -> dict:
        return {"obs": self.obs.copy(), "actions": self.actions.copy(), "rewards": self.rewards.copy(),
                "count": self.count.copy()}

    def load_state_dict(self, state: dict) -> None:
        self.obs[...], self.actions[...] = state["obs"], state["actions"]
        self.rewards[...], self.count[...] = state["rewards"], state["count"]
