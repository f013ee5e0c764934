"""The report's figures: learning curves (IQM over seeds, with a bootstrap band) and rliable's performance
profile, one axes row per env, one colour per configuration in both."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from rlrun import rundir
from rlrun.jobtable import EVAL
from rlrun.report.aggregate import BOOTSTRAP_REPS, bootstrap_seed, finished_runs, score_column, trimmed_mean

CURVE_BOOTSTRAP_REPS = 500  # resamples behind a learning-curve band


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _colors(configurations: Any) -> dict[str, Any]:
    """One colour per configuration, the same in every figure (rliable's colour-blind palette)."""
    import seaborn as sns

    names = sorted(set(configurations))
    return dict(zip(names, sns.color_palette("colorblind", n_colors=len(names))))


def _env_figure(envs: list[str]) -> tuple[Any, Any]:
    """One axes row per env, the same size in every report figure."""
    fig, axes = _pyplot().subplots(len(envs), 1, figsize=(8, 4.2 * len(envs)), squeeze=False)
    return fig, axes[:, 0]


def _save(fig: Any, path: Path) -> Path:
    fig.tight_layout()
    with rundir.open_atomic(path) as f:  # replaces a link there, never writes through it
        fig.savefig(f, format="png", dpi=100, bbox_inches="tight")
    _pyplot().close(fig)
    return path


def _legend_below(ax: Any, n: int) -> None:
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=min(n, 2), fontsize=8, frameon=False)


def plot_curves(curves: pd.DataFrame, path: Path, thresholds: dict[str, float] | None = None, points: int = 100):
    """Per env, the IQM over seeds of each configuration's 100-episode mean return against env steps, with
    a 95% stratified bootstrap band, and the solve threshold."""
    from rliable import library as rly

    if curves.empty:
        return None
    envs = sorted(curves["env"].unique())
    colors = _colors(curves["configuration"])
    fig, axes = _env_figure(envs)
    for ax, env in zip(axes, envs):
        per_env = curves[curves["env"] == env]
        for config, g in per_env.groupby("configuration", sort=True):
            runs = [c for _, c in g.groupby("job") if len(c)]
            # From the step where every seed has finished an episode, so each grid point has all seeds.
            grid = np.linspace(max(c["step"].min() for c in runs), g["step"].max(), points)
            per_seed = np.stack([np.interp(grid, c["step"], c["value"]) for c in runs])
            with bootstrap_seed(0):  # rliable's aggregate_iqm is scipy's 25% trimmed mean; here per grid point
                iqm, ci = rly.get_interval_estimates(
                    {"c": per_seed}, lambda s: trimmed_mean(s, axis=0), reps=CURVE_BOOTSTRAP_REPS
                )
            ax.plot(grid, iqm["c"], color=colors[config], label=f"{config} (n={len(runs)})")
            if len(runs) >= 2:
                ax.fill_between(grid, ci["c"][0], ci["c"][1], color=colors[config], alpha=0.2)
        threshold = (thresholds or {}).get(env)
        if threshold is not None and np.isfinite(threshold):
            ax.axhline(threshold, color="grey", linestyle="--", linewidth=1, label=f"solve threshold {threshold:g}")
        ax.set_title(f"{env}: 100-episode mean training return (IQM over seeds, 95% CI)", fontsize=10)
        ax.set_xlabel("env step")
        ax.set_ylabel("return")
        ax.grid(alpha=0.3)
        _legend_below(ax, per_env["configuration"].nunique() + 1)
    return _save(fig, path)


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
    fig, axes = _env_figure(envs)
    what = "greedy evaluation return" if column == EVAL else "training return (last 100 episodes)"
    for ax, env in zip(axes, envs):
        d = done[done["env"] == env]
        groups = dict(list(d.groupby("configuration", sort=True)))
        scores = {f"{config} (n={len(g)})": g[column].to_numpy()[:, None] for config, g in groups.items()}
        threshold = d["reward_threshold"].dropna()
        lo, hi = d[column].min(), max(d[column].max(), threshold.max() if len(threshold) else -np.inf)
        taus = np.linspace(lo - 0.05 * (hi - lo + 1), hi + 0.05 * (hi - lo + 1), 101)
        with bootstrap_seed(0):
            profiles, cis = rly.create_performance_profile(scores, taus, reps=reps)
        plot_utils.plot_performance_profiles(
            profiles,
            taus,
            performance_profile_cis=cis,
            ax=ax,
            colors={f"{config} (n={len(g)})": colors[config] for config, g in groups.items()},
            xlabel=f"{what} " + r"$\tau$",
            ylabel=r"fraction of runs with score $> \tau$",
            labelsize="medium",
            ticklabelsize="medium",
        )
        if len(threshold):
            ax.axvline(threshold.iloc[0], color="grey", linestyle="--", linewidth=1, label="solve threshold")
        ax.set_title(f"{env}: performance profile of the {what}", fontsize=10)
        _legend_below(ax, len(scores) + 1)
    return _save(fig, path)
