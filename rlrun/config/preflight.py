"""The checks a command line passes before Hydra creates or writes any directory.

Hydra composes the config and writes `<run dir>/.hydra/` before the task function runs, and reports a
composition error with exit code 1. So `python -m rlrun.train` first composes every job of the command
here, with Hydra's own parser, sweeper expansion and compose API, and checks it the way a run would
(schema, values, the env's spaces, the device). A refused command exits 2 and leaves nothing behind.
Then the run directory is claimed: a new run's directory must be new or empty and is locked for the
run's life (`rlrun.storage.rundir`); a sweep's directory must be new or empty. The resolved directory is handed
to Hydra as an explicit override, so both mean the same directory.
"""

from __future__ import annotations

import argparse
import contextlib
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import gymnasium as gym
from hydra import compose as hydra_compose
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.types import RunMode
from omegaconf import DictConfig, OmegaConf, open_dict

from rlrun.config.appconfig import RLRUN_CONFIG, ConfigSource, initialized, memoized
from rlrun.config.hydra_adapter import BASIC_SWEEPER, args_parser, sweep_jobs
from rlrun.config.overrides import (
    integral,
    may_be_integral,
    override_key,
    override_value,
    unknown_key,
    unknown_option,
)
from rlrun.config.replay_memory import check_replay, stored_obs_itemsize
from rlrun.config.runnames import check_exp_name
from rlrun.config.schemas import register_configs
from rlrun.config.validate import validate
from rlrun.envs.pixels import check_ale, check_image_obs
from rlrun.errors import ConfigError
from rlrun.logs.sinks.reachable import check_backends
from rlrun.storage import rundir


@dataclass
class Plan:
    """What the command will do, once checked: the arguments for Hydra, or a run to resume."""

    hydra_argv: list[str]
    run_dir: Path | None = None  # a single run's directory (claimed), or the run to resume
    resume: Path | None = None
    resume_overrides: list[str] = field(default_factory=list)
    hydra_mode: RunMode | None = None  # the config's `hydra.mode` (None where the command line chooses)


def hydra_quote(value: str) -> str:
    """`value` as a quoted string of Hydra's override grammar (paths with spaces, `=`, quotes, non-ASCII)."""
    out = re.sub(r"(\\*)'", lambda m: m.group(1) * 2 + "\\'", value)
    out = re.sub(r"(\\+)$", lambda m: m.group(1) * 2, out)
    return f"'{out}'"


def one_line(error: BaseException) -> str:
    """A composition error of Hydra or OmegaConf, with its cause, as one line."""
    parts: list[str] = []
    cause: BaseException | None = error
    while cause is not None and len(parts) < 3:
        text = " ".join(line.strip() for line in str(cause).splitlines() if line.strip())
        text = re.sub(r"\s*(full_key:|Config search path:).*", "", text)
        if text and text not in parts:
            parts.append(text)
        cause = cause.__cause__
    return ": ".join(parts) or type(error).__name__


def compose(overrides: list[str], source: ConfigSource = RLRUN_CONFIG) -> DictConfig:
    """The config of one job, with its `hydra` node (ConfigError for anything Hydra refuses), composed from
    `source` (rlrun's own config, or the one `--config-name/-path/-dir` choose). Integral floats given to
    integer keys count as integers (`rlrun.config.overrides.integral`: `total_steps=1e5`)."""
    if any(may_be_integral(o) for o in overrides):
        overrides = integral_overrides(overrides, source)
    try:
        return _hydra_compose(overrides, source)
    except Exception as e:  # Hydra's and OmegaConf's composition errors of every kind
        if (option := unknown_option(e)) is not None:
            raise option from None
        message = one_line(e)
        unknown = unknown_key(message, overrides, lambda given: _hydra_compose(given, source))
        raise CompositionError(unknown or message) from None  # rlrun's own line for a key the config lacks


