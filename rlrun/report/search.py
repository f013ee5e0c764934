"""A sampled search's trials read back for the report (Optuna: `+hparams_search=optuna` or `robust`): the
value each trial tried of each searched key and the objective it returned, for a figure made for scattered
trials (`plot_search`) instead of a grid's sensitivity lines."""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.override_parser.types import ChoiceSweep, IntervalSweep, RangeSweep
from hydra.errors import HydraException

from rlrun.config.overrides import override_key, override_values
from rlrun.report import plots
from rlrun.storage import bounded, summary as run_summary
from rlrun.storage.summary import TRAIN, DamagedJob

if TYPE_CHECKING:  # matplotlib is imported only when a figure is drawn
    from matplotlib.artist import Artist
    from matplotlib.axes import Axes

SAMPLED = ("OptunaSweeper",)  # sweepers whose trials are sampled, not a grid (the end of `_target_`)
COLUMNS = ["env", "trial", "number", "key", "value", "x", "log", "choices", "low", "high", "objective", "best"]
OBJECTIVE_NAMES = {  # what the config's `objective` returned to the sweeper: (the y axis, the caption)
    TRAIN: ("final 100-episode mean return", "final 100-episode mean training return"),
    "robust": ("robust score", "robust score (the share of seeds that solved and held it, and how early)"),
}


def trial_dir(job: Path) -> Path | None:
    """The directory Hydra launched for a job: the job's own, or for an agent of a `seeds=K` trial its
    parent's (the one holding `.hydra/hydra.yaml`); None where neither has one."""
    for d in (job, job.parent):
        if (d / ".hydra" / "hydra.yaml").is_file():
            return d
    return None


def _number(value: str | float | None) -> float:
    """`value` as a finite number; nan for None, text that is no number, or an infinity."""
    try:
        x = float(value) if value is not None else math.nan
    except (TypeError, ValueError):
        return math.nan
    return x if math.isfinite(x) else math.nan


