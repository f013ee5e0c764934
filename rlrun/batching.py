"""A sweep's jobs packed into batched processes (hydra/launcher=batched): which jobs share a process, and
running one such group.

Jobs whose configs differ only in `rlrun.agents.BATCHABLE` keys (seed, learning rate, gamma, ...) form a
group; a group of more than `max_agents` jobs is cut into chunks, and chunks are cut further until there
are at least as many as the parallel processes (`n_jobs`). A chunk runs as one run whose `agents` list
holds one entry per job, with the job's directory as the agent's `dir` (relative to the chunk's run
directory, checked by rlrun.agent_dirs), so each job directory receives what the job would have written
alone (events, episodes.csv, summary.json, model.pt; `.hydra/` is written by the launcher). The chunk's own
run directory (checkpoint, joint summary) is `<sweep dir>/.batched/<name>`: `python -m rlrun.resume` on it
resumes all its jobs.

Jobs that cannot share a process (`seeds` > 1, `resume`, options refused for batched agents) run alone,
each as a plain run in its own directory.
"""

from __future__ import annotations

import json
import math
import os
import sys
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from rlrun import agents, summary as run_summary
from rlrun.errors import ConfigError
from rlrun.validate import BATCHED_UNSUPPORTED, from_saved

PREEMPTED = "preempted"


LAUNCHER = "hydra_plugins.rlrun_batched_launcher.batched_launcher.BatchedLauncher"
# The launcher's settings and what each may be (its `BatchedLauncherConf`).
LAUNCHER_SETTINGS = {"max_agents": "jobs trained together in one process at most", "n_jobs": "processes at a time"}


def check_launcher(launcher: DictConfig) -> None:
    """Refuse settings of hydra/launcher=batched that it cannot run (`hydra.launcher.max_agents=0`) before
    Hydra builds it."""
    if launcher.get("_target_") != LAUNCHER:
        return
    for key, meaning in LAUNCHER_SETTINGS.items():
        value = launcher.get(key)
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ConfigError(f"hydra.launcher.{key}", value, f"an integer >= 1 ({meaning})")


def batchable_keys(cfg: DictConfig) -> tuple[str, ...]:
    keys = agents.batchable(cfg)
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
    """Job indices per process: groups of batchable jobs cut into chunks of at most `max_agents`, the
    largest cut in halves while there are fewer chunks than `n_jobs`; jobs that cannot batch alone."""
    groups: dict[str, list[int]] = {}
    alone: list[list[int]] = []
    for i, cfg in enumerate(configs):
        if groupable(cfg):
            groups.setdefault(group_key(cfg), []).append(i)
        else:
            alone.append([i])
    chunks = []
    for jobs in groups.values():
        n = math.ceil(len(jobs) / max_agents)
        chunks += [jobs[round(c * len(jobs) / n) : round((c + 1) * len(jobs) / n)] for c in range(n)]
    while len(chunks) + len(alone) < n_jobs:
        largest = max(chunks, key=len, default=[])
        if len(largest) < 2:
            break
        chunks.remove(largest)
        half = len(largest) // 2
        chunks += [largest[:half], largest[half:]]
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
    objective (its final 100-episode mean return; None for a failed job), or PREEMPTED for all."""
    from rlrun import jobs, run, rundir
    from rlrun.loop import Preempted

    configs = [from_saved(c) for c in task_configs]
    dirs = [Path(d) for d in job_dirs]
    try:
        if len(configs) == 1:
            run.train(configs[0], dirs[0])
        else:
            run.train(batched_config(configs, dirs, Path(group_dir)), Path(group_dir))
    except Preempted as e:
        where = dirs[0] if len(configs) == 1 else Path(group_dir)
        print(f"rlrun: stopped by {e}; continue with {rundir.resume_command(where)}", file=sys.stderr)
        return [PREEMPTED] * len(configs)
    except Exception as e:  # the whole process failed: every job in it is marked failed, the sweep goes on
        _, message = jobs.exit_code(e, Path(group_dir))
        print(f"rlrun: jobs in {group_dir} failed: {message}", file=sys.stderr)
        for d in dirs:
            jobs.record_failure(d, e)
        return [None] * len(configs)
    return [objective(d) for d in dirs]


def objective(job_dir: Path) -> float | None:
    """What the job's task function returns to sweepers (rlrun.summary.objective); None without a summary."""
    done = (Path(job_dir) / run_summary.FILE).exists()
    return run_summary.objective(run_summary.read(job_dir) if done else None)
