"""What every replay buffer shares: the `Batch` it samples, the `Replay` interface the loop and the
learner use, and the ring storage of preallocated tensors on the training device.

A transition is (obs, action, reward, next_obs, discount), where `discount` already folds in the episode
end and the n-step accumulation (rlrun.replay.nstep): gamma**k for a transition that may bootstrap (including a
time-limit truncation), 0 for one that terminated. The learner's target is then simply
`reward + discount * Q_target(next_obs)`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import NamedTuple, Protocol

import numpy as np
import torch


class Batch(NamedTuple):
    obs: torch.Tensor
    actions: torch.Tensor
    rewards: torch.Tensor
    next_obs: torch.Tensor
    discounts: torch.Tensor
    indices: torch.Tensor
    weights: torch.Tensor | None  # importance-sampling weights (PER only)
    age: torch.Tensor  # transitions added to the buffer since each sampled one was stored


# PER's importance-sampling exponent: one value, one per agent ((K,) array), or a device tensor (recorded steps)
Beta = float | np.ndarray | torch.Tensor


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

    @property
    def add(self) -> Callable[..., object]:
        """Store transitions: add(obs, actions, rewards, next_obs, discounts) for one agent; for K, the
        agent of each transition first: add(agent, obs, ...)."""
        ...

    def sample(self, batch_size: int, beta: Beta = 1.0) -> Batch: ...

    def update_priorities(self, indices: torch.Tensor, td_errors: torch.Tensor) -> None: ...

    def oldest_obs(self) -> torch.Tensor:
        """(K, ...) the stored observation of each agent's oldest transition (frame-index stacks: replay.frames)."""
        ...

    def state_dict(self, include_storage: bool = True) -> dict: ...

    def load_state_dict(self, state: dict) -> None: ...

    def keep_counts_on_device(self) -> None: ...  # CUDA graphs (rlrun.training.graphs): `Ring`'s

    def prepare_graph_replay(self) -> None: ...


