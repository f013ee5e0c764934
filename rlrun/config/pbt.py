"""The `pbt` group (`+pbt=truncation`): population-based training of a batched run's agents, its schema and
its rules. The rules read plain values (the caller converts the node), so the pre-flight checks them
without torch; rlrun.training.pbt runs it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from rlrun.errors import ConfigError

# Keys PBT can change while agents train: each is already a per-agent value inside the batched computation
# (an optimizer param group's lr, a lerp weight of the target sync, an epsilon schedule's floor).
EXPLORABLE = ("optimizer.lr", "algo.tau", "exploration.end")
FITNESS = ("auto", "eval", "train")  # auto: the last greedy evaluation where the run evaluates, else train
INITIAL = ("sample", "config")  # each agent's first values: drawn from the space, or the run's own


@dataclass
class PBTRange:
    """A key's range; null bounds (the default): the key is not explored."""

    low: float | None = None
    high: float | None = None
    log: bool = False  # sampled and perturbed on a log scale (learning rates)


@dataclass
class _OptimizerSpace:
    lr: PBTRange = field(default_factory=PBTRange)


@dataclass
class _AlgoSpace:
    tau: PBTRange = field(default_factory=PBTRange)


@dataclass
class _ExplorationSpace:
    end: PBTRange = field(default_factory=PBTRange)


@dataclass
class PBTSpace:
    """The ranges PBT explores, each under its key's own path, e.g. `pbt.space.optimizer.lr.low=1e-4` or
    `pbt.space.algo.tau={low: 0.01, high: 0.5}`; a key with null bounds (`pbt.space.optimizer.lr.low=null`) is not."""

    optimizer: _OptimizerSpace = field(default_factory=_OptimizerSpace)
    algo: _AlgoSpace = field(default_factory=_AlgoSpace)
    exploration: _ExplorationSpace = field(default_factory=_ExplorationSpace)


def flat_space(space: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """{"optimizer": {"lr": range}, "algo": {"tau": unset}} -> {"optimizer.lr": range}: the explored keys (a
    bound set), in EXPLORABLE's order."""
    flat = {f"{group}.{name}": bounds for group, keys in space.items() for name, bounds in (keys or {}).items()}
    return {k: b for k, b in flat.items() if b["low"] is not None or b["high"] is not None}


@dataclass
class PBTConfig:
    interval: int = 10_000  # env steps per agent between two exploit/explore rounds
    fraction: float = 0.25  # the bottom fraction of agents copies one of the top fraction
    fitness: str = "auto"  # auto | eval (the last greedy evaluation) | train (the 100-episode training mean)
    perturb: list[float] = field(default_factory=lambda: [0.8, 1.2])  # explore: one factor drawn per key
    resample_probability: float = 0.25  # explore: a fresh draw from the range instead of a factor
    initial: str = "sample"  # sample | config
    # the hyperparameters PBT explores (keys of EXPLORABLE that the algorithm lets differ per agent), each a range
    space: PBTSpace = field(default_factory=PBTSpace)


def check(
    pbt: dict[str, Any], agents: int, algorithm: str, batchable: tuple[str, ...], evaluates: bool, cuda_graphs: bool
) -> None:
    """PBT's rules (a ConfigError naming the key for the first broken one). `pbt`: the node as plain values;
    `agents`: K; `batchable`: the keys the algorithm lets differ per agent; `evaluates`: eval.interval > 0."""

    def need(ok: bool, key: str, value: object, allowed: str) -> None:
        if not ok:
            raise ConfigError(f"pbt.{key}", value, allowed)

    if agents < 2:
        raise ConfigError("seeds", agents, ">= 2 with +pbt (a population: seeds=K, or an agents list)")
    need(pbt["interval"] > 0, "interval", pbt["interval"], "a number of env steps > 0")
    need(0 < pbt["fraction"] <= 0.5, "fraction", pbt["fraction"], "(0, 0.5]")
    need(pbt["fitness"] in FITNESS, "fitness", pbt["fitness"], "one of " + ", ".join(FITNESS))
    need(evaluates or pbt["fitness"] != "eval", "fitness", "eval", "auto or train when eval.interval is 0")
    need(pbt["initial"] in INITIAL, "initial", pbt["initial"], "one of " + ", ".join(INITIAL))
    factors = pbt["perturb"]
    need(bool(factors) and all(f > 0 for f in factors), "perturb", factors, "a list of factors > 0")
    p = pbt["resample_probability"]
    need(0 <= p <= 1, "resample_probability", p, "[0, 1]")
    need(not cuda_graphs, "space", "device.cuda_graphs=true", "a run without CUDA graphs (they record one lr)")
    space = flat_space(pbt["space"])
    need(bool(space), "space", "{}", "at least one key to explore, e.g. pbt.space.optimizer.lr={low: 1e-4, high: 1e-2}")
    allowed = [k for k in EXPLORABLE if k in batchable]
    for key, bounds in space.items():
        need(
            key in allowed,
            f"space.{key}",
            "{low: .., high: ..}",
            f"null with algo={algorithm}; it explores " + ", ".join(allowed),
        )
        low, high = bounds["low"], bounds["high"]
        ok = low is not None and high is not None and math.isfinite(low) and math.isfinite(high) and low < high
        ok = ok and (low > 0 or not bounds["log"])
        need(ok, f"space.{key}", f"[{low}, {high}]", "low < high, both finite (and low > 0 with log: true)")
