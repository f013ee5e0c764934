"""A sweep's jobs packed into batched processes (hydra/launcher=batched): which jobs share a process, and
running one such group.

Jobs whose configs differ only in `rlrun.training.agents.BATCHABLE` keys (seed, learning rate, gamma, ...) form a
group; a group of more than `max_agents` jobs is cut into chunks, and chunks are cut further until there
are at least as many as the parallel processes (`n_jobs`). A chunk runs as one run whose `agents` list
holds one entry per job, with the job's directory as the agent's `dir` (relative to the chunk's run
directory, checked by rlrun.storage.agent_dirs), so each job directory receives what the job would have written
alone (events, episodes.csv, summary.json, model.pt; `.hydra/` is written by the launcher). The chunk's own
run directory (checkpoint, joint summary) is `<sweep dir>/.batched/<name>`: `python -m rlrun.resume` on it
resumes all its jobs.

Jobs that cannot share a process (`seeds` > 1, `resume`, options refused for batched agents) run alone,
each as a plain run in its own directory.

A chunk's process may run on this machine, as a submitit job (Slurm) or as a Ray task
(hydra_plugins/rlrun_batched_launcher/backends.py). A process that dies (a killed task, a lost node) loses
its chunk only: `record_lost` marks its jobs failed with the reason. Run again (the launcher's `resume`
switch, a Ray retry), a chunk that finished is skipped (`finished`), and one whose process died continues
from its checkpoint, or starts over in emptied directories without one (`continue_earlier_attempt`).
"""

from __future__ import annotations

import json
import math
import os
import shutil
import sys
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from rlrun.algos import algorithm
from rlrun.config.saved import from_disk, from_saved
from rlrun.config.validate import BATCHED_UNSUPPORTED
from rlrun.errors import ConfigError
from rlrun.storage import agent_dirs, rundir, summary as run_summary
from rlrun.sweeps.continuation import BATCHED_LAUNCHER
from rlrun.training import agents

PREEMPTED = "preempted"
LOST = "lost: "  # how the error of a job whose chunk's process died begins (`record_lost`)


# The launcher's settings and what each may be (its `BatchedLauncherConf`).
LAUNCHER_SETTINGS = {
    "max_agents": "jobs trained together in one process at most",
    "n_jobs": "processes at a time, or on a cluster the GPUs or nodes: at least this many groups",
}
BACKENDS = ("local", "submitit", "ray")
EXECUTORS = ("local", "slurm")


def check_launcher(launcher: DictConfig) -> None:
    """Refuse settings of hydra/launcher=batched that it cannot run (`hydra.launcher.max_agents=0`) before
    Hydra builds it."""
    if launcher.get("_target_") != BATCHED_LAUNCHER:
        return
    for key, meaning in LAUNCHER_SETTINGS.items():
        value = launcher.get(key)
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ConfigError(f"hydra.launcher.{key}", value, f"an integer >= 1 ({meaning})")
    if launcher.get("backend", "local") not in BACKENDS:
        raise ConfigError("hydra.launcher.backend", launcher.get("backend"), ", ".join(BACKENDS))
    executor = OmegaConf.select(launcher, "submitit.executor", default="local")
    if executor not in EXECUTORS:
        raise ConfigError("hydra.launcher.submitit.executor", executor, ", ".join(EXECUTORS))


def resumes_sweep(launcher: DictConfig) -> bool:
    """Whether this command reruns a batched sweep into its own (non-empty) directory: `hydra.launcher.resume`."""
    return launcher.get("_target_") == BATCHED_LAUNCHER and launcher.get("resume") is True


continuing: Path | None = None  # the sweep `python -m rlrun.resume <sweep dir>` continues (its own directory)


def check_sweep_dir(sweep_dir: Path, launcher: DictConfig) -> None:
    """A sweep's directory must be new or empty (rundir.check_new), but for the resume switch: then it is
    its own batched sweep's, marked by `.batched/`, which must be a directory, not a link to another's; and
    but for the sweep `rlrun.resume` continues (`continuing`), which goes into its own directory."""
    if not resumes_sweep(launcher):
        if Path(sweep_dir).absolute() != continuing:
            rundir.check_new(sweep_dir, "hydra.sweep.dir")
    elif (sweep_dir / ".batched").is_symlink():  # another sweep's groups: never resumed or written through it
        rundir.check_unlinked([sweep_dir / ".batched"], sweep_dir)
    elif sweep_dir.exists() and any(sweep_dir.iterdir()) and not (sweep_dir / ".batched").is_dir():
        raise rundir.RunDirError(  # the rerun of a batched sweep goes into its own directory, and only there
            f"{sweep_dir} holds no batched sweep (no .batched/); hydra.launcher.resume=true reruns a batched "
            "sweep into its own hydra.sweep.dir"
        )


