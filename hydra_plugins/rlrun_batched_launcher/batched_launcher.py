"""A Hydra launcher that trains a sweep's jobs as batched processes: `hydra/launcher=batched`.

    python -m rlrun.train -m hydra/launcher=batched optimizer.lr=3e-4,1e-3,2e-3,5e-3 seed=0,1,2,3,4
    python -m rlrun.train -m hydra/launcher=batched hydra.launcher.backend=submitit \
        hydra.launcher.submitit.executor=slurm hydra.launcher.submitit.partition=gpu device=cuda ...
    python -m rlrun.train -m hydra/launcher=batched hydra.launcher.backend=ray ...

Jobs whose configs differ only in keys that batch (seed, learning rate, gamma, ...: rlrun.training.agents) train
together as the agents of one process (rlrun.sweeps.batching); every job still gets its own directory, written as
if it had run alone (`.hydra/`, events, episodes.csv, summary.json, model.pt), and its own objective in
its `JobReturn`, so the report callback and the Optuna sweeper see ordinary jobs. Each group (one
process) runs through the backend the config names (backends.py: here, submitit local or Slurm, Ray); a
group whose process is lost is reported as failed jobs, and `hydra.launcher.resume=true` with the same sweep
directory reruns the sweep: finished groups are skipped, the others continue from their checkpoints.

Hydra imports every module of the `hydra_plugins` namespace package at start-up, so this one imports
only Hydra at module level; rlrun is imported when a sweep launches.
"""

# No `from __future__ import annotations`: Hydra imports plugin modules without entering them in
# sys.modules, and dataclasses cannot resolve string annotations there.
import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
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
    # Groups at a time: on `local`, processes (> 1: each spawned, one core each); on a cluster, the GPUs or
    # nodes the sweep may use. The sweep is cut into at least this many groups (docs/batched.md).
    n_jobs: int = 1
    backend: str = "local"  # where each group runs: local | submitit | ray
    # A rerun of the same sweep command (same hydra.sweep.dir): finished groups are skipped, unfinished ones
    # continue from their checkpoints (pre-emption, a lost node).
    resume: bool = False
    # backend=submitit: `executor` local or slurm, and the Slurm settings of conf/hydra/launcher/slurm.yaml, per
    # group; gpus_per_node null: 1 for device=cuda groups, else 0. folder null: <sweep dir>/.submitit/%j.
    submitit: dict[str, Any] = field(
        default_factory=lambda: {
            "executor": "local",
            "folder": None,
            "name": None,
            "timeout_min": 240,
            "cpus_per_task": 2,
            "gpus_per_node": None,
            "mem_gb": 8,
            "partition": None,
            "array_parallelism": 64,
            "additional_parameters": {},
            "setup": [],
        }
    )
    # backend=ray: `address` and `init` as rlrun's Ray launcher reads them (hydra/launcher=ray_cluster);
    # `remote`: each group's ray.remote options (num_gpus: 1 is added for device=cuda groups). max_retries
    # 0: a lost group is reported failed, and the resume switch continues it; > 0: Ray reruns it, and it
    # continues from its checkpoint.
    ray: dict[str, Any] = field(
        default_factory=lambda: {"address": None, "init": {}, "remote": {"num_cpus": 1, "max_retries": 0}}
    )


ConfigStore.instance().store(group="hydra/launcher", name="rlrun_batched", node=BatchedLauncherConf, provider="rlrun")


def counted(n: int, noun: str, plural: str = "s") -> str:
    """`1 process`, `4 processes`."""
    return f"{n} {noun}{plural if n != 1 else ''}"


def as_dict(node: Any) -> Any:
    return OmegaConf.to_container(node, resolve=True) if isinstance(node, DictConfig) else dict(node or {})


