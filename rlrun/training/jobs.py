"""How a training job ends: its summary on stdout, or one line on stderr and an exit code.

0 done · 2 refused (bad config, a run directory that holds a run or is in use, an unloadable
checkpoint, a file of the run that rlrun does not read: rlrun.storage.bounded) · 3 non-finite loss · 4 cannot
write · 5 the env raised (its last checkpoint is kept: resume it; with none yet, a new run's directory is
removed) · 75 stopped by a signal, checkpoint saved (resume) · 130 / 143 stopped by SIGINT / SIGTERM before
anything was kept (rlrun.training.signals)
"""

from __future__ import annotations

import os
import shlex
import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rlrun.envs.failure import EnvError
from rlrun.errors import ConfigError, Exit, NonFiniteError, fail
from rlrun.storage import rundir, summary as run_summary
from rlrun.storage.bounded import FileRefused


def refused(error: BaseException) -> bool:
    """A refusal (bad config, a run directory that holds a run or is in use, an unloadable checkpoint).
    The checkpoint module (torch) is imported here, not at the top: the command line and `--help` stay fast."""
    from rlrun.storage.checkpoint import CheckpointError

    return isinstance(error, (ConfigError, CheckpointError, rundir.RunDirError, FileRefused, run_summary.DamagedJob))


def record_failure(out_dir: Path, error: BaseException, root: Path | None = None) -> None:
    """Mark a sweep job as failed in its own directory, so the sweep goes on and the report lists it. Never
    through a link: a job directory that is one, or lies below one under `root` (its sweep directory),
    belongs to another run, and its failure is on stderr only."""
    link = rundir.linked_part(out_dir, root if root is not None else Path(out_dir).parent)
    if link is not None:
        print(f"rlrun: no failure record written into {out_dir}: {link} is a link", file=sys.stderr)
        return
    detail = str(error) if refused(error) else "".join(traceback.format_exception(error))
    try:
        run_summary.write(out_dir, run_summary.of_failure(str(error)))
        rundir.write_text(out_dir / "error.txt", detail)
    except OSError:
        pass  # the job's directory is unwritable: its failure is on stderr


def summary_lines(summary: dict[str, Any], out_dir: Path) -> str:
    """What a finished run tells its user: the figures that matter and where to look next."""

    def fmt(value: float | None) -> str:
        return "-" if value is None else f"{value:.1f}"

    agents = summary.get("agents")  # a batched run (seeds=K): its own summaries, one per agent
    runs = list(agents.values()) if agents else [summary]
    steps = runs[0]["env_steps"]
    solved = [r["solved_step"] for r in runs if r["solved_step"] is not None]
    lines = [
        f"rlrun: {summary['status']} after {steps:,} env steps{' per agent' if agents else ''} in "
        f"{runs[0]['wall_time_s']:.1f} s",
        "  100-episode mean return: "
        + " / ".join(fmt(r["final_mean_return_100"]) for r in runs)
        + "; last eval: "
        + " / ".join(fmt(r["final_eval_return"]) for r in runs),
        f"  solved: {len(solved)}/{len(runs)}" + (f" (at step {', '.join(f'{s:,}' for s in solved)})" if solved else "")
        if runs[0].get("reward_threshold") is not None
        else "  solved: - (the env has no reward threshold: env.reward_threshold=...)",
        f"  run directory: {out_dir}",
    ]
    from rlrun.storage.agent_dirs import root

    top = root(out_dir)  # a group of the batched launcher (<sweep>/.batched/<group>): its sweep
    if top != Path(os.path.abspath(out_dir)) and (top / "report.md").is_file():  # the report predates this resume
        lines.append(f"  the sweep's report is older than this run: python -m rlrun.report {rundir.shell_quote(top)}")
    return "\n".join(lines + backend_lines(runs, out_dir))


