"""Sweep reports: load runs into pandas, aggregate seeds per configuration with rliable, write tables and plots.

    python -m rlrun.report outputs/multirun/<sweep>

A configuration is a job's overrides without `seed`. The aggregates are those of Agarwal et al. (2021, "Deep
RL at the Edge of the Statistical Precipice"), computed by their `rliable` library: per configuration the
interquartile mean (IQM: the mean of the middle 50% of the seeds) with a 95% stratified bootstrap confidence
interval, of the greedy evaluation return (`final_eval_return`) and of the training return (the mean of the
last 100 training episodes, exploration included); steps to the env's solve threshold (median over the seeds
that reached it, and how many did); mean wall time. For two or more configurations of one env, the
probability that the best one (by greedy-eval IQM) beats each other one, and a performance profile (the
fraction of runs scoring above each return). Fewer than 5 seeds get a warning: the intervals are then wide
and unreliable. Written into the sweep dir: report.md, report.csv, curves.png and profile.png.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from rlrun import rundir
from rlrun.jobtable import (  # noqa: F401  (load_curve(s), load_run, run_dirs: the report's readers, re-exported)
    CURVE_TAG,
    EVAL,
    FINISHED,
    TRAIN,
    curves_of,
    load_curve,
    load_curves,
    load_run,
    load_sweep,
    quiet,
    run_dirs,
)

MIN_SEEDS = 5  # below this the report warns that its confidence intervals are unreliable
BOOTSTRAP_REPS = 2000  # resamples behind an IQM interval; P(X > Y) and profile bands (dearer) take half
CURVE_BOOTSTRAP_REPS = 500  # resamples behind a learning-curve band


# ----------------------------------------------------------------------------------------- aggregates (rliable)


@contextmanager
def _bootstrap_seed(seed: int) -> Iterator[None]:
    """rliable's stratified bootstrap draws its resamples from numpy's global generator (its random_state
    argument reaches only `arch`): seed it for a repeatable report, and give the caller's state back."""
    state = np.random.get_state()
    np.random.seed(seed)
    try:
        with quiet("absl"):
            yield
    finally:
        np.random.set_state(state)


def trimmed_mean(a: np.ndarray, axis: int | None = None, cut: float = 0.25) -> np.ndarray:
    """scipy.stats.trim_mean's arithmetic (the same partition and mean, so the same bits), without its
    argument-checking wrapper, which costs ~10x the maths for a handful of runs. rliable's
    `aggregate_iqm` is `trim_mean(scores, 0.25, axis=None)`; the bootstrap calls it once per resample
    (thousands of times per report)."""
    if axis is None:
        a, axis = np.ravel(a), 0
    n = a.shape[axis]
    low = int(cut * n)
    kept = np.partition(a, (low, n - low - 1), axis).take(np.arange(low, n - low), axis=axis)
    return np.mean(kept.astype(float, copy=False), axis=axis)


def iqm_ci(scores: np.ndarray, reps: int = BOOTSTRAP_REPS, seed: int = 0) -> tuple[float, float, float]:
    """IQM of `scores` (one per run) and its 95% stratified bootstrap CI; NaNs for no scores."""
    from rliable import library as rly

    scores = np.asarray(scores, dtype=float)
    if len(scores) == 0:
        return np.nan, np.nan, np.nan
    with _bootstrap_seed(seed):  # rliable's bootstrap of its aggregate_iqm (`trimmed_mean`: the same maths)
        point, ci = rly.get_interval_estimates({"x": scores[:, None]}, lambda x: np.array([trimmed_mean(x)]), reps=reps)
    return float(point["x"][0]), float(ci["x"][0, 0]), float(ci["x"][1, 0])


def improvement_probability(
    x: np.ndarray, y: np.ndarray, reps: int = BOOTSTRAP_REPS // 2, seed: int = 0
) -> tuple[float, float, float]:
    """P(X > Y): the chance that a run of X scores above a run of Y (ties count half), with its 95%
    stratified bootstrap CI."""
    from rliable import library as rly, metrics

    with _bootstrap_seed(seed):
        point, ci = rly.get_interval_estimates(
            {"xy": (np.asarray(x, float)[:, None], np.asarray(y, float)[:, None])},
            metrics.probability_of_improvement,
            reps=reps,
        )
    low, high = np.ravel(ci["xy"])
    return float(point["xy"]), float(low), float(high)


def _finished(runs: pd.DataFrame) -> pd.DataFrame:
    done = runs[runs["status"].isin(FINISHED)].copy() if not runs.empty else runs
    for column in (EVAL, TRAIN, "solved_step", "reward_threshold", "wall_time_s"):
        if column not in done:
            done[column] = np.nan
    done[[EVAL, TRAIN, "solved_step", "reward_threshold", "wall_time_s"]] = done[
        [EVAL, TRAIN, "solved_step", "reward_threshold", "wall_time_s"]
    ].astype(float)
    return done


