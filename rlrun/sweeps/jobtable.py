"""A sweep's jobs read from disk, for `rlrun.report`: one row per job, and the jobs that could not be read.

A job's files may be damaged (a `summary.json` cut by a full disk, a `.hydra/config.yaml` edited by hand):
such a job is left out of the table and named with the reason (`load_sweep(...).attrs["damaged"]`), so
one bad job never stops the report of the others.
"""

from __future__ import annotations

import logging
import math
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pandas as pd

from rlrun.config.overrides import override_values
from rlrun.storage import agent_dirs, bounded, rundir, summary as run_summary
from rlrun.storage.summary import EVAL, TRAIN, DamagedJob, Summary, read_file
from rlrun.sweeps.labels import flatten, labelled, pbt_explored

CURVE_TAG = "charts/mean_return_100"
EVAL_TAG = "eval/mean_return"
FINISHED = ("finished", "solved")
INCOMPLETE = "incomplete"  # no summary.json (yet)
CHECKPOINT = "checkpoint.pt"  # rlrun.storage.checkpoint.LATEST, without importing torch


def _choices(path: Path) -> dict[str, Any]:
    """The option chosen in each config group (Hydra's `runtime.choices`); {} where it cannot be read."""
    try:
        choices = bounded.load_yaml(path)["hydra"]["runtime"]["choices"]
    except (bounded.FileRefused, KeyError, TypeError):
        return {}
    return choices if isinstance(choices, dict) else {}


def folder_name(path: Path) -> str:
    """A folder as the report names it: as given, or its own name where that is `.` or `..`."""
    return path.resolve().name if path.name in ("", ".", "..") else str(path)


def sweep_of(job: Path, root: Path) -> tuple[str, str]:
    """The sweep a job belongs to: its nearest directory (up to `root`) holding Hydra's multirun.yaml, as
    (name, directory). The name is its path relative to `root`, or `root`'s own name where `root` is the
    sweep (never "."); ("", "") for a job of no sweep (a single run)."""
    for parent in job.parents:
        if (parent / "multirun.yaml").is_file():
            if parent != root and parent.is_relative_to(root):
                return parent.relative_to(root).as_posix(), str(parent)
            return folder_name(parent), str(parent)
        if parent == root or root not in parent.parents:
            break
    return "", ""


def run_dirs(root: Path) -> list[Path]:
    """Every run under `root`: a directory holding `.hydra/config.yaml`. A batched run (`seeds=K`) counts
    as its K agents (its `seed=*` subdirectories), exactly like K single-seed jobs.

    Links to directories are followed for reading (a folder of links to runs is a selection of runs), each
    real directory once: a link loop or a second link to the same run adds nothing."""
    found, seen = [], set()
    for top, subdirs, _ in os.walk(root, followlinks=True):
        real = os.path.realpath(top)
        if real in seen:
            subdirs[:] = []
            continue
        seen.add(real)
        subdirs.sort()
        if os.path.isfile(os.path.join(top, ".hydra", "config.yaml")):
            found.append(Path(top))
    dirs = sorted(found)
    inside = {parent for d in dirs for parent in d.parents}
    return [d for d in dirs if d not in inside or not holds_agents(d)]


def holds_agents(run_dir: Path) -> bool:
    """Whether `run_dir` is a batched run whose agents are runs below it, counted as their directories:
    `seeds` > 1 or an `agents` list in its config. A single run that holds another run below it (a
    `hydra.run.dir` chosen inside it) stays a run; so does one whose config cannot be read (none there, or
    damaged: the report names it)."""
    try:
        cfg = bounded.load_yaml(run_dir / ".hydra" / "config.yaml")
    except (bounded.FileRefused, OSError):
        return False
    if not isinstance(cfg, dict):
        return False
    if "seeds" not in cfg and "agents" not in cfg:  # a config of an rlrun from before both keys
        return True
    seeds, agents = cfg.get("seeds", 1), cfg.get("agents")
    return (isinstance(seeds, int) and seeds > 1) or (isinstance(agents, list) and len(agents) > 0)


def unfinished(run_dir: Path) -> str:
    """How a job without a summary goes on: its own checkpoint's resume, its batched group's, or neither."""
    if (run_dir / CHECKPOINT).is_file():
        return f"stopped; continue with {rundir.resume_command(run_dir)}"
    group = agent_dirs.batched_group(run_dir)
    if group is not None and (group / CHECKPOINT).is_file():
        return f"stopped with its batched group; continue with {rundir.resume_command(group)}"
    return "no summary and no checkpoint: still running, or stopped before its first checkpoint"


