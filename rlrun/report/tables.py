"""The report itself: its tables in markdown, and `write_report`, which puts report.md, report.csv,
curves.png, profile.png and sensitivity.png into the sweep directory (or the directory it is given)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np
import pandas as pd
from hydra.errors import OverrideParseException

from rlrun.config.overrides import override_key
from rlrun.config.runnames import swept_in
from rlrun.report.aggregate import (
    BOOTSTRAP_REPS,
    batched_jobs,
    finished_runs,
    improvement_table,
    left_out,
    sensitivity,
    summarize,
)
from rlrun.report.destination import refuse_link
from rlrun.report.plots import plot_curves, plot_profile, plot_sensitivity, plural
from rlrun.report.search import search_section
from rlrun.storage import bounded, rundir
from rlrun.sweeps.continuation import MULTIRUN, is_sweep, planned_jobs
from rlrun.sweeps.jobtable import (
    EVAL,
    EVAL_TAG,
    FINISHED,
    INCOMPLETE,
    curves_of,
    folder_name,
    holds_agents,
    latest_per_seed,
    load_runs,
)

MIN_SEEDS = 5  # below this the report warns that its confidence intervals are unreliable


def counted(runs: pd.DataFrame, not_started: int = 0) -> str:
    """'N jobs' (`not_started`: jobs a sweep planned that have no directory yet, counted in); where batched
    runs (`seeds=K`, `agents=[...]`) count as their agents (a row is a seed, not a process), 'N runs, the
    agents of J jobs' (or 'M of them the agents of J jobs')."""
    parents = [Path(job).parent for job in runs.job]
    batched = {p for p in set(parents) if holds_agents(p)}  # each parent's config read once
    agents = sum(p in batched for p in parents)
    if not agents:
        return plural(len(runs) + not_started, "job")
    which = "the" if agents == len(runs) else f"{agents} of them the"
    return f"{plural(len(runs), 'run')}, {which} agents of {plural(len(batched), 'job')}"


def sweep_plans(roots: list[Path]) -> dict[Path, list[Path]]:
    """Each sweep under `roots` (a folder with multirun.yaml) whose planned jobs are known: its job directories."""
    sweeps = {}
    for root in roots:
        for found in sorted(root.rglob(MULTIRUN)) if root.is_dir() else []:
            planned = planned_jobs(found.parent) if is_sweep(found.parent) else None
            if planned is not None:
                sweeps[found.parent] = planned
    return sweeps


def not_started(plans: dict[Path, list[Path]], runs: pd.DataFrame) -> list[tuple[Path, Path]]:
    """(sweep, job directory) of each planned job that has not started: no run of it was found."""
    found = {os.path.abspath(job) for job in runs.job}
    return [(sweep, d) for sweep, dirs in plans.items() for d in dirs if os.path.abspath(d) not in found]


def with_sweep_command(job: str, how: str, plans: dict[Path, list[Path]]) -> str:
    """How an unfinished job goes on, with its sweep's continue command where it belongs to a planned sweep."""
    sweep = next((s for s, dirs in plans.items() if os.path.abspath(job) in map(os.path.abspath, dirs)), None)
    if sweep is None:
        return how
    if "no checkpoint" in how:
        how = "stopped before its first checkpoint (or still running)"
    return f"{how}; continue the sweep (every job not finished) with {rundir.resume_command(Path(sweep))}"


def more_seeds(runs: pd.DataFrame, few: pd.DataFrame) -> str:
    """How to run more seeds of these configurations: `seeds=5` where their runs are the agents of a batched or
    PBT run (`seeds=K`), `seed=0,1,2,3,4` where they are jobs of their own, both where they are both."""
    parents = {Path(job).parent for job in runs[runs.configuration.isin(few.configuration)].job}
    batched = {p for p in parents if holds_agents(p)}
    ways = ([f"`seed={','.join(map(str, range(MIN_SEEDS)))}`"] if parents - batched else []) + (
        [f"`seeds={MIN_SEEDS}` for the agents of a batched or PBT run"] if batched else []
    )
    return "e.g. " + " or ".join(ways)