def score_column(runs: pd.DataFrame) -> str:
    """What profiles and improvement probabilities compare: the greedy evaluation return when every
    finished run has one, else the training return."""
    done = _finished(runs)
    return EVAL if len(done) and done[EVAL].notna().all() else TRAIN


def _finite(scores: pd.Series) -> np.ndarray:
    values = scores.to_numpy(dtype=float)
    return values[np.isfinite(values)]


def left_out(runs: pd.DataFrame) -> list[str]:
    """Finished jobs that an aggregate leaves out: a score that is NaN or infinite, or one that is missing
    while other seeds of the configuration have it (one missing everywhere reads "not evaluated")."""
    lines = []
    for config, g in _finished(runs).groupby("configuration", sort=True):
        for column in (EVAL, TRAIN):
            values = g[column].to_numpy(dtype=float)
            bad = ~np.isfinite(values)
            for job, value, nonfinite in zip(g["job"][bad], values[bad], g["nonfinite"][bad]):
                if column in nonfinite or not bad.all():
                    what = f"{column} is {value}" if column in nonfinite else f"no {column}"
                    lines.append(f"- `{job}`: {what}, left out of the IQM of {config}")
    return lines


def summarize(runs: pd.DataFrame, reps: int = BOOTSTRAP_REPS) -> pd.DataFrame:
    """One row per configuration, over its finished seeds."""
    rows = []
    for config, g in _finished(runs).groupby("configuration", sort=True):
        solved = g["solved_step"].dropna().to_numpy()
        row: dict[str, Any] = {"configuration": config, "env": g["env"].iloc[0], "seeds": len(g)}
        for name, column in (("eval_return", EVAL), ("train_return", TRAIN)):
            scores = _finite(g[column])  # the jobs left out are named in the report (`left_out`)
            iqm, lo, hi = iqm_ci(scores, reps)
            row.update({f"{name}_iqm": iqm, f"{name}_ci95_low": lo, f"{name}_ci95_high": hi})
            row[f"{name}_mean"] = float(scores.mean()) if len(scores) else np.nan
        row.update(
            {
                "reward_threshold": g["reward_threshold"].iloc[0],
                "steps_to_threshold_median": float(np.median(solved)) if len(solved) else np.nan,
                "solved_seeds": len(solved),
                "solved": f"{len(solved)}/{len(g)}",
                "wall_time_s_mean": float(g["wall_time_s"].mean()),
            }
        )
        rows.append(row)
    return pd.DataFrame(rows)


