"""Where the batched launcher's groups run (`hydra.launcher.backend`), through each engine's own API.

- `local`: in this process, or with `n_jobs` > 1 each group in a spawned process of its own, `n_jobs` at a
  time (concurrent.futures: one single-worker process pool per group, so a group whose process dies breaks
  only its own pool; in one shared pool it would break every group still running or waiting).
- `submitit`: one submitit job per group, submitted as one array (`executor.map_array`): on this machine
  (`submitit.executor=local`, each group a process) or on Slurm (`slurm`: one sbatch array of G tasks).
- `ray`: one `ray.remote` task per group, on the Ray that `ray.init` finds or starts with the same
  address rules as rlrun's Ray launcher (hydra_plugins/rlrun_ray_launcher).

Every backend runs `rlrun.sweeps.batching.run_chunk(task_configs, job_dirs, group_dir)` for each group and gives
back, per group, the list it returned, or the exception that says why its process was lost (a killed task,
a lost node, a Slurm job that ended without a result). A group that needs a GPU (`device=cuda`) asks for
one: `gpus_per_node: 1` on submitit, `num_gpus: 1` on Ray.

Imported by the launcher when a sweep launches (Hydra imports every plugin module at start-up, and this
one imports nothing heavy at module level either).
"""

import logging
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

Work = tuple[list[dict[str, Any]], list[str], str]  # run_chunk's arguments for one group
Outcome = Any  # run_chunk's list of objectives, or the exception that lost the group


def run_local(fn: Callable, work: Sequence[Work], n_jobs: int) -> list[Outcome]:
    if n_jobs == 1 or len(work) == 1:
        return [fn(*args) for args in work]
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(n_jobs) as at_a_time:
        return list(at_a_time.map(lambda args: _outcome(lambda: _in_own_process(fn, args)), work))


def _in_own_process(fn: Callable, args: Work) -> Any:
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
        return pool.submit(fn, *args).result()


def _outcome(result: Callable[[], Any]) -> Outcome:
    try:
        return result()
    except Exception as e:  # the group's process died (or the engine lost it): that group only
        return e


def submitit_parameters(settings: dict[str, Any], cuda: bool) -> dict[str, Any]:
    """submitit's AutoExecutor parameters for one group's job: one node, one task (the group's process)."""
    gpus = settings.get("gpus_per_node")
    params: dict[str, Any] = {
        "name": settings.get("name") or "rlrun-batched",
        "timeout_min": settings["timeout_min"],
        "cpus_per_task": settings["cpus_per_task"],
        "mem_gb": settings["mem_gb"],
        "nodes": 1,
        "tasks_per_node": 1,
    }
    gpus = (1 if cuda else 0) if gpus is None else gpus
    if gpus:  # none asked: no --gpus-per-node line (some clusters refuse a GPU request of 0)
        params["gpus_per_node"] = gpus
    if settings["executor"] == "slurm":
        for key in ("partition", "array_parallelism", "additional_parameters", "setup"):
            if settings.get(key) not in (None, {}, []):
                params[f"slurm_{key}"] = settings[key]
    return params


def submit_submitit(fn: Callable, work: Sequence[Work], cuda: Sequence[bool], settings: dict[str, Any], folder: Path):
    """Submit the groups as submitit jobs, one array per kind of group (CPU, GPU); the jobs in `work`'s order."""
    import submitit

    jobs: list[Any] = [None] * len(work)
    for needs_gpu in sorted(set(cuda)):
        picked = [i for i, c in enumerate(cuda) if c == needs_gpu]
        executor = submitit.AutoExecutor(folder=str(folder), cluster=settings["executor"])
        executor.update_parameters(**submitit_parameters(settings, needs_gpu))
        args = [work[i] for i in picked]
        for i, job in zip(picked, executor.map_array(fn, *zip(*args))):
            jobs[i] = job
    log.info(f"submitit: {len(jobs)} jobs ({', '.join(str(j.job_id) for j in jobs)}), logs in {folder}")
    return jobs


def run_submitit(
    fn: Callable, work: Sequence[Work], cuda: Sequence[bool], settings: dict[str, Any], sweep_dir: Path
) -> list[Outcome]:
    folder = Path(settings.get("folder") or sweep_dir / ".submitit" / "%j")
    jobs = submit_submitit(fn, work, cuda, settings, folder)
    return [_outcome(job.result) for job in jobs]


def run_ray(fn: Callable, work: Sequence[Work], cuda: Sequence[bool], settings: dict[str, Any]) -> list[Outcome]:
    import ray

    address, init = settings.get("address"), dict(settings.get("init") or {})
    if not ray.is_initialized():  # the rules of rlrun's Ray launcher (hydra_plugins/rlrun_ray_launcher)
        try:
            ray.init(address=address, **init)
        except ConnectionError as e:
            raise ConnectionError(
                f"hydra.launcher.ray.address={address}: {e}. Start one with `ray start --head`, give a "
                "cluster's address, or leave the address unset for a Ray started for this sweep."
            ) from None
    remote = dict(settings.get("remote") or {})
    log.info(f"Ray: {len(work)} groups on {ray.cluster_resources().get('CPU', 0):g} CPUs")
    tasks = {c: ray.remote(**{**remote, **({"num_gpus": 1} if c else {})})(fn) for c in set(cuda)}
    refs = [tasks[c].remote(*args) for c, args in zip(cuda, work)]
    return [_outcome(lambda ref=ref: ray.get(ref)) for ref in refs]
