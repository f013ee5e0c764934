"""A 4-job sweep through the joblib launcher (2 workers) against the same sweep run serially.

Alternates the two commands `--reps` times and prints the median wall times and their ratio
(parallel / serial). Each job is a real training run of `--steps` env steps with one torch thread.

    python scripts/bench_sweep.py --steps 20000 --reps 3
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time


def sweep(steps: int, parallel: bool) -> float:
    with tempfile.TemporaryDirectory() as out:
        cmd = [sys.executable, "-m", "rlrun.train", "-m", "seed=0,1,2,3", f"total_steps={steps}",
               "eval.interval=0", "log.plot=false", "device.threads=1", f"hydra.sweep.dir={out}"]
        if parallel:
            cmd += ["hydra/launcher=joblib", "hydra.launcher.n_jobs=2"]
        start = time.perf_counter()
        subprocess.run(cmd, check=True, capture_output=True)
        return time.perf_counter() - start


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=20_000)
    p.add_argument("--reps", type=int, default=3)
    args = p.parse_args()
    times: dict[str, list[float]] = {"serial": [], "joblib x2": []}
    for _ in range(args.reps):
        times["serial"].append(sweep(args.steps, parallel=False))
        times["joblib x2"].append(sweep(args.steps, parallel=True))
        print({k: [round(t, 1) for t in v] for k, v in times.items()}, flush=True)
    serial, parallel = statistics.median(times["serial"]), statistics.median(times["joblib x2"])
    print(f"median wall time: serial {serial:.1f}s, joblib 2 workers {parallel:.1f}s, ratio {parallel / serial:.2f}")


if __name__ == "__main__":
    main()
