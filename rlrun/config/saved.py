"""Configs read from disk (a checkpoint's, a run's `.hydra/config.yaml`): what must hold before one is used.

`from_saved` rebuilds a config on rlrun's schemas, so no `_target_` read from disk chooses
code; it also rebuilds configs that came from the user's own command line. What a file may hold but a
command line may (the user chose it then), is refused here, for configs read from disk only:

- an interpolation (`${oc.env:SECRET}`, `${oc.create:...}`): resolving one reads the environment or builds
  nodes the schema never saw, and a resolved secret would be written into the new checkpoints;
- an `env.id` with a `module:` part (`helpers:CartPole-v1`): gymnasium imports that module to make the env,
  which runs whatever code sits on `sys.path` under that name. The user may confirm it by passing the same
  id on the command line (`env.id=helpers:CartPole-v1`).

And on resume the saved `logger.*` options (MLflow's tracking URI, W&B's mode, project, entity) never
choose where data goes: the run keeps its backends, with the options the resume command line gives.

The configs made from a saved one live here too, so that the entry points only pass them on: a resumed
run's (`resumed`: the saved config with the command line's safe overrides, `RESUME_SAFE`) and a played
run's (`playing_config`: no logging backend; for videos an env id that renders frames).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import gymnasium as gym
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from rlrun.algos import ALGORITHMS, algo_kind
from rlrun.config.moved import with_current_targets
from rlrun.config.overrides import override_key, override_value
from rlrun.config.schemas import (
    GROUP_TARGETS,
    DeviceConfig,
    EnvConfig,
    LoggerConfig,
    MLflowLoggerConfig,
    RunConfig,
    WandbLoggerConfig,
)
from rlrun.config.validate import check_schema, validate
from rlrun.envs.vector import env_spec
from rlrun.errors import ConfigError


def check(raw: object, env_id: str | None = None) -> None:
    """Refuse an interpolation anywhere in `raw` (naming its key) and a `module:` env id that `env_id`, the
    id given on the command line, does not repeat (a given `env_id` must be the saved one)."""
    _refuse_interpolations(raw, "")
    env = raw.get("env") if isinstance(raw, Mapping) else None
    saved_id = env.get("id") if isinstance(env, Mapping) else None
    if env_id is not None and env_id != saved_id:
        raise ConfigError("env.id", env_id, f"the saved id {saved_id!r}: a saved run's env cannot change")
    if isinstance(saved_id, str) and ":" in saved_id and saved_id != env_id:
        module = saved_id.partition(":")[0]
        raise ConfigError(
            "env.id",
            saved_id,
            f"a registered id without a module part when read from disk (making it imports the module "
            f"{module!r}); to run that module, pass env.id={saved_id} on the command line",
        )


def _refuse_interpolations(node: object, key: str) -> None:
    if isinstance(node, Mapping):
        for k, v in node.items():
            _refuse_interpolations(v, f"{key}.{k}" if key else str(k))
    elif isinstance(node, (list, tuple)):
        for i, v in enumerate(node):
            _refuse_interpolations(v, f"{key}[{i}]")
    elif isinstance(node, str) and "${" in node:
        raise ConfigError(key, node, "a plain value: interpolations in a saved config are never resolved")


def from_disk(raw: object, env_id: str | None = None) -> DictConfig:
    """A config read from a run directory or a checkpoint (plain values): `check`ed, then rebuilt on rlrun's
    schemas."""
    check(raw, env_id)
    return from_saved(raw)


def command_line_env_id(overrides: list[str], composed: DictConfig) -> str | None:
    """The env id the command line gives (`env.id=...`, as Hydra parsed it), or None."""
    given = any(override_key(o) == "env.id" for o in overrides)
    return str(composed.env.id) if given else None


# Logger options that choose where a backend sends its data: on resume they come from the command line.
LOCATIONS: dict[str, Any] = {
    "mlflow": (MLflowLoggerConfig(), ("tracking_uri", "experiment")),
    "wandb": (WandbLoggerConfig(), ("mode", "project", "entity")),
}


def from_saved(saved: object) -> DictConfig:
    """A config read from a run directory or a checkpoint, rebuilt on rlrun's own schemas: unknown keys
    and targets outside `GROUP_TARGETS` are refused and types are checked (`ConfigError`), keys missing
    from an older run get the schema's defaults; a class path from before the module move, today's (moved)."""
    saved = with_current_targets(saved)
    check_schema(saved)
    assert isinstance(saved, Mapping)  # check_schema refuses anything else
    if "logger" not in saved:  # a run from before the logger group logged to TensorBoard
        saved = {**saved, "logger": {"tensorboard": {}}}
    groups = {g: GROUP_TARGETS[g][saved[g]["_target_"]]() for g in GROUP_TARGETS}
    algo = ALGORITHMS[algo_kind(saved.get("algo"))].schema()
    schema = OmegaConf.structured(RunConfig(env=EnvConfig(), device=DeviceConfig(), algo=algo, **groups))
    try:
        merged = OmegaConf.merge(schema, saved)
    except OmegaConfBaseException as e:
        key = getattr(e, "full_key", None) or "config"
        raise ConfigError(key, getattr(e, "value", None), str(e).splitlines()[0]) from None
    assert isinstance(merged, DictConfig)
    return merged


def rebuilt(saved: object) -> dict:
    """A saved config as plain values, rebuilt on today's schemas (`from_saved`): keys added since filled in."""
    return OmegaConf.to_container(from_saved(saved))  # type: ignore[return-value]


