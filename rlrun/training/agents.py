"""The agents of one batched run and the values each may hold on its own (per-agent hyperparameters).

A run trains K >= 1 agents as one batched computation. `seeds=K` gives K agents that differ only in their
seed; the `agents` node lists one entry per agent, each a mapping of the keys in which that agent differs
from the run's config:

    agents: [{seed: 0, optimizer.lr: 0.001}, {seed: 0, optimizer.lr: 0.003}, {seed: 1, optimizer.lr: 0.001}]

Agent k is, step for step, the single run whose config is the run's config with entry k's values (its
`agent_configs(cfg)[k]`); a key an entry leaves out keeps the run's value, a left-out `seed` is
`seed + k`. Only the algorithm's batchable keys (its `batchable`, rlrun.algos) may differ: they change
numbers inside the batched update (a learning rate per optimizer param group, a discount per sub-env, ...)
but not the shapes of the computation.
Everything else (network, batch size, env, buffer size, n-step, update frequency) would need separate
tensors, so jobs that differ there run as separate batched processes (hydra/launcher=batched).

An entry may also name the agent's directory, `dir` (relative to the run directory, or absolute); by
default it is the entry's values as path parts, `optimizer.lr=0.001/seed=0` (`seed=<S>` with `seeds=K`).
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import torch
from omegaconf import DictConfig, ListConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from rlrun.algos import algorithm
from rlrun.config.pbt import flat_space
from rlrun.errors import ConfigError
from rlrun.training.pbt import PBT

if TYPE_CHECKING:  # what torch passes an optimizer's step hooks: the step's positional and keyword arguments
    from torch.optim.optimizer import Args, Kwargs

DIR_KEY = "dir"
LR_KEYS = ("optimizer.lr", "algo.lr_end_factor")  # per-agent values of these need per-agent param groups


def entries(cfg: DictConfig) -> list[dict[str, Any]]:
    """Each agent's own values (seed always included), without `dir`."""
    listed = cfg.get("agents") or []
    if not listed:
        return [{"seed": cfg.seed + k} for k in range(cfg.seeds)]
    out = []
    for k, entry in enumerate(listed):
        raw = OmegaConf.to_container(entry, resolve=True)
        assert isinstance(raw, dict)
        values = {str(key): value for key, value in raw.items() if key != DIR_KEY}
        values.setdefault("seed", cfg.seed + k)
        out.append(values)
    return out


def single_run(cfg: DictConfig) -> dict[str, Any]:
    """The run's resolved values as plain Python, without its agents: what every agent's config starts from.
    Made once per run, so an agent's config costs the same however many agents the run has."""
    plain: dict[str, Any] = OmegaConf.to_container(cfg, resolve=True)  # type: ignore[assignment]
    plain["seeds"] = 1
    if "agents" in plain:
        plain["agents"] = []
    if plain.get("pbt") is not None:  # the population's, not an agent's: its values per agent are in pbt.csv
        plain["pbt"] = None
    return plain


def agent_config(values: dict[str, Any], base: dict[str, Any]) -> DictConfig:
    """The config of the single run that an agent with these values is (`base`: the run's `single_run`)."""
    plain = copy.deepcopy(base)
    for key, value in values.items():
        *parents, name = key.split(".")
        node = plain
        for part in parents:
            node = node[part]
        node[name] = value
    agent = OmegaConf.create(plain)
    assert isinstance(agent, DictConfig)
    return agent


def agent_configs(cfg: DictConfig) -> list[DictConfig]:
    base = single_run(cfg)
    return [agent_config(values, base) for values in entries(cfg)]


def agent_labels(cfg: DictConfig) -> list[str]:
    """Each agent's name, its values as path parts: `optimizer.lr=0.001/seed=0` (`seed=3` with seeds=K)."""
    labels = []
    for values in entries(cfg):
        order = sorted(k for k in values if k != "seed") + ["seed"]
        labels.append("/".join(f"{k}={values[k]}" for k in order))
    return labels


def agent_names(cfg: DictConfig) -> list[str]:
    """Each agent's directory, relative to the run directory (or absolute): its entry's `dir`, or its label."""
    listed = cfg.get("agents") or [{}] * cfg.seeds
    return [str(entry.get(DIR_KEY) or label) for entry, label in zip(listed, agent_labels(cfg))]


def per_agent(configs: Sequence[DictConfig], key: str) -> Any:
    """The agents' value of `key`: one value when they all hold the same, else a list (one per agent)."""
    values = [OmegaConf.select(c, key) for c in configs]
    return values[0] if all(v == values[0] for v in values) else values


