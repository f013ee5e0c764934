"""Replay storage as preallocated tensors on the training device.

Every buffer (uniform or prioritized, one agent here or K agents in `rlrun.stacked_replay`) has the
interface `Replay`: the training loop and the learner use nothing else.

A transition is (obs, action, reward, next_obs, discount), where `discount` already folds in the episode
end: gamma**k for a transition that may bootstrap (including a time-limit truncation), 0 for one that
terminated. The learner's target is then simply `reward + discount * Q_target(next_obs)`.
"""

from __future__ import annotations

from typing import NamedTuple, Optional, Protocol, Sequence

import numpy as np
import torch


class Batch(NamedTuple):
    obs: torch.Tensor
    actions: torch.Tensor
    rewards: torch.Tensor
    next_obs: torch.Tensor
    discounts: torch.Tensor
    indices: torch.Tensor
    weights: Optional[torch.Tensor]  # importance-sampling weights (PER only)
    age: torch.Tensor  # transitions added to the buffer since each sampled one was stored


class Replay(Protocol):
    """What the loop and the learner use of a buffer. Sizes, samples and priorities carry a leading agent
    axis for K stacked agents ((K, B) tensors) and none for one agent ((B,) tensors)."""

    capacity: int
    prioritized: bool

    def __len__(self) -> int:
        """Transitions stored (the smallest agent's count for stacked agents): sampling needs this many."""
        ...

    @property
    def sizes(self) -> np.ndarray:
        """(K,) transitions stored per agent (K = 1 for a single buffer)."""
        ...

    def sample(self, batch_size: int, beta: float = 1.0) -> Batch: ...

    def update_priorities(self, indices: torch.Tensor, td_errors: torch.Tensor) -> None: ...

    def oldest_obs(self) -> torch.Tensor:
        """The stored observation of each agent's oldest transition (frame-index stacks: see rlrun.frames)."""
        ...

    def state_dict(self, include_storage: bool = True) -> dict: ...

    def load_state_dict(self, state: dict) -> None: ...


class ReplayBuffer:
    """Uniform replay: a ring buffer; `sample` draws indices uniformly with replacement.

    Transitions arrive already n-step accumulated (`rlrun.nstep.NStepAccumulator`): `discount` is
    gamma^(steps taken), or 0 where the episode terminated.
    """

    prioritized = False

    def __init__(
        self,
        capacity: int,
        obs_shape: Sequence[int],
        device: torch.device | str = "cpu",
        obs_dtype: torch.dtype = torch.float32,
        generator: Optional[torch.Generator] = None,
    ):
        self.capacity = int(capacity)
        self.device = torch.device(device)
        self.generator = generator
        self.obs = torch.zeros((self.capacity, *obs_shape), dtype=obs_dtype, device=self.device)
        self.next_obs = torch.zeros_like(self.obs)
        self.actions = torch.zeros(self.capacity, dtype=torch.long, device=self.device)
        self.rewards = torch.zeros(self.capacity, dtype=torch.float32, device=self.device)
        self.discounts = torch.zeros(self.capacity, dtype=torch.float32, device=self.device)
        self.added_at = torch.zeros(self.capacity, dtype=torch.long, device=self.device)
        self.pos = 0
        self.size = 0
        self.num_added = 0
        # On the CPU, writes go through numpy views of the same memory: a numpy slice copy costs about a
        # microsecond, a torch one several, and the buffer is written at every env step.
        self._host_views = ({k: getattr(self, k).numpy() for k in self.STORAGE}
                            if self.device.type == "cpu" else None)

    def __len__(self) -> int:
        return self.size

    @property
    def sizes(self) -> np.ndarray:
        return np.array([self.size])

    def oldest_obs(self) -> torch.Tensor:
        return self.obs[self.pos if self.size == self.capacity else 0].unsqueeze(0)

    def add(self, obs, actions, rewards, next_obs, discounts) -> list[tuple[int, int]]:
        """Store a batch of B transitions (numpy arrays or tensors with a leading batch axis); returns the
        [start, end) slot ranges written (two when the ring wraps)."""
        n = actions.shape[0]
        start = self.pos
        if start + n > self.capacity:  # wraps around: store in two contiguous pieces
            k = self.capacity - start
            store = ReplayBuffer.add  # the storage itself, not a subclass's bookkeeping
            return (store(self, obs[:k], actions[:k], rewards[:k], next_obs[:k], discounts[:k])
                    + store(self, obs[k:], actions[k:], rewards[k:], next_obs[k:], discounts[k:]))
        # Contiguous slices: plain copies, cheaper than scattering through an index tensor.
        end = start + n
        values = {"obs": obs, "next_obs": next_obs, "actions": actions, "rewards": rewards,
                  "discounts": discounts, "added_at": np.arange(self.num_added, self.num_added + n)}
        if self._host_views is not None:
            for k, v in values.items():
                self._host_views[k][start:end] = v.numpy() if isinstance(v, torch.Tensor) else v
        else:
            for k, v in values.items():
                getattr(self, k)[start:end] = torch.as_tensor(v).to(self.device, non_blocking=True)
        self.pos = end % self.capacity
        self.size = min(self.size + n, self.capacity)
        self.num_added += n
        return [(start, end)]

    def _sample_indices(self, batch_size: int, beta: float):
        idx = torch.randint(0, self.size, (batch_size,), device=self.device, generator=self.generator)
        return idx, None

    def sample(self, batch_size: int, beta: float = 1.0) -> Batch:
        idx, weights = self._sample_indices(batch_size, beta)
        return Batch(
            self.obs[idx], self.actions[idx], self.rewards[idx], self.next_obs[idx], self.discounts[idx],
            idx, weights, self.num_added - 1 - self.added_at[idx],
        )

    def update_priorities(self, indices: torch.Tensor, td_errors: torch.Tensor) -> None:
        """Uniform replay has no priorities."""

    STORAGE = ("obs", "next_obs", "actions", "rewards", "discounts", "added_at")

    def state_dict(self, include_storage: bool = True) -> dict:
        state = {"pos": self.pos, "size": self.size, "num_added": self.num_added}
        if include_storage:  # only the filled part
            state.update({k: getattr(self, k)[: self.size].clone() for k in self.STORAGE})
        return state

    def load_state_dict(self, state: dict) -> None:
        if "obs" not in state:  # saved without storage: start from an empty buffer
            return
        self.pos, self.size, self.num_added = state["pos"], state["size"], state["num_added"]
        for k in self.STORAGE:
            getattr(self, k)[: self.size] = state[k].to(self.device)


