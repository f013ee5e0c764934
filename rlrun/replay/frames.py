"""Pixel observations stored once per frame.

With frame stacking every observation shares k-1 frames with the one before it, so storing stacked
observations (twice per transition, obs and next_obs) costs 2k times the pixels. Instead each new frame is
written once into a ring of single frames, and an observation becomes a vector of k global frame indices.
The replay buffer and the n-step windows store those index vectors; `decode` turns a sampled batch back
into pixel stacks on the training device. The stacks are exactly those of gymnasium's
`FrameStackObservation` (padding a new episode with its first frame), and never mix two episodes.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch

from rlrun.replay import Batch


class FrameStore:
    def __init__(self, capacity: int, frame_shape, stack: int, num_envs: int, device, dtype=torch.uint8):
        self.capacity, self.stack = int(capacity), stack
        self.frames = torch.zeros((self.capacity, *frame_shape), dtype=dtype, device=device)
        self.written = 0  # global index of the next frame
        self.current = np.zeros((num_envs, stack), dtype=np.int64)  # each env's current stack
        # buffer.augment for the decoded pixels (rlrun.replay.augment; the replay buffer's, which samples indices)
        self.augment: Callable[[Batch], Batch] | None = None

    def _write(self, frames: np.ndarray) -> np.ndarray:
        n = len(frames)
        idx = np.arange(self.written, self.written + n)
        self.frames[torch.from_numpy(idx % self.capacity).to(self.frames.device)] = torch.as_tensor(frames).to(
            self.frames.device, self.frames.dtype
        )
        self.written += n
        return idx

    def start(self, obs: np.ndarray, envs: np.ndarray | None = None) -> None:
        """New episodes: the stack is the first frame repeated (FrameStackObservation's padding)."""
        envs = np.arange(len(self.current)) if envs is None else envs
        idx = self._write(obs[envs, -1])
        self.current[envs] = idx[:, None]

    def advance(self, next_obs: np.ndarray, real_next_obs: np.ndarray, done: np.ndarray) -> np.ndarray:
        """One vector step. Returns the index stacks of the observations the transitions ended in (the final
        observation for envs that just finished), and moves every env's current stack on."""
        idx = self._write(real_next_obs[:, -1])
        stored = np.concatenate([self.current[:, 1:], idx[:, None]], axis=1)
        self.current = stored.copy()
        finished = np.flatnonzero(done)
        if finished.size:
            self.start(next_obs, finished)
        return stored

    def decode(self, batch: Batch) -> Batch:
        """A batch sampled from index stacks, with its obs and next_obs as pixel stacks."""
        batch = batch._replace(obs=self._stacks(batch.obs), next_obs=self._stacks(batch.next_obs))
        return batch if self.augment is None else self.augment(batch)

    def _stacks(self, indices: torch.Tensor) -> torch.Tensor:
        """The frames of (..., stack) frame indices: index_select, about 20x faster on a CPU than indexing
        with the index tensor (0.06 against 1.2 ms for 32 stacks of 4 84x84 frames), the same bytes."""
        frames = self.frames.index_select(0, (indices % self.capacity).reshape(-1))
        return frames.view(*indices.shape, *self.frames.shape[1:])

    def check(self, buffer) -> None:
        """Fail loudly if frames that stored transitions still refer to have been overwritten (episodes
        much shorter than the store's margin assumes). One host sync: call it at logging time."""
        if len(buffer) == 0:
            return
        needed = int(buffer.oldest_obs().min())
        if needed < self.written - self.capacity:
            raise RuntimeError(
                f"frame store too small: transitions need frame {needed}, but only frames from "
                f"{self.written - self.capacity} on are kept; lower buffer.capacity or report this"
            )

    def state_dict(self) -> dict:
        n = min(self.written, self.capacity)
        return {
            "frames": self.frames[:n].cpu().clone(),
            "written": self.written,
            "current": torch.from_numpy(self.current.copy()),
        }

    def load_state_dict(self, state: dict) -> None:
        n = state["frames"].shape[0]
        self.frames[:n] = state["frames"].to(self.frames.device)
        self.written, self.current = state["written"], state["current"].numpy().copy()
