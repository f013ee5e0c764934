"""Value checks that types cannot express. They run before anything is built, trained or written."""

from __future__ import annotations

import dataclasses
import importlib.util
import math
import typing
from collections.abc import Mapping
from typing import Any

from omegaconf import DictConfig, ListConfig, OmegaConf

from rlrun.algos import ALGORITHMS, algo_kind, algorithm
from rlrun.config import pbt
from rlrun.config.checks import cfg_get, check, in_range, one_of, positive
from rlrun.config.schemas import GROUP_TARGETS, RunConfig
from rlrun.errors import ConfigError, UnknownKeyError
from rlrun.storage.summary import OBJECTIVES


def check_schema(cfg: object) -> None:
    """Every key of `cfg` belongs to rlrun's schema, and every `_target_` names one of rlrun's own classes
    (`rlrun.config.schemas.GROUP_TARGETS`). This is what makes it safe to instantiate a config read from a run
    directory or a checkpoint: nothing in it can choose other code."""
    tree = OmegaConf.to_container(cfg, resolve=False) if isinstance(cfg, (DictConfig, ListConfig)) else cfg
    if not isinstance(tree, Mapping):
        raise ConfigError("config", type(tree).__name__, "a mapping of config groups")
    for group, targets in GROUP_TARGETS.items():
        node = tree.get(group)
        target = node.get("_target_") if isinstance(node, Mapping) else None
        check(target in targets, f"{group}._target_", target, "one of " + ", ".join(targets))
    kind = algo_kind(tree.get("algo"))
    check(kind in ALGORITHMS, "algo.kind", kind, "one of " + ", ".join(k for k in ALGORITHMS if k != "dqn"))
    _walk(tree, RunConfig, "")


def _walk(node: Mapping, schema: type, prefix: str) -> None:
    fields = {f.name for f in dataclasses.fields(schema)}
    hints = typing.get_type_hints(schema)
    for key, value in node.items():
        path = f"{prefix}{key}"
        if key not in fields:
            raise UnknownKeyError(path, value, sorted(k for k in fields if not k.startswith("_")))
        if not prefix and key == "agents":  # per-agent mappings: rlrun.training.agents.check reads them
            continue
        sub = GROUP_TARGETS[key][value["_target_"]] if not prefix and key in GROUP_TARGETS else dataclass_in(hints[key])
        if not prefix and key == "algo":  # DQN's or PQN's schema, by algo.kind
            sub = ALGORITHMS[algo_kind(value)].schema
        if sub is not None and isinstance(value, Mapping):
            _walk(value, sub, path + ".")
        elif _holds_mapping(value):
            raise ConfigError(path, value, "plain values here, not mappings")


def _holds_mapping(value: object) -> bool:
    return isinstance(value, Mapping) or (isinstance(value, (list, tuple)) and any(map(_holds_mapping, value)))


def dataclass_in(hint: object) -> type | None:
    """The dataclass in a field's type (`AtariConfig` in `Optional[AtariConfig]`), or None."""
    for t in (hint, *typing.get_args(hint)):
        if isinstance(t, type) and dataclasses.is_dataclass(t):
            return t
    return None


def validate(cfg: DictConfig) -> None:
    """Every key of the run config in its schema and every value in range, group by group, before anything is
    built or written; the first violation is a ConfigError naming the key and what is allowed."""
    check_schema(cfg)
    for rules in (_env, _network, _buffer, _optimizer_and_device, _algo, _exploration, _run):
        rules(cfg)


def _env(cfg: DictConfig) -> None:
    """The env group: vectorization, sizes, reward shaping, pixels and the network's encoder for them."""
    one_of(cfg, "env.vectorization", ["auto", "sync", "async", "vector"])
    positive(cfg, "env.num_envs")
    positive(cfg, "env.max_episode_steps", nullable=True)
    in_range(cfg, "env.reward_scale", 0.0, math.inf, lo_open=True, hi_open=True)
    positive(cfg, "env.clip_reward", nullable=True)
    in_range(cfg, "env.frame_stack", 0, math.inf, hi_open=True)
    one_of(cfg, "network.encoder", ["mlp", "nature_cnn", "der_cnn", "minatar_cnn"])
    frame_encoders = ("nature_cnn", "der_cnn")  # rlrun.nets.networks.FRAME_ENCODERS (torch: not imported here)
    if cfg.env.frame_stack > 0:
        check(
            cfg.network.encoder in frame_encoders,
            "network.encoder",
            cfg.network.encoder,
            "nature_cnn or der_cnn for stacked pixel frames (env.frame_stack > 0): use network=cnn or network=der",
        )
    if cfg.network.encoder in frame_encoders:
        check(
            cfg.env.frame_stack > 0,
            "env.frame_stack",
            cfg.env.frame_stack,
            f"> 0 with network.encoder={cfg.network.encoder} (the CNN reads stacked frames)",
        )
    if cfg.env.action_bins is not None:
        check(cfg.env.action_bins >= 2, "env.action_bins", cfg.env.action_bins, "an integer >= 2, or null")
    if cfg.env.atari is not None:
        one_of(cfg, "env.atari.backend", ["gymnasium", "vector"])
        positive(cfg, "env.atari.threads", nullable=True)
        if cfg.env.atari.repeat_action_probability is not None:
            in_range(cfg, "env.atari.repeat_action_probability", 0.0, 1.0)


