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
"""

# No `from __future__ import annotations`: Hydra imports plugin modules without entering them in
# sys.modules, and dataclasses cannot resolve string annotations there.
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hydra.core.config_store import ConfigStore
from hydra.core.singleton import Singleton
from hydra.core.utils import JobReturn, configure_log, filter_overrides, run_job, setup_globals
from hydra.plugins.launcher import Launcher
from hydra.types import HydraContext, TaskFunction
from omegaconf import DictConfig, OmegaConf, open_dict

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
    return run_job(
        hydra_context=hydra_context,
        task_function=task_function,
        config=config,
        job_dir_key="hydra.sweep.dir",
        job_subdir_key="hydra.sweep.subdir",
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
            pending.append(job.remote(self.hydra_context, self.task_function, config, Singleton.get_state()))
        return list(ray.get(pending))
