"""A command line's `key=value` overrides, read against the default config before Hydra composes them.

- `integral`: `total_steps=1e5` is Hydra's float 100000.0, which an integer key refuses; an integral
  float literal given to an integer key is rewritten as the integer (`total_steps=100000`). Anything else
  (a fraction, a sweep, a key that is not an integer) is left to Hydra and the schema.
- `unknown_key`: an override of a key the config lacks (`netwrok=dueling`, `algo.gama=0.5`) gets rlrun's own
  line, naming the nearest key (`nearest_key`) or the keys the node has, instead of Hydra's advice to append
  it with `+` (which the schema then refuses).
- `given_twice`: a key given twice (`total_steps=0 total_steps=2000`) is refused, as Hydra refuses a group
  added twice, instead of the last value winning silently (and the run being named after both).
- `unknown_option`: `network=foo` is refused with rlrun's one line naming the group's options, instead of
  Hydra's "Could not find 'network/foo'" with the options on lines of their own.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Iterable
from importlib.resources import files
from typing import Any

from hydra.errors import MissingConfigException
from omegaconf import DictConfig, OmegaConf
from omegaconf.nodes import IntegerNode

from rlrun.errors import ConfigError

# A float literal that may stand for an integer: 1e5, 2.5e4, 100000.0 (not 0.5, not 1e-3's fraction)
FLOAT_LITERAL = re.compile(r"[+-]?(\d+\.\d*|\d*\.\d+|\d+)([eE][+-]?\d+)?")


def split(override: str) -> tuple[str, str | None]:
    """(key, value) of `key=value` (`+key=value`, `++key=value`, `~key`, `group/sub=option`), the value as
    typed (`a='x=y'`: `'x=y'`) and None where there is none: the one place rlrun reads an override's key.
    It reads what Hydra's `OverridesParser` reads (`key_or_group`, `@package` kept with it, and the value's
    text; tests/unit/test_overrides.py checks a corpus), at string speed: that parser costs about a
    millisecond an override and 0.8 s to import, which a command's start-up and every run name would pay."""
    key, sep, value = override.lstrip("+~").partition("=")
    return key, value if sep else None


def override_key(override: str) -> str:
    """The key (or group) an override sets, adds or deletes: `+a.b=1` -> `a.b`, `hydra/launcher=x` ->
    `hydra/launcher` (see `split`)."""
    return split(override)[0]


def override_value(override: str) -> str:
    """The value of an override as typed, "" where it has none (`~a`; see `split`)."""
    return split(override)[1] or ""


def override_values(overrides: Iterable[Any]) -> dict[str, str]:
    """{key: value as typed} of the overrides that give a value (a later one wins), `~key` left out."""
    return {k: v for k, v in map(split, map(str, overrides)) if v is not None}


def given_twice(overrides: list[str]) -> str | None:
    """The line for the first key that `overrides` give twice (a group choice or a key, with `+`/`++` or not;
    a deletion `~key` besides a value is left to Hydra), or None where every key is given once."""
    given: dict[str, str] = {}
    for override in overrides:
        key, _ = split(override)
        if override.startswith("~"):
            continue
        if key in given:
            return f"{key} is given twice ({given[key]} and {override}): give it once"
        given[key] = override
    return None


def nearest_key(overrides: list[str], defaults: DictConfig) -> tuple[str, str] | None:
    """(key, nearest existing key) for the first override whose key the config lacks and that has a near
    name; None if there is none."""
    for override in overrides:
        key, _ = split(override)
        parent, _, name = key.rpartition(".")
        node = OmegaConf.select(defaults, parent) if parent else defaults
        if "/" in key or not isinstance(node, DictConfig) or name in node:
            continue
        near = difflib.get_close_matches(name, [str(k) for k in node], n=1)
        if near:
            return key, f"{parent + '.' if parent else ''}{near[0]}"
    return None


def unknown_key(message: str, overrides: list[str], compose: Callable[[list[str]], DictConfig]) -> str | None:
    """For Hydra's composition error `message`: the line for an override of a key the config lacks (its nearest
    key, or the keys its node has, from `compose` of the other overrides), or None for any other error."""
    try:
        found = nearest_key(overrides, compose([])) if overrides else None
    except Exception:
        found = None
    if found is not None:
        key, near = found
        if f"override '{key}'" in message:
            return f"no key {key} in the config (did you mean {near}?)"
        return f"{message} (did you mean {near}?)"
    m = re.match(r"Could not override '([\w.]+)'\. To append", message)
    if m is None:
        return None
    key = m.group(1)
    parent = key.rpartition(".")[0]
    try:
        rest = compose([o for o in overrides if split(o)[0] != key])
    except Exception:
        return None
    node = OmegaConf.select(rest, parent) if parent else rest
    if not isinstance(node, DictConfig):
        return None
    keys = sorted(str(k) for k in node if not str(k).startswith("_") and str(k) != "hydra")
    return f"no key {key} in the config (the keys of {parent or 'the config'} are {', '.join(keys)})"


def may_be_integral(override: str) -> bool:
    """Whether the value could be an integral float literal (cheap: before any config is composed)."""
    _, value = split(override)
    return value is not None and FLOAT_LITERAL.fullmatch(value) is not None and not value.isdigit()


def integral(overrides: list[str], defaults: DictConfig) -> list[str]:
    """`overrides` with each integral float literal given to an integer key of `defaults` as an integer."""
    out = []
    for override in overrides:
        key, value = split(override)
        if value is not None and may_be_integral(override) and not override.startswith("~"):
            number = float(value)
            parent, _, name = key.rpartition(".")
            node = OmegaConf.select(defaults, parent) if parent else defaults
            is_int = isinstance(node, DictConfig) and name in node and isinstance(node._get_node(name), IntegerNode)
            if is_int and number.is_integer() and abs(number) < 2**63:
                override = override[: len(override) - len(value)] + str(int(number))
        out.append(override)
    return out


def unknown_option(error: Exception) -> ConfigError | None:
    """The ConfigError for a group option that does not exist (`network=foo`), naming the group's options;
    None for any other composition error."""
    if not isinstance(error, MissingConfigException) or not error.missing_cfg_file:
        return None
    group, _, option = error.missing_cfg_file.rpartition("/")
    options = error.options or group_options(group)  # Hydra lists none for an option inside a list: logger=[x]
    if not options:
        return None
    return ConfigError(group, option, "one of " + ", ".join(options))


def group_options(group: str) -> list[str]:
    """The options of a config group of rlrun's config folder (its YAML files), sorted; [] for no such group."""
    folder = files("rlrun.conf").joinpath(*group.split("/"))
    if not folder.is_dir():
        return []
    return sorted(p.name.removesuffix(".yaml") for p in folder.iterdir() if p.name.endswith(".yaml"))
