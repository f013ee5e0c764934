"""Run and job directory names after what differs from the defaults (conf/config.yaml's resolvers).

- A single run: `<env>__<exp_name>__<overrides>__seed<S>__<time>`, the overrides being the command line's
  `key=value`s (`+`/`~` dropped, joined with `,`) without the keys that do not change what is learned
  (`QUIET_KEYS`) and those the name holds already (`RUN_ONLY`: seed, exp_name, env.id, and the group
  choices it says: `said_by_name`), e.g. `CartPole-v1__dqn__network=dueling,optimizer.lr=0.001__seed0__<time>`
  (`+experiment=rainbow` alone is `CartPole-v1__rainbow__seed0__<time>`). The group choices come first
  (`buffer=per`, `network=dueling`: what kind of run it is), then the other keys, each part sorted; past
  `MAX_CHARS`, whole items are kept while they fit and a hash of them all follows, so runs that differ in
  a dropped item still get different names.
- A sweep's job: `<sweep dir>/<k1=v1>/<k2=v2>` over the keys that the sweep varies only (a `key=a,b` or a
  range on the command line, or `hydra.sweeper.params`); what every job shares is in the sweep's
  multirun.yaml. Where a job's sweep cannot be read (no multirun.yaml, as with Optuna, whose swept keys
  are its params), every override names it, as Hydra's `override_dirname` does.

Names are filesystem-safe (a character outside `[A-Za-z0-9._=,+-]` becomes `-`) and capped at `MAX_CHARS`
(the rest replaced by a hash of the whole). A typed `exp_name` must be such a name already (`check_exp_name`):
it is refused, not rewritten, so the directory is named exactly as the user typed it.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from functools import cache
from importlib.resources import files
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml
from hydra.core.override_parser.overrides_parser import OverridesParser
from omegaconf import OmegaConf

from rlrun.config.overrides import override_key, override_values, split
from rlrun.errors import ConfigError
from rlrun.storage import bounded

if TYPE_CHECKING:
    from omegaconf import DictConfig

# Keys (and key prefixes, ending in ".") that name no experiment: logging, devices, Hydra, the logging
# backends, checkpointing, resuming, the search preset.
QUIET_KEYS = ("log.", "device", "device.", "hydra.", "logger", "logger.", "checkpoint.", "resume", "hparams_search")
RUN_ONLY = ("seed", "seeds", "exp_name", "env.id")  # in a single run's name already
MAX_CHARS = 80
UNSAFE = re.compile(r"[^A-Za-z0-9._=,+-]")


def quiet_key(key: str, exclude: Iterable[str]) -> bool:
    return any(key == k.lstrip("+~") or (k.endswith(".") and key.startswith(k)) for k in exclude)


def safe(text: str, limit: int = MAX_CHARS) -> str:
    """`text` with unsafe characters replaced, capped at `limit` with an 8-digit hash of the whole."""
    out = UNSAFE.sub("-", text)
    if len(out) > limit:
        out = out[: limit - 9] + "~" + hashlib.sha1(text.encode()).hexdigest()[:8]
    return out


def check_exp_name(value: object) -> None:
    """A typed `exp_name` is part of one directory's name, as it is: refused (ConfigError) where it would
    leave that name (`../x`, `a/b`, an interpolation giving a path) or change it (`safe` would rewrite it)."""
    ok = value is None or (isinstance(value, str) and value != "" and safe(value) == value)
    allowed = f"null or a name of letters, digits and . _ = , + - (at most {MAX_CHARS} characters)"
    if not ok:
        raise ConfigError("exp_name", value, allowed + "; hydra.run.dir / hydra.sweep.dir choose where runs go")


def _items(overrides: Iterable[str], exclude: Iterable[str], keep: set[str] | None = None) -> list[str]:
    exclude = tuple(exclude)
    out = []
    for key, value in (split(str(o)) for o in overrides):
        if value is not None and not quiet_key(key, exclude) and (keep is None or key in keep):
            out.append(f"{key}={value}")
    return sorted(out)


@cache
def _option(group: str, option: str) -> dict[str, Any]:
    """rlrun's own option `group/option.yaml` as plain data ({} where rlrun has none: a user's config)."""
    if not re.fullmatch(r"\w+", option):
        return {}
    try:
        data = yaml.safe_load(files("rlrun.conf").joinpath(group, f"{option}.yaml").read_text())
    except (OSError, yaml.YAMLError):
        return {}
    return data if isinstance(data, dict) else {}


def said_by_name(overrides: Iterable[str]) -> set[str]:
    """The group choices among `overrides` that the name's env id and exp_name say already, so the overrides
    part does not repeat them: `+experiment=X` (its exp_name leads the name, unless exp_name is given),
    `algo=X` (the algorithm's name leads it where neither exp_name nor an experiment is given) and `env=X`
    where the env id is X's own or of its namespace (`env=minatar` in `MinAtar-Breakout-v0`, `env=atari` in
    `ALE-Pong-v5`; `env=cartpole env.id=Acrobot-v1` keeps `env=cartpole`, which the id does not say)."""
    given = override_values(overrides)
    said = set()
    experiment = given.get("experiment")
    if experiment is not None and "exp_name" not in given and "exp_name" in _option("experiment", experiment):
        said.add("experiment")
    if "algo" in given and "exp_name" not in given and experiment is None:
        said.add("algo")
    env = given.get("env")
    own_id = _option("env", env).get("env", {}).get("id") if env is not None else None
    # an id's namespace (`ALE`, `MinAtar`), or the whole id where it has none
    if isinstance(own_id, str) and given.get("env.id", own_id).partition("/")[0] == own_id.partition("/")[0]:
        said.add("env")
    return said


def run_part(overrides: Iterable[str] | None) -> str:
    """The single run's name part for its overrides: `__k=v,k2=v2`, or "" for none."""
    overrides = [str(o) for o in overrides or []]
    items = [safe(i) for i in _items(overrides, QUIET_KEYS + RUN_ONLY + tuple(said_by_name(overrides)))]
    items.sort(key=lambda item: "." in override_key(item))  # group choices first (a stable sort)
    if not items:
        return ""
    text = ",".join(items)
    if len(text) > MAX_CHARS:  # whole items while they fit, then a hash of them all
        kept: list[str] = []
        for item in items:
            if len(",".join([*kept, item])) > MAX_CHARS - 9:
                break
            kept.append(item)
        text = ",".join(kept) + "~" + hashlib.sha1(",".join(items).encode()).hexdigest()[:8]
    return "__" + text