def _ci_cell(iqm: float, lo: float, hi: float, n: int) -> str:
    if not np.isfinite(iqm):
        return "not evaluated"
    return f"{iqm:.1f}" if n < 2 else f"{iqm:.1f} [{lo:.1f}, {hi:.1f}]"


class NoRunsError(ValueError):
    """The folders given to a report hold no readable run."""


def shared_settings(runs: pd.DataFrame) -> list[str]:
    """A line per sweep naming the overrides every one of its jobs has (its job directories name only the
    swept keys): the command line's overrides that are no sweep, read from the sweep's multirun.yaml."""
    lines = []
    sweeps = runs[runs["sweep"] != ""].groupby("sweep")["sweep_dir"].first() if "sweep" in runs else {}
    for sweep, sweep_dir in sorted(dict(sweeps).items()):
        try:
            task = bounded.load_yaml(Path(sweep_dir) / "multirun.yaml")["hydra"]["overrides"]["task"]
            if not isinstance(task, list) or not all(isinstance(o, str) for o in task):
                continue
            swept = swept_in(task)
        except (bounded.FileRefused, KeyError, TypeError, OverrideParseException):  # a crafted command line
            continue
        constant = [o for o in task if override_key(o) not in swept]
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
    """`aggregate.summarize`'s table as report.md shows it, a row per configuration."""
    rows = []
    for r in table.itertuples():
        if not np.isfinite(r.reward_threshold):
            steps = "no threshold"
        elif r.solved_seeds == 0:
            steps = f"not reached ({r.solved})"
        else:
            steps = f"{r.steps_to_threshold_median:,.0f} ({r.solved})"
        rows.append(
            (
                r.configuration,
                r.seeds,
                _ci_cell(r.eval_return_iqm, r.eval_return_ci95_low, r.eval_return_ci95_high, r.seeds),
                _ci_cell(r.train_return_iqm, r.train_return_ci95_low, r.train_return_ci95_high, r.seeds),
                steps,
                f"{r.wall_time_s_mean:.1f}",
            )
        )
    columns = [
        "configuration",
        "seeds",
        "greedy eval IQM [95% CI]",
        "training return IQM [95% CI]",
        "steps to threshold (median, solved)",
        "wall time (s)",
    ]
    shown = pd.DataFrame(rows, columns=columns)
    return shown.to_markdown(index=False, colalign=["left", "right", "right", "right", "right", "right"])


def shown(text: str) -> str:
    """`text` as UTF-8 can hold it: a path's bytes that are not UTF-8 (a job directory named on another
    system), which Python keeps as surrogates, are shown as `\\xff` escapes."""
    return text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def merged_seeds(merged: list[tuple[str, list[str]]]) -> list[str]:
    """A line per seed that several jobs of one configuration ran: the job kept and the jobs left out."""
    return [f"- `{kept}` kept; left out: " + ", ".join(f"`{d}`" for d in dropped) for kept, dropped in merged]


def sensitivity_section(runs: pd.DataFrame, out: Path, reps: int) -> list[str]:
    """The sensitivity figure of each swept numeric key (`aggregate.sensitivity`), with its caption; the
    trials of a sampled search (Optuna) get a figure of their own (`search.search_section`)."""
    lines, runs = search_section(runs, out)
    points = sensitivity(runs, reps)
    path = plot_sensitivity(points, out / ("sensitivity_grid.png" if lines else "sensitivity.png"))
    if path is None:
        return lines
    keys = ", ".join(f"`{k}`" for k in dict.fromkeys(points["key"]))
    what = "greedy evaluation return" if points["score"].iloc[0] == EVAL else "training return"
    return lines + [
        "",
        f"![sensitivity]({path.name})",
        "",
        f"Sensitivity: the final {what} (IQM over seeds, 95% stratified bootstrap CI) against each swept number "
        f"({keys}; a log axis where its settings span a factor of 10 or more), one line per setting of the other "
        "swept keys.",
    ]