def _network(cfg: DictConfig) -> None:
    """The network group (the head's own rules are the algorithm's: rlrun.algos)."""
    from rlrun.nets.networks import ACTIVATIONS, INITS  # torch: imported here, so --help never imports it

    check(
        len(cfg.network.hidden_sizes) > 0 and all(h > 0 for h in cfg.network.hidden_sizes),
        "network.hidden_sizes",
        list(cfg.network.hidden_sizes),
        "a non-empty list of positive ints",
    )
    one_of(cfg, "network.activation", sorted(ACTIVATIONS))
    one_of(cfg, "network.init", sorted(INITS))
    positive(cfg, "network.num_atoms")
    in_range(cfg, "network.num_quantiles", 0, math.inf, hi_open=True)
    in_range(cfg, "network.tau_embedding_dim", 0, math.inf, hi_open=True)
    algorithm(cfg.algo).check(cfg)  # the algorithm's own rules (rlrun.algos)
    if cfg.network.noisy:
        positive(cfg, "network.noisy_sigma0")
    if cfg.network.conv_layer_norm:
        check(cfg.network.encoder != "mlp", "network.conv_layer_norm", "true", "false with network.encoder=mlp")


def _buffer(cfg: DictConfig) -> None:
    """The buffer group (PER's exponents where it is chosen)."""
    positive(cfg, "buffer.capacity")
    positive(cfg, "buffer.n_step")
    one_of(cfg, "buffer.augment", ["none", "random_shift"])
    if cfg.buffer.augment != "none":  # random_shift shifts images: a conv encoder's pixel observations
        positive(cfg, "buffer.augment_pad")
        check(cfg.network.encoder != "mlp", "buffer.augment", cfg.buffer.augment, "none with network.encoder=mlp")
    in_range(cfg, "buffer.augment_intensity", 0.0, 0.5)
    if cfg.buffer.augment_intensity > 0:
        check(
            cfg.buffer.augment != "none",
            "buffer.augment_intensity",
            cfg.buffer.augment_intensity,
            "0 with buffer.augment=none",
        )
    if "alpha" in cfg.buffer:
        in_range(cfg, "buffer.alpha", 0.0, 1.0)
        in_range(cfg, "buffer.beta_start", 0.0, 1.0)
        in_range(cfg, "buffer.priority_eps", 0.0, math.inf, lo_open=True, hi_open=True)
        positive(cfg, "buffer.beta_anneal_steps", nullable=True)


def _optimizer_and_device(cfg: DictConfig) -> None:
    """The optimizer's learning rate and the device group."""
    in_range(cfg, "optimizer.lr", 0.0, math.inf, lo_open=True, hi_open=True)
    one_of(cfg, "device.type", ["auto", "cpu", "cuda"])
    positive(cfg, "device.threads", nullable=True)
    one_of(cfg, "device.amp", ["none", "bf16", "fp16"])
    one_of(cfg, "device.compile_mode", ["default", "reduce-overhead", "max-autotune"])


def _algo(cfg: DictConfig) -> None:
    """The keys every algorithm's schema shares (rlrun.algos.dqn.AlgoConfig) and checkpointing."""
    a = cfg.algo
    in_range(cfg, "algo.gamma", 0.0, 1.0, lo_open=True)
    positive(cfg, "algo.batch_size")
    check(
        a.batch_size <= cfg.buffer.capacity,
        "algo.batch_size",
        a.batch_size,
        f"at most buffer.capacity={cfg.buffer.capacity}",
    )
    in_range(cfg, "algo.learning_starts", 0, math.inf, hi_open=True)
    positive(cfg, "algo.train_freq")
    positive(cfg, "algo.gradient_steps")
    positive(cfg, "algo.target_update_period")
    in_range(cfg, "algo.tau", 0.0, 1.0, lo_open=True)
    one_of(cfg, "algo.loss", ["huber", "mse", "cross_entropy", "quantile_huber"])
    positive(cfg, "algo.max_grad_norm", nullable=True)
    in_range(cfg, "algo.lr_end_factor", 0.0, 1.0)
    one_of(cfg, "algo.on_nonfinite", ["stop", "skip", "off"])
    in_range(cfg, "checkpoint.every", 0, math.inf, hi_open=True)


def _exploration(cfg: DictConfig) -> None:
    """Epsilon's schedule."""
    one_of(cfg, "exploration.schedule", ["linear", "exponential"])
    in_range(cfg, "exploration.start", 0.0, 1.0)
    in_range(cfg, "exploration.end", 0.0, 1.0)
    if cfg.exploration.schedule == "exponential":
        check(
            cfg.exploration.end > 0,
            "exploration.end",
            cfg.exploration.end,
            "> 0 with exploration.schedule=exponential (a geometric decay never reaches 0)",
        )
    in_range(cfg, "exploration.duration", 0, math.inf, hi_open=True)


