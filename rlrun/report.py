"""Sweep reports: load runs into pandas, aggregate seeds per configuration, write a table and a plot.

    python -m rlrun.report outputs/multirun/<sweep>

A configuration is a job's overrides without `seed`. Per configuration the table gives the number of
seeds, the final 100-episode mean return (mean with a 95% bootstrap confidence interval, and the
interquartile mean), steps-to-solve (median over the seeds that solved, and how many did), and the mean
wall time. Jobs that failed are listed with their error. Written into the sweep dir: report.md,
report.csv and curves.png (mean 100-episode return per configuration with a 95% bootstrap band).
"""

from __future__ import annotations

import argparse
import json
import logging
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import yaml
from scipy import stats

CURVE_TAG = "charts/mean_return_100"


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
    """One run as a flat dict: `job`, `configuration`, `status`, `error`, `cfg.*` values, summary fields."""
    run_dir = Path(run_dir)
    cfg = yaml.safe_load((run_dir / ".hydra" / "config.yaml").read_text())
    overrides_file = run_dir / ".hydra" / "overrides.yaml"
    overrides = yaml.safe_load(overrides_file.read_text()) if overrides_file.exists() else []
    summary_file = run_dir / "summary.json"
    summary = json.loads(summary_file.read_text()) if summary_file.exists() else {"status": "incomplete"}
    pairs = dict(o.lstrip("+~").split("=", 1) for o in overrides or [] if "=" in o)
    pairs.pop("seed", None)
    row = {
        "job": str(run_dir),
        "configuration": " ".join(f"{k}={v}" for k, v in sorted(pairs.items())) or "(defaults)",
        "overrides": pairs,
        "status": summary.get("status"),
        "error": summary.get("error"),
    }
    row.update({f"cfg.{k}": v for k, v in _flatten(cfg).items()})
    row.update({k: v for k, v in summary.items() if k not in ("status", "error")})
    return row


def load_sweep(root: Path) -> pd.DataFrame:
    """One row per job under `root`, config values as `cfg.*` columns.

    `configuration` names a job by the overrides that differ between jobs (seed excluded), so settings
    given to the whole sweep do not clutter the labels.
    """
    rows = [load_run(d) for d in run_dirs(root)]
    keys = {k for r in rows for k in r["overrides"]}
    varying = sorted(k for k in keys if len({r["overrides"].get(k) for r in rows}) > 1)
    for r in rows:
        r["configuration"] = " ".join(f"{k}={r['overrides'].get(k)}" for k in varying) or "(all jobs)"
    return pd.DataFrame(rows).drop(columns="overrides") if rows else pd.DataFrame()