# Keys a resumed run may change: they do not change the experiment, only its length and reporting.
RESUME_SAFE = ("total_steps", "stop_on_solve", "objective", "log", "eval", "checkpoint", "device", "logger", "resume")


def resumed(run_dir: Path, saved: DictConfig, overrides: list[str], composed: DictConfig) -> DictConfig:
    """The saved config with the safe overrides of this command line applied; any other override that
    would change the experiment is refused. Where the run logs comes from this command line, never from
    the saved config's `logger.*` options: every chosen backend's `LOCATIONS` start at their defaults (the run
    logs to its own directory, or where `$MLFLOW_TRACKING_URI` / a `logger.*` override says)."""
    cfg = saved.copy()
    for backend, (defaults, keys) in LOCATIONS.items():
        node = cfg.logger.get(backend)
        if node is not None:
            for key in keys:
                node[key] = getattr(defaults, key)
    for override in overrides:
        key = override_key(override)
        top = key.split(".")[0].split("/")[0]
        if top in RESUME_SAFE:
            if top != "resume":  # a group (logger=[...]) is merged onto its typed node, a value replaced
                value = OmegaConf.select(composed, key)
                OmegaConf.update(cfg, key, value, merge=isinstance(value, DictConfig))
        elif (typed := OmegaConf.select(composed, key)) != (kept := OmegaConf.select(cfg, key)):
            raise unsafe_override(run_dir, override, typed, kept)
    return cfg


def unsafe_override(run_dir: Path, override: str, typed: object = None, saved: object = None) -> ConfigError:
    """The refusal of an override that would change a resumed run's experiment; `typed` and `saved`: the
    key's value as composed and as saved, where known (None: the override as typed, no saved value named)."""
    known = saved is not None and not isinstance(saved, DictConfig)
    return ConfigError(
        override_key(override),
        override_value(override) if typed is None or isinstance(typed, DictConfig) else typed,
        f"only the saved value{f' {saved!r}' if known else ''} when resuming {run_dir}, as it "
        f"changes the experiment (a resume may change {', '.join(RESUME_SAFE[:-1])})",
    )


def first_unsafe(overrides: list[str]) -> str | None:
    """The first override of a key a resume may not change (outside `RESUME_SAFE`; Hydra's own and `env.id`,
    which may confirm the saved one, aside), or None: to blame where the overrides do not compose on the default config
    (`pbt.fraction=0.9` where the default has no `pbt`)."""
    for override in overrides:
        key = override_key(override)
        if key.split(".")[0].split("/")[0] not in (*RESUME_SAFE, "hydra") and key != "env.id":
            return override
    return None


def from_checkpoint(run_dir: Path, state: dict[str, Any], env_id: str | None) -> DictConfig:
    """A checkpoint's config, checked and rebuilt on rlrun's schemas (`from_disk`); a ConfigError names `resume`."""
    try:
        return from_disk(state["config"], env_id)
    except ConfigError as e:
        raise ConfigError("resume", str(run_dir), f"a checkpoint whose config rlrun accepts ({e})") from None


def to_yaml(cfg: DictConfig) -> str:
    """The config as YAML, for modules that do not handle configs themselves (tests/unit/test_architecture.py)."""
    return OmegaConf.to_yaml(cfg)


def playing_config(cfg: DictConfig, video: bool = False) -> DictConfig:
    """A copy of `cfg`, validated, to play a saved run with: no logging backend (none has to be installed to
    play a trained agent); with `video`, an env id that renders frames (rgb_array): the same env registered
    again under `rlrun_video/<id>` with render_mode set, so the evaluation envs are made as always
    (build.make_eval_envs)."""
    cfg = cfg.copy()
    cfg.logger = OmegaConf.structured(LoggerConfig)
    validate(cfg)
    if not video:
        return cfg
    spec = env_spec(cfg.env.id)
    video_id = f"rlrun_video/{spec.id.replace('/', '-')}"
    if video_id not in gym.registry:
        gym.registry[video_id] = dataclasses.replace(
            spec, id=video_id, kwargs={**spec.kwargs, "render_mode": "rgb_array"}
        )
    cfg.env.id = video_id
    return cfg
