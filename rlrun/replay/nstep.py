"""n-step returns, accumulated per vector env before transitions reach the replay buffer.

For each env we keep the last (up to) n steps. A full window emits one transition
    (s_t, a_t, R = sum_k gamma^k r_{t+k}, s_{t+n}, discount = gamma^n).
When an episode ends at step T every pending start j is flushed with R summed up to T and
    discount = 0 if the episode terminated, gamma^(T - j + 1) if it was truncated (time limit),
so the bootstrap discount is always gamma^(steps actually taken) and no window spans two episodes.
With n = 1 this is exactly the one-step transition.

gamma may differ per env (agents with their own discount, rlrun.training.agents): every sum is then taken with its
env's own powers, term by term in the same order as with one gamma, so each env's numbers are exactly
those of a run with its gamma alone.
"""

from __future__ import annotations

import numpy as np


class NStepAccumulator:
    """Per-env windows of the last n steps in one ring shared by all envs.

    Every vector step writes all envs at the same ring slot, so an env's pending steps are always the
    last `count[i]` slots before it, and the common step (no episode ended, every window full) emits
    with plain slices: about a dozen numpy calls, whatever the number of envs.
    """

    def __init__(self, num_envs: int, n: int, gamma, obs_shape, obs_dtype=np.float32):
        """`gamma`: one discount, or a sequence with one per env."""
        self.n, self.num_envs = n, num_envs
        self.gamma = np.broadcast_to(np.asarray(gamma, dtype=np.float64), (num_envs,))
        self.obs = np.zeros((num_envs, n, *obs_shape), dtype=obs_dtype)
        self.actions = np.zeros((num_envs, n), dtype=np.int64)
        self.rewards = np.zeros((num_envs, n), dtype=np.float64)
        self.count = np.zeros(num_envs, dtype=np.int64)  # pending steps per env
        self.slot = n - 1  # ring slot of the newest step
        self.powers = self.gamma[:, None] ** np.arange(n + 1)  # (num_envs, n + 1): each env's gamma^k
        self._envs = np.arange(num_envs)
        self._offsets = np.arange(n)
        self._full_discounts = self.powers[:, n].astype(np.float32)
        self.last_envs = self._envs  # env index of each transition the last `step` returned, ascending

    def step(self, obs, actions, rewards, next_obs, terminated, truncated):
        """Add one vector step; returns the transitions it completes as numpy arrays
        (obs, actions, returns, next_obs, discounts), or None. They may be views into this object's
        storage: store them before the next call."""
        n, envs = self.n, self._envs
        if n == 1:  # one-step TD: every step is its own transition, nothing to keep
            discounts = np.where(terminated, np.float32(0.0), self.gamma.astype(np.float32))
            self.last_envs = envs
            return obs, actions, rewards.astype(np.float32), next_obs, discounts
        slot = self.slot = (self.slot + 1) % n
        self.obs[:, slot] = obs
        self.actions[:, slot] = actions
        self.rewards[:, slot] = rewards
        self.count += 1
        done = np.logical_or(terminated, truncated)
        if not done.any():
            if self.count[0] == n and (self.num_envs == 1 or self.count.min() == n):  # every window full
                *out, self.last_envs = self._emit_oldest(None, next_obs)
                return tuple(out)
            full = np.flatnonzero(self.count == n)
        else:
            full = np.flatnonzero((self.count == n) & ~done)
        pieces = []
        if full.size:
            pieces.append(self._emit_oldest(full, next_obs))
        if done.any():
            pieces.append(self._flush(np.flatnonzero(done), next_obs, terminated))
        if not pieces:
            return None
        if len(pieces) == 1:
            *out, self.last_envs = pieces[0]
            return tuple(out)
        # Both kinds on one step: merge in env order (a flushed env's transitions stay in their order).
        merged = [np.concatenate(parts) for parts in zip(*pieces)]
        order = np.argsort(merged[-1], kind="stable")
        *out, self.last_envs = (m[order] for m in merged)
        return tuple(out)

    def _emit_oldest(self, full, next_obs):
        """One n-step transition from the oldest pending step of each full window (all envs when `full`
        is None), which then leaves the window."""
        n = self.n
        first = (self.slot + 1) % n  # a full window starts right after the newest slot
        order = (first + self._offsets) % n
        if full is None:
            returns = discounted_sums(self.rewards[:, order], self.powers[:, :n])
            out = (
                self.obs[:, first],
                self.actions[:, first],
                returns.astype(np.float32),
                next_obs,
                self._full_discounts,
                self._envs,
            )
            self.count -= 1
            return out
        returns = discounted_sums(self.rewards[full][:, order], self.powers[full, :n])
        out = (
            self.obs[full, first],
            self.actions[full, first],
            returns.astype(np.float32),
            next_obs[full],
            self._full_discounts[full],
            full,
        )
        self.count[full] -= 1
        return out

    def _flush(self, ended, next_obs, terminated):
        """Every pending step of each env whose episode just ended, with R summed up to the end and
        discount 0 (terminated) or gamma^(steps taken) (truncated)."""
        n = self.n
        out_obs, out_act, out_ret, out_next, out_disc, out_env = [], [], [], [], [], []
        for i in ended:
            k = int(self.count[i])
            order = (self.slot - k + 1 + self._offsets[:k]) % n
            rewards = self.rewards[i, order]
            for j in range(k):
                steps = k - j
                out_obs.append(self.obs[i, order[j]])
                out_act.append(self.actions[i, order[j]])
                out_ret.append(discounted_sums(rewards[None, j:], self.powers[i : i + 1, :steps])[0])
                out_next.append(next_obs[i])
                out_disc.append(0.0 if terminated[i] else self.powers[i, steps])
                out_env.append(i)
            self.count[i] = 0
        return (
            np.stack(out_obs),
            np.array(out_act, dtype=np.int64),
            np.array(out_ret, dtype=np.float32),
            np.stack(out_next),
            np.array(out_disc, dtype=np.float32),
            np.array(out_env, dtype=np.int64),
        )

    def state_dict(self) -> dict:
        return {
            "obs": self.obs.copy(),
            "actions": self.actions.copy(),
            "rewards": self.rewards.copy(),
            "count": self.count.copy(),
            "slot": self.slot,
        }

    def load_state_dict(self, state: dict) -> None:
        self.obs[...], self.actions[...] = state["obs"], state["actions"]
        self.rewards[...], self.count[...] = state["rewards"], state["count"]
        self.slot = int(state["slot"])


def discounted_sums(rewards: np.ndarray, powers: np.ndarray) -> np.ndarray:
    """sum_k powers[:, k] * rewards[:, k] per row, accumulated term by term (k = 0, 1, ...): the same
    operations in the same order whatever the number of rows, so a row's sum does not depend on its
    neighbours (a matrix product may sum in another order)."""
    out = rewards[:, 0] * powers[:, 0]
    for k in range(1, rewards.shape[1]):
        out = out + rewards[:, k] * powers[:, k]
    return out
