"""`python -m rlrun.train [overrides]`: the command line around `rlrun.run.train`.

`main` checks the command before Hydra writes anything (`rlrun.config.preflight`), then hands it to the Hydra app
`hydra_main`, a thin wrapper that calls `train` and returns the objective sweepers optimise. Everything that
can go wrong becomes one line on stderr and an exit code (`rlrun.errors.fail`, `rlrun.training.jobs`).

Nothing here imports torch until a config is validated (the algorithms' modules under rlrun/algos import it
only where they build a learner), so `--help` is quick. `--help` is rlrun's own (`print_help`): the groups
with their options, and every key of the composed config with its value and a one-line description read
from the comments of its schema (rlrun/config/schemas.py, and each algorithm's in rlrun/algos/).
"""

from __future__ import annotations

import dataclasses
import inspect
import io
import sys
import tokenize
import typing
from collections.abc import Mapping
from contextlib import nullcontext
from importlib.resources import files
from pathlib import Path
from typing import Any

import hydra
import yaml
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import DictConfig, ListConfig, OmegaConf

from rlrun import console
from rlrun.config import preflight, schemas as config
from rlrun.config.appconfig import APP_CONFIG_NAME, APP_CONFIG_PATH, ConfigSource, composed_once
from rlrun.config.argv import given_overrides, normalized_argv
from rlrun.config.hydra_adapter import args_parser, mode_known
from rlrun.config.overrides import given_twice, group_options
from rlrun.config.schemas import register_configs
from rlrun.config.validate import dataclass_in
from rlrun.errors import ConfigError, Exit, fail
from rlrun.storage import rundir
from rlrun.storage.summary import objective
from rlrun.training import signals
from rlrun.training.jobs import run_job
from rlrun.version import __version__


@hydra.main(version_base="1.3", config_path=APP_CONFIG_PATH, config_name=APP_CONFIG_NAME)
def hydra_main(cfg: DictConfig) -> float | None:
    """Returns the objective that sweepers (Optuna) optimise: the final 100-episode mean training return, or
    what the config's `objective` names (rlrun.storage.summary.objective)."""
    # the run's machinery (torch, envs) only once a job runs, not for errors and --help
    from rlrun.config import saved
    from rlrun.resume import check_unfinished, continued_job, load_checkpoint
    from rlrun.run import train

    hydra_cfg = HydraConfig.get()
    out_dir = Path(hydra_cfg.runtime.output_dir)
    sweep_job = hydra_cfg.job.num if hydra_cfg.mode == RunMode.MULTIRUN else None

    def job() -> dict[str, Any]:
        if cfg.resume is not None:  # a sweep over resumed runs: each continues in its own directory
            run_dir, overrides = Path(cfg.resume), list(hydra_cfg.overrides.task)
            found, state = load_checkpoint(run_dir, saved.command_line_env_id(overrides, cfg))
            resumed = saved.resumed(run_dir, found, overrides, cfg)
            check_unfinished(run_dir, state, resumed)
            return train(resumed, run_dir, state)
        return train(cfg, out_dir)

    if sweep_job is not None:  # a job of a sweep `python -m rlrun.resume <sweep dir>` continues
        job = continued_job(job, out_dir, cfg)
    return objective(run_job(job, out_dir, sweep_job), cfg.objective)


def main() -> None:
    """Entry point: check the command (nothing is written for a refused one), then run it."""
    console.guard()  # a closed, full or broken stdout/stderr never fails the run
    signals.stop_on_signal()
    if "--version" in sys.argv[1:]:  # rlrun's, with Hydra's (Hydra's own flag would print only its version)
        print(f"rlrun {__version__} (Hydra {hydra.__version__})")
        return
    with composed_once():  # the checks read the command line more than once: composed once
        args = sys.argv[1:] = normalized_argv(sys.argv[1:])  # total_steps=1e5: an integer
        if (twice := given_twice(given_overrides(args))) is not None:  # Hydra would keep the last silently
            fail(str(preflight.CompositionError(twice)), Exit.BAD_INPUT)
        if "--help" in args or "-h" in args:
            try:
                print_help(args)
            except ConfigError as e:
                fail(str(e), Exit.BAD_INPUT)
            return  # `--help | head`: the guarded console drops what the reader left
        try:
            plan = preflight.plan(args)
            if plan is None:
                check_shown_config(args)
        except (ConfigError, rundir.RunDirError) as e:
            fail(str(e), Exit.BAD_INPUT)
        except OSError as e:
            fail(
                f"cannot create the run directory ({e}); choose another with hydra.run.dir=... "
                "(or hydra.sweep.dir=... for -m)",
                Exit.CANNOT_WRITE,
            )
    if plan is not None and plan.resume is not None:
        from rlrun.resume import resume  # as in hydra_main: the run's machinery only once a job runs

        resume(plan.resume, plan.resume_overrides)
        return
    if plan is not None:
        signals.in_sweep = plan.run_dir is None
        sys.argv[1:] = plan.hydra_argv

    register_configs()  # the schemas Hydra composes with (`--cfg` and the like skip the preflight)
    with mode_known(plan.hydra_mode) if plan is not None else nullcontext():  # the preflight read it
        hydra_main()


def check_shown_config(argv: list[str]) -> None:
    """`--cfg` and `--info` show the config the overrides compose: one that does not compose is refused as a
    run's is (ConfigError: one line, exit 2), not with Hydra's many-line error and exit 1."""
    args = args_parser().parse_args(argv)
    if args.cfg or args.info:
        preflight.compose(list(args.overrides), ConfigSource.from_args(args))