class SumTree:
    """Binary sum tree over `capacity` leaves, every operation vectorised over a batch of indices.

    Updates and searches walk the tree one level at a time for the whole batch, so their cost is
    O(log capacity) tensor ops, with no Python loop over the batch.
    """

    def __init__(self, capacity: int, device: torch.device):
        self.leaves = 1 << max(0, (capacity - 1).bit_length())
        self.depth = self.leaves.bit_length() - 1
        # float64: sums over 1e6 leaves must not drift away from the leaves they are made of.
        self.tree = torch.zeros(2 * self.leaves, dtype=torch.float64, device=device)
        # On the CPU the walks run in numpy on the same memory: ~20 levels x 3 ops, each about a
        # microsecond in numpy and several in torch. Same float64 arithmetic, same results.
        self._np = self.tree.numpy() if self.tree.device.type == "cpu" else None

    @property
    def total(self) -> torch.Tensor:
        return self.tree[1]

    def leaf_values(self, idx: torch.Tensor) -> torch.Tensor:
        return self.tree[idx + self.leaves]

    def update(self, idx: torch.Tensor, values: torch.Tensor) -> None:
        if self._np is not None:
            tree, pos = self._np, idx.numpy() + self.leaves
            tree[pos] = values.to(torch.float64).numpy()
            for _ in range(self.depth):
                pos = pos // 2
                tree[pos] = tree[2 * pos] + tree[2 * pos + 1]
            return
        pos = idx + self.leaves
        self.tree[pos] = values.to(self.tree.dtype)
        for _ in range(self.depth):
            pos = pos // 2  # repeated parents just recompute the same sum
            self.tree[pos] = self.tree[2 * pos] + self.tree[2 * pos + 1]

    def find(self, mass: torch.Tensor) -> torch.Tensor:
        """Leaf index i with prefix_sum(i) <= mass < prefix_sum(i + 1), for each mass in the batch."""
        if self._np is not None:
            tree, m = self._np, mass.to(torch.float64).numpy()
            i = np.ones(m.shape, dtype=np.int64)
            for _ in range(self.depth):
                left = tree[2 * i]
                go_right = m >= left
                m = np.where(go_right, m - left, m)
                i = 2 * i + go_right
            return torch.from_numpy(i - self.leaves)
        idx = torch.ones_like(mass, dtype=torch.long)
        mass = mass.to(self.tree.dtype)
        for _ in range(self.depth):
            left = self.tree[2 * idx]
            go_right = mass >= left
            mass = torch.where(go_right, mass - left, mass)
            idx = 2 * idx + go_right.long()
        return idx - self.leaves


