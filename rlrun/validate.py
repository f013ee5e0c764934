"""Value checks that types cannot express. They run before anything is built, trained or written."""

from __future__ import annotations

import dataclasses
import difflib
import math
import typing
from collections.abc import Mapping
from typing import Any

from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from rlrun.config import GROUP_TARGETS, DeviceConfig, EnvConfig, RunConfig


class ConfigError(ValueError):
    """A config value is out of range or inconsistent; the message names the key and what is allowed."""

    def __init__(self, key: str, value: Any, allowed: str):
        self.key, self.value, self.allowed = key, value, allowed
        super().__init__(f"Invalid config value {key}={value!r}: allowed {allowed}.")


class UnknownKeyError(ConfigError):
    """A key that no schema has (a typo such as `+algo.gama=0.5`, or anything a crafted file adds)."""

    def __init__(self, key: str, value: Any, known: list[str]):
        parent, _, name = key.rpartition(".")
        near = difflib.get_close_matches(name, known, n=1)
        hint = (
            f"did you mean {parent + '.' if parent else ''}{near[0]}?"
            if near
            else f"the keys here are {', '.join(known)}"
        )
        ValueError.__init__(self, f"Unknown config key {key} ({hint})")
        self.key, self.value, self.allowed = key, value, ", ".join(known)


def check_schema(cfg: Any) -> None:
    """Every key of `cfg` belongs to rlrun's schema, and every `_target_` names one of rlrun's own classes
    (`rlrun.config.TARGET_SCHEMAS`). This is what makes it safe to instantiate a config read from a run
    directory or a checkpoint: nothing in it can choose other code."""

    tree = (
        cfg
        if isinstance(cfg, Mapping) and not isinstance(cfg, DictConfig)
        else OmegaConf.to_container(cfg, resolve=False)
    )
    if not isinstance(tree, Mapping):
        raise ConfigError("config", type(tree).__name__, "a mapping of config groups")
    for group, targets in GROUP_TARGETS.items():
        node = tree.get(group)
        target = node.get("_target_") if isinstance(node, Mapping) else None
        _check(target in targets, f"{group}._target_", target, "one of " + ", ".join(targets))
    _walk(tree, RunConfig, "")


def _walk(node: Mapping, schema: type, prefix: str) -> None:

    fields = {f.name for f in dataclasses.fields(schema)}
    hints = typing.get_type_hints(schema)
    for key, value in node.items():
        path = f"{prefix}{key}"
        if key not in fields:
            raise UnknownKeyError(path, value, sorted(k for k in fields if not k.startswith("_")))
        sub = (
            GROUP_TARGETS[key][value["_target_"]] if not prefix and key in GROUP_TARGETS else _dataclass_in(hints[key])
        )
        if sub is not None and isinstance(value, Mapping):
            _walk(value, sub, path + ".")
        elif _holds_mapping(value):
            raise ConfigError(path, value, "plain values here, not mappings")


def _holds_mapping(value: Any) -> bool:
    if isinstance(value, Mapping):
        return True
    return isinstance(value, (list, tuple)) and any(_holds_mapping(v) for v in value)


def _dataclass_in(hint: Any) -> Any:
    """The dataclass in a field's type (`AtariConfig` in `Optional[AtariConfig]`), or None."""
    for t in (hint, *typing.get_args(hint)):
        if dataclasses.is_dataclass(t):
            return t
    return None


def _check(ok: bool, key: str, value: Any, allowed: str) -> None:
    if not ok:
        raise ConfigError(key, value, allowed)


def _positive(cfg: DictConfig, key: str) -> None:
    v = cfg_get(cfg, key)
    _check(v is not None and v > 0, key, v, "a number > 0")


def _one_of(cfg: DictConfig, key: str, choices) -> None:
    v = cfg_get(cfg, key)
    _check(v in choices, key, v, "one of " + ", ".join(map(str, choices)))


