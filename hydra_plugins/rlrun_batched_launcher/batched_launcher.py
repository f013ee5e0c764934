"""A Hydra launcher that trains a sweep's jobs as batched processes: `hydra/launcher=batched`.

    python -m rlrun.train -m hydra/launcher=batched optimizer.lr=3e-4,1e-3,2e-3,5e-3 seed=0,1,2,3,4

Jobs whose configs differ only in keys that batch (seed, learning rate, gamma, ...: rlrun.agents) train
together as the agents of one process (rlrun.batching); every job still gets its own directory, written as
if it had run alone (`.hydra/`, events, episodes.csv, summary.json, model.pt), and its own objective in
its `JobReturn`, so the report callback and the Optuna sweeper see ordinary jobs.

Hydra imports every module of the `hydra_plugins` namespace package at start-up, so this one imports
only Hydra at module level; rlrun is imported when a sweep launches.
"""

# No `from __future__ import annotations`: Hydra imports plugin modules without entering them in
# sys.modules, and dataclasses cannot resolve string annotations there.
import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hydra.core.config_store import ConfigStore
from hydra.core.hydra_config import HydraConfig
from hydra.core.utils import JobReturn, JobStatus, configure_log, filter_overrides, setup_globals
from hydra.plugins.launcher import Launcher
from hydra.types import HydraContext, TaskFunction
from omegaconf import DictConfig, OmegaConf, open_dict, read_write

log = logging.getLogger(__name__)


@dataclass
class BatchedLauncherConf:
    _target_: str = "hydra_plugins.rlrun_batched_launcher.batched_launcher.BatchedLauncher"
    max_agents: int = 64  # jobs trained together in one process at most
    n_jobs: int = 1  # processes at a time; > 1: each in its own (spawned) process, one core each


ConfigStore.instance().store(group="hydra/launcher", name="rlrun_batched", node=BatchedLauncherConf, provider="rlrun")


def counted(n: int, noun: str, plural: str = "s") -> str:
    """`1 process`, `4 processes`."""
    return f"{n} {noun}{plural if n != 1 else ''}"


class BatchedLauncher(Launcher):
    def __init__(self, max_agents: int = 64, n_jobs: int = 1) -> None:
        if max_agents < 1 or n_jobs < 1:
            raise ValueError(f"hydra.launcher: max_agents={max_agents} and n_jobs={n_jobs} must be >= 1")
        self.max_agents, self.n_jobs = max_agents, n_jobs
        self.config: DictConfig | None = None
        self.hydra_context: HydraContext | None = None
        self.task_function: TaskFunction | None = None

    def setup(self, *, hydra_context: HydraContext, task_function: TaskFunction, config: DictConfig) -> None:
        self.config, self.hydra_context, self.task_function = config, hydra_context, task_function

    def _prepare(self, overrides: Sequence[str], idx: int) -> tuple[DictConfig, DictConfig, Path]:
        """The job's config and task config, and its directory with `.hydra/` written as Hydra's run_job
        writes it."""
        assert self.config is not None and self.hydra_context is not None
        config = self.hydra_context.config_loader.load_sweep_config(self.config, list(overrides))
        with open_dict(config):
            config.hydra.job.id = f"batched_{idx}"
            config.hydra.job.num = idx
        HydraConfig.instance().set_config(config)
        job_dir = Path(str(config.hydra.sweep.dir)) / str(config.hydra.sweep.subdir)
        with read_write(config.hydra.runtime), open_dict(config.hydra.runtime):
            config.hydra.runtime.output_dir = os.path.abspath(job_dir)
        HydraConfig.instance().set_config(config)
        task_cfg = config.copy()
        with read_write(task_cfg), open_dict(task_cfg):
            del task_cfg["hydra"]
        if config.hydra.output_subdir is not None:
            hydra_dir = job_dir / str(config.hydra.output_subdir)
            hydra_dir.mkdir(parents=True, exist_ok=True)
            (hydra_dir / "config.yaml").write_text(OmegaConf.to_yaml(task_cfg))
            (hydra_dir / "hydra.yaml").write_text(OmegaConf.to_yaml(HydraConfig.instance().cfg))
            (hydra_dir / "overrides.yaml").write_text(OmegaConf.to_yaml(config.hydra.overrides.task))
        return config, task_cfg, job_dir

    def launch(self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> Sequence[JobReturn]:
        from rlrun import batching
        from rlrun.validate import from_saved

        assert self.config is not None and self.hydra_context is not None and self.task_function is not None
        setup_globals()
        configure_log(self.config.hydra.hydra_logging, self.config.hydra.verbose)
        sweep_dir = Path(str(self.config.hydra.sweep.dir))
        sweep_dir.mkdir(parents=True, exist_ok=True)
        callbacks = self.hydra_context.callbacks
        prepared, plain = [], []
        for idx, overrides in enumerate(job_overrides, start=initial_job_idx):
            config, task_cfg, job_dir = self._prepare(overrides, idx)
            prepared.append((config, task_cfg, job_dir))
            plain.append(OmegaConf.to_container(task_cfg, resolve=True))
        chunks = batching.plan_chunks([from_saved(p) for p in plain], self.max_agents, self.n_jobs)
        log.info(
            f"Batched launcher: {counted(len(job_overrides), 'job')} in {counted(len(chunks), 'process', 'es')} "
            f"(at most {self.max_agents} agents each, {self.n_jobs} at a time)"
        )
        work = []
        for chunk in chunks:
            first, last = chunk[0] + initial_job_idx, chunk[-1] + initial_job_idx
            group_dir = sweep_dir / ".batched" / (f"jobs{first}" if first == last else f"jobs{first}-{last}")
            for i in chunk:
                shown = " ".join(filter_overrides(job_overrides[i]))
                log.info(f"\t#{i + initial_job_idx} : {shown} [{group_dir.name}]")
                callbacks.on_job_start(config=prepared[i][0], task_function=self.task_function)
            work.append(([plain[i] for i in chunk], [str(prepared[i][2]) for i in chunk], str(group_dir.absolute())))
        results = self._run(work, batching.run_chunk)
        returns: list[Any] = [None] * len(job_overrides)
        preempted = False
        for chunk, objectives in zip(chunks, results):
            for i, value in zip(chunk, objectives):
                config, task_cfg, job_dir = prepared[i]
                preempted |= value == batching.PREEMPTED
                ret = JobReturn(
                    overrides=list(job_overrides[i]),
                    cfg=task_cfg,
                    hydra_cfg=OmegaConf.create({"hydra": config.hydra}),
                    working_dir=os.getcwd(),
                    task_name=str(config.hydra.job.name),
                    status=JobStatus.COMPLETED,
                    _return_value=None if value == batching.PREEMPTED else value,
                )
                callbacks.on_job_end(config=config, job_return=ret)
                returns[i] = ret
        if preempted:
            raise SystemExit(75)  # EX_TEMPFAIL, as a preempted run: the lines above name the resume commands
        return returns

    def _run(self, work: list[tuple], fn: Any) -> list[list[Any]]:
        if self.n_jobs == 1 or len(work) == 1:
            return [fn(*args) for args in work]
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        with ProcessPoolExecutor(self.n_jobs, mp_context=multiprocessing.get_context("spawn")) as pool:
            futures = [pool.submit(fn, *args) for args in work]
            return [f.result() for f in futures]
