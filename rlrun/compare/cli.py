"""`python -m rlrun.compare A='<overrides>' B='<overrides>' [key=value ...]`: is B better than A?

Both arms train on the same seeds, a round of `seeds` seeds at a time (one batched run per arm and round),
until a look at the evidence decides at level `alpha` or `max_seeds` paired seeds are spent; or, with
A=<folder> B=<folder>, existing runs are paired by seed and decided without training. docs/compare.md
explains the test; `rlrun.compare.sequential` implements it.
"""

from __future__ import annotations

import math
import shlex
import sys
from pathlib import Path
from typing import NoReturn

USAGE = """usage: python -m rlrun.compare A='<overrides>' B='<overrides>' [metric=solved|final|auc] [seeds=N]
                            [max_seeds=M] [seed=FIRST] [alpha=0.05] [name=NAME] [dir=FOLDER] [overrides of both ...]
       python -m rlrun.compare A=<folder of runs> B=<folder of runs> [metric=...] [alpha=...] [name=...] [dir=...]

  A, B       each arm's overrides (A='' for the defaults), or a folder of finished runs (a sweep, batched runs)
  metric     solved (reached the env's threshold within the budget; default), final (mean return of the
             last 100 training episodes), auc (mean 100-episode return over the run)
  seeds      paired seeds per round (default 10); max_seeds: the seed budget (default 100)
  seed       the first seed (default 0); rounds take seeds seed, seed+1, ...
  alpha      the chance of declaring a winner when there is no difference (default 0.05)
  name, dir  the comparison's folder: dir, else outputs/compare/<name> (name: from the env and the arms)
  other key=value: overrides given to both arms (env=..., total_steps=..., +experiment=...)
Rerunning the same command continues a stopped comparison; docs/compare.md explains the verdict."""

OWN = ("A", "B", "metric", "seeds", "max_seeds", "seed", "alpha", "name", "dir")
DEFAULTS = {"metric": "solved", "seeds": "10", "max_seeds": "100", "seed": "0", "alpha": "0.05"}
EXIT_CONFIG = 2


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
    if own.get("dir"):
        return Path(own["dir"])
    name = own.get("name") or default_name
    if not name or "/" in name or name in (".", ".."):
        raise BadInput(f"name={name}: one folder name (no '/')")
    return Path("outputs") / "compare" / name


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
        key = o.lstrip("+~").partition("=")[0]
        if "=" not in o:
            raise BadInput(f"{where}: {o!r} is not an override (key=value)")
        if key in ("seed", "seeds"):
            raise BadInput(f"{where}: {o}: the comparison chooses the seeds (seed= the first, seeds= per round)")
        if key.startswith("hydra") or key in ("resume", "agents"):
            raise BadInput(f"{where}: {o}: not in a comparison (each round is one run in the comparison's folder)")
        if key in swept:
            raise BadInput(f"{where}: {o} is a sweep; an arm is one setting")


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] in ("-h", "--help"):
        print(USAGE, file=sys.stdout if argv else sys.stderr)
        sys.exit(0 if argv else EXIT_CONFIG)
    command_line = shlex.join(["python", "-m", "rlrun.compare", *argv])
    from rlrun.training import signals

    signals.stop_on_signal()  # a Ctrl-C while the arms are checked: one line (the rounds pass it to their run)
    try:
        from rlrun.report import ReportExtraMissing, require_report_extra

        require_report_extra()
        own, common = parse(argv)
        metric, alpha = settings(own)
        a, b = Path(own["A"]), Path(own["B"])
        if own["A"] and own["B"] and a.is_dir() and b.is_dir():
            if common or any(k in argv_keys(argv) for k in ("seeds", "max_seeds", "seed")):
                raise BadInput(
                    "A and B are folders of runs: nothing to train (no seeds=, max_seeds=, seed= or overrides)"
                )
            from rlrun.compare.run import decide_folders

            decide_folders(a, b, metric, alpha, folder(own, f"{a.name}_vs_{b.name}"), command_line)
            return
        if own["A"] and a.is_dir() or own["B"] and b.is_dir():
            raise BadInput("A and B are both folders of runs or both overrides, not one of each")
        from rlrun.compare.run import prepare, run_rounds

        job = prepare(own, common, metric, alpha, command_line)
    except BadInput as e:
        fail(str(e))
    except ReportExtraMissing as e:
        fail(str(e))
    run_rounds(job)


def argv_keys(argv: list[str]) -> set[str]:
    return {a.partition("=")[0] for a in argv}


def fail(message: str, code: int = EXIT_CONFIG) -> NoReturn:
    print(f"rlrun.compare: {message}", file=sys.stderr)
    sys.exit(code)
