"""Schedules as plain functions of the env step, so a resumed run recomputes them exactly."""

from __future__ import annotations

import math


def linear(start: float, end: float, duration: int, step: int) -> float:
    if duration <= 0:
        return end
    frac = min(1.0, step / duration)
    return start + frac * (end - start)


def exponential(start: float, end: float, duration: int, step: int) -> float:
    """Geometric decay from `start` that reaches `end` exactly at `duration`, then stays there."""
    if duration <= 0 or step >= duration:
        return end
    return start * math.exp(math.log(end / start) * step / duration)


SCHEDULES = {"linear": linear, "exponential": exponential}
