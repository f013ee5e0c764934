"""The comparison's command line: its own keys, the arms' overrides and its folder, checked (BadInput)."""

from __future__ import annotations

import math
import os
import shlex
from pathlib import Path

from rlrun.config.overrides import split

OWN = ("A", "B", "metric", "seeds", "max_seeds", "seed", "alpha", "name", "dir")
DEFAULTS = {"metric": "solved", "seeds": "10", "max_seeds": "100", "seed": "0", "alpha": "0.05"}


class BadInput(ValueError):
    pass


def parse(argv: list[str]) -> tuple[dict[str, str], list[str]]:
    """The comparison's own keys and the overrides given to both arms."""
    own: dict[str, str] = {}
    common: list[str] = []
    for arg in argv:
        key, sep, value = arg.partition("=")
        if not sep:
            raise BadInput(f"{arg!r} is not key=value (allowed keys: {', '.join(OWN)}, or overrides of both arms)")
        if key in OWN:
            if key in own:
                raise BadInput(f"{key} is given twice")
            own[key] = value
        else:
            common.append(arg)
    for key in ("A", "B"):
        if key not in own:
            raise BadInput(f"{key}= is missing: each arm's overrides (A='' for the defaults) or a folder of runs")
    return {**DEFAULTS, **own}, common


def _int(own: dict[str, str], key: str, low: int) -> int:
    try:
        value = int(own[key])
    except ValueError:
        raise BadInput(f"{key}={own[key]}: an integer >= {low}") from None
    if value < low:
        raise BadInput(f"{key}={value}: an integer >= {low}")
    return value


def settings(own: dict[str, str]) -> tuple[str, float]:
    from rlrun.compare.arms import METRICS

    if own["metric"] not in METRICS:
        raise BadInput(f"metric={own['metric']}: allowed {', '.join(METRICS)}")
    try:
        alpha = float(own["alpha"])
    except ValueError:
        alpha = math.nan
    if not 0 < alpha < 0.5:
        raise BadInput(f"alpha={own['alpha']}: a number in (0, 0.5)")
    return own["metric"], alpha


def folder(own: dict[str, str], default_name: str) -> Path:
    """The comparison's folder: `dir`, else outputs/compare/<name>, a typed `name` by exp_name's rule (one
    folder); `default_name` (from the arms or the folders compared) made safe."""
    from rlrun.config.runnames import MAX_CHARS, safe
    from rlrun.storage.rundir import NAME_MAX

    if own.get("dir"):
        path = Path(own["dir"])
    else:
        name = own.get("name") or safe(default_name)  # a typed name is used as it is, or refused
        if not name or safe(name) != name or name in (".", ".."):
            raise BadInput(
                f"name={name}: one folder name of letters, digits and . _ = , + - (at most {MAX_CHARS} "
                "characters); dir=FOLDER chooses any folder"
            )
        path = Path("outputs") / "compare" / name
    long = next((part for part in path.parts if len(os.fsencode(part)) > NAME_MAX), None)
    if long is not None:
        raise BadInput(
            f"dir={path}: its name {long[:24]}... is {len(os.fsencode(long))} bytes; a name may have {NAME_MAX}"
        )
    return path


def arm_overrides(key: str, value: str) -> list[str]:
    try:
        overrides = shlex.split(value)
    except ValueError as e:
        raise BadInput(f"{key}={value!r}: {e}") from None
    return overrides


def check_overrides(where: str, overrides: list[str]) -> None:
    """What the comparison sets itself, or cannot run, refused in an arm's or the shared overrides."""
    from rlrun.config.runnames import swept_in

    try:
        swept = swept_in(overrides)
    except Exception:  # Hydra's grammar refuses one: composing the arm says which, and why
        swept = set()
    for o in overrides:
        key, value = split(o)
        if value is None:
            folder_too = ", nor an existing folder of runs" if where.startswith(("A=", "B=")) else ""
            raise BadInput(f"{where}: {o!r} is not an override (key=value){folder_too}")
        if key in ("seed", "seeds"):
            raise BadInput(f"{where}: {o}: the comparison chooses the seeds (seed= the first, seeds= per round)")
        if key.startswith("hydra") or key in ("resume", "agents"):
            raise BadInput(f"{where}: {o}: not in a comparison (each round is one run in the comparison's folder)")
        if key in swept:
            raise BadInput(f"{where}: {o} is a sweep; an arm is one setting")


COMMAND = "rlrun.compare"  # leads each line of `rlrun.errors.fail`
