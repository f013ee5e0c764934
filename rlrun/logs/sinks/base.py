"""What every logging backend shares: where a run is logged (`SinkRun`), the `Sink` interface, and the
helpers the backends use. Imports nothing of rlrun.logs.sinks, so the backends import it without a cycle."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol


@dataclass
class SinkRun:
    """Where one agent's run is logged and under which name."""

    dir: Path  # the agent's directory: the run directory, or <run dir>/seed=<S>/ of a batched run
    root: Path  # the run directory (local stores shared by a batched run's agents live here)
    name: str  # the run's name in MLflow and W&B
    experiment: str  # MLflow experiment / W&B group default: the config's exp_name
    resume_step: int | None = None  # continue the run logged up to this env step
    group: str | None = None  # a batched run's name: its agents are grouped under it (W&B)


class Sink(Protocol):
    """A logging backend. `start` is called once for a new run (not on resume)."""

    def start(self, params: dict[str, Any], config_yaml: str) -> None: ...

    def scalar(self, tag: str, value: float, step: int) -> None: ...

    def text(self, tag: str, text: str, step: int) -> None: ...

    def flush(self) -> None: ...

    def close(self, summary: dict[str, Any]) -> dict[str, Any]:
        """Finish the run with its summary; returns where it was logged (for summary.json and the CLI)."""
        ...


def numeric(summary: dict[str, Any]) -> dict[str, float]:
    """The summary's numbers (what backends that store only numbers keep of it)."""
    return {k: float(v) for k, v in summary.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}


SWEEP_DEPTH = 12  # how many folders above a job its sweep directory may be (one per swept key, and more)


def sweep_dir(path: Path) -> Path | None:
    """The sweep a run directory belongs to: the nearest folder above it holding Hydra's multirun.yaml
    (written when a sweep starts); None for a single run."""
    for parent in list(Path(os.path.abspath(path)).parents)[:SWEEP_DEPTH]:
        if (parent / "multirun.yaml").is_file():
            return parent
    return None


def run_name(out_dir: Path) -> str:
    """A run's name in MLflow and W&B: its directory's name, or for a sweep job `<sweep>/<job dir>`, e.g.
    `CartPole-v1__dqn__<time>/optimizer.lr=0.001/seed=2`."""
    out_dir = Path(os.path.abspath(out_dir))
    sweep = sweep_dir(out_dir)
    if sweep is not None:
        return f"{sweep.name}/{out_dir.relative_to(sweep).as_posix()}"
    parts = out_dir.parts
    if "multirun" in parts[:-1]:
        return "/".join(parts[len(parts) - parts[::-1].index("multirun") :])
    return out_dir.name
