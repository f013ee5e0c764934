"""`python -m rlrun.resume <run dir> [overrides]`: continue a run in its own directory.

The path is taken as it is, not through Hydra's override grammar, so every directory rlrun makes (sweep
jobs such as `optimizer.lr=0.001/seed=0`, paths with spaces or non-ASCII characters) can be resumed.
`python -m rlrun.train resume=<dir>` does the same for directories the grammar can spell.

The run's config comes from its checkpoint, checked (`rlrun.config.saved`: no interpolations, no `module:` env
id unless the command line repeats it) and rebuilt on rlrun's own schemas (`rlrun.config.saved.from_saved`):
nothing read from the run directory chooses which code runs, and its `logger.*` options never choose where
data goes (they come from this command line, or the run logs into its own directory). Overrides may
change only what does not change the experiment (`rlrun.config.saved.RESUME_SAFE`). The directory is owned
by this process for the run (a second resume of it is refused and changes nothing), and a new
`.hydra/resume_<time>/` records the command.
"""

from __future__ import annotations

from rlrun import process_exit
from rlrun.training import signals

if __name__ == "__main__":  # a signal during the imports below gets one line too
    process_exit.register()  # before any module registers its atexit handler: this one runs after them all
    signals.stop_on_signal()

import logging
import os
import shutil
import sys
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from rlrun import console
from rlrun.config import preflight, saved as saved_config
from rlrun.config.overrides import override_key, override_value
from rlrun.errors import ConfigError, Exit, FinishedRunError, SolvedRunError, fail
from rlrun.logs import runlog
from rlrun.run import train
from rlrun.storage import agent_dirs, checkpoint as ckpt, rundir, summary as run_summary
from rlrun.training.agents import dir_plan
from rlrun.training.jobs import run_job

if TYPE_CHECKING:
    from omegaconf import DictConfig

USAGE = (
    "usage: python -m rlrun.resume <run dir> [overrides]\n"
    "       python -m rlrun.resume <sweep dir>   (a stopped sweep: its finished jobs kept, the others run)\n"
    "  overrides may set total_steps, stop_on_solve, objective, log.*, eval.*, checkpoint.*, device.*, logger.*\n"
    "  (the saved logger.* locations are not used), and repeat the saved env.id"
)

# The options of the logger group (conf/logger/): the only names a resume takes from a checkpoint's logger node.
LOGGER_OPTIONS = ("tensorboard", "csv", "mlflow", "wandb")


def load_checkpoint(run_dir: Path, env_id: str | None = None) -> tuple[DictConfig, dict[str, Any]]:
    """The run's saved config (checked and rebuilt on rlrun's schemas) and its newest loadable checkpoint;
    `env_id`: the id the command line gives, which may confirm a saved `module:` id."""
    state = load_state(run_dir)
    return saved_config.from_checkpoint(run_dir, state, env_id), state


def continue_with(run_dir: Path) -> str:
    """How to go on with `run_dir`: its resume, with a larger budget when it has finished."""
    done: dict[str, Any] = {}
    try:
        if (run_dir / run_summary.FILE).is_file():
            done = dict(run_summary.read(run_dir))
    except run_summary.DamagedJob:
        pass
    steps = done.get("env_steps_per_agent", done.get("env_steps"))
    if done.get("status") == "finished" and isinstance(steps, int) and not isinstance(steps, bool):
        return f"it has finished; train it further with {rundir.resume_command(run_dir)} total_steps={2 * steps}"
    return f"continue it with {rundir.resume_command(run_dir)}"


def load_state(run_dir: Path) -> dict[str, Any]:
    """The run's newest loadable checkpoint (the previous one, said on stderr, when the newest is damaged)."""
    if not run_dir.is_dir() or not rundir.holds_run(run_dir):
        raise ConfigError("resume", str(run_dir), "an existing run directory of rlrun")
    try:
        state, path = ckpt.load(run_dir)
    except ckpt.CheckpointError as e:
        no_file = not any((run_dir / name).exists() for name in (ckpt.LATEST, ckpt.PREVIOUS))
        if no_file and (group := agent_dirs.batched_group(run_dir)) is not None:
            raise ConfigError(
                "resume",
                str(run_dir),
                f"a run with a checkpoint; this job of a batched sweep is checkpointed with its group {group}: "
                f"{continue_with(group)}",
            ) from None
        parent = run_dir.absolute().parent
        if no_file and (parent / ckpt.LATEST).is_file() and rundir.holds_run(parent):  # an agent of seeds=K
            raise ConfigError(
                "resume",
                str(run_dir),
                f"a run with a checkpoint; this agent is checkpointed with its batched run {parent}: "
                f"{continue_with(parent)}",
            ) from None
        raise ConfigError("resume", str(run_dir), f"a run with a loadable checkpoint ({e})") from None
    if path.name != ckpt.LATEST:
        print(
            f"rlrun: warning: {run_dir / ckpt.LATEST} is damaged; resuming from {path.name} (step {state['step']})",
            file=sys.stderr,
        )
    return state