def load_curve(run_dir: Path, tag: str = CURVE_TAG) -> pd.DataFrame:
    """A scalar tag of one run's TensorBoard events as (step, value)."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    quiet = logging.getLogger("tensorboard")  # its directory watcher logs "No path found after ..." per run
    level = quiet.level
    quiet.setLevel(logging.WARNING)
    try:
        acc = EventAccumulator(str(run_dir), size_guidance={"scalars": 0})
        acc.Reload()
    finally:
        quiet.setLevel(level)
    if tag not in acc.Tags()["scalars"]:
        return pd.DataFrame(columns=["step", "value"])
    return pd.DataFrame([(e.step, e.value) for e in acc.Scalars(tag)], columns=["step", "value"])


def load_curves(root: Path, tag: str = CURVE_TAG) -> pd.DataFrame:
    """Long format: job, configuration, step, value for every finished job."""
    frames = []
    runs = load_sweep(root)
    for row in runs[runs["status"].isin(["finished", "solved"])].itertuples() if not runs.empty else []:
        frames.append(load_curve(Path(row.job), tag).assign(job=row.job, configuration=row.configuration))
    if not frames:
        return pd.DataFrame(columns=["step", "value", "job", "configuration"])
    return pd.concat(frames, ignore_index=True)


def _bootstrap_ci(x: np.ndarray, seed: int = 0) -> tuple[float, float]:
    if len(x) < 2 or np.all(x == x[0]):
        return (float(x[0]), float(x[0])) if len(x) else (np.nan, np.nan)
    res = stats.bootstrap((x,), np.mean, confidence_level=0.95, n_resamples=2000, rng=np.random.default_rng(seed))
    return float(res.confidence_interval.low), float(res.confidence_interval.high)


def summarize(runs: pd.DataFrame) -> pd.DataFrame:
    """One row per configuration, over its finished seeds."""
    rows = []
    done = runs[runs["status"].isin(["finished", "solved"])]
    for config, g in done.groupby("configuration", sort=True):
        final = g["final_mean_return_100"].astype(float).dropna().to_numpy()
        solved = g["solved_step"].dropna().astype(float).to_numpy()
        lo, hi = _bootstrap_ci(final)
        rows.append(
            {
                "configuration": config,
                "seeds": len(g),
                "final_return_mean": float(final.mean()) if len(final) else np.nan,
                "final_return_ci95_low": lo,
                "final_return_ci95_high": hi,
                "final_return_iqm": float(stats.trim_mean(final, 0.25)) if len(final) else np.nan,
                "steps_to_solve_median": float(np.median(solved)) if len(solved) else np.nan,
                "solved": f"{len(solved)}/{len(g)}",
                "wall_time_s_mean": float(g["wall_time_s"].astype(float).mean()),
            }
        )
    return pd.DataFrame(rows)


def plot_curves(curves: pd.DataFrame, path: Path, points: int = 100) -> Path | None:
    if curves.empty:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 4.5))
    for config, g in curves.groupby("configuration", sort=True):
        grid = np.linspace(0, g["step"].max(), points)
        per_seed = np.stack(
            [np.interp(grid, c["step"], c["value"], left=np.nan) for _, c in g.groupby("job") if len(c)]
        )
        with warnings.catch_warnings():  # grid points before a seed's first episode are NaN
            warnings.simplefilter("ignore", RuntimeWarning)
            mean = np.nanmean(per_seed, axis=0)
        ax.plot(grid, mean, label=f"{config} (n={len(per_seed)})")
        if len(per_seed) >= 2:
            ok = ~np.isnan(per_seed).any(axis=0) & (per_seed.std(axis=0) > 0)
            if ok.any():
                ci = stats.bootstrap(
                    (per_seed[:, ok],), np.mean, axis=0, n_resamples=1000, rng=np.random.default_rng(0)
                ).confidence_interval
                ax.fill_between(grid[ok], ci.low, ci.high, alpha=0.2)
    ax.set_xlabel("env step")
    ax.set_ylabel("100-episode mean return")
    ax.legend(fontsize=7, loc="best")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def write_report(root: Path) -> str:
    """Write report.md, report.csv and curves.png into `root`; returns the markdown."""
    root = Path(root)
    runs = load_sweep(root)
    if runs.empty:
        return f"No runs under {root}."
    table = summarize(runs)
    table.to_csv(root / "report.csv", index=False)
    lines = [f"# Sweep report: {root}", "", f"{len(runs)} jobs, {len(table)} configurations.", ""]
    if not table.empty:
        shown = table.copy()
        shown["final return (95% CI)"] = [
            f"{m:.1f} [{lo:.1f}, {hi:.1f}]"
            for m, lo, hi in zip(table.final_return_mean, table.final_return_ci95_low, table.final_return_ci95_high)
        ]
        shown = shown[
            [
                "configuration",
                "seeds",
                "final return (95% CI)",
                "final_return_iqm",
                "steps_to_solve_median",
                "solved",
                "wall_time_s_mean",
            ]
        ]
        lines.append(shown.to_markdown(index=False, floatfmt=".1f"))
    failed = runs[~runs["status"].isin(["finished", "solved"])]
    if not failed.empty:
        lines += ["", "## Failed jobs", ""]
        lines += [f"- `{r.job}` ({r.status}): {r.error}" for r in failed.itertuples()]
    plot_curves(load_curves(root), root / "curves.png")
    text = "\n".join(lines) + "\n"
    (root / "report.md").write_text(text)
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
