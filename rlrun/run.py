"""`train(cfg, out_dir)`: one run, from a validated config to its summary (the command line, sweeps, scripts
and notebooks call it). The parts come from `rlrun.training.build`, the loop is `rlrun.training.loop`.

Called from Python, a run leaves the directory the command line leaves: its lines go to `train.log` and, where
logging is not configured, to stdout (`rlrun.logs.runlog`), and its composed config to `.hydra/config.yaml`
(which Hydra's app writes for the command line; there is no `hydra.yaml` or `overrides.yaml` then)."""

from __future__ import annotations

import copy
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from rlrun.config.schemas import register_configs
from rlrun.config.validate import validate
from rlrun.envs.vector import checkpointed_vectorization
from rlrun.logs.runlog import logging_to
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


def record_config(cfg: DictConfig, out_dir: Path) -> None:
    """`.hydra/config.yaml` as Hydra's app writes it, for a run started from Python (evaluate, resume, load
    and the report read it); a run directory that has one (the command line's, a sweep job's) keeps it."""
    # OmegaConf only once a run starts (the command line imports this module only then too)
    from omegaconf import OmegaConf

    saved = Path(out_dir) / ".hydra" / "config.yaml"
    if not saved.exists():
        saved.parent.mkdir(exist_ok=True)
        rundir.write_text(saved, OmegaConf.to_yaml(cfg))


def train(cfg: DictConfig, out_dir: Path | str, resume: dict | None = None) -> dict[str, Any]:
    """Train the run's agents (`seeds` of them) as `cfg` says, writing everything under `out_dir`, which
    this process owns for the run (`rlrun.storage.rundir`); with `resume` (a loaded checkpoint), continue that
    run. Logs its progress through `logging` (the `rlrun` logger; rlrun.logs.runlog). Returns the run summary."""
    validate(cfg)
    out_dir = Path(out_dir)
    with rundir.owned(out_dir), logging_to(out_dir):
        return _train(cfg, out_dir, resume, record=resume is None)


def train_group(cfg: DictConfig, group_dir: Path, resume: dict | None = None) -> dict[str, Any]:
    """`train` for the agents of a batched sweep's group (rlrun.sweeps.batching): `group_dir` holds their
    checkpoint and log, not a run of its own, so it gets no `.hydra/config.yaml` (the report would count it)."""
    validate(cfg)
    with rundir.owned(group_dir), logging_to(group_dir):
        return _train(cfg, group_dir, resume, record=False)


def _as_checkpointed(cfg: DictConfig, resume: dict | None) -> DictConfig:
    """The config the parts are built from: the envs made as the checkpoint's were, whatever `auto` picks
    today (the run's config, its agents' and its checkpoints' keep `auto`)."""
    if resume is None:
        return cfg
    vectorization = checkpointed_vectorization(cfg.env.vectorization, resume.get("envs"))
    if vectorization == cfg.env.vectorization:
        return cfg
    cfg = copy.deepcopy(cfg)
    cfg.env.vectorization = vectorization
    return cfg


def _train(cfg: DictConfig, out_dir: Path, resume: dict | None, record: bool) -> dict[str, Any]:
    parts, settings = build.build(_as_checkpointed(cfg, resume)), build.loop_settings(cfg)
    resume_step = None if resume is None else resume["step"]
    population = build.population(cfg, out_dir, parts.reward_threshold, resume_step)
    population.watch(settings.total_steps, resume_step or 0, settings.progress_interval)
    trainer = Trainer(settings, parts, population, out_dir, resume)
    # Once the parts are built and the checkpoint is loaded: a refused run leaves no config, a refused
    # resume its train.log as it was.
    if record:
        record_config(cfg, out_dir)
    log.info(start_line(out_dir, parts.device, population.agents, resume_step, settings.total_steps))
    info, warnings = settings.budget_notes(parts.buffer)
    for line in info:
        log.info(line)
    for line in warnings:
        log.warning(line)
    try:
        return trainer.run()
    finally:
        trainer.close()
