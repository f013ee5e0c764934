"""Experience replay: uniform or prioritized, for one agent or K stacked agents, behind one interface
(`Replay`). `base` holds the batch, the interface and the ring storage; `sumtree` the sum trees;
`prioritized` the PER maths; `buffers` the four buffer classes."""

from rlrun.replay.base import Batch, Replay, Ring
from rlrun.replay.buffers import (
    PrioritizedReplayBuffer,
    ReplayBuffer,
    StackedPrioritizedReplayBuffer,
    StackedReplayBuffer,
)
from rlrun.replay.sumtree import SumTree

__all__ = [
    "Batch",
    "PrioritizedReplayBuffer",
    "Replay",
    "ReplayBuffer",
    "Ring",
    "StackedPrioritizedReplayBuffer",
    "StackedReplayBuffer",
    "SumTree",
]