def swept_in(overrides: Iterable[str]) -> set[str]:
    """The keys of `overrides` that are sweeps (`a,b`, `range(...)`, `choice(...)`, `interval(...)`)."""
    parsed = OverridesParser.create().parse_overrides([str(o) for o in overrides])
    return {o.key_or_group for o in parsed if o.is_sweep_override()}  # Hydra's key, without +, ++ or ~


def swept_keys(sweep_dir: Path, sweeper_params: object) -> set[str] | None:
    """The keys the sweep varies: its command line's sweeps (read from multirun.yaml, which Hydra's basic
    sweeper writes) and its sweeper's params; None where the command line is unknown. A sweeper that writes
    no multirun.yaml (Optuna) also samples the sweeps given on the command line, which its params do not
    list: naming its jobs after the params alone gave two trials that differ only there one directory."""
    try:
        saved = bounded.load_yaml(Path(sweep_dir) / "multirun.yaml")
        found = swept_in(saved["hydra"]["overrides"]["task"])
    except (bounded.FileRefused, KeyError, TypeError):
        return None
    params: object = OmegaConf.to_container(sweeper_params) if OmegaConf.is_config(sweeper_params) else sweeper_params
    if isinstance(params, dict) and params:
        found |= swept_in(f"{k!s}={v!s}" for k, v in params.items())
    return found


def job_subdir(root: DictConfig) -> str:
    """A sweep job's directory under the sweep dir: `k=v/k2=v2` over the swept keys, all of them (so no two
    jobs share one), or where they are unknown or none over the overrides less the quiet keys; the job's
    number where none is left."""
    hydra = root.hydra
    swept = swept_keys(Path(str(hydra.sweep.dir)), OmegaConf.select(root, "hydra.sweeper.params", default=None))
    swept = swept or None  # a "sweep" of one job (`-m seed=0`) is named as an unknown one
    exclude = list(hydra.job.config.override_dirname.exclude_keys) + list(QUIET_KEYS) if swept is None else []
    items = _items(hydra.overrides.task, exclude, swept)
    return "/".join(safe(i) for i in items) if items else str(hydra.job.num)