def check(cfg: DictConfig) -> list[DictConfig]:
    """Refuse an `agents` node that a batched run cannot train (ConfigError naming the entry and key);
    returns the agents' configs for the caller to validate one by one."""
    listed = cfg.get("agents") or []
    if not listed:
        return []
    if cfg.seeds != 1:
        raise ConfigError("seeds", cfg.seeds, "1 with an `agents` list (each entry is one agent; give it a seed)")
    if len(listed) < 2:
        raise ConfigError("agents", OmegaConf.to_container(listed), "2 or more entries (one agent is a plain run)")
    allowed = algorithm(cfg.algo).batchable
    for k, entry in enumerate(listed):
        if not isinstance(entry, DictConfig):
            raise ConfigError(f"agents[{k}]", entry, "a mapping of per-agent values: {seed: 1, optimizer.lr: 1e-3}")
        for key in map(str, entry):
            if key != DIR_KEY and key not in allowed:
                raise ConfigError(
                    f"agents[{k}].{key}",
                    entry[key],
                    f"per-agent keys {', '.join(allowed)} (and {DIR_KEY}); other keys change the computation's "
                    "shapes, so such runs are separate processes",
                )
            if key != DIR_KEY and OmegaConf.select(cfg, str(key), default="<absent>") == "<absent>":
                raise ConfigError(f"agents[{k}].{key}", entry[key], "a key this config has (buffer.* needs buffer=per)")
    check_types(cfg)
    configs = agent_configs(cfg)
    if cfg.device.cuda_graphs and any(not isinstance(per_agent(configs, k), (int, float)) for k in LR_KEYS):
        raise ConfigError("device.cuda_graphs", True, "false when agents differ in optimizer.lr or algo.lr_end_factor")
    names = agent_names(cfg)
    if len(set(names)) != len(names):
        dup = next(n for n in names if names.count(n) > 1)
        raise ConfigError("agents", dup, "entries with distinct values or distinct dirs (two agents would share one)")
    return configs


def check_types(cfg: DictConfig) -> None:
    """Each entry's values written over the run's typed config, as the schema types them: a value of the wrong
    type (`optimizer.lr: abc`, a quoted `algo.gamma: '0.99'`) is refused naming its entry and key."""
    typed = cfg.copy()
    for k, entry in enumerate(entries(cfg)):
        for key, value in entry.items():
            shared = OmegaConf.select(typed, key)
            try:
                OmegaConf.update(typed, key, value, merge=False)
            except OmegaConfBaseException as e:
                raise ConfigError(
                    f"agents[{k}].{key}", value, f"a value of {key}'s type ({str(e).splitlines()[0]})"
                ) from None
            got = OmegaConf.select(typed, key)
            number = isinstance(shared, (int, float)) and not isinstance(shared, bool)
            if got != value or number and isinstance(value, (str, bool)):  # '0.99' converted, or an untyped config
                kind = type(got if got != value else shared).__name__
                raise ConfigError(f"agents[{k}].{key}", value, f"a {kind}, as {key} is (written without quotes)")


def explored(cfg: DictConfig, key: str) -> bool:
    """Whether population-based training (the `pbt` group) changes `key` per agent during the run."""
    return cfg.get("pbt") is not None and key in flat_space(OmegaConf.to_container(cfg.pbt.space))  # type: ignore[arg-type]


def values(cfg: DictConfig, key: str) -> Any:
    """`key`'s value for the run's agents: one value when they share it, else a list with one per agent
    (always a list for a key that PBT explores: rlrun.training.pbt changes its items)."""
    node: Any = cfg
    for part in key.split("."):
        node = node[part]
    if explored(cfg, key):
        return [entry.get(key, node) for entry in entries(cfg)]
    if not cfg.get("agents"):
        return node
    # What `per_agent(agent_configs(cfg), key)` gives, without composing every agent's whole config (the
    # agent configs hold the run's resolved values with the entry's written over them).
    shared = OmegaConf.to_container(node, resolve=True) if isinstance(node, (DictConfig, ListConfig)) else node
    found = [entry.get(key, shared) for entry in entries(cfg)]
    return found[0] if all(v == found[0] for v in found) else found


def sub_env_values(cfg: DictConfig, key: str) -> Any:
    """`values`, with a list repeated for each agent's `env.num_envs` sub-envs."""
    value = values(cfg, key)
    return value if not isinstance(value, list) else [v for v in value for _ in range(cfg.env.num_envs)]