def load_run(run_dir: Path) -> dict[str, Any]:
    """One run as a flat dict: `job`, `configuration`, `seed` (the composed config's), `written` (when its
    summary, else its config, was last written), `status`, `error`, `cfg.*` values, summary fields,
    `nonfinite` (the summary's score fields that are NaN or infinite), and `population` (for an agent of a
    PBT population, its label, e.g. "PBT (truncation) exploring optimizer.lr"; else ""). Raises `DamagedJob`."""
    run_dir = Path(run_dir)
    cfg = read_file(run_dir / ".hydra" / "config.yaml", bounded.load_yaml, dict)
    overrides_file = run_dir / ".hydra" / "overrides.yaml"
    overrides = read_file(overrides_file, lambda p: bounded.load_yaml(p) or [], list) if overrides_file.exists() else []
    if not all(isinstance(o, str) for o in overrides):
        raise DamagedJob("overrides.yaml holds something other than overrides")
    summary_file = run_dir / run_summary.FILE
    summary: Summary = (
        run_summary.read(run_dir) if summary_file.exists() else {"status": INCOMPLETE, "error": unfinished(run_dir)}
    )
    pairs = override_values(overrides)
    pairs.pop("seed", None)
    seed = cfg.get("seed")
    row: dict[str, Any] = {
        "job": str(run_dir),
        "configuration": " ".join(f"{k}={v}" for k, v in sorted(pairs.items())) or "(defaults)",
        "overrides": pairs,
        "seed": seed if isinstance(seed, int) and not isinstance(seed, bool) else None,
        "written": (summary_file if summary_file.exists() else run_dir / ".hydra" / "config.yaml").stat().st_mtime,
        "population": "",
        "explored": [],
        "status": summary.get("status"),
        "error": summary.get("error"),
        "nonfinite": [k for k in (EVAL, TRAIN) if isinstance(v := summary.get(k), float) and not math.isfinite(v)],
    }
    row.update({f"cfg.{k}": v for k, v in flatten(cfg).items()})
    row["choices"] = _choices(run_dir / ".hydra" / "hydra.yaml")
    if (explored := pbt_explored(run_dir.parent)) is not None:
        row["explored"] = explored
        row["population"] = f"PBT ({pairs.get('pbt', 'population')}) exploring {', '.join(explored) or 'nothing'}"
    row.update({k: v for k, v in summary.items() if k not in ("status", "error", "nonfinite", "seed")})
    return row


def load_runs(roots: list[Path]) -> pd.DataFrame:
    """One row per job under the folders `roots` (each job once, whichever folder or link reaches it),
    config values as `cfg.*` columns, `env` the env id, `sweep` the sweep it belongs to ("" for a single run)
    and `sweep_dir` its directory. Damaged jobs are left out: `attrs["damaged"]` lists them as (job
    directory, reason).

    `configuration` names a job by the settings that differ between jobs (seed excluded; `labels.labelled`), so
    settings given to the whole sweep do not clutter the labels; `settings` holds them as a dict.
    """
    rows, damaged, seen = [], [], set()
    for root in map(Path, roots):
        for d in run_dirs(root):
            if (real := os.path.realpath(d)) in seen:
                continue
            seen.add(real)
            try:
                row = load_run(d)
            except DamagedJob as e:
                damaged.append((str(d), str(e)))
                continue
            row["sweep"], row["sweep_dir"] = sweep_of(d, root)
            rows.append(row)
    labelled(rows)
    for r in rows:
        r["env"] = str(r.get("cfg.env.id", ""))  # text, as its label shows it (a crafted id may be a number)
    table = pd.DataFrame(rows).drop(columns=["overrides", "choices", "explored"]) if rows else pd.DataFrame()
    table.attrs["damaged"] = damaged
    return table


def load_sweep(root: Path) -> pd.DataFrame:
    """`load_runs` of one folder."""
    return load_runs([root])


def latest_per_seed(runs: pd.DataFrame) -> pd.DataFrame:
    """`runs` with one job per (configuration, env, seed): runs of the same configuration and seed are one
    seed, not several. The job kept is the latest finished one (by `written`), else the latest;
    `attrs["merged"]` lists (kept job, [the jobs dropped for it]). Jobs without a seed are all kept."""
    if runs.empty or "seed" not in runs:
        out = runs.copy()
        out.attrs["merged"] = []
        return out
    ordered = runs.assign(_done=runs["status"].isin(FINISHED)).sort_values(["_done", "written"], kind="stable")
    keys = ["configuration", "env", "seed"]
    has_seed = ordered["seed"].notna()
    kept = ordered[~has_seed | ~ordered.duplicated(keys, keep="last")]
    merged = []
    for _, g in ordered[has_seed].groupby(keys, sort=True):
        if len(g) > 1:
            merged.append((g["job"].iloc[-1], list(g["job"].iloc[:-1])))
    out = runs.loc[sorted(kept.index)]
    out.attrs = {**runs.attrs, "merged": merged}
    return out


@contextmanager
def quiet(name: str) -> Iterator[None]:
    """A library's INFO lines, which under Hydra's logging reach the console as [HYDRA] lines: TensorBoard's
    directory watcher logs "No path found after <events file>" for every run it reads, rliable (through
    absl) "Calculating estimates for ..." for every aggregate."""
    logger = logging.getLogger(name)
    level = logger.level
    logger.setLevel(logging.WARNING)
    try:
        yield
    finally:
        logger.setLevel(level)