def check_unfinished(run_dir: Path, state: dict[str, Any], cfg: DictConfig) -> None:
    """Refuse to resume a run that has trained its budget (`total_steps`, this command line's if it sets one)
    and owes nothing at its last step (a signal can cut the final evaluation short: the resume runs it), or
    that `stop_on_solve` stopped, unless this command line sets stop_on_solve=false."""
    if state.get("solved") is True and cfg.stop_on_solve:
        raise SolvedRunError(rundir.shell_quote(run_dir), state["step"])
    if state["step"] >= cfg.total_steps and not state.get("pending"):
        own = (state.get("config") or {}).get("total_steps") if isinstance(state.get("config"), dict) else None
        asked = own is not None and own != cfg.total_steps  # the command line's budget, not the run's
        raise FinishedRunError(rundir.shell_quote(run_dir), state["step"], cfg.total_steps, asked)


def with_saved_backends(overrides: list[str], saved: object) -> list[str]:
    """`overrides`, led by `logger=[<the run's backends>]` when they set `logger.<backend>.*` options without
    choosing the backends (`resume <run> logger.mlflow.tracking_uri=...`). Only the names of rlrun's own
    logger options are taken from the checkpoint."""
    keys = [override_key(o) for o in overrides]
    logger = saved.get("logger") if isinstance(saved, dict) else None
    if "logger" in keys or not any(k.startswith("logger.") for k in keys) or not isinstance(logger, dict):
        return overrides
    backends = [name for name in LOGGER_OPTIONS if logger.get(name) is not None]
    return [f"logger=[{','.join(backends)}]", *overrides]


def log_to(run_dir: Path) -> None:
    """Log as a Hydra job does: to stdout and, appended, to the run's train.log."""
    formatter = logging.Formatter(runlog.FILE_FORMAT)
    root = logging.getLogger()
    root.setLevel(logging.INFO)
    for handler in (logging.StreamHandler(sys.stdout), logging.FileHandler(run_dir / "train.log")):
        handler.setFormatter(formatter)
        root.addHandler(handler)


def check_state(cfg: DictConfig, state: dict[str, Any]) -> None:
    """The checkpoint's records that need no built parts (its format, PBT's state, the work a signal left
    owed, the stopped agents), checked as the trainer checks them when it loads them, but before anything is
    written: a CheckpointError naming what does not fit."""
    from rlrun.config.validate import check_explored
    from rlrun.training import trainer_state
    from rlrun.training.agents import agent_labels, make_pbt

    trainer_state.check_format(state)
    pbt = make_pbt(cfg, lambda key, found: check_explored(cfg, key, found))
    if pbt is not None:
        pbt.check_state(state.get("pbt"))
    trainer_state._pending(state.get("pending", []), pbt is not None)
    trainer_state._failed_agents(state.get("failed_agents", {}), len(agent_labels(cfg)))


def resume_in_place(
    run_dir: Path,
    overrides: list[str],
    record: Callable[[], None] | None = None,
    env_id: str | None = None,
) -> dict[str, Any]:
    """Train the run in `run_dir` on from its checkpoint (its summary); raises what `run_job` turns into
    exit codes. Every refusal comes before anything is written. Without `record`: write `.hydra/resume_<time>/`
    and log to the run's train.log; `record` writes its own record instead (a job of a continued sweep, run
    inside Hydra's app, has Hydra's record and logging, no overrides, and the `env_id` its command line
    repeats)."""
    if not run_dir.is_dir() or not rundir.holds_run(run_dir):
        raise ConfigError("resume", str(run_dir), "an existing run directory of rlrun")
    rundir.claim(run_dir)  # before reading anything: a concurrent resume is refused here
    state = load_state(run_dir)
    composed: Any = None  # without overrides nothing is composed (Hydra's app may be running: a sweep's job)
    if overrides:
        try:
            composed = preflight.task_config(preflight.compose(with_saved_backends(overrides, state["config"])))
        except ConfigError:
            unsafe = saved_config.first_unsafe(overrides)
            if unsafe is not None:  # refused by what it would change, not by how Hydra fails to compose it
                raise saved_config.unsafe_override(run_dir, unsafe) from None
            raise
        env_id = saved_config.command_line_env_id(overrides, composed)
    saved = saved_config.from_checkpoint(run_dir, state, env_id)
    cfg = saved_config.resumed(run_dir, saved, overrides, composed)
    check_unfinished(run_dir, state, cfg)
    preflight.check_job(cfg, {})
    check_state(cfg, state)
    agent_dirs.check(*dir_plan(cfg), run_dir, new=False)  # the agents' own dirs: refused before the record below
    if record is not None:
        record()
    else:
        where = run_dir / ".hydra" / datetime.now().strftime("resume_%Y-%m-%d_%H-%M-%S-%f")  # never reused
        where.mkdir(parents=True, exist_ok=True)
        rundir.write_text(where / "overrides.yaml", yaml.safe_dump(list(overrides)))
        rundir.write_text(where / "config.yaml", saved_config.to_yaml(cfg))
        log_to(run_dir)
    return train(cfg, run_dir, state)


