"""A sweep's jobs read from disk, for `rlrun.report`: one row per job, and the jobs that could not be read.

A job's files may be damaged (a `summary.json` cut by a full disk, a `.hydra/config.yaml` edited by hand):
such a job is left out of the table and named with the reason (`load_sweep(...).attrs["damaged"]`), so
one bad job never stops the report of the others.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pandas as pd

from rlrun.config.runnames import QUIET_KEYS, quiet_key
from rlrun.storage import bounded, summary as run_summary
from rlrun.storage.summary import EVAL, TRAIN, DamagedJob, Summary, read_file

CURVE_TAG = "charts/mean_return_100"
EVAL_TAG = "eval/mean_return"
FINISHED = ("finished", "solved")


def _flatten(node: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(node, dict):
        out: dict[str, Any] = {}
        for k, v in node.items():
            out.update(_flatten(v, f"{prefix}{k}."))
        return out
    return {prefix[:-1]: node}


def readable(value: str) -> str:
    """An override's value as a label shows it: a float with at most 6 significant digits (a `range` of
    floats gives 0.30000000000000004)."""
    try:
        number = float(value)
    except ValueError:
        return value
    return f"{number:.6g}" if "." in value or "e" in value.lower() else value


def _choices(path: Path) -> dict[str, Any]:
    """The option chosen in each config group (Hydra's `runtime.choices`); {} where it cannot be read."""
    try:
        choices = bounded.load_yaml(path)["hydra"]["runtime"]["choices"]
    except (bounded.FileRefused, KeyError, TypeError):
        return {}
    return choices if isinstance(choices, dict) else {}


def _value(row: dict[str, Any], key: str) -> str:
    """A key's value in a job as its label shows it: the composed config's where the key is a value there
    (so 1e-3 and 0.001, false and False are one value), else the override's (a group's option)."""
    if f"cfg.{key}" in row:
        return readable(str(row[f"cfg.{key}"]))
    return readable(str(row["overrides"].get(key, row["choices"].get(key, "(default)"))))


def sweep_of(job: Path, root: Path) -> str:
    """The sweep a job belongs to: its nearest directory (up to `root`) holding Hydra's multirun.yaml,
    relative to `root` ("." for `root` itself); "" for a job of no sweep (a single run)."""
    for parent in job.parents:
        if (parent / "multirun.yaml").is_file():
            return parent.relative_to(root).as_posix() if parent.is_relative_to(root) else str(parent)
        if parent == root or root not in parent.parents:
            break
    return ""


def run_dirs(root: Path) -> list[Path]:
    """Every run under `root`: a directory holding `.hydra/config.yaml`. A batched run (`seeds=K`) counts
    as its K agents (its `seed=*` subdirectories), exactly like K single-seed jobs."""
    dirs = sorted(p.parent.parent for p in Path(root).rglob(".hydra/config.yaml"))
    inside = {parent for d in dirs for parent in d.parents}
    return [d for d in dirs if d not in inside]


def load_run(run_dir: Path) -> dict[str, Any]:
    """One run as a flat dict: `job`, `configuration`, `status`, `error`, `cfg.*` values, summary fields,
    and `nonfinite` (the summary's score fields that are NaN or infinite). Raises `DamagedJob`."""
    run_dir = Path(run_dir)
    cfg = read_file(run_dir / ".hydra" / "config.yaml", bounded.load_yaml, dict)
    overrides_file = run_dir / ".hydra" / "overrides.yaml"
    overrides = read_file(overrides_file, lambda p: bounded.load_yaml(p) or [], list) if overrides_file.exists() else []
    if not all(isinstance(o, str) for o in overrides):
        raise DamagedJob("overrides.yaml holds something other than overrides")
    summary: Summary = run_summary.read(run_dir) if (run_dir / run_summary.FILE).exists() else {"status": "incomplete"}
    pairs = dict(o.lstrip("+~").split("=", 1) for o in overrides if "=" in o)
    pairs.pop("seed", None)
    row: dict[str, Any] = {
        "job": str(run_dir),
        "configuration": " ".join(f"{k}={v}" for k, v in sorted(pairs.items())) or "(defaults)",
        "overrides": pairs,
        "status": summary.get("status"),
        "error": summary.get("error"),
        "nonfinite": [k for k in (EVAL, TRAIN) if isinstance(v := summary.get(k), float) and not math.isfinite(v)],
    }
    row.update({f"cfg.{k}": v for k, v in _flatten(cfg).items()})
    row["choices"] = _choices(run_dir / ".hydra" / "hydra.yaml")
    row.update({k: v for k, v in summary.items() if k not in ("status", "error", "nonfinite")})
    return row


def load_sweep(root: Path) -> pd.DataFrame:
    """One row per job under `root`, config values as `cfg.*` columns, `env` the env id. Damaged jobs are
    left out: `attrs["damaged"]` lists them as (job directory, reason).

    `configuration` names a job by the overrides that differ between jobs (seed excluded), so settings
    given to the whole sweep do not clutter the labels.
    """
    rows, damaged = [], []
    for d in run_dirs(root):
        try:
            rows.append(load_run(d))
        except DamagedJob as e:
            damaged.append((str(d), str(e)))
    keys = {k for r in rows for k in r["overrides"] if not quiet_key(k, QUIET_KEYS)}
    values = [{k: _value(r, k) for k in keys} for r in rows]
    varying = sorted(k for k in keys if len({v[k] for v in values}) > 1)
    for r, v in zip(rows, values):
        r["configuration"] = " ".join(f"{k}={v[k]}" for k in varying) or "(all jobs)"
        r["env"] = r.get("cfg.env.id", "")
        r["sweep"] = sweep_of(Path(r["job"]), Path(root))
    table = pd.DataFrame(rows).drop(columns=["overrides", "choices"]) if rows else pd.DataFrame()
    table.attrs["damaged"] = damaged
    return table


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
    with quiet("tensorboard"):
        acc = EventAccumulator(str(run_dir), size_guidance={"scalars": 0})
        acc.Reload()
    if tag not in acc.Tags()["scalars"]:
        return pd.DataFrame(columns=["step", "value"])
    return pd.DataFrame([(e.step, e.value) for e in acc.Scalars(tag)], columns=["step", "value"])


def _csv(path: Path) -> pd.DataFrame | None:
    try:
        bounded.check_file(path)
        return pd.read_csv(path)
    except (OSError, ValueError):  # bounded.FileRefused is a ValueError
        return None


def load_curve(run_dir: Path, tag: str = CURVE_TAG) -> pd.DataFrame:
    """A scalar tag of one run as (step, value): from its TensorBoard events, else its scalars.csv
    (`logger=csv`), else, for `charts/mean_return_100`, the 100-episode rolling mean of its episodes.csv
    (every run writes it, whatever its logger)."""
    run_dir = Path(run_dir)
    if any(run_dir.glob("events.out.tfevents.*")):
        curve = _events_curve(run_dir, tag)
        if len(curve):
            return curve
    scalars = _csv(run_dir / "scalars.csv")
    if scalars is not None and {"env_step", "tag", "value"} <= set(scalars.columns):
        rows = scalars[scalars["tag"] == tag]
        if len(rows):
            return pd.DataFrame({"step": rows["env_step"].to_numpy(), "value": rows["value"].to_numpy(float)})
    episodes = _csv(run_dir / "episodes.csv")
    if tag == CURVE_TAG and episodes is not None and {"env_step", "return"} <= set(episodes.columns):
        mean = episodes["return"].astype(float).rolling(100, min_periods=1).mean()
        return pd.DataFrame({"step": episodes["env_step"].to_numpy(), "value": mean.to_numpy()})
    return pd.DataFrame(columns=["step", "value"])


def curves_of(runs: pd.DataFrame, tag: str = CURVE_TAG) -> pd.DataFrame:
    """Long format: job, configuration, env, step, value for every finished job of `runs` (`load_sweep`)."""
    frames = []
    for row in runs[runs["status"].isin(FINISHED)].itertuples() if not runs.empty else []:
        curve = load_curve(Path(row.job), tag)
        if len(curve):
            frames.append(curve.assign(job=row.job, configuration=row.configuration, env=row.env))
    if not frames:
        return pd.DataFrame(columns=["step", "value", "job", "configuration", "env"])
    return pd.concat(frames, ignore_index=True)


def load_curves(root: Path, tag: str = CURVE_TAG) -> pd.DataFrame:
    """`curves_of` every job under `root`."""
    return curves_of(load_sweep(root), tag)
