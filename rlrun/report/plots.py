"""The report's figures: learning curves (IQM over seeds, with a bootstrap band) and rliable's performance
profile, one axes row per env, one colour per configuration in both."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike

from rlrun.report.aggregate import BOOTSTRAP_REPS, bootstrap_seed, finished_runs, score_column, trimmed_mean
from rlrun.storage import rundir
from rlrun.sweeps.jobtable import EVAL

if TYPE_CHECKING:  # matplotlib is imported only when a figure is drawn
    from matplotlib.artist import Artist
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

Color = tuple[float, float, float]  # an RGB colour, each channel in [0, 1] (seaborn's palettes)

CURVE_BOOTSTRAP_REPS = 500  # resamples behind a learning-curve band


def _pyplot() -> ModuleType:
    # matplotlib takes ~0.5 s to import (here and below): only when a figure is drawn
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _colors(configurations: Iterable[str]) -> dict[str, Color]:
    """One colour per configuration, the same in every figure: rliable's colour-blind palette up to 10,
    evenly spaced hues beyond (so no two share a colour)."""
    # the report extra: imported (here and below) only when a report is drawn
    import seaborn as sns

    names = sorted(set(configurations))
    palette = sns.color_palette("colorblind" if len(names) <= 10 else "husl", n_colors=max(len(names), 1))
    return dict(zip(names, palette))


def _save(fig: Figure, path: Path) -> Path:
    with rundir.open_atomic(path) as f:  # replaces a link there, never writes through it
        fig.savefig(f, format="png", dpi=100, bbox_inches="tight")
    _pyplot().close(fig)
    return path


def plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def step_label(step: float) -> str:
    """An env-step count as a short tick label (800k, 1.5M): full numbers of seven digits run into each
    other on a panel's x axis."""
    if abs(step) >= 1e6:
        return f"{step / 1e6:,.4g}M"
    return f"{step / 1e3:.4g}k" if abs(step) >= 1e4 else f"{step:,.0f}"


def _readable_axes(ax: Axes, x_format: Callable[[float], str] = step_label) -> None:
    """Tick labels as plain numbers (10k or 10,000 rather than 1e4 with an offset)."""
    from matplotlib.ticker import FuncFormatter

    ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _: x_format(x)))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda y, _: f"{y:,.6g}"))


def _legend_below(fig: Figure, entries: dict[str, Color | Artist]) -> None:
    """One legend for the whole figure, under its axes (never over a curve): label -> colour or artist."""
    from matplotlib.lines import Line2D

    handles = [e if not isinstance(e, tuple) else Line2D([], [], color=e, linewidth=2) for e in entries.values()]
    fig.tight_layout()
    fig.legend(
        handles,
        list(entries),
        loc="upper center",
        bbox_to_anchor=(0.5, 0.0),
        ncol=min(len(entries), 2),
        fontsize=8,
        frameon=False,
    )


def dense_points(g: pd.DataFrame, points: int) -> tuple[np.ndarray, np.ndarray]:
    """A densely logged curve (the 100-episode mean) of one configuration's seeds on a common grid: `points`
    steps from the first step where every seed has a point to the last, each seed interpolated; one step
    where they all end there (a grid of one point is drawn as a marker)."""
    runs = [c.sort_values("step") for _, c in g.groupby("job") if len(c)]
    first, last = max(c["step"].min() for c in runs), g["step"].max()
    grid = np.linspace(first, last, points) if last > first else np.array([float(last)])
    return grid, np.stack([np.interp(grid, c["step"], c["value"]) for c in runs])


