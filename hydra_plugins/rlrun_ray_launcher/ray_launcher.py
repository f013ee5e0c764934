"""A Hydra launcher that runs each sweep job as a Ray task, through Ray's own API.

    python -m rlrun.train -m hydra/launcher=ray_cluster seed=0,1,2,3                  # a Ray for this sweep
    python -m rlrun.train -m hydra/launcher=ray_cluster hydra.launcher.address=auto  # the running cluster

Hydra finds this module in the `hydra_plugins` namespace package and imports it on every start, so it
imports only Hydra here and Ray when a sweep launches. It exists because hydra-ray-launcher 1.2.2 (the last
release) pins `cloudpickle<3`, which conflicts with joblib 1.6, and passes `object_store_memory` to
`ray.init`, which Ray 2.x refuses when it attaches to a running cluster.

A job is `hydra.core.utils.run_job` inside a `ray.remote` task, as in Hydra's own launchers: the task gets
the job's composed config and Hydra's global state, writes into its own directory and returns its
`JobReturn`. The sweep directory is made absolute before the jobs leave the driver, because a Ray worker
need not start in the driver's working directory. On a cluster of several machines it must lie on a
filesystem every node mounts, and every node needs rlrun installed.

Ray runs a task again when its worker dies (SIGKILL, the OOM killer, a lost node; `max_retries`, 3 by
default, in `hydra.launcher.remote`). A job run again finds its directory as the dead attempt left it: from
a checkpoint it resumes, as `python -m rlrun.resume` would (its `.hydra/` kept, TensorBoard and
episodes.csv cut back to the checkpoint); without one it starts over in an emptied directory. A job whose
retries are spent fails alone, as any failed job of a sweep: summary.json and error.txt in its directory.
"""

# No `from __future__ import annotations`: Hydra imports plugin modules without entering them in
# sys.modules, and dataclasses cannot resolve string annotations there.
import logging
import shutil
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hydra.core.config_store import ConfigStore
from hydra.core.singleton import Singleton
from hydra.core.utils import JobReturn, JobStatus, configure_log, filter_overrides, run_job, setup_globals
from hydra.plugins.launcher import Launcher
from hydra.types import HydraContext, TaskFunction
from omegaconf import DictConfig, OmegaConf, open_dict, read_write

log = logging.getLogger(__name__)


@dataclass
class RayLauncherConf:
    _target_: str = "hydra_plugins.rlrun_ray_launcher.ray_launcher.RayLauncher"
    # Which Ray to use, as `ray.init(address=...)` reads it. null: $RAY_ADDRESS, else the cluster that
    # `ray start` last started on this machine, else a new Ray for this sweep (stopped when the sweep
    # ends). "local": always a new Ray for this sweep. "auto": a running cluster, or an error.
    # "<host>:6379": that cluster's head node. "ray://<host>:10001": a cluster through Ray Client.
    address: str | None = None
    # Further `ray.init` keyword arguments, e.g. {num_cpus: 4} for a Ray started for the sweep (by default
    # it takes every core). Ray refuses resource arguments when it attaches to a running cluster.
    init: dict[str, Any] = field(default_factory=dict)
    # `ray.remote` options of every job: the resources it holds while it runs, so at most
    # (cluster CPUs / num_cpus) jobs run at once. Set num_gpus: 1 for jobs with device=cuda.
    remote: dict[str, Any] = field(default_factory=lambda: {"num_cpus": 1, "num_gpus": 0})


ConfigStore.instance().store(group="hydra/launcher", name="rlrun_ray", node=RayLauncherConf, provider="rlrun")


def _run_job_remotely(
    hydra_context: HydraContext, task_function: TaskFunction, config: DictConfig, singleton_state: dict[Any, Any]
) -> JobReturn:
    """Runs in a Ray worker: restore Hydra's global state as the driver had it, then run one job."""
    from hydra.core.hydra_config import HydraConfig

    setup_globals()
    Singleton.set_state(singleton_state)
    HydraConfig.instance().set_config(config)
    if config.get("resume") is None:  # a job of a sweep over resumed runs continues the run it names
        _continue_earlier_attempt(config, job_dir(config))
    return run_job(
        hydra_context=hydra_context,
        task_function=task_function,
        config=config,
        job_dir_key="hydra.sweep.dir",
        job_subdir_key="hydra.sweep.subdir",
    )


def job_dir(config: DictConfig) -> Path:
    """Where Hydra's `run_job` puts this job (the sweep dir and the job's subdir, as it joins them)."""
    from hydra.core.hydra_config import HydraConfig

    HydraConfig.instance().set_config(config)  # the subdir interpolates the job's own hydra node
    return Path(str(config.hydra.sweep.dir)) / str(config.hydra.sweep.subdir)