def _hydra_compose(overrides: list[str], source: ConfigSource) -> DictConfig:
    def composed() -> DictConfig:
        register_configs()
        with initialized(source):
            return hydra_compose(config_name=source.config_name, overrides=overrides, return_hydra_config=True)

    return memoized((tuple(overrides), source), composed)


def integral_overrides(overrides: list[str], source: ConfigSource) -> list[str]:
    """`overrides` with integral float literals of integer keys as integers, the keys' types read from the
    config the other overrides compose (their group choices included); unchanged if those do not compose."""
    with contextlib.suppress(Exception):  # as given, most compose (`algo.tau=1.0`); `total_steps=1e5` does not
        _hydra_compose(overrides, source)
        return overrides
    try:
        defaults = _hydra_compose([o for o in overrides if not may_be_integral(o)], source)
    except Exception:  # the error is reported when the whole command line is composed
        return overrides
    return integral(overrides, defaults)


class CompositionError(ConfigError):
    def __init__(self, message: str):
        ValueError.__init__(self, f"Invalid config: {message}")
        self.key, self.value, self.allowed = "", None, message


def job_overrides(overrides: list[str], sweeper: str) -> list[list[str]]:
    """Each job's overrides, as Hydra's basic sweeper will launch them. Other sweepers (Optuna) choose
    their jobs as they go: their base config is checked, and a bad trial fails alone."""
    try:
        parsed = OverridesParser.create().parse_overrides(overrides)
    except Exception as e:
        raise CompositionError(one_line(e)) from None
    if sweeper != BASIC_SWEEPER:
        return [[o.input_line for o in parsed if o.input_line is not None and not o.is_sweep_override()]]
    return sweep_jobs(parsed)


def task_config(cfg: DictConfig) -> DictConfig:
    """The run config without Hydra's own node."""
    task = OmegaConf.create(OmegaConf.to_container(cfg, resolve=False))
    assert isinstance(task, DictConfig)
    with open_dict(task):
        task.pop("hydra", None)
    return task


def check_job(task: DictConfig, probed: dict) -> None:
    """What `train` would refuse at its start: values, the env's spaces and pixels, the device, replay
    larger than the memory available (a replay of more than 1 GiB is announced on stderr)."""
    validate(task)
    from rlrun.training.device import resolve_device  # the builders only for a job that passed its checks

    pixels = task.network.encoder != "mlp"  # the device replay will live on, as `train` resolves it
    device = resolve_device("cpu" if task.device.type == "auto" and not pixels else task.device.type, pixels)
    check_backends(task.get("logger"), probed)  # a logging server that does not answer: refused now
    e = task.env
    key = ("env", e.id, e.action_bins, e.frame_stack, str(e.atari))
    if key not in probed:
        probed[key] = observation_space(task)
    line = replay_line(task, probed[key], device.type == "cpu")
    if line is not None and line not in probed:
        probed[line] = True
        print(line, file=sys.stderr)


def observation_space(task: DictConfig) -> gym.spaces.Box:
    """The observation space of the env as the run makes it, once its spaces and pixels are checked."""
    # the env factory and the builders only for the memory check of a job that will run
    from rlrun.envs.vector import check_spaces, env_spec
    from rlrun.training.build import make_eval_envs

    e = task.env
    check_ale(e.id, env_spec(e.id), e.atari)
    try:
        envs = make_eval_envs(task, 1)
    except ConfigError:  # a value rlrun's env code refuses names its own key (env.atari.fire_reset, ...)
        raise
    except Exception as err:  # a missing dependency, bad kwargs for this env
        raise ConfigError("env.id", e.id, f"an env that can be made with these settings ({one_line(err)})") from None
    try:
        check_spaces(envs, e.id)
        space = envs.single_observation_space
        assert isinstance(space, gym.spaces.Box)  # check_spaces refuses any other
        check_image_obs(e.id, space, e.frame_stack, task.network.encoder)
    finally:
        envs.close()
    return space


