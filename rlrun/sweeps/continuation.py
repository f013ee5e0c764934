"""A stopped sweep, continued: `python -m rlrun.resume <sweep dir>`.

A sweep's directory holds `multirun.yaml`, which Hydra's basic sweeper writes when the sweep starts: the
command line's overrides (`hydra.overrides.task`) and Hydra's own (`hydra.overrides.hydra`: the launcher and
its settings). The continuation runs the same sweep again into the same directory: Hydra's sweeper plans
the same jobs, with the same numbers and directories, and each job, before it trains, looks at what its
directory holds (`continued`): a summary (finished, or failed by itself) is kept as it is and not rerun, a
checkpoint is resumed as `python -m rlrun.resume <job dir>` resumes it, and a job that never started (or
stopped before its first checkpoint) starts in an emptied directory. The batched launcher does the same for
its groups (`hydra.launcher.resume=true`).

Hydra writes each job's `.hydra/` before the job runs; during a continuation it writes none
(`hydra.output_subdir=null`) and each job writes Hydra's record itself once it goes on
(`rlrun.resume.continued_job`, which the task function applies where `MARKER` is set): a kept job gets none,
so its files stay as they were, a resumed job gets `.hydra/resume_<time>/` (as `rlrun.resume` leaves one)
once its resume is accepted (a refused one writes nothing there), a job that starts now its `.hydra/`.

`planned_jobs` recomputes the job directories of such a sweep for the report (Hydra's override parser, the
basic sweeper's cartesian product, rlrun's job names), so a job that never started is counted too.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any

from rlrun.config.hydra_adapter import BASIC_SWEEPER, sweep_jobs
from rlrun.config.overrides import override_key, override_value
from rlrun.errors import ConfigError
from rlrun.storage import bounded, rundir

MULTIRUN = "multirun.yaml"
BATCHED_LAUNCHER = "hydra_plugins.rlrun_batched_launcher.batched_launcher.BatchedLauncher"
# Set in each job's environment (hydra.job.env_set) while a sweep is continued: `continued` applies.
JOB_DIR = "${rlrun_job_dir:}"  # hydra.sweep.subdir (conf/hydra): rlrun.config.runnames.job_subdir
MARKER = "RLRUN_SWEEP_CONTINUES"
# Hydra's overrides a continuation sets itself (the saved ones are replaced) and those it never takes from
# the directory: nothing read from it chooses code (`_target_`, callbacks, search paths).
OWN_SETTINGS = (
    "hydra.sweep.dir",
    "hydra.mode",
    "hydra.output_subdir",
    f"hydra.job.env_set.{MARKER}",
    "hydra.launcher.resume",
)
REFUSED = ("_target_", "hydra.callbacks", "hydra/callbacks", "hydra.searchpath", "hydra.job.env_set")


def is_sweep(path: Path) -> bool:
    """Whether `path` is a sweep's directory (its multirun.yaml) rather than a run's."""
    return (Path(path) / MULTIRUN).is_file() and not rundir.holds_run(path)


def _saved(sweep_dir: Path) -> dict[str, Any]:
    """The `hydra` node of the sweep's multirun.yaml; ConfigError naming the file where it is unreadable."""
    path = Path(sweep_dir) / MULTIRUN
    try:
        hydra = bounded.load_yaml(path)["hydra"]
        task, own = hydra["overrides"]["task"], hydra["overrides"]["hydra"]
    except (bounded.FileRefused, KeyError, TypeError) as e:
        raise ConfigError("resume", str(sweep_dir), f"a sweep directory with a readable {MULTIRUN} ({e})") from None
    if not isinstance(hydra, dict) or not all(isinstance(o, str) for o in [*task, *own]):
        raise ConfigError("resume", str(sweep_dir), f"a sweep directory whose {MULTIRUN} lists overrides")
    return hydra


