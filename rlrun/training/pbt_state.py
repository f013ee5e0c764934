"""A checkpoint's PBT state checked before it is loaded (rlrun.training.pbt.PBT.check_state): each field of the
right shape for this run (its explored keys, agents and their labels), each explored value one its key's own
rule allows. A crafted or damaged state would otherwise end in a traceback, fail only at the end of training,
or train with a value the key refuses (an lr of -1: gradient ascent)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from rlrun.errors import ConfigError


def problem(pbt: Any, state: Any) -> str | None:
    """What in a checkpoint's PBT state does not fit `pbt` (a rlrun.training.pbt.PBT: its explored keys,
    agents and labels, its keys' rules), or None."""
    k, width = pbt.agents, 5 + len(pbt.space)
    if not isinstance(state, dict):
        return f"it is {type(state).__name__}, not the state of a run with +pbt"
    missing = [key for key in pbt.state_dict() if key not in state]
    if missing:
        return "no " + ", ".join(missing)
    values = state["values"]
    if not isinstance(values, dict) or sorted(values) != sorted(pbt.space):
        return f"values are for {_shown(values)}, not for the keys explored ({', '.join(pbt.space)})"
    for key, found in values.items():
        if not _numbers(found, k):
            return f"values[{key}] is {_shown(found)}, not {k} finite numbers (one per agent)"
        try:
            if pbt.rule is not None:
                pbt.rule(key, found)
        except ConfigError as e:
            return f"values[{key}] holds {e.value}, which {e.key}'s own rule refuses (allowed {e.allowed})"
    try:
        np.random.default_rng().bit_generator.state = state["rng"]
    except (TypeError, ValueError, KeyError):
        return f"rng is {_shown(state['rng'])}, not the state of PBT's random stream"
    events = state["events"]
    if not isinstance(events, list) or not all(_event_fits(pbt, e, width) for e in events):
        return f"events hold {_shown(events)}, not rows of {width} fields (step, agent, source, fitnesses, values)"
    diverged = state["diverged"]
    if not isinstance(diverged, list) or not all(_integer(a) and 0 <= a < k for a in diverged):
        return f"diverged is {_shown(diverged)}, not agent numbers below {k}"
    if state["eval_fitness"] is not None and not _numbers(state["eval_fitness"], k, finite=False):
        return f"eval_fitness is {_shown(state['eval_fitness'])}, not None or {k} numbers"
    if not _numbers([state["seconds"]], 1) or state["seconds"] < 0:
        return f"seconds is {_shown(state['seconds'])}, not a number >= 0"
    copied = state["copied_at_episode"]
    if not isinstance(copied, list) or len(copied) != k or not all(_integer(e) and e >= 0 for e in copied):
        return f"copied_at_episode is {_shown(copied)}, not {k} episode counts"
    inherited = state["inherited"]
    known = [f for f in inherited if f is not None] if isinstance(inherited, list) else None
    if not isinstance(inherited, list) or len(inherited) != k or not _numbers(known, None, finite=False):
        return f"inherited is {_shown(inherited)}, not {k} fitnesses (or None)"
    return None


def _event_fits(pbt: Any, row: Any, width: int) -> bool:
    """A pbt.csv row: env step, agent and source labels, fitnesses ("" at step 0), the explored values."""
    if not isinstance(row, list) or len(row) != width or not _integer(row[0]) or row[0] < 0:
        return False
    fitness = [f for f in row[3:5] if f != ""]
    labelled = row[1] in pbt.labels and row[2] in pbt.labels
    return labelled and _numbers(fitness, None, finite=False) and _numbers(row[5:], None)


def _integer(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _numbers(values: Any, length: int | None, finite: bool = True) -> bool:
    """A list of real numbers (not bools or strings) of `length` (any for None), finite unless not asked."""
    if not isinstance(values, list) or (length is not None and len(values) != length):
        return False
    real = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values)
    return real and (not finite or all(math.isfinite(v) for v in values))


def _shown(value: Any) -> str:
    """A value read from a checkpoint as a message shows it: its repr, cut short."""
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."