# A view over several agents is stepped by the optimizer's vectorized loop where a single agent's tensor may
# fall into its scalar tail (fused Adam's two paths round differently): only tensors whose per-agent size
# is a whole number of vector widths (64 floats covers AVX-512 with unrolling) are sliced across agents.
SLICE_MULTIPLE = 64


def agent_param_groups(
    stacked: Sequence[torch.nn.Parameter], lrs: Sequence[float], end_factors: Sequence[float], split: bool = False
) -> list[dict[str, Any]]:
    """Optimizer param groups over leaf views of the stacked (K, ...) parameters: one group per run of
    consecutive agents that share their learning rate and its schedule (`agents`: [first, last + 1]).

    The views share storage with the stacked tensors, which the forward and backward passes use; a
    step-pre hook (`link_view_grads`) hands each view its slice of the stacked gradient. Adam, RMSprop and
    SGD are elementwise, so agent k's step is exactly its single run's with learning rate lrs[k]. A group
    views each stacked tensor once for all its agents where the vectorized loop splits that view as it
    splits each agent's own tensor (`SLICE_MULTIPLE`), and once per agent otherwise. A sweep's jobs come
    lr-major (`optimizer.lr=a,b seed=0,1,2`), so a batched process of them has one group per learning
    rate, not one per agent: each group and each tensor cost the optimizer Python work at every step.
    `split`: one group per agent, whose lr changes on its own (population-based training).
    """
    runs: list[list[int]] = []
    for k, key in enumerate(zip(lrs, end_factors)):
        if runs and key == (lrs[runs[-1][0]], end_factors[runs[-1][0]]) and not split:
            runs[-1][1] = k + 1
        else:
            runs.append([k, k + 1])
    groups = []
    for a, b in runs:
        # Views as slices [first, end) of an agent axis, one per agent where a tensor cannot span agents; `parts`
        # names each view's stacked tensor and agents for `link_view_grads`.
        parts = []
        for i, p in enumerate(stacked):
            spans = b - a > 1 and p[0].numel() % SLICE_MULTIPLE == 0
            parts += [[i, a, b]] if spans else [[i, k, k + 1] for k in range(a, b)]
        views = [torch.nn.Parameter(stacked[i].data[first:end]) for i, first, end in parts]
        groups.append({"params": views, "lr": lrs[a], "agents": [a, b], "parts": parts})
    return groups


def link_view_grads(optimizer: torch.optim.Optimizer, stacked: Sequence[torch.nn.Parameter]) -> None:
    """Before each step, point every agent's views at its slice of the stacked gradients; after it, drop
    the stacked gradients (the optimizer's `zero_grad` only clears the views)."""
    stacked = list(stacked)

    def before(opt: torch.optim.Optimizer, args: Args, kwargs: Kwargs) -> None:
        for group in opt.param_groups:
            for view, (i, first, end) in zip(group["params"], group["parts"]):
                grad = stacked[i].grad
                view.grad = None if grad is None else grad[first:end]

    def after(opt: torch.optim.Optimizer, args: Args, kwargs: Kwargs) -> None:
        for p in stacked:
            p.grad = None

    optimizer.register_step_pre_hook(before)
    optimizer.register_step_post_hook(after)


def dir_plan(cfg: DictConfig) -> tuple[list[str], Callable[[int], dict], bool]:
    """What rlrun.storage.agent_dirs.check needs to check the agents' directories: their names, agent k's
    config as a plain dict (computed only for a directory that exists), and whether the run lists its agents."""
    base, values = single_run(cfg), entries(cfg)

    def expected(k: int) -> dict:
        return OmegaConf.to_container(agent_config(values[k], base))  # type: ignore[return-value]

    return agent_names(cfg), expected, bool(cfg.get("agents"))


def make_pbt(cfg: DictConfig, rule: Callable[[str, list[float]], None] | None = None) -> PBT | None:
    """The run's population-based training (the `pbt` group), or None; `rule(key, values)`: the key's own
    rule, for the values a checkpoint's PBT state holds (rlrun.config.validate.check_explored)."""
    if cfg.get("pbt") is None:
        return None
    settings: dict[str, Any] = OmegaConf.to_container(cfg.pbt, resolve=True)  # type: ignore[assignment]
    initial = {key: values(cfg, key) for key in flat_space(settings["space"])}
    return PBT(settings, cfg.seed, initial, agent_labels(cfg), rule)
