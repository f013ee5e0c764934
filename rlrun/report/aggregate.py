"""The report's statistics, by rliable (Agarwal et al. 2021): per configuration the interquartile mean (IQM)
of its seeds with a 95% stratified bootstrap confidence interval, and P(X > Y) between configurations.
Every bootstrap is seeded, so a report is repeatable; numpy's global generator is given back untouched.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
import pandas as pd

from rlrun.sweeps.jobtable import EVAL, FINISHED, TRAIN, quiet

BOOTSTRAP_REPS = 2000  # resamples behind an IQM interval; P(X > Y) and profile bands (dearer) take half


@contextmanager
def bootstrap_seed(seed: int) -> Iterator[None]:
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
    # the report extra: imported (here and below) only when a report is drawn
    from rliable import library as rly

    scores = np.asarray(scores, dtype=float)
    if len(scores) == 0:
        return np.nan, np.nan, np.nan
    with bootstrap_seed(seed):  # rliable's bootstrap of its aggregate_iqm (`trimmed_mean`: the same maths)
        point, ci = rly.get_interval_estimates({"x": scores[:, None]}, lambda x: np.array([trimmed_mean(x)]), reps=reps)
    return float(point["x"][0]), float(ci["x"][0, 0]), float(ci["x"][1, 0])


def pairwise_improvement(scores_x: np.ndarray, scores_y: np.ndarray) -> float:
    """rliable's `probability_of_improvement` (per task the Mann-Whitney U statistic over n x m, averaged over
    tasks: the share of (x, y) pairs with x > y, ties counting half) without scipy's test machinery, which
    costs ~1 ms per call and the bootstrap calls it once per resample. The same numbers: U counts half-ranks,
    sums of halves are exact in floating point."""
    x, y = scores_x[:, None, :], scores_y[None, :, :]
    pairs = (x > y).sum(axis=(0, 1)) + 0.5 * (x == y).sum(axis=(0, 1))
    return float(np.mean(pairs / (scores_x.shape[0] * scores_y.shape[0])))


def improvement_probability(
    x: np.ndarray, y: np.ndarray, reps: int = BOOTSTRAP_REPS // 2, seed: int = 0
) -> tuple[float, float, float]:
    """P(X > Y): the chance that a run of X scores above a run of Y (ties count half), with its 95%
    stratified bootstrap CI."""
    from rliable import library as rly

    with bootstrap_seed(seed):
        point, ci = rly.get_interval_estimates(
            {"xy": (np.asarray(x, float)[:, None], np.asarray(y, float)[:, None])},
            pairwise_improvement,
            reps=reps,
        )
    low, high = np.ravel(ci["xy"])
    return float(point["xy"]), float(low), float(high)


def finished_runs(runs: pd.DataFrame) -> pd.DataFrame:
    done = runs[runs["status"].isin(FINISHED)].copy() if not runs.empty else runs
    numbers = [EVAL, TRAIN, "solved_step", "reward_threshold", "wall_time_s"]
    for column in numbers:
        if column not in done:
            done[column] = np.nan
    done[numbers] = done[numbers].astype(float)
    return done


def score_column(runs: pd.DataFrame) -> str:
    """What profiles and improvement probabilities compare: the greedy evaluation return when every
    finished run has one, else the training return."""
    done = finished_runs(runs)
    return EVAL if len(done) and done[EVAL].notna().all() else TRAIN


def _finite(scores: pd.Series) -> np.ndarray:
    values = scores.to_numpy(dtype=float)
    return values[np.isfinite(values)]


def left_out(runs: pd.DataFrame) -> list[str]:
    """Finished jobs that an aggregate leaves out: a score that is NaN or infinite, or one that is missing
    while other seeds of the configuration have it (one missing everywhere reads "not evaluated")."""
    lines = []
    for config, g in finished_runs(runs).groupby("configuration", sort=True):
        for column in (EVAL, TRAIN):
            values = g[column].to_numpy(dtype=float)
            bad = ~np.isfinite(values)
            for job, value, nonfinite in zip(g["job"][bad], values[bad], g["nonfinite"][bad]):
                if column in nonfinite or not bad.all():
                    what = f"{column} is {value}" if column in nonfinite else f"no {column}"
                    lines.append(f"- `{job}`: {what}, left out of the IQM of {config}")
    return lines


def job_wall_times(runs: pd.DataFrame) -> pd.Series:
    """Each job's wall time: its run's, or for an agent of a batched process (`process_agents` K) its
    process's divided by K, so that a batched sweep's jobs add up to its processes' time."""
    shared = runs["process_agents"].fillna(1).astype(float) if "process_agents" in runs else 1.0
    return runs["wall_time_s"] / shared