# --- --help -------------------------------------------------------------------------------------------

HELP_HEADER = """usage: python -m rlrun.train [group=option ...] [key=value ...]   (-m: a sweep, e.g. seed=0,1,2)
       python -m rlrun.train [overrides] --help     this help, for the config those overrides compose
       python -m rlrun.train [overrides] --cfg job  the composed config;  --hydra-help: Hydra's own options

== Config groups (group=option; logger=[tensorboard,mlflow] chooses several) =="""
COMMENT_COLUMN = 44
# Hydra's keys in a group that builds an object (network, buffer, optimizer): set by the option chosen.
HYDRA_KEYS = {
    "_target_": "the class this group builds (set by the option)",
    "_partial_": "built later, with the network's parameters",
}


def print_help(argv: list[str]) -> None:
    """The help for the config that `argv` composes (its overrides, and --config-name/-path/-dir)."""
    args = args_parser().parse_args(argv)
    cfg = preflight.task_config(preflight.compose(args.overrides, ConfigSource.from_args(args)))
    lines = [HELP_HEADER]
    groups = config_groups()
    specializations = groups.pop("env_network", [])
    lines += [f"{group}: {', '.join(options)}" for group, options in groups.items()]
    if specializations:  # chosen by Hydra from env and network (conf/config.yaml), not by the user
        lines.append(f"(applied with their env and network: {', '.join(specializations)})")
    lines += ["", "== Config (key: value  # meaning; set any key with key=value) =="]
    lines += config_lines(cfg)
    print("\n".join(lines))


def config_groups() -> dict[str, list[str]]:
    """Each config group of rlrun.conf (Hydra's own `hydra/` aside) and its options."""
    groups = {}
    for entry in sorted(files("rlrun.conf").iterdir(), key=lambda e: e.name):
        if entry.is_dir() and entry.name not in ("hydra", "__pycache__"):
            options = group_options(entry.name)
            if options:
                groups[entry.name] = options
    return groups


def config_lines(cfg: Mapping[str, object], schema: type | None = None, indent: str = "") -> list[str]:
    """`key: value  # description` for every key of `cfg`, nested groups indented."""
    schema = schema or config.RunConfig
    docs, hints = field_docs(schema), typing.get_type_hints(schema)
    lines = []
    for key, value in cfg.items():
        doc = docs.get(key) or HYDRA_KEYS.get(key)
        if isinstance(value, DictConfig) and len(value):
            sub = dataclass_in(hints.get(key)) or _matching_schema(value)
            lines.append(_with_comment(f"{indent}{key}:", doc or _class_doc(sub)))
            lines += config_lines(value, sub, indent + "  ")
        else:
            doc = doc or _class_doc(dataclass_in(hints.get(key)))  # logger backends: their schema's docstring
            plain = OmegaConf.to_container(value) if isinstance(value, (DictConfig, ListConfig)) else value
            text = yaml.safe_dump(plain, default_flow_style=True, width=10_000).split("\n")[0]
            lines.append(_with_comment(f"{indent}{key}: {text}", doc))
    return lines


def _with_comment(line: str, doc: str | None) -> str:
    return line if not doc else f"{line:<{COMMENT_COLUMN}}  # {doc}"


def field_docs(schema: type) -> dict[str, str]:
    """A dataclass's fields and their comments in its source: the comment on the field's line, else the
    comment lines just above it. Inherited fields keep their base class's comment unless overridden."""
    docs: dict[str, str] = {}
    for cls in reversed(schema.__mro__):
        if not dataclasses.is_dataclass(cls):
            continue
        names = {f.name for f in dataclasses.fields(cls)}
        source = inspect.getsource(cls)
        comments = {
            tok.start[0]: tok.string.lstrip("#").strip()
            for tok in tokenize.generate_tokens(io.StringIO(source).readline)
            if tok.type == tokenize.COMMENT
        }
        above: list[str] = []
        for number, line in enumerate(source.splitlines(), start=1):
            stripped = line.strip()
            if stripped.startswith("#"):
                above.append(comments.get(number, ""))
                continue
            name = stripped.split(":", 1)[0]
            if ":" in stripped and name in names and name.isidentifier():
                doc = comments.get(number) or " ".join(above)
                if doc:
                    docs[name] = doc
            above = []
    return docs


def _class_doc(schema: type | None) -> str | None:
    """The first line of a schema's own docstring (dataclasses without one get their signature)."""
    doc = None if schema is None else schema.__dict__.get("__doc__")
    if not doc or doc.startswith(schema.__name__ + "("):  # type: ignore[union-attr]
        return None
    return doc.strip().splitlines()[0]


def _matching_schema(node: DictConfig) -> type | None:
    """The schema of a group whose field is typed `Any` (buffer, optimizer, algo): the dataclass of
    rlrun.config.schemas, or an algorithm's (rlrun.algos), whose fields are exactly the node's keys."""
    # the algorithm registry only for --help
    from rlrun.algos import ALGORITHMS

    keys = set(node.keys())
    ours = [c for c in vars(config).values() if isinstance(c, type) and c.__module__ == config.__name__]
    for cls in [*ours, *(algo.schema for algo in ALGORITHMS.values())]:
        if dataclasses.is_dataclass(cls) and {f.name for f in dataclasses.fields(cls)} == keys:
            return cls
    return None
