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
import yaml

from rlrun import summary as run_summary
from rlrun.summary import EVAL, TRAIN, DamagedJob, Summary, read_file

CURVE_TAG = "charts/mean_return_100"
FINISHED = ("finished", "solved")


def _flatten(node: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(node, dict):
        out: dict[str, Any] = {}
        for k, v in node.items():
            out.update(_flatten(v, f"{prefix}{k}."))
        return out
    return {prefix[:-1]: node}


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
    cfg = read_file(run_dir / ".hydra" / "config.yaml", "YAML", yaml.safe_load, dict)
    overrides_file = run_dir / ".hydra" / "overrides.yaml"
    overrides = (
        read_file(overrides_file, "YAML", lambda t: yaml.safe_load(t) or [], list) if overrides_file.exists() else []
    )
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
    keys = {k for r in rows for k in r["overrides"]}
    varying = sorted(k for k in keys if len({r["overrides"].get(k) for r in rows}) > 1)
    for r in rows:
        r["configuration"] = " ".join(f"{k}={r['overrides'].get(k)}" for k in varying) or "(all jobs)"
        r["env"] = r.get("cfg.env.id", "")
    table = pd.DataFrame(rows).drop(columns="overrides") if rows else pd.DataFrame()
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


def load_curve(run_dir: Path, tag: str = CURVE_TAG) -> pd.DataFrame:
    """A scalar tag of one run's TensorBoard events as (step, value)."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    with quiet("tensorboard"):
        acc = EventAccumulator(str(run_dir), size_guidance={"scalars": 0})
        acc.Reload()
    if tag not in acc.Tags()["scalars"]:
        return pd.DataFrame(columns=["step", "value"])
    return pd.DataFrame([(e.step, e.value) for e in acc.Scalars(tag)], columns=["step", "value"])


def curves_of(runs: pd.DataFrame, tag: str = CURVE_TAG) -> pd.DataFrame:
    """Long format: job, configuration, env, step, value for every finished job of `runs` (`load_sweep`)."""
    frames = []
    for row in runs[runs["status"].isin(FINISHED)].itertuples() if not runs.empty else []:
        frames.append(load_curve(Path(row.job), tag).assign(job=row.job, configuration=row.configuration, env=row.env))
    if not frames:
        return pd.DataFrame(columns=["step", "value", "job", "configuration", "env"])
    return pd.concat(frames, ignore_index=True)


def load_curves(root: Path, tag: str = CURVE_TAG) -> pd.DataFrame:
    """`curves_of` every job under `root`."""
    return curves_of(load_sweep(root), tag)