def batched_jobs(runs: pd.DataFrame) -> int:
    """How many of the finished jobs were agents of a batched process."""
    return int((finished_runs(runs).get("process_agents", pd.Series(dtype=float)).fillna(1) > 1).sum())


def summarize(runs: pd.DataFrame, reps: int = BOOTSTRAP_REPS) -> pd.DataFrame:
    """One row per configuration, over its finished seeds."""
    rows = []
    for config, g in finished_runs(runs).groupby("configuration", sort=True):
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
                "wall_time_s_mean": float(job_wall_times(g).mean()),
            }
        )
        rows.append(row)
    return pd.DataFrame(rows)


def improvement_table(runs: pd.DataFrame, table: pd.DataFrame, reps: int = BOOTSTRAP_REPS // 2) -> pd.DataFrame:
    """Per env with two or more configurations: P(best > other) for each other configuration, the best
    being the highest IQM of the compared score."""
    column = score_column(runs)
    iqm = "eval_return_iqm" if column == EVAL else "train_return_iqm"
    done = finished_runs(runs)
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


def numeric_settings(runs: pd.DataFrame) -> list[str]:
    """The swept keys whose settings are all numbers (`optimizer.lr`, `algo.gamma`, ...), in label order:
    the keys a sensitivity figure draws on its x axis."""
    keys: dict[str, set[float]] = {}
    numeric: dict[str, bool] = {}
    for settings in runs.get("settings", pd.Series(dtype=object)):
        for key, value in settings.items():
            try:
                keys.setdefault(key, set()).add(float(value))
                numeric.setdefault(key, True)
            except ValueError:
                numeric[key] = False
    return [k for k in keys if numeric[k] and len(keys[k]) > 1]


def others_label(settings: dict[str, str], key: str, population: str = "") -> str:
    """A job's settings of the swept keys other than `key` (after its PBT population's label), as a line of
    a sensitivity figure names them."""
    rest = " ".join([population] * bool(population) + [f"{k}={v}" for k, v in settings.items() if k != key])
    return rest or "all jobs"


def sensitivity(runs: pd.DataFrame, reps: int = BOOTSTRAP_REPS) -> pd.DataFrame:
    """Per env and swept numeric key (`numeric_settings`): for each setting of the key and each setting of
    the other swept keys, the IQM over seeds of the final return (`score_column`) with its 95% stratified
    bootstrap CI (`iqm_ci`). Columns: env, key, value, others, seeds, iqm, ci95_low, ci95_high, score."""
    column = score_column(runs)
    done = finished_runs(runs)
    rows = []
    for key in numeric_settings(done):
        has_key = done[[key in s for s in done["settings"]]]
        points = has_key.assign(
            value=[float(s[key]) for s in has_key["settings"]],
            others=[others_label(s, key, p) for s, p in zip(has_key["settings"], has_key["population"])],
        )
        for (env, others, value), g in points.groupby(["env", "others", "value"], sort=True):
            scores = _finite(g[column])
            iqm, lo, hi = iqm_ci(scores, reps)
            rows.append((env, key, value, others, len(scores), iqm, lo, hi, column))
    return pd.DataFrame(
        rows, columns=["env", "key", "value", "others", "seeds", "iqm", "ci95_low", "ci95_high", "score"]
    )
