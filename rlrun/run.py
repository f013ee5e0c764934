"""`train(cfg, out_dir)`: one run, from a validated config to its summary (tests and sweeps call it
directly). The parts come from `rlrun.build`, the loop is `rlrun.loop`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from omegaconf import DictConfig

from rlrun import build, rundir
from rlrun.config import register_configs
from rlrun.loop import Trainer
from rlrun.validate import validate

register_configs()


def train(cfg: DictConfig, out_dir: Path, resume: dict | None = None) -> dict[str, Any]:
    """Train the run's agents (`seeds` of them) as `cfg` says, writing everything under `out_dir`, which
    this process owns for the run (`rlrun.rundir`); with `resume` (a loaded checkpoint), continue that
    run. Returns the run summary."""
    validate(cfg)
    with rundir.owned(out_dir):
        parts = build.build(cfg)
        population = build.population(cfg, out_dir, parts.reward_threshold, None if resume is None else resume["step"])
        trainer = Trainer(build.loop_settings(cfg), parts, population, out_dir, resume)
        try:
            return trainer.run()
        finally:
            trainer.close()