def resume(run_dir: Path, overrides: list[str]) -> None:
    """Continue the run in `run_dir`; exits with the codes of `rlrun.cli` when it cannot."""
    run_job(lambda: resume_in_place(run_dir, overrides), run_dir)


def continue_sweep(sweep_dir: Path, overrides: list[str]) -> None:
    """Continue the sweep in `sweep_dir` (rlrun.sweeps.continuation): its finished jobs kept, its stopped ones
    resumed, the ones never started run; then its report, as the sweep command ends."""
    import runpy

    from rlrun.sweeps import batching, continuation

    try:
        argv = continuation.continue_argv(sweep_dir, overrides)
    except ConfigError as e:
        fail(str(e), Exit.BAD_INPUT)
    batching.continuing = sweep_dir.absolute()  # its own directory: not refused as a non-empty one
    signals.sweep_dir = sweep_dir
    sys.argv[1:] = [*argv, f"hydra.sweep.dir={preflight.hydra_quote(str(sweep_dir))}"]
    runpy.run_module("rlrun.train", run_name="__main__", alter_sys=True)  # the sweep's own command, then exit


def continued_job(job: Callable[[], dict[str, Any]], out_dir: Path, cfg: DictConfig) -> Callable[[], dict[str, Any]]:
    """A job of a sweep as `python -m rlrun.resume <sweep dir>` continues it (rlrun.sweeps.continuation; in
    another sweep, `job`): its summary kept (a finished or failed job is not rerun, nothing written), its
    checkpoint resumed (Hydra's record of the job in `.hydra/resume_<time>/`, written once the resume is
    accepted), or `job` run from an emptied directory (its record is its `.hydra/`). `cfg`: the job's config
    as Hydra composed it, for the record Hydra does not write during a continuation."""
    from hydra.core.hydra_config import HydraConfig

    from rlrun.sweeps.continuation import MARKER

    subdir = os.environ.get(MARKER)  # where a resumed job's record goes: .hydra/resume_<time>
    if not subdir:
        return job
    hydra = HydraConfig.get()
    if (out_dir / run_summary.FILE).exists():
        print(f"rlrun: {out_dir} has its summary: kept, not rerun", flush=True)  # not into its train.log
        return lambda: dict(run_summary.read(out_dir))
    if any((out_dir / name).exists() for name in (ckpt.LATEST, ckpt.PREVIOUS)):
        given = [override_value(str(o)) for o in hydra.overrides.task if str(o).startswith("env.id=")]
        # a `module:` env id is the one the command line repeated
        env_id = given[-1] if given else None
        return lambda: resume_in_place(out_dir, [], lambda: hydra_record(out_dir / subdir, cfg), env_id)
    for p in list(out_dir.iterdir()) if out_dir.is_dir() else []:  # what a start before any checkpoint left
        if p.name not in (rundir.LOCK_NAME, ".hydra"):
            shutil.rmtree(p) if p.is_dir() and not p.is_symlink() else p.unlink()
    hydra_record(out_dir / ".hydra", cfg)  # the job starts now
    return job


def hydra_record(where: Path, cfg: DictConfig) -> None:
    """The record Hydra writes into a job's `.hydra/` (config.yaml, hydra.yaml, overrides.yaml), written
    into `where` for a job of a continued sweep (which runs with `hydra.output_subdir=null`)."""
    from hydra.core.hydra_config import HydraConfig
    from omegaconf import OmegaConf

    hydra = HydraConfig.get()
    node = OmegaConf.to_container(hydra)  # unresolved, as Hydra writes it
    assert isinstance(node, dict)  # HydraConfig is a DictConfig
    node["output_subdir"] = ".hydra"  # as the job's first run recorded it
    where.mkdir(parents=True, exist_ok=True)
    rundir.write_text(where / "config.yaml", OmegaConf.to_yaml(cfg))
    rundir.write_text(where / "hydra.yaml", OmegaConf.to_yaml({"hydra": node}))
    rundir.write_text(where / "overrides.yaml", OmegaConf.to_yaml(hydra.overrides.task))


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    console.guard()  # a closed, full or broken stdout/stderr never fails the run
    if not argv or argv[0] in ("-h", "--help"):
        print(USAGE, file=sys.stdout if argv else sys.stderr)
        sys.exit(Exit.OK if argv else Exit.BAD_INPUT)
    signals.stop_on_signal()
    from rlrun.sweeps.continuation import is_sweep

    if is_sweep(Path(argv[0])):
        continue_sweep(Path(argv[0]), argv[1:])
        return
    resume(Path(argv[0]), argv[1:])


if __name__ == "__main__":
    process_exit.run_then_exit(main)
