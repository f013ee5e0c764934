"""A trainer's checkpoint state as `rlrun.training.loop.Trainer.load_state_dict` checks it: its format
(versioned by CHECKPOINT_FORMAT) and the fields a crafted or damaged file could make unreadable (the stopped
agents, the work a signal left owed), each refused as a one-line CheckpointError."""

from __future__ import annotations

import reprlib
from typing import Any

from rlrun.storage import checkpoint as ckpt

CHECKPOINT_FORMAT = 1


def check_format(state: dict[str, Any]) -> None:
    """A CheckpointError for a checkpoint of another format."""
    if state["format"] != CHECKPOINT_FORMAT:
        raise ckpt.CheckpointError(
            f"checkpoint format {state['format']!r}: this rlrun reads format {CHECKPOINT_FORMAT}"
        )


def _pending(pending: object, pbt: bool) -> list[str]:
    """The step's owed work (Trainer.pending): [], ["eval"] or ["eval", "pbt"] (with PBT); anything else refused."""
    allowed = [[], ["eval"], ["eval", "pbt"]] if pbt else [[], ["eval"]]
    if not isinstance(pending, list) or not all(isinstance(x, str) for x in pending) or pending not in allowed:
        raise ckpt.CheckpointError(f"the checkpoint's pending work {reprlib.repr(pending)} is not one of {allowed}")
    return list(pending)


def _failed_agents(failed: object, agents: int) -> dict[int, str]:
    """The stopped agents (Population.failed): agent index (0 to `agents` - 1) -> why; anything else refused."""
    if not isinstance(failed, dict) or not all(
        type(k) is int and 0 <= k < agents and isinstance(v, str) for k, v in failed.items()
    ):
        raise ckpt.CheckpointError(
            f"the checkpoint's stopped agents {reprlib.repr(failed)} are not a dict of agent index "
            f"(0 to {agents - 1}) to reason"
        )
    return dict(failed)
