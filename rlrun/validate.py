"""Value checks that types cannot express. They run before anything is built, trained or written."""

from __future__ import annotations

import dataclasses
import math
import typing
from collections.abc import Mapping
from typing import Any

from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from rlrun.config import ALGO_SCHEMAS, GROUP_TARGETS, DeviceConfig, EnvConfig, RunConfig, algo_kind
from rlrun.errors import ConfigError, UnknownKeyError


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
    kind = algo_kind(tree.get("algo"))
    _check(kind in ALGO_SCHEMAS, "algo.kind", kind, "one of " + ", ".join(k for k in ALGO_SCHEMAS if k != "dqn"))
    _walk(tree, RunConfig, "")


def _walk(node: Mapping, schema: type, prefix: str) -> None:

    fields = {f.name for f in dataclasses.fields(schema)}
    hints = typing.get_type_hints(schema)
    for key, value in node.items():
        path = f"{prefix}{key}"
        if key not in fields:
            raise UnknownKeyError(path, value, sorted(k for k in fields if not k.startswith("_")))
        if not prefix and key == "agents":  # per-agent mappings: rlrun.agents.check reads them
            continue
        sub = (
            GROUP_TARGETS[key][value["_target_"]] if not prefix and key in GROUP_TARGETS else _dataclass_in(hints[key])
        )
        if not prefix and key == "algo":  # DQN's or PQN's schema, by algo.kind
            sub = ALGO_SCHEMAS[algo_kind(value)]
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
    _one_of(cfg, "env.vectorization", ["auto", "sync", "async", "vector"])
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
    if cfg.env.atari is not None:
        _one_of(cfg, "env.atari.backend", ["gymnasium", "vector"])
        if cfg.env.atari.threads is not None:
            _positive(cfg, "env.atari.threads")

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
    _in_range(cfg, "network.num_quantiles", 0, math.inf, hi_open=True)
    _in_range(cfg, "network.tau_embedding_dim", 0, math.inf, hi_open=True)
    heads = {
        "num_atoms": n.num_atoms > 1,
        "num_quantiles": n.num_quantiles > 0,
        "tau_embedding_dim": n.tau_embedding_dim > 0,
    }
    chosen = [key for key, on in heads.items() if on]
    if len(chosen) > 1:
        raise ConfigError(
            f"network.{chosen[1]}",
            cfg_get(cfg, f"network.{chosen[1]}"),
            f"its off value with network.{chosen[0]} set (C51, QR-DQN and IQN are alternative heads)",
        )
    if n.num_quantiles > 0 or n.tau_embedding_dim > 0:
        _in_range(cfg, "algo.kappa", 0.0, math.inf, hi_open=True)
        for key in ("algo.iqn_taus", "algo.iqn_target_taus", "network.iqn_acting_taus"):
            _positive(cfg, key)
        _check(
            cfg.algo.loss == "quantile_huber",
            "algo.loss",
            cfg.algo.loss,
            "quantile_huber with a quantile network (network.num_quantiles or network.tau_embedding_dim > 0)",
        )
    elif n.num_atoms > 1:
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
            "one of huber, mse with a scalar network (cross_entropy is C51's, quantile_huber QR-DQN's and IQN's)",
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
    _one_of(cfg, "algo.loss", ["huber", "mse", "cross_entropy", "quantile_huber"])
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
    _validate_logger(cfg)
    _positive(cfg, "total_steps")
    _in_range(cfg, "seed", 0, 2**32 - 1)
    _positive(cfg, "seeds")
    if cfg.seeds > 1:
        _validate_batched(cfg)
    _validate_agents(cfg)
    _validate_cuda_graphs(cfg)
    if algo_kind(cfg.algo) == "pqn":
        _validate_pqn(cfg)