def curves_figure(runs: pd.DataFrame, out: Path, thresholds: dict[str, float]) -> tuple[Path | None, list[str]]:
    """curves.png (the training and greedy-evaluation curves of the finished jobs; None where there are none)
    and the curves it leaves out because they cannot be read, one line each (each also said on stderr)."""
    train, evals = curves_of(runs), curves_of(runs, EVAL_TAG)
    unreadable = []
    for what, curves in (("training curve", train), ("evaluation curve", evals)):
        for job, why in curves.attrs["damaged"]:
            print(f"rlrun: warning: left out the {what} of {job}: {why}", file=sys.stderr)
            unreadable.append(f"- `{job}` ({what}): {why}")
    return plot_curves(train, out / "curves.png", thresholds, 100, evals), unreadable


def _read(roots: list[Path]) -> tuple[pd.DataFrame, pd.DataFrame, list[str]]:
    """The runs found under `roots`, the runs kept (one per configuration and seed) and the damaged jobs'
    lines, each skip and repeat warned about on stderr. Raises `NoRunsError` where no run was found."""
    found = load_runs(roots)
    damaged = [f"- `{job}`: {why}" for job, why in found.attrs["damaged"]]
    for job, why in found.attrs["damaged"]:
        print(f"rlrun: warning: skipped the damaged job {job}: {why}", file=sys.stderr)
    if found.empty:
        folders = ", ".join(str(r) for r in roots)
        raise NoRunsError(
            f"no readable runs under {folders} (a run is a directory holding .hydra/config.yaml"
            + (f"; {len(damaged)} damaged)" if damaged else ")")
        )
    runs = latest_per_seed(found)
    for kept, dropped in runs.attrs["merged"]:
        print(
            f"rlrun: warning: {len(dropped) + 1} jobs ran the same configuration and seed; kept {kept}, left out "
            + ", ".join(dropped),
            file=sys.stderr,
        )
    return found, runs, damaged


def _headline(
    roots: list[Path], found: pd.DataFrame, runs: pd.DataFrame, table: pd.DataFrame, waiting: int, damaged: int
) -> list[str]:
    """The report's title and its count of runs (finished, unfinished, not started, damaged, repeats)."""
    done = finished_runs(runs)
    envs = ", ".join(
        f"{env} (solve threshold {t:g})" if np.isfinite(t) else str(env)
        for env, t in done.groupby("env")["reward_threshold"].first().items()
    )
    unfinished = int((runs["status"] == INCOMPLETE).sum())
    return [
        f"# Sweep report: {', '.join(folder_name(r) for r in roots)}",
        "",
        f"{counted(runs, waiting)} ({len(done)} finished"
        + (f", {unfinished} unfinished" if unfinished else "")
        + (f", {waiting} not started" if waiting else "")
        + (f", {damaged} damaged and skipped" if damaged else "")
        + (f"; {plural(len(found) - len(runs), 'repeat')} of a seed left out" if runs.attrs["merged"] else "")
        + f"), {plural(len(table), 'configuration')}"
        + (f"; {envs}." if envs else "."),
        "",
    ]


def _notes(runs: pd.DataFrame, table: pd.DataFrame) -> list[str]:
    """The note on repeated seeds and the warning on configurations with too few seeds, where they apply."""
    lines = []
    if merged := runs.attrs["merged"]:
        lines += [
            f"**Note:** {plural(len(merged), 'seed')} of a configuration ran more than once; each counts once, "
            "by its latest finished job (see Repeated seeds).",
            "",
        ]
    few = table[table.seeds < MIN_SEEDS] if not table.empty else table
    if not few.empty:
        lines += [
            f"**Warning:** {plural(len(few), 'configuration')} with fewer than {MIN_SEEDS} seeds "
            f"({', '.join(str(n) for n in sorted(set(few.seeds)))}): confidence intervals from so few runs are "
            f"wide and unreliable. Run at least {MIN_SEEDS} seeds per configuration ({more_seeds(runs, few)}).",
            "",
        ]
    return lines


