"""The value checks every rule is written with: each raises a `ConfigError` naming the key, its value and
what is allowed. Shared by rlrun.config.validate and the algorithms' own rules (rlrun.algos)."""

from __future__ import annotations

import math
from typing import Any

from omegaconf import DictConfig

from rlrun.errors import ConfigError


def check(ok: bool, key: str, value: object, allowed: str) -> None:
    if not ok:
        raise ConfigError(key, value, allowed)


def positive(cfg: DictConfig, key: str, nullable: bool = False) -> None:
    """`key` > 0; with `nullable`, null too (an Optional key's "unset")."""
    v = cfg_get(cfg, key)
    check((v is None and nullable) or (v is not None and v > 0), key, v, "a number > 0")


def one_of(cfg: DictConfig, key: str, choices) -> None:
    v = cfg_get(cfg, key)
    check(v in choices, key, v, "one of " + ", ".join(map(str, choices)))


def in_range(cfg: DictConfig, key: str, lo: float, hi: float, lo_open=False, hi_open=False) -> None:
    v = cfg_get(cfg, key)
    ok = v is not None and math.isfinite(v) and (v > lo if lo_open else v >= lo) and (v < hi if hi_open else v <= hi)
    if math.isinf(hi):
        allowed = f"a number {'>' if lo_open else '>='} {lo}"
    else:
        allowed = f"{'(' if lo_open else '['}{lo}, {hi}{')' if hi_open else ']'}"
    check(ok, key, v, allowed)


def cfg_get(cfg: DictConfig, key: str) -> Any:
    node: Any = cfg
    for part in key.split("."):
        node = node[part]
    return node