def _in_range(cfg: DictConfig, key: str, lo: float, hi: float, lo_open=False, hi_open=False) -> None:
    v = cfg_get(cfg, key)
    ok = v is not None and math.isfinite(v) and (v > lo if lo_open else v >= lo) and (v < hi if hi_open else v <= hi)
    if math.isinf(hi):
        allowed = f"a number {'>' if lo_open else '>='} {lo}"
    else:
        allowed = f"{'(' if lo_open else '['}{lo}, {hi}{')' if hi_open else ']'}"
    _check(ok, key, v, allowed)


def cfg_get(cfg: DictConfig, key: str) -> Any:
    node: Any = cfg
    for part in key.split("."):
        node = node[part]
    return node


def validate(cfg: DictConfig) -> None:
    from rlrun.networks import ACTIVATIONS, INITS

    check_schema(cfg)
    _one_of(cfg, "env.vectorization", ["sync", "async"])
    _positive(cfg, "env.num_envs")
    if cfg.env.max_episode_steps is not None:
        _positive(cfg, "env.max_episode_steps")
    _in_range(cfg, "env.reward_scale", 0.0, math.inf, lo_open=True, hi_open=True)
    if cfg.env.clip_reward is not None:
        _positive(cfg, "env.clip_reward")
    _in_range(cfg, "env.frame_stack", 0, math.inf, hi_open=True)
    _one_of(cfg, "network.encoder", ["mlp", "nature_cnn"])
    if cfg.env.frame_stack > 0:
        _check(
            cfg.network.encoder == "nature_cnn",
            "network.encoder",
            cfg.network.encoder,
            "nature_cnn for stacked pixel frames (env.frame_stack > 0): use network=cnn",
        )
    if cfg.network.encoder == "nature_cnn":
        _check(
            cfg.env.frame_stack > 0,
            "env.frame_stack",
            cfg.env.frame_stack,
            "> 0 with network.encoder=nature_cnn (the CNN reads stacked frames)",
        )
    if cfg.env.action_bins is not None:
        _check(cfg.env.action_bins >= 2, "env.action_bins", cfg.env.action_bins, "an integer >= 2, or null")

    _check(
        len(cfg.network.hidden_sizes) > 0 and all(h > 0 for h in cfg.network.hidden_sizes),
        "network.hidden_sizes",
        list(cfg.network.hidden_sizes),
        "a non-empty list of positive ints",
    )
    _one_of(cfg, "network.activation", sorted(ACTIVATIONS))
    _one_of(cfg, "network.init", sorted(INITS))
    _positive(cfg, "network.num_atoms")
    n = cfg.network
    if n.num_atoms > 1:
        _check(n.num_atoms >= 2 and n.v_min < n.v_max, "network.v_min", n.v_min, f"< network.v_max={n.v_max}")
        _check(
            cfg.algo.loss == "cross_entropy",
            "algo.loss",
            cfg.algo.loss,
            "cross_entropy with a distributional network (network.num_atoms > 1): C51 minimises the "
            "cross-entropy to the projected target distribution",
        )
    else:
        _check(
            cfg.algo.loss in ("huber", "mse"),
            "algo.loss",
            cfg.algo.loss,
            "one of huber, mse with a scalar network (cross_entropy needs network.num_atoms > 1)",
        )
    if n.noisy:
        _positive(cfg, "network.noisy_sigma0")

    _positive(cfg, "buffer.capacity")
    _positive(cfg, "buffer.n_step")
    if "alpha" in cfg.buffer:
        _in_range(cfg, "buffer.alpha", 0.0, 1.0)
        _in_range(cfg, "buffer.beta_start", 0.0, 1.0)
        _in_range(cfg, "buffer.priority_eps", 0.0, math.inf, lo_open=True, hi_open=True)
        if cfg.buffer.beta_anneal_steps is not None:
            _positive(cfg, "buffer.beta_anneal_steps")

    _in_range(cfg, "optimizer.lr", 0.0, math.inf, lo_open=True, hi_open=True)
    _one_of(cfg, "device.type", ["auto", "cpu", "cuda"])
    if cfg.device.threads is not None:
        _positive(cfg, "device.threads")
    _one_of(cfg, "device.amp", ["none", "bf16", "fp16"])
    _one_of(cfg, "device.compile_mode", ["default", "reduce-overhead", "max-autotune"])

    a = cfg.algo
    _in_range(cfg, "algo.gamma", 0.0, 1.0, lo_open=True)
    _positive(cfg, "algo.batch_size")
    _check(
        a.batch_size <= cfg.buffer.capacity,
        "algo.batch_size",
        a.batch_size,
        f"at most buffer.capacity={cfg.buffer.capacity}",
    )
    _in_range(cfg, "algo.learning_starts", 0, math.inf, hi_open=True)
    _positive(cfg, "algo.train_freq")
    _positive(cfg, "algo.gradient_steps")
    _positive(cfg, "algo.target_update_period")
    _in_range(cfg, "algo.tau", 0.0, 1.0, lo_open=True)
    _one_of(cfg, "algo.loss", ["huber", "mse", "cross_entropy"])
    if a.max_grad_norm is not None:
        _positive(cfg, "algo.max_grad_norm")
    _in_range(cfg, "algo.lr_end_factor", 0.0, 1.0)
    _one_of(cfg, "algo.on_nonfinite", ["stop", "skip", "off"])
    _in_range(cfg, "checkpoint.every", 0, math.inf, hi_open=True)

    _one_of(cfg, "exploration.schedule", ["linear", "exponential"])
    _in_range(cfg, "exploration.start", 0.0, 1.0)
    _in_range(cfg, "exploration.end", 0.0, 1.0)
    if cfg.exploration.schedule == "exponential":
        _check(
            cfg.exploration.end > 0,
            "exploration.end",
            cfg.exploration.end,
            "> 0 with exploration.schedule=exponential (a geometric decay never reaches 0)",
        )
    _in_range(cfg, "exploration.duration", 0, math.inf, hi_open=True)

    _in_range(cfg, "eval.interval", 0, math.inf, hi_open=True)
    _positive(cfg, "eval.episodes")
    _positive(cfg, "log.interval")
    _positive(cfg, "total_steps")
    _in_range(cfg, "seed", 0, 2**32 - 1)
    _positive(cfg, "seeds")
    if cfg.seeds > 1:
        _validate_batched(cfg)