def _aggregates(runs: pd.DataFrame, table: pd.DataFrame, out: Path, reps: int) -> list[str]:
    """The table of configurations with how to read it, the sensitivity section (its figure written into
    `out`) and the probability of improvement."""
    lines = [
        markdown_table(table),
        "",
        "IQM: the mean of the middle 50% of the seeds; [low, high]: 95% stratified bootstrap confidence "
        f"interval ({reps} resamples; rliable). Greedy eval: `final_eval_return`, the last greedy "
        "evaluation; training return: the mean of the last 100 training episodes (exploration included).",
    ]
    if shared := batched_jobs(runs):
        lines[-1] += (
            f" Wall time: {plural(shared, 'run')} trained as agents of batched processes; each is "
            "given its process's training time divided by the agents the process trained (shared, not its own)."
        )
    lines += sensitivity_section(runs, out, reps)
    improvement = improvement_table(runs, table, reps // 2)
    if improvement.empty:
        return lines
    what = "greedy evaluation return" if improvement.score.iloc[0] == EVAL else "training return"
    cells = [f"{r.p:.2f} [{r.ci95_low:.2f}, {r.ci95_high:.2f}]" for r in improvement.itertuples()]
    pairs = pd.DataFrame({"X": improvement.x, "Y": improvement.y, "P(X > Y) [95% CI]": cells})
    return lines + [
        "",
        f"## Probability of improvement ({what})",
        "",
        "The chance that a run of X, the configuration with the highest IQM, scores above a run of Y.",
        "",
        pairs.to_markdown(index=False),
    ]


def _jobs_to_act_on(runs: pd.DataFrame, waiting: list[tuple[Path, Path]], plans: dict[Path, list[Path]]) -> list[str]:
    """The failed, unfinished and not started jobs, each with what to do about it."""
    lines = []
    failed = runs[~runs["status"].isin([*FINISHED, INCOMPLETE])]
    if not failed.empty:
        lines += ["", "## Failed jobs", ""]
        lines += [f"- `{r.job}` ({r.status}): {r.error}" for r in failed.itertuples()]
    unfinished = runs[runs["status"] == INCOMPLETE]
    if not unfinished.empty:
        lines += ["", "## Unfinished jobs", ""]
        lines += [f"- `{r.job}`: {with_sweep_command(r.job, r.error, plans)}" for r in unfinished.itertuples()]
    if waiting:
        lines += ["", "## Jobs not started", ""]
        lines += [f"- `{job}`: continue the sweep with {rundir.resume_command(Path(sweep))}" for sweep, job in waiting]
    return lines


def write_report(root: Path | list[Path], reps: int = BOOTSTRAP_REPS, out: Path | None = None) -> str:
    """Write report.md, report.csv, curves.png, profile.png and sensitivity.png into `out` (by default the one
    folder `root`) for the runs under `root` (a folder, or several); returns the markdown. Runs of the same
    configuration and seed count once (`latest_per_seed`). Raises `NoRunsError` where no run was found."""
    roots = [Path(r) for r in ([root] if isinstance(root, (str, Path)) else root)]
    if out is None:
        if len(roots) != 1:
            raise ValueError("a report of several folders needs the folder to write it into (out=...)")
        out = roots[0]
    refuse_link(Path(out))
    found, runs, damaged = _read(roots)
    table = summarize(runs, reps)
    rundir.write_text(out / "report.csv", shown(table.to_csv(index=False)))
    plans = sweep_plans(roots)
    waiting = not_started(plans, found)
    lines = _headline(roots, found, runs, table, len(waiting), len(damaged))
    lines += shared_settings(runs) + pooled(runs) + _notes(runs, table)
    if not table.empty:
        lines += _aggregates(runs, table, out, reps)
    lines += _jobs_to_act_on(runs, waiting, plans)
    thresholds = finished_runs(runs).groupby("env")["reward_threshold"].first().to_dict()
    curves, unreadable = curves_figure(runs, out, thresholds)
    sections = (
        ("Jobs left out of the aggregates", left_out(runs)),
        ("Repeated seeds (one job kept per configuration and seed)", merged_seeds(runs.attrs["merged"])),
        ("Damaged jobs (skipped)", damaged),
        ("Curves left out (unreadable)", unreadable),
    )
    for title, items in sections:
        lines += ["", f"## {title}", "", *items] if items else []
    figures = [(curves, "curves"), (plot_profile(runs, out / "profile.png", reps // 2), "performance profile")]
    shown_figures = [f"![{what}]({path.name})" for path, what in figures if path is not None]
    if shown_figures:
        lines += ["", *shown_figures]
    text = shown("\n".join(lines) + "\n")
    rundir.write_text(out / "report.md", text)
    return text
