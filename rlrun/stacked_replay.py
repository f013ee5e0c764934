"""Replay for K agents in one storage with an agent axis: (K, capacity, ...) tensors.

Each agent keeps its own ring position, size, sampling generator and (for PER) sum tree and max
priority, so agent k's buffer holds, samples and weights exactly what a single-seed `ReplayBuffer` /
`PrioritizedReplayBuffer` with that agent's seed would. Only the arithmetic is shared: one gather per
field for all K batches, one tree walk for all K trees. The random draws stay per agent (one small call
per agent and batch), because K independent streams are what makes each agent equal to its single run.
"""

from __future__ import annotations

from typing import Optional, Sequence

import numpy as np
import torch

from rlrun.replay import Batch, PriorityBookkeeping


class StackedReplayBuffer:
    """`ReplayBuffer` for K agents (see the module docstring); `add` takes each transition's agent."""

    prioritized = False
    STORAGE = ("obs", "next_obs", "actions", "rewards", "discounts", "added_at")

    def __init__(
        self,
        agents: int,
        capacity: int,
        obs_shape: Sequence[int],
        generators: Sequence[torch.Generator],
        device: torch.device | str = "cpu",
        obs_dtype: torch.dtype = torch.float32,
    ):
        self.agents, self.capacity = agents, int(capacity)
        self.device = torch.device(device)
        self.generators = list(generators)
        shape = (agents, self.capacity)
        self.obs = torch.zeros((*shape, *obs_shape), dtype=obs_dtype, device=self.device)
        self.next_obs = torch.zeros_like(self.obs)
        self.actions = torch.zeros(shape, dtype=torch.long, device=self.device)
        self.rewards = torch.zeros(shape, dtype=torch.float32, device=self.device)
        self.discounts = torch.zeros(shape, dtype=torch.float32, device=self.device)
        self.added_at = torch.zeros(shape, dtype=torch.long, device=self.device)
        self.pos = np.zeros(agents, dtype=np.int64)
        self.sizes = np.zeros(agents, dtype=np.int64)
        self.num_added = np.zeros(agents, dtype=np.int64)
        self._rows = torch.arange(agents, device=self.device).unsqueeze(1)  # (K, 1) for gathers
        self._host_views = ({k: getattr(self, k).numpy() for k in self.STORAGE}
                            if self.device.type == "cpu" else None)

    def __len__(self) -> int:
        return int(self.sizes.min())

    def oldest_obs(self) -> torch.Tensor:
        oldest = np.where(self.sizes == self.capacity, self.pos, 0)
        return self.obs[self._rows.squeeze(1), torch.as_tensor(oldest, device=self.device)]

    def add(self, agent: np.ndarray, obs, actions, rewards, next_obs, discounts) -> tuple[np.ndarray, np.ndarray]:
        """Store transitions of several agents at once. `agent` (N,) names each transition's agent and is
        sorted, so each agent's transitions keep their order. Returns the (agent, slot) written."""
        counts = np.bincount(agent, minlength=self.agents)
        if counts.max() > self.capacity:
            raise ValueError(f"{counts.max()} transitions for one agent do not fit a capacity of {self.capacity}")
        rank = np.arange(agent.shape[0]) - np.repeat(np.cumsum(counts) - counts, counts)  # order within agent
        slot = (self.pos[agent] + rank) % self.capacity
        values = {"obs": obs, "next_obs": next_obs, "actions": actions, "rewards": rewards,
                  "discounts": discounts, "added_at": self.num_added[agent] + rank}
        if self._host_views is not None:
            for k, v in values.items():
                self._host_views[k][agent, slot] = v.numpy() if isinstance(v, torch.Tensor) else v
        else:
            a, s = torch.as_tensor(agent, device=self.device), torch.as_tensor(slot, device=self.device)
            for k, v in values.items():
                getattr(self, k)[a, s] = torch.as_tensor(v).to(self.device, non_blocking=True)
        self.pos = (self.pos + counts) % self.capacity
        self.sizes = np.minimum(self.sizes + counts, self.capacity)
        self.num_added += counts
        return agent, slot

    def _sample_indices(self, batch_size: int, beta: float):
        idx = torch.stack([torch.randint(0, int(size), (batch_size,), device=self.device, generator=g)
                           for size, g in zip(self.sizes, self.generators)])
        return idx, None

    def sample(self, batch_size: int, beta: float = 1.0) -> Batch:
        """(K, batch_size, ...) tensors: row k is agent k's batch."""
        idx, weights = self._sample_indices(batch_size, beta)
        rows = self._rows
        num_added = torch.as_tensor(self.num_added, device=self.device).unsqueeze(1)
        return Batch(self.obs[rows, idx], self.actions[rows, idx], self.rewards[rows, idx], self.next_obs[rows, idx],
                     self.discounts[rows, idx], idx, weights, num_added - 1 - self.added_at[rows, idx])

    def update_priorities(self, indices: torch.Tensor, td_errors: torch.Tensor) -> None:
        """Uniform replay has no priorities."""

    def state_dict(self, include_storage: bool = True) -> dict:
        state = {"pos": self.pos.tolist(), "sizes": self.sizes.tolist(), "num_added": self.num_added.tolist()}
        if include_storage:
            filled = int(self.sizes.max())
            state.update({k: getattr(self, k)[:, :filled].clone() for k in self.STORAGE})
        return state

    def load_state_dict(self, state: dict) -> None:
        if "obs" not in state:
            return
        self.pos, self.sizes, self.num_added = (np.array(state[k], dtype=np.int64) for k in ("pos", "sizes", "num_added"))
        filled = int(self.sizes.max())
        for k in self.STORAGE:
            getattr(self, k)[:, :filled] = state[k].to(self.device)


