"""The two arms of a comparison as per-seed scores, read from their run directories with the report's readers
(`rlrun.report.run_dirs`, `load_run`, `load_curve`): a batched run counts as its agents, a sweep as its jobs.

Per seed: `solved` (the 100-episode training mean reached the env's threshold within the budget), `steps`
(the env steps per agent it took to reach it; a seed that never did counts at the budget), `final`
(the mean return of the last 100 training episodes) and `auc` (the mean of the 100-episode mean training
return over the run's env steps: the area under its learning curve divided by its length).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from rlrun.errors import ConfigError
from rlrun.report import FINISHED, TRAIN, curves_of, load_run, run_dirs
from rlrun.storage.summary import DamagedJob

METRICS = ("solved", "steps", "final", "auc")
# The largest magnitude a return can have: rewards and the returns rlrun logs are 32-bit floats (TensorBoard's
# scalars too), so a larger one, like a non-finite one, was written by hand, not by a run
RETURN_BOUND = float(np.finfo(np.float32).max)
NOT_A_SCORE = {  # why a summary's number is not a score, as the left-out list says it
    TRAIN: f"not a return (a finite number of magnitude at most {RETURN_BOUND:.3g})",
    "solved_step": "not a step count (an integer from 0 to the run's env steps)",
    "auc": f"not an area under a curve of returns (finite, of magnitude at most {RETURN_BOUND:.3g})",
}


def a_return(value: object) -> bool:
    """Whether `value` can be a return (a 100-episode mean, an area under a curve of them)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and abs(value) <= RETURN_BOUND


def integer(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def impossible(row: dict, budget: int | None) -> str | None:
    """The first score field of a run's summary that holds a number no run writes, and why; None if none. A
    solved step is at most the run's own env steps (its summary's), else its budget (a resume may have raised
    the budget that `.hydra/config.yaml` holds)."""
    final, step, done = row.get(TRAIN), row.get("solved_step"), row.get("env_steps")
    last = done if integer(done) else budget
    if final is not None and not a_return(final):  # NaN and inf fail the comparison too
        return f"{TRAIN} is {final!r}, {NOT_A_SCORE[TRAIN]}"
    if step is not None and (not integer(step) or step < 0 or (last is not None and step > last)):
        return f"solved_step is {step!r}, {NOT_A_SCORE['solved_step']}"
    return None


def read_arm(name: str, folder: Path) -> pd.DataFrame:
    """One row per finished run under `folder`, indexed by its seed (from its composed config): job, env,
    budget, threshold, solved_step, solved, steps, final. An agent that a non-finite update stopped (status
    `failed` beside its `nonfinite.pt`) counts as what it reached before (never solved after: at the budget
    for `steps`), not as a missing seed, which would favour the arm that diverges. Other unfinished or damaged
    runs are left out (`attrs["left_out"]`); a seed found twice is refused (ConfigError: which runs would pair
    is ambiguous)."""
    rows, left = [], []
    where: dict[int, Path] = {}
    for d in run_dirs(folder):
        try:
            row = load_run(d)
        except DamagedJob as e:
            left.append(f"{d}: {e}")
            continue
        seed = row["seed"]  # the composed config's, where it is an integer (load_run)
        if seed is None:
            left.append(f"{d}: no seed in .hydra/config.yaml")
            continue
        if seed in where:
            raise ConfigError(name, str(folder), f"a folder with one run per seed (seed {seed}: {where[seed]} and {d})")
        where[seed] = d
        diverged = row["status"] == "failed" and (d / "nonfinite.pt").is_file()
        if row["status"] not in FINISHED and not diverged:
            left.append(f"{d}: {row['status']}")
            continue
        final = row.get(TRAIN)
        budget = row.get("cfg.total_steps")  # one that is no integer is not shown, nor counted for `steps`
        budget = budget if integer(budget) else None
        if (why := impossible(row, budget)) is not None:  # a crafted number is never scored
            left.append(f"{d}: summary.json: {why}")
            continue
        solved_step = row.get("solved_step")
        rows.append(
            {
                "seed": seed,
                "job": str(d),
                "env": str(row.get("cfg.env.id")),  # text, as the report shows it
                "budget": budget,
                "threshold": row.get("reward_threshold"),
                "solved_step": solved_step,
                "solved": solved_step is not None,
                # at least the budget where never solved: the difference to a seed that solved is understated
                "steps": float(solved_step if solved_step is not None else budget if budget is not None else np.nan),
                "final": np.nan if final is None else float(final),
            }
        )
    table = pd.DataFrame(
        rows, columns=["seed", "job", "env", "budget", "threshold", "solved_step", "solved", "steps", "final"]
    ).set_index("seed")
    table.attrs["left_out"] = left
    return table.sort_index()


def curve_area(curve: pd.DataFrame) -> float:
    """The mean of a (step, value) curve over its steps (trapezoids); its one value for a single point."""
    if curve.empty:
        return float("nan")
    steps, values = curve["step"].to_numpy(float), curve["value"].to_numpy(float)
    if len(steps) == 1 or steps[-1] == steps[0]:
        return float(values[-1])
    return float(np.sum((values[1:] + values[:-1]) / 2 * np.diff(steps)) / (steps[-1] - steps[0]))


def curves(table: pd.DataFrame, label: str) -> pd.DataFrame:
    """Every run's 100-episode mean training curve, in the report's long format (job, configuration, env). A
    run whose curve is damaged (a CSV value that is no number) has none: `attrs["damaged"]` lists (job, why)."""
    return curves_of(table.assign(configuration=label), finished_only=False)


def with_auc(table: pd.DataFrame, arm_curves: pd.DataFrame) -> pd.DataFrame:
    """`table` with its `auc` column, from the arm's curves. A run whose curve holds a value that is no return
    (non-finite, beyond `RETURN_BOUND`) is left out (`attrs["left_out"]` names it)."""
    areas = {job: curve_area(c) for job, c in arm_curves.groupby("job")}
    bad = {
        job: float(values[0])
        for job, c in arm_curves.groupby("job")
        if len(values := [v for v in c["value"].to_numpy(float) if not a_return(v)])
    }
    left = [f"{job}: its curve holds {value!r}, {NOT_A_SCORE['auc']}" for job, value in bad.items()]
    left += [f"{job}: {why}" for job, why in arm_curves.attrs.get("damaged", [])]
    damaged = {job for job, _ in arm_curves.attrs.get("damaged", [])}
    out = table[~table["job"].isin(bad) & ~table["job"].isin(damaged)]
    out = out.assign(auc=[areas.get(job, np.nan) for job in out["job"]])
    out.attrs = {**table.attrs, "left_out": [*table.attrs.get("left_out", []), *left]}
    return out


def paired(a: pd.DataFrame, b: pd.DataFrame, metric: str) -> tuple[pd.DataFrame, list[int]]:
    """The seeds both arms finished, with both scores (`a_<column>`, `b_<column>`), and the seeds left out
    because one arm's score is missing (a run stopped by a non-finite update has no final return)."""
    both = pd.concat([a.add_prefix("a_"), b.add_prefix("b_")], axis=1, join="inner")
    if metric == "solved":
        return both, []
    missing = both[both[f"a_{metric}"].isna() | both[f"b_{metric}"].isna()].index.tolist()
    return both.drop(index=missing), missing
