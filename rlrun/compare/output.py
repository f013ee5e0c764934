"""What a comparison writes into its folder: compare.md (the verdict, the looks, the intervals, the per-seed
table, the curves and the commands that reproduce it), compare.csv (the per-seed table) and curves.png."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import pandas as pd

from rlrun.compare.decide import WHAT, Look, better_chance, number_format, test_name
from rlrun.compare.stats import rate_interval
from rlrun.machine import hardware
from rlrun.storage import rundir


def _cell(x: float, digits: str = ".1f") -> str:
    return "-" if x is None or not np.isfinite(x) else format(x, digits)


def _seed_cell(v: object) -> str:
    """A cell of the per-seed table in compare.md: a float to one decimal, a missing value as `-`."""
    return "-" if pd.isna(v) else f"{v:.1f}" if isinstance(v, float) else str(v)


def per_seed(both: pd.DataFrame, metric: str) -> pd.DataFrame:
    """The per-seed table of compare.csv: both arms' runs and scores, seed by seed."""
    columns = ["job", "solved", "solved_step", "final"] + (["auc"] if "a_auc" in both else [])
    columns += ["steps"] if metric == "steps" else []
    table = pd.DataFrame({"seed": both.index})
    for arm in ("a", "b"):
        for c in columns:
            values = both[f"{arm}_{c}"]
            table[f"{arm}_{c}"] = values.astype("Int64").array if c == "solved_step" else values.to_numpy()
    if metric != "solved":
        table[f"difference_{metric}"] = (both[f"b_{metric}"] - both[f"a_{metric}"]).to_numpy()
    return table


def looks_table(looks: list[Look], metric: str) -> list[str]:
    if metric == "solved":
        head = "| round | paired seeds | solved A | solved B | A-only | B-only | e-value | p | decides at |"
        rows = [
            f"| {lk.round or '-'} | {lk.seeds} | {lk.a:.0f} | {lk.b:.0f} | {lk.only_a} | {lk.only_b} "
            f"| {_cell(lk.e_value, '.3g')} | {lk.p:.3g} | p <= {lk.level:.3g} |"
            for lk in looks
        ]
    else:
        f = number_format(metric)
        head = (
            "| round | paired seeds | mean A | mean B | B - A (paired bootstrap at 1 - level) "
            f"| {better_chance(metric)} | p | level |"
        )
        rows = [
            f"| {lk.round or '-'} | {lk.seeds} | {_cell(lk.a, f)} | {_cell(lk.b, f)} | {_cell(lk.b - lk.a, '+' + f)} "
            f"[{_cell(lk.interval[0], '+' + f)}, {_cell(lk.interval[1], '+' + f)}] | {_cell(lk.improvement[0], '.2f')} "
            f"[{_cell(lk.improvement[1], '.2f')}, {_cell(lk.improvement[2], '.2f')}] | {lk.p:.3g} | {lk.level:.3g} |"
            for lk in looks
        ]
    return [head, "|" + "---|" * (head.count("|") - 1), *rows]


def each_arm(both: pd.DataFrame, metric: str, last: Look) -> list[str]:
    """Each arm's score over the paired seeds with its 95% interval (solved: the solve rates and the paired
    difference of the `last` look)."""
    from rlrun.report import iqm_ci  # the report extra

    lines = []
    n = len(both)
    if metric == "solved":
        for arm in ("A", "B"):
            solved = int(both[f"{arm.lower()}_solved"].sum())
            low, high = rate_interval(solved, n) if n else (np.nan, np.nan)
            lines.append(
                f"- {arm}: {solved}/{n} reached the threshold (95% interval {100 * low:.0f}-{100 * high:.0f}%)"
            )
        low, high = last.interval
        lines.append(f"- B - A solve rate: {100 * low:+.0f} to {100 * high:+.0f} points (95% paired bootstrap)")
        return lines
    f = number_format(metric)
    for arm in ("A", "B"):
        iqm, lo, hi = iqm_ci(both[f"{arm.lower()}_{metric}"].to_numpy(float))
        lines.append(
            f"- {arm}: {WHAT[metric]}: IQM {_cell(iqm, f)} [{_cell(lo, f)}, {_cell(hi, f)}] (95% stratified bootstrap)"
        )
    return lines


def per_seed_table(both: pd.DataFrame, metric: str) -> list[str]:
    """compare.csv's table in markdown, without the jobs' paths."""
    table = per_seed(both, metric).drop(columns=["a_job", "b_job"])
    return [
        "| " + " | ".join(table.columns) + " |",
        "|" + "---|" * len(table.columns),
        *("| " + " | ".join(_seed_cell(v) for v in row) + " |" for row in table.itertuples(index=False)),
    ]


def write(
    root: Path,
    *,
    verdict: str,
    looks: list[Look],
    both: pd.DataFrame,
    metric: str,
    arms: dict[str, str],
    settings: list[str],
    commands: list[str],
    left_out: list[str],
    curves: pd.DataFrame,
    threshold: float | None,
) -> list[Path]:
    """Write compare.md, compare.csv and curves.png into `root`; returns the paths written."""
    from rlrun.report import plot_curves  # the report extra

    root.mkdir(parents=True, exist_ok=True)
    csv_path = root / "compare.csv"
    rundir.write_text(csv_path, per_seed(both, metric).to_csv(index=False))
    written = [csv_path]
    figure = None
    if not curves.empty:
        env = str(curves["env"].iloc[0])
        figure = plot_curves(curves, root / "curves.png", {env: threshold} if threshold is not None else None)
        if figure is not None:
            written.append(figure)
    last = looks[-1]
    lines = [
        "# Is B better than A?",
        "",
        f"**{verdict}**",
        "",
        *(f"- {arm}: {what}" for arm, what in arms.items()),
        *(f"- {s}" for s in settings),
        f"- {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC, {hardware()}",
        "",
        "## Looks",
        "",
        f"The test: {test_name(metric, last)} (docs/compare.md says what it promises).",
        "",
        *looks_table(looks, metric),
        "",
        "## Each arm",
        "",
    ]
    lines += each_arm(both, metric, last) + ["", "## Per seed (compare.csv)", ""] + per_seed_table(both, metric)
    if left_out:
        lines += ["", "Left out:", "", *(f"- {x}" for x in left_out)]
    if figure is not None:
        lines += ["", "## Curves", "", f"![learning curves]({figure.name})"]
    lines += ["", "## Reproduce", "", "```", *commands, "```", ""]
    md = root / "compare.md"
    rundir.write_text(md, "\n".join(lines))
    return [md, *written]