class PriorityBookkeeping:
    """What every prioritized buffer (single or stacked) shares: beta's schedule, and the sum tree and max
    priority in checkpoints. Mixed in before the storage class, whose state this extends."""

    def beta(self, step: int, total_steps: int) -> float:
        duration = self.beta_anneal_steps if self.beta_anneal_steps is not None else total_steps
        return min(1.0, self.beta_start + (1.0 - self.beta_start) * step / max(1, duration))

    def state_dict(self, include_storage: bool = True) -> dict:
        self._flush()
        state = super().state_dict(include_storage)
        if include_storage:
            state["tree"] = self.tree.tree.clone()
            state["max_priority"] = self.max_priority.clone()
        return state

    def load_state_dict(self, state: dict) -> None:
        super().load_state_dict(state)
        if "tree" in state:
            self.tree.tree.copy_(state["tree"])
            self.max_priority = state["max_priority"].to(self.device)


class PrioritizedReplayBuffer(PriorityBookkeeping, ReplayBuffer):
    """Proportional prioritized replay (Schaul et al. 2016).

    P(i) = p_i^alpha / sum_k p_k^alpha with p_i = |td_i| + priority_eps; new transitions enter at the
    largest priority seen so far. Importance weights are w_i = (N * P(i))^-beta, divided by the largest
    weight in the batch (as Dopamine and most Rainbow implementations do) so that updates only shrink.
    Sampling is stratified: the total mass is cut into `batch_size` equal segments, one draw in each.
    """

    prioritized = True

    def __init__(
        self,
        capacity: int,
        obs_shape: Sequence[int],
        device: torch.device | str = "cpu",
        obs_dtype: torch.dtype = torch.float32,
        generator: Optional[torch.Generator] = None,
        alpha: float = 0.6,
        beta_start: float = 0.4,
        beta_anneal_steps: Optional[int] = None,
        priority_eps: float = 1e-6,
    ):
        super().__init__(capacity, obs_shape, device, obs_dtype, generator)
        self.alpha = alpha
        self.beta_start = beta_start
        self.beta_anneal_steps = beta_anneal_steps
        self.priority_eps = priority_eps
        self.tree = SumTree(self.capacity, self.device)
        self.max_priority = torch.ones((), dtype=torch.float64, device=self.device)
        self._pending: list[tuple[torch.Tensor, torch.Tensor]] = []

    def add(self, obs, actions, rewards, next_obs, discounts) -> list[tuple[int, int]]:
        ranges = super().add(obs, actions, rewards, next_obs, discounts)
        idx = torch.cat([torch.arange(a, b, device=self.device) for a, b in ranges])
        # New transitions get the max priority as of now; writing them into the tree is deferred to the
        # next read, so the tree walk is paid once per update phase instead of once per env step.
        self._pending.append((idx, self.max_priority.expand(idx.shape[0])))
        return ranges

    def _flush(self) -> None:
        if self._pending:
            idx, prio = (torch.cat(t) for t in zip(*self._pending))
            self._pending.clear()
            self.tree.update(idx, prio ** self.alpha)

    def priorities(self, idx: torch.Tensor) -> torch.Tensor:
        """p_i^alpha of the given slots."""
        self._flush()
        return self.tree.leaf_values(idx)

    def probabilities(self, idx: torch.Tensor) -> torch.Tensor:
        return self.priorities(idx) / self.tree.total

    def _sample_indices(self, batch_size: int, beta: float):
        self._flush()
        segment = self.tree.total / batch_size
        u = torch.rand(batch_size, device=self.device, generator=self.generator, dtype=torch.float64)
        mass = (torch.arange(batch_size, device=self.device, dtype=torch.float64) + u) * segment
        idx = self.tree.find(mass).clamp_(max=self.size - 1)  # float round-off at the right edge
        weights = (self.size * self.probabilities(idx)) ** (-beta)
        return idx, (weights / weights.max()).float()

    def update_priorities(self, indices: torch.Tensor, td_errors: torch.Tensor) -> None:
        self._flush()
        priorities = td_errors.detach().abs().to(torch.float64) + self.priority_eps
        self.max_priority = torch.maximum(self.max_priority, priorities.max())
        self.tree.update(indices, priorities ** self.alpha)


    def stats(self) -> dict[str, torch.Tensor]:
        """Priority statistics over the stored transitions (p^alpha, as sampled)."""
        self._flush()
        p = self.tree.tree[self.tree.leaves : self.tree.leaves + self.size]
        total = p.sum()
        return {
            "priority_max": p.max(),
            "priority_mean": p.mean(),
            # Kish effective sample size of P, as a fraction of N: 1 = uniform, -> 1/N = one transition.
            "ess_fraction": total * total / (self.size * (p * p).sum()),
        }