class BatchedLauncher(Launcher):
    def __init__(
        self,
        max_agents: int = 64,
        n_jobs: int = 1,
        backend: str = "local",
        resume: bool = False,
        submitit: Any = None,
        ray: Any = None,
    ) -> None:
        if max_agents < 1 or n_jobs < 1:
            raise ValueError(f"hydra.launcher: max_agents={max_agents} and n_jobs={n_jobs} must be >= 1")
        self.max_agents, self.n_jobs, self.backend, self.resume = max_agents, n_jobs, backend, resume
        self.submitit, self.ray = as_dict(submitit), as_dict(ray)
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
        from rlrun.storage.rundir import linked_part

        done = self.resume and (job_dir / ".hydra" / "config.yaml").exists()  # a rerun keeps the job's first
        linked = linked_part(job_dir, Path(str(config.hydra.sweep.dir))) is not None  # its group refuses it
        if config.hydra.output_subdir is not None and not done and not linked:
            hydra_dir = job_dir / str(config.hydra.output_subdir)
            hydra_dir.mkdir(parents=True, exist_ok=True)
            (hydra_dir / "config.yaml").write_text(OmegaConf.to_yaml(task_cfg))
            (hydra_dir / "hydra.yaml").write_text(OmegaConf.to_yaml(HydraConfig.instance().cfg))
            (hydra_dir / "overrides.yaml").write_text(OmegaConf.to_yaml(config.hydra.overrides.task))
        return config, task_cfg, job_dir

    def launch(self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> Sequence[JobReturn]:
        from rlrun.config.saved import from_saved
        from rlrun.sweeps import batching

        assert self.config is not None and self.hydra_context is not None and self.task_function is not None
        setup_globals()
        configure_log(self.config.hydra.hydra_logging, self.config.hydra.verbose)
        sweep_dir = Path(str(self.config.hydra.sweep.dir))
        # .batched/ marks the sweep as the batched launcher's, even where every group is one job run in its own
        # directory (max_agents=1): the resume switch reruns only such a directory
        (sweep_dir / ".batched").mkdir(parents=True, exist_ok=True)
        callbacks = self.hydra_context.callbacks
        prepared, plain = [], []
        for idx, overrides in enumerate(job_overrides, start=initial_job_idx):
            config, task_cfg, job_dir = self._prepare(overrides, idx)
            prepared.append((config, task_cfg, job_dir))
            plain.append(OmegaConf.to_container(task_cfg, resolve=True))
        chunks = batching.plan_chunks([from_saved(p) for p in plain], self.max_agents, self.n_jobs)
        on = self.backend + (f" ({self.submitit['executor']} executor)" if self.backend == "submitit" else "")
        log.info(
            f"Batched launcher: {counted(len(job_overrides), 'job')} -> {counted(len(chunks), 'group')} of up to "
            f"{max(map(len, chunks))} agents, on backend {on}"
        )
        work, results = [], []
        for chunk in chunks:
            first, last = chunk[0] + initial_job_idx, chunk[-1] + initial_job_idx
            group_dir = sweep_dir / ".batched" / (f"jobs{first}" if first == last else f"jobs{first}-{last}")
            dirs = [str(prepared[i][2].absolute()) for i in chunk]
            done = self.resume and batching.finished([Path(d) for d in dirs], sweep_dir)
            for i in chunk:
                shown = " ".join(filter_overrides(job_overrides[i]))
                log.info(f"\t#{i + initial_job_idx} : {shown} [{group_dir.name}{', finished' if done else ''}]")
                callbacks.on_job_start(config=prepared[i][0], task_function=self.task_function)
            kinds = [prepared[i][0].objective for i in chunk]
            results.append([batching.objective(Path(d), k) for d, k in zip(dirs, kinds)] if done else None)
            if not done:
                work.append(([plain[i] for i in chunk], dirs, str(group_dir.absolute())))
        ran = iter(self._run(work, [w[0][0]["device"]["type"] == "cuda" for w in work], sweep_dir))
        results = [next(ran) if r is None else r for r in results]
        returns: list[Any] = [None] * len(job_overrides)
        preempted = False
        for chunk, objectives in zip(chunks, results):
            if isinstance(objectives, BaseException):  # the group's process was lost: its jobs failed
                reason = " ".join(str(objectives).splitlines()[:2])  # submitit: what ended and where its log is
                batching.record_lost(
                    [str(prepared[i][2].absolute()) for i in chunk],
                    f"{type(objectives).__name__}: {reason}",
                    sweep_dir.absolute(),
                )
                objectives = [None] * len(chunk)
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
            from rlrun.errors import Exit

            raise SystemExit(Exit.STOPPED)  # as a preempted run: the lines above name the resume commands
        return returns

    def _run(self, work: list[tuple], cuda: list[bool], sweep_dir: Path) -> list[Any]:
        from hydra_plugins.rlrun_batched_launcher import backends
        from rlrun.sweeps.batching import run_chunk

        if not work:
            return []
        if self.backend == "submitit":
            return backends.run_submitit(run_chunk, work, cuda, self.submitit, sweep_dir.absolute())
        if self.backend == "ray":
            return backends.run_ray(run_chunk, work, cuda, self.ray)
        return backends.run_local(run_chunk, work, self.n_jobs)