def _events_curve(run_dir: Path, tag: str) -> pd.DataFrame:
    # tensorboard's event reader takes seconds to import: only when curves are read
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    try:
        for events in run_dir.glob("events.out.tfevents.*"):
            bounded.check_file(events)  # what TensorBoard's reader opens: regular files of bounded size
    except bounded.FileRefused:
        return pd.DataFrame(columns=["step", "value"])  # the run's CSV files give its curve instead
    with quiet("tensorboard"), utf8_path(run_dir) as readable:
        acc = EventAccumulator(str(readable), size_guidance={"scalars": 0})
        acc.Reload()
    if tag not in acc.Tags()["scalars"]:
        return pd.DataFrame(columns=["step", "value"])
    return pd.DataFrame([(e.step, e.value) for e in acc.Scalars(tag)], columns=["step", "value"])


@contextmanager
def utf8_path(path: Path) -> Iterator[Path]:
    """`path`, or where its name is not UTF-8 (a folder named with bytes Python keeps as surrogates, which
    TensorBoard's reader cannot encode), a link to it of a UTF-8 name in a temporary folder."""
    try:
        str(path).encode("utf-8")
    except UnicodeEncodeError:
        pass
    else:
        yield path
        return
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        link = Path(tmp) / "run"
        os.symlink(os.path.abspath(path), link)
        yield link


def numbers(table: pd.DataFrame, column: str, name: str) -> pd.Series:
    """`table[column]` as floats, or a DamagedJob naming the file `name`, the row (1 is the first after the
    header) and the value that is not a number."""
    values = pd.to_numeric(table[column], errors="coerce")
    bad = values.isna() & table[column].notna()
    if bad.any():
        i = int(bad.to_numpy().argmax())
        raise DamagedJob(f"{name} row {i + 1}: {column} {table[column].iloc[i]!r} is not a number")
    return values.astype(float)


def _csv(path: Path) -> pd.DataFrame | None:
    try:
        bounded.check_file(path)
        return pd.read_csv(path)
    except (OSError, ValueError):  # bounded.FileRefused is a ValueError
        return None


def load_curve(run_dir: Path, tag: str = CURVE_TAG) -> pd.DataFrame:
    """A scalar tag of one run as (step, value): from its TensorBoard events, else its scalars.csv
    (`logger=csv`), else, for `charts/mean_return_100`, the 100-episode rolling mean of its episodes.csv
    (every run writes it, whatever its logger). A CSV value that is no number is a `DamagedJob` naming the
    file and row."""
    run_dir = Path(run_dir)
    if any(run_dir.glob("events.out.tfevents.*")):
        curve = _events_curve(run_dir, tag)
        if len(curve):
            return curve
    scalars = _csv(run_dir / "scalars.csv")
    if scalars is not None and {"env_step", "tag", "value"} <= set(scalars.columns):
        rows = scalars[scalars["tag"] == tag]
        if len(rows):
            steps, values = numbers(rows, "env_step", "scalars.csv"), numbers(rows, "value", "scalars.csv")
            return pd.DataFrame({"step": steps.to_numpy(), "value": values.to_numpy()})
    episodes = _csv(run_dir / "episodes.csv")
    if tag == CURVE_TAG and episodes is not None and {"env_step", "return"} <= set(episodes.columns):
        steps, returns = numbers(episodes, "env_step", "episodes.csv"), numbers(episodes, "return", "episodes.csv")
        mean = returns.rolling(100, min_periods=1).mean()
        return pd.DataFrame({"step": steps.to_numpy(), "value": mean.to_numpy()})
    return pd.DataFrame(columns=["step", "value"])


def curves_of(runs: pd.DataFrame, tag: str = CURVE_TAG, finished_only: bool = True) -> pd.DataFrame:
    """Long format: job, configuration, env, step, value for every finished job of `runs` (`load_sweep`; every
    job with `finished_only=False`). A job whose curve is damaged is left out: `attrs["damaged"]` lists them as
    (job directory, reason)."""
    frames, damaged = [], []
    if not runs.empty and finished_only:
        runs = runs[runs["status"].isin(FINISHED)]
    for row in runs.itertuples():
        try:
            curve = load_curve(Path(row.job), tag)
        except DamagedJob as e:
            damaged.append((row.job, str(e)))
            continue
        if len(curve):
            frames.append(curve.assign(job=row.job, configuration=row.configuration, env=row.env))
    table = (
        pd.concat(frames, ignore_index=True)
        if frames
        else pd.DataFrame(columns=["step", "value", "job", "configuration", "env"])
    )
    table.attrs["damaged"] = damaged
    return table


def load_curves(root: Path, tag: str = CURVE_TAG) -> pd.DataFrame:
    """`curves_of` every job under `root`."""
    return curves_of(load_sweep(root), tag)