def _continue_earlier_attempt(config: DictConfig, out_dir: Path) -> None:
    """Ray runs a job again when its worker died. The sweep's directory was new, so anything in the job's
    directory is that dead attempt's: resume its checkpoint, or start over in an emptied directory."""
    from rlrun.storage import checkpoint, rundir

    if not out_dir.is_dir():
        return  # the first attempt
    with rundir.owned(out_dir):  # the dead worker's lock is gone; a live one (a lost node's) refuses here
        if any((out_dir / name).exists() for name in (checkpoint.LATEST, checkpoint.PREVIOUS)):
            log.info(f"Ray ran job {config.hydra.job.num} again: it resumes from its checkpoint in {out_dir}")
            with open_dict(config):
                config.resume = str(out_dir)
            with read_write(config.hydra):  # Hydra marks its node read-only
                config.hydra.output_subdir = None  # keep the .hydra/ of the job's first attempt
            return
        for p in out_dir.iterdir():  # no checkpoint: nothing of the dead attempt is kept
            if p.name != rundir.LOCK_NAME:
                shutil.rmtree(p) if p.is_dir() and not p.is_symlink() else p.unlink()


def _lost(config: DictConfig, overrides: Sequence[str], out_dir: Path, error: Exception) -> JobReturn:
    """A job whose every attempt lost its worker: failed alone, recorded in its directory (`rlrun.training.jobs`)."""
    from rlrun.training.jobs import record_failure

    message = " ".join(str(error).split())
    log.error(f"job {config.hydra.job.num} failed: its Ray worker died ({message[:300]})")
    out_dir.mkdir(parents=True, exist_ok=True)
    record_failure(out_dir, RuntimeError(f"the Ray worker running this job died: {message}"))
    task_cfg = OmegaConf.masked_copy(config, [str(k) for k in config if k != "hydra"])
    return JobReturn(
        overrides=list(overrides),
        cfg=task_cfg,
        hydra_cfg=config,
        working_dir=str(out_dir),
        task_name=str(config.hydra.job.name),
        status=JobStatus.COMPLETED,  # as rlrun's own failed jobs: the sweep goes on, the report lists it
        _return_value=None,
    )


class RayLauncher(Launcher):
    def __init__(self, address: str | None, init: DictConfig, remote: DictConfig) -> None:
        self.address = address
        self.init_kwargs: dict[str, Any] = OmegaConf.to_container(init, resolve=True)  # type: ignore[assignment]
        self.remote_options: dict[str, Any] = OmegaConf.to_container(remote, resolve=True)  # type: ignore[assignment]
        self.config: DictConfig | None = None
        self.hydra_context: HydraContext | None = None
        self.task_function: TaskFunction | None = None

    def setup(self, *, hydra_context: HydraContext, task_function: TaskFunction, config: DictConfig) -> None:
        self.config = config
        self.hydra_context = hydra_context
        self.task_function = task_function

    def launch(self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> Sequence[JobReturn]:
        import ray

        assert self.config is not None and self.hydra_context is not None and self.task_function is not None
        setup_globals()
        configure_log(self.config.hydra.hydra_logging, self.config.hydra.verbose)
        sweep_dir = Path(str(self.config.hydra.sweep.dir)).absolute()
        sweep_dir.mkdir(parents=True, exist_ok=True)
        if not ray.is_initialized():
            try:
                ray.init(address=self.address, **self.init_kwargs)
            except ConnectionError as e:
                raise ConnectionError(
                    f"hydra.launcher.address={self.address}: {e}. Start one with `ray start --head`, give a "
                    "cluster's address, or leave the address unset for a Ray started for this sweep."
                ) from None
        log.info(f"Ray launcher: {len(job_overrides)} jobs on {ray.cluster_resources().get('CPU', 0):g} CPUs")
        job = (
            ray.remote(**self.remote_options)(_run_job_remotely)
            if self.remote_options
            else ray.remote(_run_job_remotely)
        )
        pending = []
        for idx, overrides in enumerate(job_overrides, start=initial_job_idx):
            log.info(f"\t#{idx} : {' '.join(filter_overrides(overrides))}")
            config = self.hydra_context.config_loader.load_sweep_config(self.config, list(overrides))
            with open_dict(config):
                config.hydra.job.id = f"ray_{idx}"
                config.hydra.job.num = idx
                config.hydra.sweep.dir = str(sweep_dir)
            ref = job.remote(self.hydra_context, self.task_function, config, Singleton.get_state())
            pending.append((ref, config, overrides))
        results = []
        for ref, config, overrides in pending:
            try:
                results.append(ray.get(ref))
            except (ray.exceptions.WorkerCrashedError, ray.exceptions.NodeDiedError) as e:
                results.append(_lost(config, overrides, job_dir(config), e))
        return results