def batchable_keys(cfg: DictConfig) -> tuple[str, ...]:
    keys = algorithm(cfg.algo).batchable
    if cfg.device.cuda_graphs:  # recorded steps take one lr for all: lr sweeps stay in separate processes
        keys = tuple(k for k in keys if k not in agents.LR_KEYS)
    return keys


def groupable(cfg: DictConfig) -> bool:
    return cfg.seeds == 1 and cfg.resume is None and not cfg.agents and all(ok(cfg) for _, ok, _ in BATCHED_UNSUPPORTED)


def group_key(cfg: DictConfig) -> str:
    """What jobs of one group share: the config without its batchable keys."""
    plain = OmegaConf.to_container(cfg, resolve=True)
    assert isinstance(plain, dict)
    for key in batchable_keys(cfg):
        parent, _, name = key.rpartition(".")
        node = plain
        for part in parent.split(".") if parent else []:
            node = node.get(part) or {}
        node.pop(name, None)
    return json.dumps(plain, sort_keys=True, default=str)


def plan_chunks(configs: list[DictConfig], max_agents: int, n_jobs: int) -> list[list[int]]:
    """Job indices per process: each group of batchable jobs cut into the fewest equal chunks of at most
    `max_agents`, then the group with the largest chunks cut once more while there are fewer chunks than
    `n_jobs` (so each of n_jobs processes, GPUs or nodes gets one); jobs that cannot batch alone."""
    groups: dict[str, list[int]] = {}
    alone: list[list[int]] = []
    for i, cfg in enumerate(configs):
        if groupable(cfg):
            groups.setdefault(group_key(cfg), []).append(i)
        else:
            alone.append([i])
    cuts = {key: math.ceil(len(jobs) / max_agents) for key, jobs in groups.items()}
    while cuts and sum(cuts.values()) + len(alone) < n_jobs:  # one more cut of the group with the largest chunks
        key = max(cuts, key=lambda k: len(groups[k]) / cuts[k])
        if len(groups[key]) <= cuts[key]:
            break
        cuts[key] += 1
    chunks = []
    for key, jobs in groups.items():
        n = cuts[key]
        chunks += [jobs[round(c * len(jobs) / n) : round((c + 1) * len(jobs) / n)] for c in range(n)]
    return sorted(chunks + alone)


def batched_config(configs: list[DictConfig], job_dirs: list[Path], group_dir: Path) -> DictConfig:
    """One run of these jobs' agents: the first job's config, with an `agents` entry per job holding the
    batchable values that differ between them (seed always) and the job's directory, relative to the group's
    run directory (`../../optimizer.lr=0.001/seed=0`: the checkpoint never names a place outside the sweep)."""
    base = configs[0].copy()
    keys = [k for k in batchable_keys(base) if len({str(OmegaConf.select(c, k)) for c in configs}) > 1]
    keys = ["seed"] + [k for k in keys if k != "seed"]
    entries = []
    for cfg, job_dir in zip(configs, job_dirs):
        entry = {k: OmegaConf.select(cfg, k) for k in keys}
        entry[agents.DIR_KEY] = os.path.relpath(os.path.abspath(job_dir), os.path.abspath(group_dir))
        entries.append(entry)
    base.agents = entries
    return base


