"""`bench.py backends`: the batched launcher's backends on one machine, against joblib.

The sweep `optimizer.lr=3e-4,1e-3,2e-3,5e-3 seed=0..9` (40 CartPole jobs, default config otherwise,
`--steps` env steps per job) cut into groups of `max_agents=10` (4 groups), timed whole (Hydra's start,
the checks, the report) through:
- `batched, local, n_jobs=2`: the 4 groups as processes, two at a time;
- `batched, submitit local`: the 4 groups as one submitit array on this machine (all started at once);
- `joblib, n_jobs=2`: 40 single runs, two at a time.
With `--identical`, each backend (local, submitit local, and a local Ray when Ray is installed) runs the
sweep once more into a kept folder, and every job's episodes.csv and the report (wall times aside) are
compared with the local backend's.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

from benchlib.common import alternate, pinning, ratio_rows, report
from benchlib.runs import timed_sweep

LRS, SEEDS, GROUP = "optimizer.lr=3e-4,1e-3,2e-3,5e-3", "seed=0,1,2,3,4,5,6,7,8,9", "hydra.launcher.max_agents=10"
BATCHED = ["hydra/launcher=batched", GROUP]
CONTESTANTS = {
    "batched, local, n_jobs=2": [*BATCHED, "hydra.launcher.n_jobs=2"],
    "batched, submitit local": [*BATCHED, "hydra.launcher.backend=submitit"],
    "joblib, n_jobs=2": ["hydra/launcher=joblib", "hydra.launcher.n_jobs=2"],
}
RAY = ["hydra.launcher.backend=ray", "hydra.launcher.ray.address=local", "+hydra.launcher.ray.init.num_cpus=2"]


def backends(args) -> None:
    jobs = [LRS, SEEDS, f"total_steps={args.steps}"]
    if args.identical:
        identical(jobs)
        return
    times = alternate({name: timed_sweep([*jobs, *extra]) for name, extra in CONTESTANTS.items()}, args.reps)
    rows = ratio_rows(times, "joblib, n_jobs=2")
    report(
        f"backends: 40-job lr x seed sweep of {args.steps:,} env steps per job, groups of up to 10 agents",
        ["launcher", "median wall s", "/ joblib", "wall s, each round"],
        rows,
        [f"medians of {args.reps} alternating rounds, default config otherwise"],
        pin=pinning(parallel=True),
    )


def identical(jobs: list[str]) -> None:
    import pandas as pd

    runs = {"local": BATCHED, "submitit local": [*BATCHED, "hydra.launcher.backend=submitit"]}
    try:
        import ray  # noqa: F401

        runs["ray (local)"] = [*BATCHED, *RAY]
    except ImportError:
        pass
    with tempfile.TemporaryDirectory() as tmp:
        dirs = {name: Path(tmp) / name.split()[0] for name in runs}
        for name, extra in runs.items():
            cmd = [sys.executable, "-m", "rlrun.train", "-m", *jobs, *extra, f"hydra.sweep.dir={dirs[name]}"]
            subprocess.run(cmd, check=True, capture_output=True, env={"RAY_ADDRESS": "", **_env()})
        ref = dirs["local"]
        ref_jobs = sorted(p.relative_to(ref) for p in ref.glob("*/*/episodes.csv"))
        ref_report = pd.read_csv(ref / "report.csv").drop(columns="wall_time_s_mean")
        rows = []
        for name, d in dirs.items():
            found = sorted(p.relative_to(d) for p in d.glob("*/*/episodes.csv"))
            same = sum((d / j).read_bytes() == (ref / j).read_bytes() for j in ref_jobs if (d / j).exists())
            groups = len(list((d / ".batched").glob("jobs*")))
            report_same = ref_report.equals(pd.read_csv(d / "report.csv").drop(columns="wall_time_s_mean"))
            rows.append([name, groups, f"{len(found)}/{len(ref_jobs)}", f"{same}/{len(ref_jobs)}", report_same])
    report(
        "backends --identical: the 40-job sweep once per backend, compared with the local backend",
        ["backend", "groups", "job dirs", "episodes.csv identical", "report.csv identical (wall time aside)"],
        rows,
    )


def _env() -> dict[str, str]:
    import os

    return {**os.environ, "PYTHONWARNINGS": "ignore"}