# What K agents in one process (seeds > 1) cannot do, because they share one vector env or one update:
# refused before anything is built.
BATCHED_UNSUPPORTED = [
    (
        "env.normalize_reward",
        lambda c: not c.env.normalize_reward,
        "false when seeds > 1 (its running statistics would be shared by all agents)",
    ),
    (
        "algo.on_nonfinite",
        lambda c: c.algo.on_nonfinite != "skip",
        "stop or off when seeds > 1 (skipping would skip every agent's update)",
    ),
    (
        "device.amp",
        lambda c: c.device.amp != "fp16",
        "none or bf16 when seeds > 1 (fp16's loss scaler would skip every agent's step together)",
    ),
]


def _validate_batched(cfg: DictConfig) -> None:
    for key, ok, allowed in BATCHED_UNSUPPORTED:
        _check(ok(cfg), key, cfg_get(cfg, key), allowed)


def from_saved(saved: Any) -> DictConfig:
    """A config read from a run directory or a checkpoint, rebuilt on rlrun's own schemas: unknown keys
    and targets outside `GROUP_TARGETS` are refused and types are checked (`ConfigError`), keys missing
    from an older run get the schema's defaults."""
    check_schema(saved)
    groups = {g: GROUP_TARGETS[g][saved[g]["_target_"]]() for g in GROUP_TARGETS}
    schema = OmegaConf.structured(RunConfig(env=EnvConfig(), device=DeviceConfig(), **groups))
    try:
        merged = OmegaConf.merge(schema, saved)
    except OmegaConfBaseException as e:
        key = getattr(e, "full_key", None) or "config"
        raise ConfigError(key, getattr(e, "value", None), str(e).splitlines()[0]) from None
    assert isinstance(merged, DictConfig)
    return merged
