"""What a run's replay will take in memory, known before anything is allocated or written.

A replay buffer allocates all its storage at the start (rlrun.replay: obs and next_obs, actions, rewards,
discounts and insertion counts per slot; PER's sum tree), and frame-stacked pixels keep each frame once in
a `rlrun.replay.frames.FrameStore` with index stacks in the buffer. `replay_bytes` counts those bytes per agent
exactly as `rlrun.training.build` sizes them; the pre-flight (`rlrun.config.preflight.check_job`) prints the
total when it is large and refuses a run whose replay exceeds the memory available to it, naming the capacity that fits.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path

import numpy as np

from rlrun.errors import ConfigError

LARGE = 2**30  # bytes: from here on, say at the start what replay will hold
HEADROOM = 0.8  # the capacity offered instead leaves a fifth of the available memory to the rest of the run
PER_SLOT = 8 + 4 + 4 + 8  # action (int64), reward and discount (float32), insertion count (int64)


def frame_store_frames(capacity: int, num_envs: int, frame_stack: int) -> int:
    """Frames a FrameStore keeps per agent (rlrun.training.build: one per env step and per episode end, with a margin
    for episodes down to ~16 steps on average)."""
    return capacity + capacity // 16 + 1024 + num_envs * frame_stack


def stored_obs_itemsize(obs_dtype) -> int:
    """Bytes per stored observation element: uint8 observations (MinAtar's grids, ALE RAM) are stored as
    they come, anything else as float32 (rlrun.training.build)."""
    return 1 if np.dtype(obs_dtype) == np.uint8 else 4


def replay_bytes(
    capacity: int,
    obs_shape: tuple[int, ...],
    frame_stack: int,
    num_envs: int,
    prioritized: bool = False,
    obs_itemsize: int = 4,
) -> int:
    """Bytes of one agent's replay: stacked frames stored once (uint8) with 2 index stacks (int64) per
    slot, or else obs and next_obs (`obs_itemsize` bytes each element); plus each slot's other fields and
    PER's float64 sum tree."""
    if frame_stack:
        frame = math.prod(obs_shape[1:])  # uint8 pixels of one frame
        storage = frame_store_frames(capacity, num_envs, frame_stack) * frame + capacity * 2 * frame_stack * 8
    else:
        storage = capacity * 2 * math.prod(obs_shape) * obs_itemsize
    tree = 2 * (1 << max(0, (capacity - 1).bit_length())) * 8 if prioritized else 0
    return storage + capacity * PER_SLOT + tree


def available_memory() -> int | None:
    """Bytes this process can still allocate: MemAvailable of /proc/meminfo, bounded by a cgroup v2 limit
    (containers) when one is set; None where neither can be read (not Linux)."""
    try:
        text = Path("/proc/meminfo").read_text()
    except OSError:
        return None
    found = [int(line.split()[1]) * 1024 for line in text.splitlines() if line.startswith("MemAvailable:")]
    if not found:
        return None
    limit = cgroup_room()
    return found[0] if limit is None else min(found[0], limit)


def cgroup_room() -> int | None:
    """Room left under this process's cgroup v2 memory limit (its page cache counted as free), or None."""
    try:
        line = Path("/proc/self/cgroup").read_text().splitlines()[0]
        group = Path("/sys/fs/cgroup") / line.split("::", 1)[1].lstrip("/")
        limit = (group / "memory.max").read_text().strip()
        used = int((group / "memory.current").read_text())
        stat = dict(row.split() for row in (group / "memory.stat").read_text().splitlines())
    except (OSError, IndexError, ValueError):
        return None
    if limit == "max":
        return None
    return max(0, int(limit) - used + int(stat.get("inactive_file", 0)))


def gb(n: float) -> str:
    return f"{n / 1e9:.1f} GB"


def check_replay(
    capacity: int,
    obs_shape: tuple[int, ...],
    frame_stack: int,
    num_envs: int,
    agents: int,
    prioritized: bool,
    on_host: bool,
    obs_itemsize: int,
) -> str | None:
    """The line to print about replay's size (None when it is small), or a ConfigError naming
    buffer.capacity when replay on the host would not fit the available memory."""

    def size(slots: int) -> int:  # bytes of every agent's replay of `slots` transitions
        return agents * replay_bytes(slots, obs_shape, frame_stack, num_envs, prioritized, obs_itemsize)

    total = size(capacity)
    if total <= LARGE:
        return None
    what = f"{capacity:,} frames of {'x'.join(map(str, obs_shape[1:]))}" if frame_stack else f"{capacity:,} obs"
    what += " per agent" + (f", {agents} agents" if agents > 1 else "")
    available = available_memory() if on_host else None
    if available is not None and total > available:
        fit = fitting_capacity(int(available * HEADROOM), size)
        raise ConfigError(
            "buffer.capacity",
            capacity,
            f"at most {fit:,} here: replay would hold ~{gb(total)} ({what}), and {gb(available)} of memory is "
            f"available; buffer.capacity={fit} leaves a fifth of it to the rest of the run",
        )
    where = f"; available {gb(available)}" if available is not None else ("" if on_host else " on the GPU")
    return f"rlrun: replay will hold ~{gb(total)} ({what}){where}"


def fitting_capacity(budget: int, size: Callable[[int], int]) -> int:
    """The largest capacity (a multiple of 1,000 from 1,000 on, else 1) whose replay, `size(capacity)`
    bytes, fits `budget` bytes."""
    lo, hi = 0, 1
    while size(hi) <= budget:
        lo, hi = hi, hi * 2
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if size(mid) <= budget:
            lo = mid
        else:
            hi = mid
    return max(1, lo // 1000 * 1000 if lo >= 1000 else lo)