def _run(cfg: DictConfig) -> None:
    """Evaluation, logging, budget, seeds and what a batched run or recorded updates allow."""
    in_range(cfg, "eval.interval", 0, math.inf, hi_open=True)
    positive(cfg, "eval.episodes")
    positive(cfg, "eval.num_envs", nullable=True)
    in_range(cfg, "eval.epsilon", 0.0, 1.0)
    positive(cfg, "log.interval")
    in_range(cfg, "log.progress_interval", 0.0, math.inf, hi_open=True)
    _validate_logger(cfg)
    positive(cfg, "total_steps")
    one_of(cfg, "objective", list(OBJECTIVES))
    in_range(cfg, "seed", 0, 2**32 - 1)
    positive(cfg, "seeds")
    if cfg.seed + cfg.seeds - 1 > 2**32 - 1:  # the agents' seeds are seed ... seed + seeds - 1: numpy's range
        allowed = f"at most {2**32 - cfg.seeds} with seeds={cfg.seeds} (each agent's seed < 2**32)"
        raise ConfigError("seed", cfg.seed, allowed)
    if cfg.seeds > 1:
        _validate_batched(cfg, "seeds > 1")
    _validate_agents(cfg)
    _validate_cuda_graphs(cfg)
    if cfg.get("pbt") is not None:  # population-based training: its rules read plain values
        agents = len(cfg.agents) if cfg.agents else cfg.seeds
        plain: dict[str, Any] = OmegaConf.to_container(cfg.pbt, resolve=True)  # type: ignore[assignment]
        algo = algorithm(cfg.algo)
        pbt.check(plain, agents, algo.name, algo.batchable, cfg.eval.interval > 0, cfg.device.cuda_graphs)
        for key, b in pbt.flat_space(plain["space"]).items():  # every value explored, at any round
            try:
                check_explored(cfg, key, [b["low"], b["high"]])
            except ConfigError as e:
                allowed = f"a range in {e.key}'s {e.allowed}"
                raise ConfigError(f"pbt.space.{key}", [b["low"], b["high"]], allowed) from None


def check_explored(cfg: DictConfig, key: str, values: list[float]) -> None:
    """Each of `values` as `key`'s value in `cfg`, as a single run, passes every rule (else a ConfigError naming
    the key); explored keys' rules are intervals, so the least and greatest value stand for all."""
    for value in {min(values), max(values)}:
        probe = OmegaConf.merge(cfg, {"pbt": None, "agents": [], "seeds": 1})
        assert isinstance(probe, DictConfig)
        OmegaConf.update(probe, key, value, merge=False)
        validate(probe)


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


def _validate_batched(cfg: DictConfig, when: str) -> None:
    """BATCHED_UNSUPPORTED's rules, their messages saying `when` agents share a process."""
    for key, ok, allowed in BATCHED_UNSUPPORTED:
        check(ok(cfg), key, cfg_get(cfg, key), allowed.replace("seeds > 1", when))


def _validate_agents(cfg: DictConfig) -> None:
    """An `agents` list (rlrun.training.agents): its keys, then each agent's config as the single run it is."""
    # rlrun.training imports this module: the per-agent rules are read at call time
    from rlrun.training import agents

    configs = agents.check(cfg)
    if not configs:
        return
    _validate_batched(cfg, "with an agents list")
    for k, agent in enumerate(configs):
        try:
            validate(agent)
        except ConfigError as e:
            raise ConfigError(f"agents[{k}].{e.key}", e.value, e.allowed) from None


def _validate_cuda_graphs(cfg: DictConfig) -> None:
    """What a recorded update (rlrun.training.graphs) cannot do: decide on the host after each update."""
    if not cfg.device.cuda_graphs:
        return
    skip = cfg.algo.on_nonfinite == "skip"
    check(not skip, "algo.on_nonfinite", cfg.algo.on_nonfinite, "stop or off with device.cuda_graphs=true")
    check(cfg.device.amp != "fp16", "device.amp", cfg.device.amp, "none or bf16 with device.cuda_graphs=true")


# Logging backends whose package is an optional extra of the same name.
LOGGER_EXTRAS = ("mlflow", "wandb")


def _validate_logger(cfg: DictConfig) -> None:
    """A chosen backend's package is installed; W&B's mode is one it knows."""
    logger = cfg.get("logger") or {}
    for name in LOGGER_EXTRAS:
        if logger.get(name) is not None and importlib.util.find_spec(name) is None:
            raise ConfigError("logger", name, f"a backend whose package is installed: pip install -e '.[{name}]'")
    if logger.get("wandb") is not None and logger["wandb"].get("mode") is not None:
        one_of(cfg, "logger.wandb.mode", ["online", "offline", "disabled"])
