"""`train(cfg, out_dir)`: one run, from a validated config to its summary (tests and sweeps call it
directly). The parts come from `rlrun.training.build`, the loop is `rlrun.training.loop`."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from rlrun.config.schemas import register_configs
from rlrun.config.validate import validate
from rlrun.storage import rundir
from rlrun.training import build
from rlrun.training.loop import Trainer

register_configs()
log = logging.getLogger(__name__)

if TYPE_CHECKING:
    from omegaconf import DictConfig


def start_line(out_dir: Path, device: torch.device, agents: int, resume_step: int | None, total_steps: int) -> str:
    """What a run says first (the console and train.log, as Hydra's job logging has them): where it writes,
    from which step a resumed run goes on, and what it runs on."""
    where = "run" if resume_step is None else "resuming"
    batch = f" ({agents} agents)" if agents > 1 else ""
    since = "" if resume_step is None else f" from env step {resume_step:,} of {total_steps:,}"
    if device.type == "cuda":
        on = f"{device} ({torch.cuda.get_device_name(device)})"
    else:
        threads = torch.get_num_threads()
        on = f"{device} ({threads} thread{'s' if threads > 1 else ''})"
    return f"rlrun: {where} {out_dir}{batch}{since} on {on}"


def train(cfg: DictConfig, out_dir: Path, resume: dict | None = None) -> dict[str, Any]:
    """Train the run's agents (`seeds` of them) as `cfg` says, writing everything under `out_dir`, which
    this process owns for the run (`rlrun.storage.rundir`); with `resume` (a loaded checkpoint), continue that
    run. Returns the run summary."""
    validate(cfg)
    with rundir.owned(out_dir):
        parts, settings = build.build(cfg), build.loop_settings(cfg)
        resume_step = None if resume is None else resume["step"]
        population = build.population(cfg, out_dir, parts.reward_threshold, resume_step)
        population.watch(settings.total_steps, resume_step or 0, settings.progress_interval)
        trainer = Trainer(settings, parts, population, out_dir, resume)
        # Once the checkpoint is loaded: a refused resume leaves train.log as it was.
        log.info(start_line(out_dir, parts.device, population.agents, resume_step, settings.total_steps))
        try:
            return trainer.run()
        finally:
            trainer.close()