def replay_line(task: DictConfig, space: gym.spaces.Box, on_host: bool) -> str | None:
    """What replay will hold, as a line to print when it is large; ConfigError where it cannot fit."""
    # the algorithm registry only once a config is checked
    from rlrun.algos import algorithm

    if algorithm(task.algo).collector != "replay":
        return None
    agents = len(task.get("agents") or []) or task.seeds
    prioritized = str(task.buffer._target_).endswith("PrioritizedReplayBuffer")
    shape = tuple(space.shape)
    itemsize = stored_obs_itemsize(space.dtype)
    return check_replay(
        task.buffer.capacity, shape, task.env.frame_stack, task.env.num_envs, agents, prioritized, on_host, itemsize
    )


def plan(argv: list[str]) -> Plan | None:
    """Check the command line; claim its run directory. None: not a run (help, --cfg, ...), Hydra does it.
    Raises ConfigError or RunDirError (exit 2), OSError (exit 4)."""
    args = args_parser().parse_args(argv)
    if not _is_run(args):
        return None
    source = ConfigSource.from_args(args)  # the config Hydra will compose, whichever flags chose it
    try:
        source.search_path()
    except ValueError as e:
        raise CompositionError(one_line(e)) from None
    overrides = list(args.overrides)
    base = _compose_base(overrides, source, multirun=args.multirun)
    if args.multirun or base.hydra.mode == RunMode.MULTIRUN:
        check_hydra_not_swept(overrides)
        return _sweep_plan(argv, base, overrides, source)
    return _run_plan(argv, base, overrides)


def _is_run(args: argparse.Namespace) -> bool:
    """Whether Hydra's parsed `args` ask for a run (False: help, --cfg, --info, shell completion); refuses
    two modes at once and --experimental-rerun."""
    if sum(map(bool, (args.run, args.multirun, args.cfg, args.info is not None, args.shell_completion))) > 1:
        raise CompositionError(  # Hydra's own check is a ValueError traceback
            "only one of -m/--multirun, -r/--run, -c/--cfg, -i/--info and --shell-completion can be given"
        )
    if args.help or args.hydra_help or args.cfg or args.info or args.shell_completion:
        return False
    if args.experimental_rerun:  # Hydra would unpickle the file it names: code read from disk
        raise CompositionError(
            f"--experimental-rerun {args.experimental_rerun} is not supported (it loads a pickle, which can run "
            "code); continue a run with python -m rlrun.resume <run dir>"
        )
    return True


def _compose_base(overrides: list[str], source: ConfigSource, multirun: bool) -> DictConfig:
    """The command line's config (with -m, without its swept values); a resume= that cannot compose is
    refused with what to do instead."""
    try:
        return compose([o for o in overrides if not _is_sweep(o)] if multirun else overrides, source)
    except CompositionError as e:
        resumes = [override_value(o) for o in overrides if o.startswith("resume=")]
        from rlrun.config.saved import first_unsafe, unsafe_override  # gymnasium: only for a resume refused here

        if resumes and (unsafe := first_unsafe(overrides)) is not None:  # `pbt.fraction=0.9`: no pbt by default
            raise unsafe_override(Path(resumes[0]), unsafe) from None
        if resumes:  # a path the override grammar cannot spell
            raise CompositionError(
                f"{e.allowed}; to resume a run whose path has '=', spaces or quotes, use "
                f"{rundir.resume_command(Path(resumes[0]))}"
            ) from None
        raise


def _run_plan(argv: list[str], base: DictConfig, overrides: list[str]) -> Plan:
    """One run: a resume= continues that run in its own directory, without Hydra's app; a new run is
    checked and its directory claimed."""
    task = task_config(base)
    if OmegaConf.select(task, "resume") is not None:
        return Plan(
            [],
            run_dir=Path(task.resume),
            resume=Path(task.resume),
            resume_overrides=[o for o in overrides if not override_key(o).startswith(("resume", "hydra"))],
        )
    check_job(task, {})
    check_exp_name(task.exp_name)  # a new run's directory is named after it
    run_dir = Path(str(base.hydra.run.dir))
    rundir.check_new(run_dir)
    from rlrun.storage import agent_dirs  # imports torch: once the command is checked
    from rlrun.training.agents import dir_plan

    agent_dirs.check(*dir_plan(task), run_dir, new=True)
    rundir.claim(run_dir, new=True)
    return Plan(_pinned(argv, "hydra.run.dir", run_dir), run_dir=run_dir, hydra_mode=base.hydra.mode)


