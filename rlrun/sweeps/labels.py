"""What a report calls each job: the settings that differ between the jobs (`labelled`), config groups
named after what the composed config holds (`GROUP_LABELS`), a PBT population as one (`pbt_explored`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rlrun.config.runnames import QUIET_KEYS, quiet_key
from rlrun.storage import bounded


def flatten(node: object, prefix: str = "") -> dict[str, object]:
    """A nested dict as one level of dotted keys."""
    if isinstance(node, dict):
        out: dict[str, object] = {}
        for k, v in node.items():
            out.update(flatten(v, f"{prefix}{k}."))
        return out
    return {prefix[:-1]: node}


def readable(value: str) -> str:
    """An override's value as a label shows it: a float with at most 6 significant digits (a `range` of
    floats gives 0.30000000000000004)."""
    try:
        number = float(value)
    except ValueError:
        return value
    return f"{number:.6g}" if "." in value or "e" in value.lower() else value


def pbt_explored(population_dir: Path) -> list[str] | None:
    """The keys a PBT population explored (its config's `pbt.space` entries with a range), read from the run
    directory its agents sit in; None where that directory holds no PBT population."""
    try:
        cfg = bounded.load_yaml(population_dir / ".hydra" / "config.yaml")
        space = cfg["pbt"]["space"]
    except (bounded.FileRefused, KeyError, TypeError):
        return None
    ranges = flatten(space) if isinstance(space, dict) else {}
    keys = {k.rpartition(".")[0] for k in ranges if k.endswith((".low", ".high"))}
    return sorted(k for k in keys if ranges.get(f"{k}.low") is not None and ranges.get(f"{k}.high") is not None)


def _network_label(row: dict[str, Any]) -> str | None:
    """The network a job trained, from its composed config: its encoder and head features, e.g. `mlp`,
    `minatar_cnn+dueling`, `nature_cnn+dueling+noisy+c51` (the group option chosen may not say it: env=minatar
    sets the MinAtar CNN under the default option `network=mlp`)."""
    if "cfg.network.encoder" not in row:
        return None
    get = row.get

    def number(key: str) -> float:  # a value that is no number (a crafted config) is no feature
        value = get(key)
        return value if isinstance(value, (int, float)) and not isinstance(value, bool) else 0

    features = [
        ("dueling", bool(get("cfg.network.dueling"))),
        ("noisy", bool(get("cfg.network.noisy"))),
        ("c51", number("cfg.network.num_atoms") > 1),
        ("qrdqn", number("cfg.network.num_quantiles") > 0 and not number("cfg.network.tau_embedding_dim")),
        ("iqn", number("cfg.network.tau_embedding_dim") > 0),
    ]
    return "+".join([str(row["cfg.network.encoder"]), *(name for name, on in features if on)])


def _class_label(row: dict[str, Any], group: str, names: dict[str, str]) -> str | None:
    target = str(row.get(f"cfg.{group}._target_", ""))
    name = target.rpartition(".")[2]
    return names.get(name, name.lower()) if name else None


# Config groups labelled from what the composed config holds, not the option chosen (which env and experiment
# presets reshape): the same label for the same thing, whichever way it was chosen.
GROUP_LABELS = {
    "algo": lambda row: str(row.get("cfg.algo.kind", "dqn")) if any(k.startswith("cfg.algo.") for k in row) else None,
    "network": _network_label,
    "buffer": lambda row: _class_label(row, "buffer", {"ReplayBuffer": "uniform", "PrioritizedReplayBuffer": "per"}),
    "optimizer": lambda row: _class_label(row, "optimizer", {}),
    "env": lambda row: str(row["cfg.env.id"]) if "cfg.env.id" in row else None,
}


def _setting(row: dict[str, Any], key: str) -> str:
    """A key's value in a job as its label shows it: a config group's from its composed config (`GROUP_LABELS`),
    else the composed config's where the key is a value there (so 1e-3 and 0.001, false and False are one
    value), else the override's (a group's option)."""
    label = GROUP_LABELS[key](row) if key in GROUP_LABELS else None
    if label is not None:
        return label
    if f"cfg.{key}" in row:
        return readable(str(row[f"cfg.{key}"]))
    return readable(str(row["overrides"].get(key, row["choices"].get(key, "(default)"))))


def labelled(rows: list[dict[str, Any]]) -> None:
    """Each row's `settings` (the keys that differ between the jobs, seed excluded, each with its value) and
    `configuration` (them as `k=v ...`, after a PBT population's label): settings given to every job, and
    what a PBT population explores, do not clutter the labels."""
    keys = {k for r in rows for k in r["overrides"] if not quiet_key(k, (*QUIET_KEYS, "seeds", "pbt", "pbt."))}
    keys |= set(GROUP_LABELS)
    values = [{k: _setting(r, k) for k in keys if k not in r["explored"]} for r in rows]
    # a key differs between jobs where it takes two values, or where PBT explored it in some jobs only
    varying = sorted(k for k in keys if len({v.get(k) for v in values}) > 1 and any(k in v for v in values))
    for r, v in zip(rows, values):
        r["settings"] = {k: v[k] for k in varying if k in v}
        label = " ".join(f"{k}={value}" for k, value in r["settings"].items())
        r["configuration"] = " ".join(filter(None, [r["population"], label])) or "(all jobs)"