def _space(params: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Each searched key's distribution as the figure needs it: `log`, `choices` (the options of a choice,
    as text) or `low`/`high` (an interval's or range's bounds)."""
    parser, space = OverridesParser.create(), {}
    for key, spec in params.items():
        try:
            sweep = parser.parse_override(f"{key}={spec}").value()
        except HydraException:
            sweep = None
        log = "log" in getattr(sweep, "tags", set())
        entry: dict[str, Any] = {"log": log, "choices": (), "low": math.nan, "high": math.nan}
        if isinstance(sweep, ChoiceSweep):
            entry["choices"] = tuple(str(c) for c in sweep.list)
        elif isinstance(sweep, IntervalSweep):
            entry["low"], entry["high"] = _number(sweep.start), _number(sweep.end)
        elif isinstance(sweep, RangeSweep):
            entry["low"], entry["high"] = _number(sweep.start), _number(sweep.stop)
        space[override_key(str(key))] = entry
    return space


def _trial(directory: Path) -> tuple[dict[str, Any], dict[str, dict[str, Any]], dict[str, str]] | None:
    """(hydra node, searched space, the trial's values of the searched keys), or None for a job that is
    no trial of a sampled search (or whose files cannot be read: the report names damaged jobs itself)."""
    try:
        hydra = bounded.load_yaml(directory / ".hydra" / "hydra.yaml")["hydra"]
        sweeper, task = hydra["sweeper"], hydra["overrides"]["task"]
    except (bounded.FileRefused, OSError, KeyError, TypeError):
        return None
    if not isinstance(sweeper, dict) or not str(sweeper.get("_target_", "")).endswith(SAMPLED):
        return None
    if not isinstance(sweeper.get("params"), dict) or not isinstance(task, list):
        return None
    space = _space(sweeper["params"])
    values = override_values(task)
    return hydra, space, {k: values[k] for k in space if k in values}


def search_trials(runs: pd.DataFrame) -> pd.DataFrame:
    """One row per trial of a sampled search and searched key (columns `COLUMNS`): the value it tried (`x`
    as a number where it is one), the key's distribution (`log`, `choices`, `low`/`high`), the objective
    the trial returned (its summary and the config's `objective`, as rlrun.cli returned it; NaN for a trial
    without a summary) and whether it is the best trial of its env (the highest objective, lowest for
    `direction: minimize`; the first such trial on a tie, as Optuna counts it). `attrs["objective"]` names
    the objective. Empty where no job of `runs` is a trial of a sampled search."""
    rows, names, seen = [], set(), set()
    for job, env in zip(runs.get("job", []), runs.get("env", [])):
        directory = trial_dir(Path(job))
        if directory is None or directory in seen:
            continue
        seen.add(directory)
        trial = _trial(directory)
        if trial is None:
            continue
        hydra, space, values = trial
        try:
            cfg = bounded.load_yaml(directory / ".hydra" / "config.yaml")
            kind = cfg.get("objective", TRAIN) if isinstance(cfg, dict) else TRAIN
            summary = run_summary.read(directory) if (directory / run_summary.FILE).is_file() else None
        except (bounded.FileRefused, OSError, DamagedJob):
            kind, summary = TRAIN, None
        score = run_summary.objective(summary, kind) if summary is not None else None
        names.add(OBJECTIVE_NAMES.get(kind, (str(kind), str(kind))))
        number = hydra.get("job", {}).get("num") if isinstance(hydra.get("job"), dict) else None
        sign = -1.0 if str(hydra["sweeper"].get("direction", "maximize")) == "minimize" else 1.0
        for key, entry in space.items():
            rows.append(
                {
                    "env": env,
                    "trial": str(directory),
                    "number": number if isinstance(number, int) else len(seen),
                    "key": key,
                    "value": values.get(key, ""),
                    "x": _number(values.get(key)),
                    **entry,
                    "objective": _number(score),
                    "sign": sign,
                }
            )
    table = pd.DataFrame(rows, columns=[*COLUMNS, "sign"])
    if not table.empty:
        firsts = table.drop_duplicates("trial").dropna(subset=["objective"])
        ranked = firsts.assign(rank=-firsts["sign"] * firsts["objective"]).sort_values(["rank", "number"])
        best = set(ranked.groupby("env", sort=False)["trial"].first())
        table["best"] = table["trial"].isin(best)
    table = table.drop(columns="sign")
    table.attrs["objective"] = " / ".join(sorted(long for _, long in names)) or "objective"
    table.attrs["objective_axis"] = " / ".join(sorted(short for short, _ in names)) or "objective"
    return table


def search_section(runs: pd.DataFrame, out: Path) -> tuple[list[str], pd.DataFrame]:
    """The figure of the sampled-search trials among `runs` (`plot_search`, sensitivity.png) with its
    caption, and the runs that are no such trial (for the grid's sensitivity figure); ([], runs) where no
    run is a trial of a sampled search."""
    trials = search_trials(runs)
    path = plot_search(trials, out / "sensitivity.png") if not trials.empty else None
    if path is None:
        return [], runs
    drawn = trials.dropna(subset=["objective"]).drop_duplicates("trial")
    best = [
        f"#{r.number} ({r.objective:.4g}: "
        + ", ".join(f"`{k}={v}`" for k, v in trials.loc[trials.trial == r.trial, ["key", "value"]].to_numpy())
        + ")"
        for r in drawn[drawn["best"]].itertuples()
    ]
    missing = trials["trial"].nunique() - len(drawn)
    not_drawn = f" {plots.plural(missing, 'trial')} without an objective (failed or unfinished) not drawn."
    lines = [
        "",
        f"![search]({path.name})",
        "",
        f"Search: each trial of the sampled search (Optuna; {plots.plural(len(drawn), 'trial')} with an objective) "
        "as a point: the value it tried of each searched key (x; a log axis for keys sampled log-uniformly, the "
        f"key's range or all its choices shown) against the {trials.attrs['objective']} (y), the value it returned "
        f"to the sweeper. The star is the best trial: {'; '.join(best)}." + (not_drawn if missing else ""),
    ]
    job_trials = [trial_dir(Path(job)) for job in runs["job"]]
    return lines, runs[[d is None or str(d) not in set(trials["trial"]) for d in job_trials]]


def _search_axis(ax: Axes, d: pd.DataFrame) -> np.ndarray:
    """The x axis of one searched key: a choice's options as categories (every option a tick, tried or
    not), else the value on a log axis where the key is sampled log-uniformly, limited to the key's range.
    Returns the trials' x positions."""
    first = d.iloc[0]
    if first["choices"]:
        options = list(first["choices"])
        numbers = d["x"].to_numpy(float)
        for value in d["value"]:
            if value not in options and not any(_same_number(value, o) for o in options):
                options.append(value)  # a value given on the command line, outside the space
        positions = []
        for value, x in zip(d["value"], numbers):
            match = [i for i, o in enumerate(options) if o == value or (np.isfinite(x) and _same_number(value, o))]
            positions.append(match[0])
        ax.set_xticks(range(len(options)), options)
        ax.set_xlim(-0.5, len(options) - 0.5)
        return np.asarray(positions, dtype=float)
    if first["log"]:
        # matplotlib takes ~0.5 s to import (here and below): only when a figure is drawn
        from matplotlib.ticker import FuncFormatter, LogLocator

        ax.set_xscale("log")  # ticks at 1, 2 and 5 of each decade, all labelled: a range may span less than one
        ax.xaxis.set_minor_locator(LogLocator(subs=(2.0, 5.0)))
        ax.xaxis.set_minor_formatter(FuncFormatter(lambda x, _: f"{x:,.6g}"))
    low, high = first["low"], first["high"]
    if np.isfinite(low) and np.isfinite(high) and high > low:
        if first["log"] and low > 0:
            ax.set_xlim(low / (high / low) ** 0.04, high * (high / low) ** 0.04)
        else:
            ax.set_xlim(low - 0.04 * (high - low), high + 0.04 * (high - low))
    plots._readable_axes(ax, "{:,.6g}".format)
    return d["x"].to_numpy(float)


def _same_number(a: str | float, b: str | float) -> bool:
    try:
        return float(a) == float(b)
    except (TypeError, ValueError):
        return False


def plot_search(trials: pd.DataFrame, path: Path):
    """A sampled search (Optuna) as scattered trials: per env, one panel per searched key, each trial a
    point at the value it tried (x; a log axis for keys sampled log-uniformly, the key's whole range or all
    its choices shown) and the objective it returned (y), the best trial a star. `trials` is
    `search.search_trials`; None where it holds no trial with an objective."""
    done = trials.dropna(subset=["objective"]) if not trials.empty else trials
    if done.empty:
        return None
    panels = [(env, key) for env in sorted(done["env"].unique()) for key in dict.fromkeys(done["key"])]
    cols = min(len(panels), 3)
    rows = -(-len(panels) // cols)
    plt = plots._pyplot()
    fig, axes = plt.subplots(rows, cols, figsize=(4.6 * cols, 3.6 * rows), squeeze=False)
    color = plots._colors(["trial"])["trial"]
    objective = trials.attrs.get("objective_axis", "objective")
    for ax in axes.flat[len(panels) :]:
        ax.set_visible(False)
    for ax, (env, key) in zip(axes.flat, panels):
        d = done[(done["env"] == env) & (done["key"] == key)]
        x = _search_axis(ax, d)
        best = d["best"].to_numpy(bool)
        ax.scatter(x[~best], d["objective"][~best], color=color, s=36, alpha=0.8, zorder=2)
        ax.scatter(x[best], d["objective"][best], color="black", marker="*", s=200, zorder=3)
        ax.set_title(f"{env}: {key}" + (" (sampled log-uniformly)" if d["log"].iloc[0] else ""), fontsize=10)
        ax.set_xlabel(key)
        ax.set_ylabel(f"objective: {objective}")
        ax.grid(alpha=0.3, which="both")
    from matplotlib.lines import Line2D

    n = done["trial"].nunique()
    best_rows = done[done["best"]].drop_duplicates("trial")
    entries: dict[str, plots.Color | Artist] = {
        f"a trial ({n} with an objective)": Line2D([], [], color=color, marker="o", linestyle=""),
    }
    for r in best_rows.itertuples():
        where = f", {r.env}" if done["env"].nunique() > 1 else ""
        entries[f"the best trial (#{r.number}{where}): objective {r.objective:.4g}"] = Line2D(
            [], [], color="black", marker="*", markersize=12, linestyle=""
        )
    fig.suptitle(
        f"Sampled search: each trial at the value it tried of each searched key (x) and the objective it "
        f"returned (y: {trials.attrs.get('objective', objective)})",
        fontsize=10,
    )
    plots._legend_below(fig, entries)
    return plots._save(fig, path)