def continue_argv(sweep_dir: Path, overrides: list[str]) -> list[str]:
    """The command line (for `python -m rlrun.train`, less `hydra.sweep.dir`) that continues the sweep in
    `sweep_dir`. `overrides` may only repeat the saved `env.id` (a `module:` id is imported only when the
    command line names it)."""
    sweep_dir = Path(sweep_dir)
    hydra = _saved(sweep_dir)
    sweeper = str((hydra.get("sweeper") or {}).get("_target_"))
    if sweeper != BASIC_SWEEPER:
        raise ConfigError(
            "resume",
            str(sweep_dir),
            f"a sweep of listed values (Hydra's basic sweeper); {sweeper} chooses its trials as it goes, and its "
            "finished trials are kept where they are",
        )
    task = list(hydra["overrides"]["task"])
    saved_ids = [override_value(o) for o in task if override_key(o) == "env.id"]
    for o in overrides:
        if override_key(o) != "env.id" or override_value(o) not in saved_ids:
            raise ConfigError(
                "resume",
                f"{sweep_dir} {o}",
                "a sweep directory alone: a sweep continues as it was planned (overrides: only its own env.id=...)",
            )
    command = rundir.resume_command(Path(sweep_dir))
    for value in saved_ids:
        if ":" in value and f"env.id={value}" not in overrides:
            raise ConfigError(
                "env.id", value, f"repeated on the command line to continue this sweep: {command} env.id={value}"
            )
    own = [o for o in hydra["overrides"]["hydra"] if not override_key(o).startswith(OWN_SETTINGS)]
    for o in own:
        if any(part in override_key(o) for part in REFUSED):
            raise ConfigError(
                "resume",
                str(sweep_dir),
                f"a sweep without {override_key(o)} in its Hydra overrides (it chooses code)",
            )
    argv = ["-m", *task, *own]
    config_name = (hydra.get("job") or {}).get("config_name")
    if isinstance(config_name, str) and config_name != "config":
        argv += ["--config-name", config_name]
    for source in (hydra.get("runtime") or {}).get("config_sources") or []:
        if isinstance(source, dict) and source.get("provider") == "command-line":
            argv += ["--config-dir", str(source.get("path"))]
    launcher = str((hydra.get("launcher") or {}).get("_target_"))
    if launcher == BATCHED_LAUNCHER:  # its groups: skipped when finished, continued from their checkpoints
        argv.append("hydra.launcher.resume=true")
    else:
        record = datetime.now().strftime(".hydra/resume_%Y-%m-%d_%H-%M-%S-%f")
        # Hydra writes no record before a job runs: the job writes it once it goes on (a kept job: none)
        argv += ["hydra.output_subdir=null", f"+hydra.job.env_set.{MARKER}={record}"]
    return argv


def planned_jobs(sweep_dir: Path) -> list[Path] | None:
    """The directories of every job the sweep in `sweep_dir` planned, in Hydra's order; None where they cannot
    be known (no readable multirun.yaml, a sweeper that chooses its trials as it goes)."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from omegaconf import OmegaConf

    from rlrun.config.runnames import job_subdir

    try:
        hydra = _saved(sweep_dir)
    except ConfigError:
        return None
    sweeper = hydra.get("sweeper") or {}
    if str(sweeper.get("_target_")) != BASIC_SWEEPER or (hydra.get("sweep") or {}).get("subdir") != JOB_DIR:
        return None
    params = sweeper.get("params") or {}
    given = [f"{k}={v}" for k, v in params.items()] + list(hydra["overrides"]["task"])
    try:
        jobs = sweep_jobs(OverridesParser.create().parse_overrides(given))  # as the basic sweeper lists them
    except Exception:  # a damaged multirun.yaml, a sweep it cannot list: its jobs are the ones found
        return None
    exclude = (((hydra.get("job") or {}).get("config") or {}).get("override_dirname") or {}).get("exclude_keys") or []
    dirs = []
    for num, job in enumerate(jobs):
        root = OmegaConf.create(
            {
                "hydra": {
                    "sweep": {"dir": str(sweep_dir)},
                    "sweeper": {"params": params or None},
                    "job": {"num": num, "config": {"override_dirname": {"exclude_keys": list(exclude)}}},
                    "overrides": {"task": list(job)},
                }
            }
        )
        dirs.append(Path(sweep_dir) / job_subdir(root))
    return dirs