class Ring:
    """Preallocated storage of `capacity` transitions per agent: (*lead, capacity, ...) tensors, where
    `lead` is () for one agent and (K,) for K. On the CPU, writes go through numpy views of the same
    memory: a numpy slice copy costs about a microsecond, a torch one several, and the buffer is written
    at every env step."""

    STORAGE = ("obs", "next_obs", "actions", "rewards", "discounts", "added_at")
    COUNTERS: tuple[str, ...] = ()  # ring positions and counts, saved in checkpoints
    prioritized = False
    augment: Callable[[Batch], Batch] | None  # buffer.augment (rlrun.replay.augment), applied to every sample
    _uniforms: Callable[[int], torch.Tensor]  # (..., B) float64 uniforms from each agent's generator
    _randint: Callable[[int], torch.Tensor]  # (..., B) slots drawn uniformly from each agent's filled ones

    def _allocate(
        self,
        lead: tuple[int, ...],
        capacity: int,
        obs_shape: Sequence[int],
        obs_dtype: torch.dtype,
        device: torch.device | str,
    ) -> None:
        self.capacity = int(capacity)
        self.device = torch.device(device)
        shape = (*lead, self.capacity)
        self.obs = torch.zeros((*shape, *obs_shape), dtype=obs_dtype, device=self.device)
        self.next_obs = torch.zeros_like(self.obs)
        self.actions = torch.zeros(shape, dtype=torch.long, device=self.device)
        self.rewards = torch.zeros(shape, dtype=torch.float32, device=self.device)
        self.discounts = torch.zeros(shape, dtype=torch.float32, device=self.device)
        self.added_at = torch.zeros(shape, dtype=torch.long, device=self.device)
        self._lead = (slice(None),) * len(lead)
        self._host_views = {k: getattr(self, k).numpy() for k in self.STORAGE} if self.device.type == "cpu" else None

    # --- CUDA graphs (rlrun.training.graphs) -----------------------------------------------------------
    _dev_sizes: torch.Tensor | None = None  # sizes and added-counts on the device, for recorded sampling
    _dev_added: torch.Tensor | None = None

    def keep_counts_on_device(self) -> None:
        """Sample with sizes read from device tensors (refreshed by `prepare_graph_replay`), so that a
        recorded sampling step stays right as the buffer fills."""
        lead = self.sizes.shape if self._lead else ()
        self._dev_sizes = torch.zeros(lead, dtype=torch.long, device=self.device)
        self._dev_added = torch.zeros(lead, dtype=torch.long, device=self.device)

    def prepare_graph_replay(self) -> None:
        """Before a recorded update phase: the current counts on the device (one small copy each)."""
        assert self._dev_sizes is not None and self._dev_added is not None
        self._dev_sizes.copy_(torch.as_tensor(np.asarray(self.sizes).reshape(self._dev_sizes.shape)))
        self._dev_added.copy_(torch.as_tensor(np.asarray(self.num_added).reshape(self._dev_added.shape)))  # type: ignore[attr-defined]
        flush = getattr(self, "_flush", None)
        if flush is not None:  # PER: new transitions' priorities into the trees, outside the graph
            flush()

    def _uniform_indices_on_device(self, uniforms: torch.Tensor) -> torch.Tensor:
        """Indices uniform in [0, size) from uniforms in [0, 1), without reading the size on the host."""
        assert self._dev_sizes is not None
        size = self._dev_sizes if self._dev_sizes.dim() == 0 else self._dev_sizes.unsqueeze(1)
        return torch.minimum((uniforms * size).long(), size - 1)

    def _store(self, where: tuple, obs, next_obs, actions, rewards, discounts, added_at) -> None:
        """Write transitions at `where`: slot slices, or (agent, slot) index arrays."""
        values = {
            "obs": obs,
            "next_obs": next_obs,
            "actions": actions,
            "rewards": rewards,
            "discounts": discounts,
            "added_at": added_at,
        }
        if self._host_views is not None:
            for k, v in values.items():
                self._host_views[k][where] = v.numpy() if isinstance(v, torch.Tensor) else v
        else:
            where = tuple(torch.as_tensor(w, device=self.device) if isinstance(w, np.ndarray) else w for w in where)
            for k, v in values.items():
                getattr(self, k)[where] = torch.as_tensor(v).to(self.device, non_blocking=True)

    def _sample_indices(self, batch_size: int, beta: Beta) -> tuple[torch.Tensor, torch.Tensor | None]:
        if self._dev_sizes is not None:  # recorded in a CUDA graph (rlrun.training.graphs)
            return self._uniform_indices_on_device(self._uniforms(batch_size)), None
        return self._randint(batch_size), None

    def _batch(self, at, idx: torch.Tensor, weights: torch.Tensor | None, num_added) -> Batch:
        """The sampled transitions at `at` (`idx`, or (agent rows, idx)), augmented where buffer.augment says."""
        batch = Batch(
            self.obs[at],
            self.actions[at],
            self.rewards[at],
            self.next_obs[at],
            self.discounts[at],
            idx,
            weights,
            num_added - 1 - self.added_at[at],
        )
        return batch if self.augment is None else self.augment(batch)

    def _filled(self) -> int:
        """Slots in use in the fullest agent's ring."""
        return int(np.max(self.sizes))

    @property
    def sizes(self) -> np.ndarray:
        raise NotImplementedError

    def update_priorities(self, indices: torch.Tensor, td_errors: torch.Tensor) -> None:
        """Uniform replay has no priorities."""

    def state_dict(self, include_storage: bool = True) -> dict:
        state = {k: np.asarray(getattr(self, k)).tolist() for k in self.COUNTERS}
        if include_storage:  # only the filled part
            filled = (*self._lead, slice(0, self._filled()))
            state.update({k: getattr(self, k)[filled].clone() for k in self.STORAGE})
        return state

    def load_state_dict(self, state: dict) -> None:
        if "obs" not in state:  # saved without storage: start from an empty buffer
            return
        for k in self.COUNTERS:
            setattr(self, k, state[k] if isinstance(state[k], int) else np.array(state[k], dtype=np.int64))
        filled = (*self._lead, slice(0, self._filled()))
        for k in self.STORAGE:
            getattr(self, k)[filled] = state[k].to(self.device)