def evaluation_points(g: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """One configuration's greedy evaluations as (steps, seeds x steps): the k-th evaluation of every seed
    at the k-th step (the median of the seeds' steps, the evaluation step itself where they share it), for
    the evaluations every seed has. Nothing between two evaluations is made up: interpolating seeds whose
    lines cross gives a band with kinks and spikes where no evaluation ran. A step logged twice (a resumed
    run) counts once, its last value."""
    runs = [c.drop_duplicates("step", keep="last").sort_values("step") for _, c in g.groupby("job") if len(c)]
    n = min(len(c) for c in runs)
    steps = np.median(np.stack([c["step"].to_numpy(float)[:n] for c in runs]), axis=0)
    return steps, np.stack([c["value"].to_numpy(float)[:n] for c in runs])


def _iqm_curve(ax: Axes, steps: np.ndarray, per_seed: np.ndarray, color: Color, markers: bool = False) -> int:
    """The IQM over seeds (rows of `per_seed`) at each step with its 95% band; a single step as a marker with
    its interval as an error bar (a line through one point draws nothing). Returns the number of seeds."""
    from rliable import library as rly

    with bootstrap_seed(0):  # rliable's aggregate_iqm is scipy's 25% trimmed mean; here per step
        iqm, ci = rly.get_interval_estimates(
            {"c": per_seed}, lambda s: trimmed_mean(s, axis=0), reps=CURVE_BOOTSTRAP_REPS
        )
    seeds = len(per_seed)
    if len(steps) == 1:
        err = np.abs(np.array([[iqm["c"][0] - ci["c"][0][0]], [ci["c"][1][0] - iqm["c"][0]]]))
        ax.errorbar(steps, iqm["c"], yerr=err if seeds >= 2 else None, color=color, marker="o", capsize=4)
        return seeds
    ax.plot(steps, iqm["c"], color=color, marker="o" if markers else None, markersize=4)
    if seeds >= 2:
        ax.fill_between(steps, ci["c"][0], ci["c"][1], color=color, alpha=0.2)
    return seeds


def plot_curves(
    curves: pd.DataFrame,
    path: Path,
    thresholds: dict[str, float] | None = None,
    points: int = 100,
    eval_curves: pd.DataFrame | None = None,
):
    """Per env, the IQM over seeds of each configuration's 100-episode mean training return against env
    steps, with a 95% stratified bootstrap band and the solve threshold; next to it the greedy evaluation
    returns the same way, where the runs have them, at the evaluation steps only (`evaluation_points`, a
    marker on each; one evaluation per run is a marker with its interval as an error bar)."""
    panels = [(curves, "100-episode mean training return", False)]
    if eval_curves is not None and not eval_curves.empty:
        panels.append((eval_curves, "greedy evaluation return, at each evaluation", True))
    panels = [p for p in panels if not p[0].empty]
    if not panels:
        return None
    envs = sorted(set().union(*(set(c["env"]) for c, _, _ in panels)))
    colors = _colors(set().union(*(set(c["configuration"]) for c, _, _ in panels)))
    plt = _pyplot()
    fig, axes = plt.subplots(len(envs), len(panels), figsize=(6 * len(panels), 4 * len(envs)), squeeze=False)
    seeds: dict[str, int] = {}
    for (i, env), (j, (data, what, evaluations)) in ((e, q) for e in enumerate(envs) for q in enumerate(panels)):
        ax = axes[i, j]
        series = [
            (config, *(evaluation_points(g) if evaluations else dense_points(g, points)))
            for config, g in data[data["env"] == env].groupby("configuration", sort=True)
        ]
        singles = [config for config, steps, _ in series if len(steps) == 1]
        for config, steps, per_seed in series:
            if len(singles) > 1 and config in singles:  # one point each: side by side (1% of the step apart)
                steps = steps * (1 + 0.01 * (singles.index(config) - (len(singles) - 1) / 2))
            n = _iqm_curve(ax, steps, per_seed, colors[config], markers=evaluations)
            seeds[config] = max(seeds.get(config, 0), n)
        if len(singles) > 1 and len(singles) == len(series):  # the step itself is the only tick
            step = float(np.median([steps[0] for _, steps, _ in series]))
            ax.set_xticks([step])
            ax.set_xlim(step * 0.95, step * 1.05)
        threshold = (thresholds or {}).get(env)
        if threshold is not None and np.isfinite(threshold):
            ax.axhline(threshold, color="grey", linestyle="--", linewidth=1)
        ax.set_title(f"{env}: {what}\n(IQM over seeds, 95% CI)", fontsize=10)
        ax.set_xlabel("env steps")
        ax.set_ylabel("episode return")
        ax.grid(alpha=0.3)
        _readable_axes(ax)
    entries: dict[str, Color | Artist] = {f"{c} ({plural(n, 'seed')})": colors[c] for c, n in sorted(seeds.items())}
    shown = sorted({t for e, t in (thresholds or {}).items() if e in envs and t is not None and np.isfinite(t)})
    if shown:
        from matplotlib.lines import Line2D

        label = f"solve threshold {shown[0]:g}" if len(shown) == 1 else "solve threshold (the env's)"
        entries[label] = Line2D([], [], color="grey", linestyle="--", linewidth=1)
    _legend_below(fig, entries)
    return _save(fig, path)


def score_distribution(scores: np.ndarray, taus: np.ndarray) -> np.ndarray:
    """rliable's default profile (`score_distributions`: for each tau, the mean of `scores > tau` over all
    runs and tasks) in one comparison instead of a Python call per tau: the same values, and ~15x less time
    in the bootstrap, which calls it once per resample."""
    return (np.asarray(scores)[..., None] > np.asarray(taus)).reshape(-1, len(taus)).mean(axis=0)


def plot_profile(runs: pd.DataFrame, path: Path, reps: int = BOOTSTRAP_REPS // 2):
    """rliable's performance profile per env: for every return tau, the fraction of a configuration's runs
    scoring above it, with a 95% stratified bootstrap band."""
    from rliable import library as rly, plot_utils

    column = score_column(runs)
    done = finished_runs(runs)
    done = done[np.isfinite(done[column])]
    if done.empty:
        return None
    envs = sorted(done["env"].unique())
    colors = _colors(done["configuration"])
    fig, axes = _pyplot().subplots(len(envs), 1, figsize=(8, 4.2 * len(envs)), squeeze=False)
    axes = axes[:, 0]
    entries: dict[str, Color | Artist] = {}
    what = "greedy evaluation return" if column == EVAL else "training return (last 100 episodes)"
    for ax, env in zip(axes, envs):
        d = done[done["env"] == env]
        groups = dict(list(d.groupby("configuration", sort=True)))
        names = {config: f"{config} ({plural(len(g), 'seed')})" for config, g in groups.items()}
        scores = {names[config]: g[column].to_numpy()[:, None] for config, g in groups.items()}
        threshold = d["reward_threshold"].dropna()
        lo, hi = d[column].min(), max(d[column].max(), threshold.max() if len(threshold) else -np.inf)
        taus = np.linspace(lo - 0.05 * (hi - lo + 1), hi + 0.05 * (hi - lo + 1), 101)
        with bootstrap_seed(0):
            profiles, cis = rly.create_performance_profile(
                scores, taus, custom_profile_func=score_distribution, reps=reps
            )
        plot_utils.plot_performance_profiles(
            profiles,
            taus,
            performance_profile_cis=cis,
            ax=ax,
            colors={names[config]: colors[config] for config in groups},
            xlabel=f"{what} " + r"$\tau$",
            ylabel=r"fraction of runs with score $> \tau$",
            labelsize="medium",
            ticklabelsize="medium",
        )
        entries.update({names[config]: colors[config] for config in groups})
        if len(threshold):
            from matplotlib.lines import Line2D

            ax.axvline(threshold.iloc[0], color="grey", linestyle="--", linewidth=1)
            entries[f"solve threshold {threshold.iloc[0]:g}"] = Line2D(
                [], [], color="grey", linestyle="--", linewidth=1
            )
        ax.set_title(
            f"{env}: performance profile of the final {what}\n(share of runs above each return, 95% CI)", fontsize=10
        )
        _readable_axes(ax, "{:,.6g}".format)
    _legend_below(fig, entries)
    return _save(fig, path)


def log_axis(values: ArrayLike) -> bool:
    """A key's settings read on a log axis: all positive and spanning a factor of 10 or more (a lr sweep)."""
    values = np.asarray(values, dtype=float)
    return bool(len(values) and (values > 0).all() and values.max() >= 10 * values.min())


def plot_sensitivity(points: pd.DataFrame, path: Path):
    """Per env (a row) and swept numeric key (a column, on a log axis where `log_axis`): the final IQM return
    over seeds at each setting of the key with its 95% CI (`aggregate.sensitivity`), one line per setting of
    the other swept keys. None where no numeric key was swept."""
    if points.empty:
        return None
    envs, keys = sorted(points["env"].unique()), list(dict.fromkeys(points["key"]))
    colors = _colors(points["others"])
    what = "greedy evaluation return" if points["score"].iloc[0] == EVAL else "training return (last 100 episodes)"
    plt = _pyplot()
    fig, axes = plt.subplots(len(envs), len(keys), figsize=(6 * len(keys), 4 * len(envs)), squeeze=False)
    entries: dict[str, Color | Artist] = {}
    for (i, env), (j, key) in ((e, k) for e in enumerate(envs) for k in enumerate(keys)):
        ax, d = axes[i, j], points[(points["env"] == env) & (points["key"] == key)]
        for others, line in d.groupby("others", sort=True):
            line = line.sort_values("value")
            x, iqm, low, high = (line[c].to_numpy(float) for c in ("value", "iqm", "ci95_low", "ci95_high"))
            ax.errorbar(x, iqm, yerr=np.stack([iqm - low, high - iqm]), color=colors[others], marker="o", capsize=4)
            n = sorted(set(line["seeds"]))
            entries[f"{others} ({n[0]}" + (f"-{n[-1]} seeds)" if len(n) > 1 else f" seed{'s' * (n[0] != 1)})")] = (
                colors[others]
            )
        if log_axis(d["value"]):
            from matplotlib.ticker import NullFormatter

            ax.set_xscale("log")
            ax.xaxis.set_minor_formatter(NullFormatter())
        _readable_axes(ax, "{:,.6g}".format)
        ax.set_title(f"{env}: final {what} against {key}\n(IQM over seeds, 95% CI)", fontsize=10)
        ax.set_xlabel(key)
        ax.set_ylabel("episode return")
        ax.grid(alpha=0.3, which="both")
    _legend_below(fig, entries)
    return _save(fig, path)