def _sweep_plan(argv: list[str], base: DictConfig, overrides: list[str], source: ConfigSource) -> Plan:
    """A sweep: its launcher, every job's config and its sweep directory checked."""
    from rlrun.sweeps.batching import check_launcher, check_sweep_dir  # imports torch: once the command is checked

    check_launcher(base.hydra.launcher)
    check_launcher_extra(base.hydra.launcher, base.hydra.runtime.choices.get("hydra/launcher"))
    probed: dict[Any, Any] = {}
    check_exp_name(task_config(base).exp_name)  # the sweep's directory is named after it
    for job in job_overrides(overrides, str(base.hydra.sweeper._target_)):
        check_job(task_config(compose(job, source)), probed)
    sweep_dir = Path(str(base.hydra.sweep.dir))
    check_sweep_dir(sweep_dir, base.hydra.launcher)
    return Plan(_pinned(argv, "hydra.sweep.dir", sweep_dir), hydra_mode=base.hydra.mode)


def check_hydra_not_swept(overrides: list[str]) -> None:
    """Refuse a sweep of a `hydra.*` key (Hydra's own two-line error, exit 1): for a sweeper's search space,
    name the override that gives it (`optimizer.lr=choice(...)`, as docs/sweeps.md shows)."""
    for text in overrides:
        try:
            o = OverridesParser.create().parse_override(text)
        except Exception:  # composing reports it
            continue
        if not (o.is_sweep_override() and o.is_hydra_override()):
            continue
        key, value = o.key_or_group, override_value(text)
        allowed = "one value (Hydra's own config is not swept)"
        params = "hydra.sweeper.params."
        if key.startswith(params):
            allowed += f"; a search space is given as an override of its key: '{key[len(params) :]}={value}'"
        raise ConfigError(key, value, allowed)


# The packages a launcher imports when the sweep launches, and the extra that installs each
LAUNCHER_PACKAGES = {"ray": ("Ray", "ray"), "submitit": ("submitit", "sweep")}


def check_launcher_extra(launcher: DictConfig, choice: str | None) -> None:
    """Refuse a launcher, or a backend of the batched one, whose package is not installed (naming the extra),
    where Hydra would end in a ModuleNotFoundError traceback once the sweep's directory is made."""
    import importlib.util

    target = str(launcher.get("_target_", ""))
    if target.startswith("hydra_plugins.rlrun_ray_launcher."):
        key, value, kind, package = "hydra/launcher", choice, "launcher", "ray"
    elif target.startswith("hydra_plugins.rlrun_batched_launcher.") and launcher.get("backend") in LAUNCHER_PACKAGES:
        key, value, kind, package = "hydra.launcher.backend", launcher.backend, "backend", launcher.backend
    else:
        return
    if importlib.util.find_spec(package) is None:
        name, extra = LAUNCHER_PACKAGES[package]
        install = f'pip install -e ".[{extra}]"'
        raise ConfigError(key, value, f"a {kind} whose package is installed: {name} is not; {install}")


def _pinned(argv: list[str], key: str, path: Path) -> list[str]:
    """`argv` with `key` set to the directory resolved here (Hydra would resolve `${now:...}` anew)."""
    return [a for a in argv if not a.startswith(key + "=")] + [f"{key}={hydra_quote(str(path))}"]


def _is_sweep(override: str) -> bool:
    try:
        return OverridesParser.create().parse_override(override).is_sweep_override()
    except Exception:
        return False
