"""The report itself: its tables in markdown, and `write_report`, which puts report.md, report.csv,
curves.png and profile.png into the sweep directory."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from rlrun.config.runnames import swept_in
from rlrun.report.aggregate import (
    BOOTSTRAP_REPS,
    batched_jobs,
    finished_runs,
    improvement_table,
    left_out,
    summarize,
)
from rlrun.report.plots import plot_curves, plot_profile
from rlrun.storage import bounded, rundir
from rlrun.sweeps.jobtable import EVAL, EVAL_TAG, FINISHED, curves_of, load_sweep

MIN_SEEDS = 5  # below this the report warns that its confidence intervals are unreliable


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


def shared_settings(root: Path, runs: pd.DataFrame) -> list[str]:
    """A line per sweep naming the overrides every one of its jobs has (its job directories name only the
    swept keys): the command line's overrides that are no sweep, read from the sweep's multirun.yaml."""
    lines = []
    for sweep in sorted(set(runs["sweep"]) - {""}) if "sweep" in runs else []:
        try:
            task = [str(o) for o in bounded.load_yaml(root / sweep / "multirun.yaml")["hydra"]["overrides"]["task"]]
        except (bounded.FileRefused, KeyError, TypeError):
            continue
        swept = swept_in(task)
        constant = [o for o in task if o.lstrip("+~").partition("=")[0] not in swept]
        if constant:
            lines += [f"Every job of the sweep `{sweep}` has " + " ".join(f"`{o}`" for o in constant) + ".", ""]
    return lines


def pooled(runs: pd.DataFrame) -> list[str]:
    """A warning line per configuration whose seeds come from more than one sweep (or from a sweep and
    single runs): they are pooled as one configuration, which holds only if nothing else differed."""
    if runs.empty or "sweep" not in runs:
        return []
    lines = []
    for config, g in runs.groupby("configuration", sort=True):
        origins = sorted(set(g["sweep"]))
        if len(origins) > 1:
            named = ", ".join(f"`{o}`" if o else "single runs" for o in origins)
            lines += [
                f"**Warning:** the seeds of {config} come from {len(origins)} sweeps ({named}) and are pooled as "
                "one configuration: compare each sweep's multirun.yaml, or report the sweeps one by one.",
                "",
            ]
    return lines


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


def shown(text: str) -> str:
    """`text` as UTF-8 can hold it: a path's bytes that are not UTF-8 (a job directory named on another
    system), which Python keeps as surrogates, are shown as `\\xff` escapes."""
    return text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def write_report(root: Path, reps: int = BOOTSTRAP_REPS, out: Path | None = None) -> str:
    """Write report.md, report.csv, curves.png and profile.png into `out` (made if missing; by default
    `root`, the sweep directory); returns the markdown. An `OSError` names what could not be written."""
    root = Path(root)
    out = root if out is None else Path(out)
    runs = load_sweep(root)
    damaged = [f"- `{job}`: {why}" for job, why in runs.attrs["damaged"]]
    for job, why in runs.attrs["damaged"]:
        print(f"rlrun: warning: skipped the damaged job {job}: {why}", file=sys.stderr)
    if runs.empty:
        return shown("\n".join([f"No readable runs under {root}.", *damaged]))
    table = summarize(runs, reps)
    out.mkdir(parents=True, exist_ok=True)
    rundir.write_text(out / "report.csv", shown(table.to_csv(index=False)))
    done = finished_runs(runs)
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
    lines += shared_settings(root, runs) + pooled(runs)
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
        if shared := batched_jobs(runs):
            lines[-1] += (
                f" Wall time: {_plural(shared, 'job')} trained as agents of batched processes; each is "
                "given its process's training time divided by the agents the process trained (shared, not its own)."
            )
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
        (plot_curves(curves_of(runs), out / "curves.png", thresholds, 100, curves_of(runs, EVAL_TAG)), "curves"),
        (plot_profile(runs, out / "profile.png", reps // 2), "performance profile"),
    ]
    shown_figures = [f"![{what}]({path.name})" for path, what in figures if path is not None]
    if shown_figures:
        lines += ["", *shown_figures]
    text = shown("\n".join(lines) + "\n")
    rundir.write_text(out / "report.md", text)
    return text