def improvement_table(runs: pd.DataFrame, table: pd.DataFrame, reps: int = BOOTSTRAP_REPS // 2) -> pd.DataFrame:
    """Per env with two or more configurations: P(best > other) for each other configuration, the best
    being the highest IQM of the compared score."""
    column = score_column(runs)
    iqm = "eval_return_iqm" if column == EVAL else "train_return_iqm"
    done = _finished(runs)
    rows = []
    for env, t in table.groupby("env", sort=True):
        if len(t) < 2:
            continue
        best = t.loc[t[iqm].idxmax(), "configuration"]
        x = _finite(done.loc[done.configuration == best, column])
        for other in t.configuration:
            if other != best:
                y = _finite(done.loc[done.configuration == other, column])
                p, lo, hi = improvement_probability(x, y, reps)
                rows.append(
                    {"env": env, "x": best, "y": other, "score": column, "p": p, "ci95_low": lo, "ci95_high": hi}
                )
    return pd.DataFrame(rows)


# ----------------------------------------------------------------------------------------------------- plots


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
            with _bootstrap_seed(0):  # rliable's aggregate_iqm is scipy's 25% trimmed mean; here per grid point
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
    done = _finished(runs)
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
        with _bootstrap_seed(0):
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


# ---------------------------------------------------------------------------------------------------- report


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def _ci_cell(iqm: float, lo: float, hi: float, n: int) -> str:
    if not np.isfinite(iqm):
        return "not evaluated"
    return f"{iqm:.1f}" if n < 2 else f"{iqm:.1f} [{lo:.1f}, {hi:.1f}]"


def _steps_cell(row: Any) -> str:
    if not np.isfinite(row.reward_threshold):
        return "no threshold"
    if row.solved_seeds == 0:
        return f"not reached ({row.solved})"
    return f"{row.steps_to_threshold_median:,.0f} ({row.solved})"


def markdown_table(table: pd.DataFrame) -> str:
    shown = pd.DataFrame(
        {
            "configuration": table.configuration,
            "seeds": table.seeds,
            "greedy eval IQM [95% CI]": [
                _ci_cell(r.eval_return_iqm, r.eval_return_ci95_low, r.eval_return_ci95_high, r.seeds)
                for r in table.itertuples()
            ],
            "training return IQM [95% CI]": [
                _ci_cell(r.train_return_iqm, r.train_return_ci95_low, r.train_return_ci95_high, r.seeds)
                for r in table.itertuples()
            ],
            "steps to threshold (median, solved)": [_steps_cell(r) for r in table.itertuples()],
            "wall time (s)": [f"{t:.1f}" for t in table.wall_time_s_mean],
        }
    )
    return shown.to_markdown(index=False, colalign=["left", "right", "right", "right", "right", "right"])


def write_report(root: Path, reps: int = BOOTSTRAP_REPS) -> str:
    """Write report.md, report.csv, curves.png and profile.png into `root`; returns the markdown."""
    root = Path(root)
    runs = load_sweep(root)
    damaged = [f"- `{job}`: {why}" for job, why in runs.attrs["damaged"]]
    for job, why in runs.attrs["damaged"]:
        print(f"rlrun: warning: skipped the damaged job {job}: {why}", file=sys.stderr)
    if runs.empty:
        return "\n".join([f"No readable runs under {root}.", *damaged])
    table = summarize(runs, reps)
    rundir.write_text(root / "report.csv", table.to_csv(index=False))
    done = _finished(runs)
    envs = ", ".join(
        f"{env} (solve threshold {t:g})" if np.isfinite(t) else str(env)
        for env, t in done.groupby("env")["reward_threshold"].first().items()
    )
    lines = [
        f"# Sweep report: {root}",
        "",
        f"{_plural(len(runs), 'job')} ({len(done)} finished"
        + (f", {len(damaged)} damaged and skipped" if damaged else "")
        + f"), {_plural(len(table), 'configuration')}"
        + (f"; {envs}." if envs else "."),
        "",
    ]
    few = table[table.seeds < MIN_SEEDS] if not table.empty else table
    if not few.empty:
        lines += [
            f"**Warning:** {_plural(len(few), 'configuration')} with fewer than {MIN_SEEDS} seeds "
            f"({', '.join(str(n) for n in sorted(set(few.seeds)))}): confidence intervals from so few runs are "
            f"wide and unreliable. Run at least {MIN_SEEDS} seeds per configuration (e.g. `seed=0,1,2,3,4`).",
            "",
        ]
    if not table.empty:
        lines += [
            markdown_table(table),
            "",
            "IQM: the mean of the middle 50% of the seeds; [low, high]: 95% stratified bootstrap confidence "
            f"interval ({reps} resamples; rliable). Greedy eval: `final_eval_return`, the last greedy "
            "evaluation; training return: the mean of the last 100 training episodes (exploration included).",
        ]
        improvement = improvement_table(runs, table, reps // 2)
        if not improvement.empty:
            what = "greedy evaluation return" if improvement.score.iloc[0] == EVAL else "training return"
            pairs = pd.DataFrame(
                {
                    "X": improvement.x,
                    "Y": improvement.y,
                    "P(X > Y) [95% CI]": [
                        f"{r.p:.2f} [{r.ci95_low:.2f}, {r.ci95_high:.2f}]" for r in improvement.itertuples()
                    ],
                }
            )
            lines += [
                "",
                f"## Probability of improvement ({what})",
                "",
                "The chance that a run of X, the configuration with the highest IQM, scores above a run of Y.",
                "",
                pairs.to_markdown(index=False),
            ]
    failed = runs[~runs["status"].isin(FINISHED)]
    if not failed.empty:
        lines += ["", "## Failed jobs", ""]
        lines += [f"- `{r.job}` ({r.status}): {r.error}" for r in failed.itertuples()]
    for title, items in (("Jobs left out of the aggregates", left_out(runs)), ("Damaged jobs (skipped)", damaged)):
        lines += ["", f"## {title}", "", *items] if items else []
    thresholds = done.groupby("env")["reward_threshold"].first().to_dict()
    figures = [
        (plot_curves(curves_of(runs), root / "curves.png", thresholds), "learning curves"),
        (plot_profile(runs, root / "profile.png", reps // 2), "performance profile"),
    ]
    shown_figures = [f"![{what}]({path.name})" for path, what in figures if path is not None]
    if shown_figures:
        lines += ["", *shown_figures]
    text = "\n".join(lines) + "\n"
    rundir.write_text(root / "report.md", text)
    return text


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(
        prog="python -m rlrun.report", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("sweep_dir", type=Path)
    args = p.parse_args(argv)
    if not args.sweep_dir.is_dir():
        p.error(f"{args.sweep_dir} is not a directory")
    print(write_report(args.sweep_dir))


if __name__ == "__main__":
    main()