def _validate_pqn(cfg: DictConfig) -> None:
    """PQN (algo=pqn): rollouts that split into whole minibatches, and the parts it has no use for."""
    _one_of(cfg, "algo.kind", ["pqn"])  # choose the algorithm with algo=dqn|pqn, not algo.kind
    for key in ("algo.num_steps", "algo.update_epochs", "algo.num_minibatches"):
        _positive(cfg, key)
    _in_range(cfg, "algo.q_lambda", 0.0, 1.0)
    a, rollout = cfg.algo, cfg.algo.num_steps * cfg.env.num_envs
    _check(
        rollout % a.num_minibatches == 0,
        "algo.num_minibatches",
        a.num_minibatches,
        f"a divisor of algo.num_steps x env.num_envs = {rollout} with algo=pqn",
    )
    n = cfg.network
    for key, on in [
        ("network.num_atoms", n.num_atoms > 1),
        ("network.num_quantiles", n.get("num_quantiles", 0) > 0),
        ("network.tau_embedding_dim", n.get("tau_embedding_dim", 0) > 0),
        ("network.noisy", n.noisy),
    ]:
        if on:
            raise ConfigError(key, cfg_get(cfg, key), "its default with algo=pqn (a scalar Q-net: mlp, dueling, cnn)")
    for key, ok, allowed in [
        ("device.compile", not cfg.device.compile, "false with algo=pqn (its update is not compiled)"),
        ("device.cuda_graphs", not cfg.device.cuda_graphs, "false with algo=pqn (its update is not recorded)"),
        ("device.amp", cfg.device.amp != "fp16", "none or bf16 with algo=pqn"),
    ]:
        _check(ok, key, cfg_get(cfg, key), allowed)
    _check(
        cfg.buffer._target_ == "rlrun.replay.ReplayBuffer",
        "buffer",
        "per",
        "uniform (the default, unused) with algo=pqn: PQN learns from its rollouts, without replay",
    )


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


def _validate_agents(cfg: DictConfig) -> None:
    """An `agents` list (rlrun.agents): its keys, then each agent's config as the single run it is."""
    from rlrun import agents

    configs = agents.check(cfg)
    if not configs:
        return
    for key, ok, allowed in BATCHED_UNSUPPORTED:
        _check(ok(cfg), key, cfg_get(cfg, key), allowed.replace("seeds > 1", "with an agents list"))
    for k, agent in enumerate(configs):
        try:
            validate(agent)
        except ConfigError as e:
            raise ConfigError(f"agents[{k}].{e.key}", e.value, e.allowed) from None


def _validate_cuda_graphs(cfg: DictConfig) -> None:
    """What a recorded update (rlrun.graphs) cannot do: decide on the host after each update."""
    if not cfg.device.cuda_graphs:
        return
    skip = cfg.algo.on_nonfinite == "skip"
    _check(not skip, "algo.on_nonfinite", cfg.algo.on_nonfinite, "stop or off with device.cuda_graphs=true")
    _check(cfg.device.amp != "fp16", "device.amp", cfg.device.amp, "none or bf16 with device.cuda_graphs=true")


# Logging backends whose package is an optional extra of the same name.
LOGGER_EXTRAS = ("mlflow", "wandb")


def _validate_logger(cfg: DictConfig) -> None:
    """A chosen backend's package is installed; W&B's mode is one it knows."""
    import importlib.util

    logger = cfg.get("logger") or {}
    for name in LOGGER_EXTRAS:
        if logger.get(name) is not None and importlib.util.find_spec(name) is None:
            raise ConfigError("logger", name, f"a backend whose package is installed: pip install -e '.[{name}]'")
    if logger.get("wandb") is not None and logger["wandb"].get("mode") is not None:
        _one_of(cfg, "logger.wandb.mode", ["online", "offline", "disabled"])


def from_saved(saved: Any) -> DictConfig:
    """A config read from a run directory or a checkpoint, rebuilt on rlrun's own schemas: unknown keys
    and targets outside `GROUP_TARGETS` are refused and types are checked (`ConfigError`), keys missing
    from an older run get the schema's defaults."""
    check_schema(saved)
    if "logger" not in saved:  # a run from before the logger group logged to TensorBoard
        saved = {**saved, "logger": {"tensorboard": {}}}
    groups = {g: GROUP_TARGETS[g][saved[g]["_target_"]]() for g in GROUP_TARGETS}
    algo = ALGO_SCHEMAS[algo_kind(saved.get("algo"))]()
    schema = OmegaConf.structured(RunConfig(env=EnvConfig(), device=DeviceConfig(), algo=algo, **groups))
    try:
        merged = OmegaConf.merge(schema, saved)
    except OmegaConfBaseException as e:
        key = getattr(e, "full_key", None) or "config"
        raise ConfigError(key, getattr(e, "value", None), str(e).splitlines()[0]) from None
    assert isinstance(merged, DictConfig)
    return merged