def backend_lines(runs: list[dict[str, Any]], out_dir: Path) -> list[str]:
    """Where the logging backends hold the run, as commands to open it (`logged_to` in summary.json)."""
    from rlrun.storage.agent_dirs import root

    logged = [r.get("logged_to", {}) for r in runs]
    first = logged[0] if logged else {}
    lines = []
    if "tensorboard" in first:  # a group of the batched launcher writes in its sweep's job folders
        lines.append(f"  tensorboard --logdir {rundir.shell_quote(root(out_dir))}")
    if not any(logged):  # logger=[]
        lines.append("  no logging backend: see episodes.csv and summary.json")
    if "csv" in first:
        lines.append(f"  scalars: {first['csv']['path']}" + (" (one per agent)" if len(runs) > 1 else ""))
    if "mlflow" in first:
        uri = first["mlflow"]["tracking_uri"]
        if uri.startswith(("sqlite:", "file:")):
            lines.append(f"  mlflow ui --backend-store-uri {shlex.quote(uri)}")
        else:
            lines.append(f"  mlflow: {len(runs)} run(s) at {uri}")
    if "wandb" in first:
        urls = [lg["wandb"]["url"] for lg in logged if "url" in lg.get("wandb", {})]
        if urls:
            lines.append("  wandb: " + " ".join(urls))
        elif first["wandb"]["mode"] == "offline":
            lines.append("  wandb sync " + " ".join(rundir.shell_quote(Path(lg["wandb"]["dir"])) for lg in logged))
    return lines


def exit_code(error: Exception, out_dir: Path) -> tuple[int | None, str]:
    """The exit code and one-line message for an error of a run; (None, repr) for an unexpected one."""
    if refused(error):
        return Exit.BAD_INPUT, str(error)
    if isinstance(error, NonFiniteError):
        return Exit.NONFINITE, str(error)
    if isinstance(error, OSError):  # an unwritable or full run directory; earlier checkpoints are intact
        return Exit.CANNOT_WRITE, f"cannot write to {out_dir}: {error.strerror or error}"
    if isinstance(error, EnvError):
        return Exit.ENV_FAILED, str(error)
    return None, repr(error)


def kept_or_removed(out_dir: Path, removed: bool) -> str:
    """What became of a run that stopped on an error: its directory removed, or its checkpoint kept."""
    if removed:
        return f"; it had no checkpoint yet, so {out_dir} was removed"
    if (out_dir / "checkpoint.pt").exists():
        return f"; the last checkpoint in {out_dir} is kept. Continue with: {rundir.resume_command(out_dir)}"
    return ""


def run_job(job: Callable[[], dict[str, Any]], out_dir: Path, sweep_job: int | None = None) -> dict | None:
    """Run `job` (a training run writing into `out_dir`) and turn each way it can fail into one line and an
    exit code. In a sweep (`sweep_job` is the job's number), a failed job is recorded in its directory and
    the sweep goes on."""
    # the training stack only when a job runs (jobs.py is imported by the CLI's error paths)
    from rlrun.training.loop import Preempted

    if sweep_job is not None:
        _know_sweep_dir()
    try:
        summary = job()
        if sweep_job is None:
            print(summary_lines(summary, out_dir), flush=True)
        return summary
    except Preempted as e:
        from rlrun.training import signals

        how = (
            signals.continue_sweep(rundir)
            if sweep_job is not None and signals.sweep_dir is not None
            else f"Continue with: {rundir.resume_command(out_dir)}"
        )
        fail(f"stopped by {e}; checkpoint saved in {out_dir}. {how}", Exit.STOPPED)
    except Exception as e:
        code, message = exit_code(e, out_dir)
        if sweep_job is None:
            if code is None:
                raise  # a bug: the traceback is what helps
            # a run refused, or whose env failed, before its first checkpoint
            if code in (Exit.BAD_INPUT, Exit.ENV_FAILED):
                removed = rundir.discard_unstarted(out_dir)  # leaves no directory behind
                if code == Exit.ENV_FAILED:
                    message += kept_or_removed(out_dir, removed)
            if code == Exit.NONFINITE:  # a run that trained: its summary says how it ended, as a sweep job's does
                record_failure(out_dir, e)
            fail(message, code)
        traced = code in (None, Exit.ENV_FAILED)  # error.txt holds the traceback: of a bug, or into the env's code
        print(
            f"rlrun: job {sweep_job} failed: {message}" + (f" (details in {out_dir / 'error.txt'})" if traced else ""),
            file=sys.stderr,
        )
        record_failure(out_dir, e)
        return None


def _know_sweep_dir() -> None:
    """A sweep's job: a stop names the sweep's continue command (also in a launcher's worker process)."""
    from hydra.core.hydra_config import HydraConfig

    from rlrun.training import signals

    if HydraConfig.initialized():
        signals.sweep_dir = Path(str(HydraConfig.get().sweep.dir))