class StackedSumTree:
    """K binary sum trees as one (K, 2 * leaves) float64 tensor; walks are batched over agents and indices."""

    def __init__(self, agents: int, capacity: int, device: torch.device):
        self.leaves = 1 << max(0, (capacity - 1).bit_length())
        self.depth = self.leaves.bit_length() - 1
        self.tree = torch.zeros((agents, 2 * self.leaves), dtype=torch.float64, device=device)

    @property
    def total(self) -> torch.Tensor:
        return self.tree[:, 1]

    def leaf_values(self, idx: torch.Tensor) -> torch.Tensor:
        """idx (K, B) -> (K, B)."""
        return self.tree.gather(1, idx + self.leaves)

    def update(self, agent: torch.Tensor, idx: torch.Tensor, values: torch.Tensor) -> None:
        """Set leaf idx[i] of tree agent[i] to values[i] (flat (N,) tensors) and recompute the sums above."""
        tree, pos = self.tree, idx + self.leaves
        tree[agent, pos] = values.to(tree.dtype)
        for _ in range(self.depth):
            pos = pos // 2  # repeated parents just recompute the same sum
            tree[agent, pos] = tree[agent, 2 * pos] + tree[agent, 2 * pos + 1]

    def find(self, mass: torch.Tensor) -> torch.Tensor:
        """mass (K, B) -> leaf (K, B) with prefix_sum(leaf) <= mass < prefix_sum(leaf + 1) in tree k."""
        idx = torch.ones_like(mass, dtype=torch.long)
        mass = mass.to(self.tree.dtype)
        for _ in range(self.depth):
            left = self.tree.gather(1, 2 * idx)
            go_right = mass >= left
            mass = torch.where(go_right, mass - left, mass)
            idx = 2 * idx + go_right.long()
        return idx - self.leaves


class StackedPrioritizedReplayBuffer(PriorityBookkeeping, StackedReplayBuffer):
    """`PrioritizedReplayBuffer` (proportional, stratified, max-priority insertion, IS weights divided by
    the batch maximum), per agent, on stacked storage and stacked sum trees."""

    prioritized = True

    def __init__(
        self,
        agents: int,
        capacity: int,
        obs_shape: Sequence[int],
        generators: Sequence[torch.Generator],
        device: torch.device | str = "cpu",
        obs_dtype: torch.dtype = torch.float32,
        alpha: float = 0.6,
        beta_start: float = 0.4,
        beta_anneal_steps: Optional[int] = None,
        priority_eps: float = 1e-6,
    ):
        super().__init__(agents, capacity, obs_shape, generators, device, obs_dtype)
        self.alpha, self.beta_start, self.beta_anneal_steps = alpha, beta_start, beta_anneal_steps
        self.priority_eps = priority_eps
        self.tree = StackedSumTree(agents, self.capacity, self.device)
        self.max_priority = torch.ones(agents, dtype=torch.float64, device=self.device)
        self._pending: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]] = []

    def add(self, agent: np.ndarray, obs, actions, rewards, next_obs, discounts) -> tuple[np.ndarray, np.ndarray]:
        agent, slot = super().add(agent, obs, actions, rewards, next_obs, discounts)
        a = torch.as_tensor(agent, device=self.device)
        # At each agent's max priority as of now; written into the trees at the next read (as in the
        # single-agent buffer).
        self._pending.append((a, torch.as_tensor(slot, device=self.device), self.max_priority[a]))
        return agent, slot

    def _flush(self) -> None:
        if self._pending:
            agent, slot, prio = (torch.cat(t) for t in zip(*self._pending))
            self._pending.clear()
            self.tree.update(agent, slot, prio ** self.alpha)

    def _sizes(self) -> torch.Tensor:
        return torch.as_tensor(self.sizes, device=self.device).unsqueeze(1)

    def _sample_indices(self, batch_size: int, beta: float):
        self._flush()
        segment = (self.tree.total / batch_size).unsqueeze(1)
        u = torch.stack([torch.rand(batch_size, device=self.device, generator=g, dtype=torch.float64)
                         for g in self.generators])
        mass = (torch.arange(batch_size, device=self.device, dtype=torch.float64) + u) * segment
        sizes = self._sizes()
        idx = torch.minimum(self.tree.find(mass), sizes - 1)  # float round-off at the right edge
        probabilities = self.tree.leaf_values(idx) / self.tree.total.unsqueeze(1)
        weights = (sizes * probabilities) ** (-beta)
        return idx, (weights / weights.max(dim=1, keepdim=True).values).float()

    def update_priorities(self, indices: torch.Tensor, td_errors: torch.Tensor) -> None:
        """indices, td_errors: (K, B)."""
        self._flush()
        priorities = td_errors.detach().abs().to(torch.float64) + self.priority_eps
        self.max_priority = torch.maximum(self.max_priority, priorities.max(dim=1).values)
        self.tree.update(self._rows.expand_as(indices).flatten(), indices.flatten(), (priorities ** self.alpha).flatten())

    def stats(self) -> dict[str, torch.Tensor]:
        """Per-agent (K,) priority statistics over the stored transitions (p^alpha)."""
        self._flush()
        filled = int(self.sizes.max())
        p = self.tree.tree[:, self.tree.leaves : self.tree.leaves + filled]
        stored = torch.arange(filled, device=self.device) < self._sizes()
        p = torch.where(stored, p, torch.zeros((), dtype=p.dtype, device=p.device))
        n = self._sizes().squeeze(1).to(p.dtype)
        total = p.sum(dim=1)
        return {"priority_max": p.max(dim=1).values, "priority_mean": total / n,
                "ess_fraction": total * total / (n * (p * p).sum(dim=1))}
