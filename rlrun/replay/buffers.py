"""The four buffers: uniform or prioritized, for one agent or for K agents on stacked (K, capacity, ...)
storage.

Each stacked agent keeps its own ring position, size, sampling generator and (for PER) sum tree and max
priority, so agent k's buffer holds, samples and weights exactly what a single-agent buffer with that
agent's seed would. Only the arithmetic is shared: one gather per field for all K batches, one tree walk
for all K trees. The random draws stay per agent (one small call per agent and batch), because K
independent streams are what makes each agent equal to its single run.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from rlrun.replay.augment import make_augmentation
from rlrun.replay.base import Batch, Beta, Ring
from rlrun.replay.prioritized import Prioritized


class ReplayBuffer(Ring):
    """Uniform replay for one agent: a ring buffer; `sample` draws indices uniformly with replacement."""

    COUNTERS = ("pos", "size", "num_added")

    def __init__(
        self,
        capacity: int,
        obs_shape: Sequence[int],
        device: torch.device | str = "cpu",
        obs_dtype: torch.dtype = torch.float32,
        generator: torch.Generator | None = None,
        augment: str = "none",
        augment_pad: int = 4,
        augment_intensity: float = 0.0,
    ):
        self._allocate((), capacity, obs_shape, obs_dtype, device)
        self.generator = generator
        # buffer.augment (rlrun.replay.augment), applied to every sample; a frame-index buffer hands it to its
        # FrameStore, which applies it to the decoded pixels
        self.augment = make_augmentation(augment, augment_pad, [generator], 1, augment_intensity)
        self.pos, self.size, self.num_added = 0, 0, 0

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
        ranges = self._write(obs, actions, rewards, next_obs, discounts)
        if self.prioritized:
            self._enter(torch.cat([torch.arange(a, b, device=self.device) for a, b in ranges]))  # type: ignore[attr-defined]
        return ranges

    def _write(self, obs, actions, rewards, next_obs, discounts) -> list[tuple[int, int]]:
        n = actions.shape[0]
        start = self.pos
        if start + n > self.capacity:  # wraps around: store in two contiguous pieces
            cut = self.capacity - start
            return self._write(obs[:cut], actions[:cut], rewards[:cut], next_obs[:cut], discounts[:cut]) + self._write(
                obs[cut:], actions[cut:], rewards[cut:], next_obs[cut:], discounts[cut:]
            )
        # Contiguous slices: plain copies, cheaper than scattering through an index tensor.
        end = start + n
        added_at = np.arange(self.num_added, self.num_added + n)
        self._store((slice(start, end),), obs, next_obs, actions, rewards, discounts, added_at)
        self.pos = end % self.capacity
        self.size = min(self.size + n, self.capacity)
        self.num_added += n
        return [(start, end)]

    def _size_tensor(self) -> int | torch.Tensor:
        return self.size if self._dev_sizes is None else self._dev_sizes

    def _uniforms(self, batch_size: int) -> torch.Tensor:
        return torch.rand(batch_size, device=self.device, generator=self.generator, dtype=torch.float64)

    def _randint(self, batch_size: int) -> torch.Tensor:
        return torch.randint(0, self.size, (batch_size,), device=self.device, generator=self.generator)

    def sample(self, batch_size: int, beta: Beta = 1.0) -> Batch:
        idx, weights = self._sample_indices(batch_size, beta)
        return self._batch(idx, idx, weights, self.num_added if self._dev_added is None else self._dev_added)


class PrioritizedReplayBuffer(Prioritized, ReplayBuffer):
    """Proportional prioritized replay for one agent (rlrun.replay.prioritized): `ReplayBuffer`'s arguments,
    then PER's by name."""


class StackedReplayBuffer(Ring):
    """Uniform replay for K agents; `add` takes each transition's agent."""

    COUNTERS = ("pos", "sizes", "num_added")

    def __init__(
        self,
        agents: int,
        capacity: int,
        obs_shape: Sequence[int],
        generators: Sequence[torch.Generator],
        device: torch.device | str = "cpu",
        obs_dtype: torch.dtype = torch.float32,
        augment: str = "none",
        augment_pad: int = 4,
        augment_intensity: float = 0.0,
    ):
        self._allocate((agents,), capacity, obs_shape, obs_dtype, device)
        self.agents, self.generators = agents, list(generators)
        self.augment = make_augmentation(augment, augment_pad, self.generators, 2, augment_intensity)
        self.pos = np.zeros(agents, dtype=np.int64)
        self._sizes = np.zeros(agents, dtype=np.int64)
        self.num_added = np.zeros(agents, dtype=np.int64)
        self._rows = torch.arange(agents, device=self.device).unsqueeze(1)  # (K, 1) for gathers

    @property
    def sizes(self) -> np.ndarray:
        return self._sizes

    @sizes.setter
    def sizes(self, value: np.ndarray) -> None:
        self._sizes = value

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
        self._store((agent, slot), obs, next_obs, actions, rewards, discounts, self.num_added[agent] + rank)
        self.pos = (self.pos + counts) % self.capacity
        self.sizes = np.minimum(self.sizes + counts, self.capacity)
        self.num_added += counts
        if self.prioritized:
            self._enter(torch.as_tensor(slot, device=self.device), torch.as_tensor(agent, device=self.device))  # type: ignore[attr-defined]
        return agent, slot

    def _size_tensor(self) -> torch.Tensor:
        if self._dev_sizes is not None:
            return self._dev_sizes.unsqueeze(1)
        return torch.as_tensor(self.sizes, device=self.device).unsqueeze(1)

    def _uniforms(self, batch_size: int) -> torch.Tensor:
        return torch.stack(
            [torch.rand(batch_size, device=self.device, generator=g, dtype=torch.float64) for g in self.generators]
        )

    def _randint(self, batch_size: int) -> torch.Tensor:
        return torch.stack(
            [
                torch.randint(0, int(size), (batch_size,), device=self.device, generator=g)
                for size, g in zip(self.sizes, self.generators)
            ]
        )

    def sample(self, batch_size: int, beta: Beta = 1.0) -> Batch:
        """(K, batch_size, ...) tensors: row k is agent k's batch."""
        idx, weights = self._sample_indices(batch_size, beta)
        if self._dev_added is not None:
            num_added = self._dev_added.unsqueeze(1)
        else:
            num_added = torch.as_tensor(self.num_added, device=self.device).unsqueeze(1)
        return self._batch((self._rows, idx), idx, weights, num_added)


class StackedPrioritizedReplayBuffer(Prioritized, StackedReplayBuffer):
    """`PrioritizedReplayBuffer` per agent, on stacked storage and one sum tree per agent:
    `StackedReplayBuffer`'s arguments, then PER's by name (`alpha`, `beta_start`: one value, or one per agent)."""
