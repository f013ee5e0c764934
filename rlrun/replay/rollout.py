"""PQN's rollout storage: the last `num_steps` vector steps of every sub-env, in the order they happened.

Replay keeps transitions to sample later; a rollout keeps one stretch of experience to learn from once
and then forget. Row e is sub-env e of the vector env (agent k's envs in rows k * num_envs ...), so
the steps of one env follow each other and Q(lambda) can run backwards along them (rlrun.algos.pqn). Each step
keeps the real next observation (the final one where an episode ended: rlrun.envs.vector.next_obs_for_storage),
so that a time-limit truncation can bootstrap from it; `terminated` and `truncated` mark episode ends.

The arrays live on the host and go to the training device once per update phase. A rollout is small
(num_steps x num_envs steps), so checkpoints always include it: a resumed run continues exactly.
"""

from __future__ import annotations

import numpy as np
import torch

STORAGE = ("obs", "actions", "rewards", "next_obs", "terminated", "truncated")


class Rollout:
    prioritized = False  # what the loop asks of its store: no priorities, no beta

    def __init__(self, num_steps: int, agents: int, num_envs: int, obs_shape, obs_dtype):
        self.num_steps, self.agents, self.num_envs = num_steps, agents, num_envs
        rows = (num_steps, agents * num_envs)
        self.obs = np.zeros((*rows, *obs_shape), dtype=obs_dtype)
        self.next_obs = np.zeros_like(self.obs)
        self.actions = np.zeros(rows, dtype=np.int64)
        self.rewards = np.zeros(rows, dtype=np.float32)
        self.terminated = np.zeros(rows, dtype=bool)
        self.truncated = np.zeros(rows, dtype=bool)
        self.t = 0  # vector steps stored in the current rollout
        self.completed = 0  # rollouts filled before the current one (numbers transitions for the metrics)

    @property
    def full(self) -> bool:
        return self.t == self.num_steps

    def add(self, obs, actions, rewards, next_obs, terminated, truncated) -> None:
        """Store one vector step; the step after a full rollout starts the next one."""
        if self.full:
            self.t, self.completed = 0, self.completed + 1
        t = self.t
        self.obs[t], self.actions[t], self.rewards[t] = obs, actions, rewards
        self.next_obs[t], self.terminated[t], self.truncated[t] = next_obs, terminated, truncated
        self.t += 1

    def __len__(self) -> int:
        """Steps stored per agent."""
        return self.t * self.num_envs

    @property
    def sizes(self) -> np.ndarray:
        return np.full(self.agents, len(self))

    def tensors(self, device: torch.device) -> dict[str, torch.Tensor]:
        """The full rollout on `device`: (num_steps, agents * num_envs, ...) tensors named as in STORAGE."""
        assert self.full, "a PQN update phase needs a full rollout"
        return {k: torch.from_numpy(getattr(self, k)).to(device) for k in STORAGE}

    def state_dict(self, include_storage: bool = True) -> dict:
        """Always with the stored steps (`include_storage` is replay's option: a rollout is small)."""
        state: dict = {"t": self.t, "completed": self.completed}
        state.update({k: torch.from_numpy(getattr(self, k)[: self.t].copy()) for k in STORAGE})
        return state

    def load_state_dict(self, state: dict) -> None:
        self.t, self.completed = int(state["t"]), int(state["completed"])
        for k in STORAGE:
            getattr(self, k)[: self.t] = state[k].numpy()