def run_chunk(task_configs: list[dict[str, Any]], job_dirs: list[str], group_dir: str) -> list[Any]:
    """Train these jobs (plain config dicts, one directory each) in one process. Returns each job's
    objective (rlrun.storage.summary.objective: None for a failed job, 0.0 under `robust`), or PREEMPTED for
    all. A chunk run before (a rerun of its sweep) is skipped when it finished and continued when its process died."""
    # Hydra finds the batched launcher on every start: the training stack (here and below) only when a group runs
    from rlrun import run
    from rlrun.training import jobs
    from rlrun.training.loop import Preempted

    configs = [from_saved(c) for c in task_configs]
    dirs = [Path(d) for d in job_dirs]
    where = dirs[0] if len(dirs) == 1 else Path(group_dir)  # the chunk's run (its checkpoint): a lone job's own
    top = agent_dirs.root(Path(group_dir))
    try:
        rundir.check_unlinked([*dirs, Path(group_dir)], top)  # a linked job dir or .batched/ is another's
        with rundir.owned(where):  # a live earlier attempt (a lost node's) is refused here, untouched
            if finished(dirs):
                return [objective(d, c.objective) for d, c in zip(dirs, configs)]
            state = continue_earlier_attempt(where, dirs)
            if state is not None:
                run.train(from_disk(state["config"], None), where, state)
            elif len(configs) == 1:
                run.train(configs[0], dirs[0])
            else:
                run.train_group(batched_config(configs, dirs, where), where)
    except Preempted as e:
        print(  # the sweep's resume continues it (rlrun.sweeps.continuation)
            f"rlrun: stopped by {e}; checkpoint saved in {where}. Continue the sweep with: "
            f"{rundir.resume_command(top)}",
            file=sys.stderr,
        )
        return [PREEMPTED] * len(configs)
    except Exception as e:  # the whole process failed: every job in it is marked failed, the sweep goes on
        _, message = jobs.exit_code(e, Path(group_dir))
        print(f"rlrun: jobs in {group_dir} failed: {message}", file=sys.stderr)
        for d in dirs:
            jobs.record_failure(d, e, top)
        return [run_summary.objective(None, c.objective) for c in configs]  # a failed job's
    return [objective(d, c.objective) for d, c in zip(dirs, configs)]


def objective(job_dir: Path, kind: str = run_summary.TRAIN) -> float | None:
    """What the job's task function returns to sweepers (rlrun.storage.summary.objective); None without a summary."""
    try:
        summary = run_summary.read(job_dir) if (Path(job_dir) / run_summary.FILE).exists() else None
    except run_summary.DamagedJob:  # replaced since the job wrote it: counted as failed
        summary = None
    return run_summary.objective(summary, kind)


def lost(job_dir: Path) -> bool:
    """Whether the job's summary is `record_lost`'s (its chunk's process died)."""
    try:
        return str(run_summary.read(job_dir).get("error", "")).startswith(LOST)
    except (OSError, ValueError, run_summary.DamagedJob):
        return False


def finished(job_dirs: list[Path], sweep_dir: Path | None = None) -> bool:
    """Every job of the chunk has its own summary (finished, or failed by itself), none of them lost, and none
    reached through a link below `sweep_dir` (another run's summary: its group refuses it)."""
    unlinked = [sweep_dir is None or rundir.linked_part(d, sweep_dir) is None for d in job_dirs]
    return all(ok and (d / run_summary.FILE).exists() and not lost(d) for d, ok in zip(job_dirs, unlinked))


def record_lost(job_dirs: list[str], reason: str, sweep_dir: Path) -> None:
    """A chunk whose process died (killed, its node lost): each of its jobs without a summary of its own is
    marked failed with the reason; a rerun of the sweep with hydra.launcher.resume=true continues them."""
    from rlrun.training import jobs

    why = " ".join(reason.split())[:500]
    error = RuntimeError(
        f"{LOST}the process training this job's group died ({why}); rerun the sweep command "
        "with hydra.launcher.resume=true to continue it from its last checkpoint"
    )
    print(f"rlrun: jobs {', '.join(job_dirs)} failed: {error}", file=sys.stderr)
    for d in map(Path, job_dirs):
        if not (d / run_summary.FILE).exists() and rundir.linked_part(d, sweep_dir) is None:
            d.mkdir(parents=True, exist_ok=True)
            jobs.record_failure(d, error, sweep_dir)


def continue_earlier_attempt(where: Path, dirs: list[Path]) -> dict[str, Any] | None:
    """What an earlier attempt of this chunk left (the sweep's directory was new, so anything there is its):
    its newest checkpoint to continue from, or None, with the directories emptied as a new run finds them
    (each job's `.hydra/`, written by the launcher, kept)."""
    from rlrun.storage import checkpoint

    for d in dirs:
        if lost(d):
            for name in (run_summary.FILE, "error.txt"):
                (d / name).unlink(missing_ok=True)
    if any((where / name).exists() for name in (checkpoint.LATEST, checkpoint.PREVIOUS)):
        state, _ = checkpoint.load(where)
        return state
    for d in dict.fromkeys([where, *dirs]):
        keep = (rundir.LOCK_NAME, ".hydra") if d in dirs else (rundir.LOCK_NAME,)
        for p in d.iterdir() if d.is_dir() else []:
            if p.name not in keep:
                shutil.rmtree(p) if p.is_dir() and not p.is_symlink() else p.unlink()
    return None
