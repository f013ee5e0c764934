"""K seeds batched in one process (`seeds=K`) against one single-seed run, same env steps per agent.

Alternates the commands `--reps` times (whole processes, start-up included) and prints median wall
times and the ratio batched / single. With `--separate`, also times K single-seed processes launched
side by side (what every PyTorch peer does), for reference.

    python scripts/bench_seeds.py --seeds 8 --steps 20000 --reps 3            # the CPU bar: ratio <= 3
    python scripts/bench_seeds.py --seeds 64 --device cuda --steps 20000      # the GPU bar: ratio <= 2
    python scripts/bench_seeds.py --seeds 8 --separate -- network=dueling buffer=per
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time


def command(out: str, steps: int, device: str, extra: list[str], **keys) -> list[str]:
    args = [f"{k}={v}" for k, v in keys.items()]
    return [sys.executable, "-m", "rlrun.train", f"total_steps={steps}", f"device={device}", "eval.interval=0",
            "log.plot=false", "log.progress_bar=false", "checkpoint.every=0", *args, *extra, f"hydra.run.dir={out}"]


def timed(cmds: list[list[str]]) -> float:
    start = time.perf_counter()
    procs = [subprocess.Popen(c, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True) for c in cmds]
    for p in procs:
        _, err = p.communicate()
        if p.returncode != 0:
            raise SystemExit(f"run failed ({p.returncode}): {' '.join(p.args)}\n{err[-2000:]}")
    return time.perf_counter() - start


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--seeds", type=int, default=8)
    p.add_argument("--steps", type=int, default=20_000, help="env steps per agent")
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--device", default="cpu")
    p.add_argument("--separate", action="store_true", help="also time K single-seed processes side by side")
    p.add_argument("extra", nargs="*", help="overrides for every run (after --)")
    args = p.parse_args()
    times: dict[str, list[float]] = {"single": [], f"batched x{args.seeds}": []}
    if args.separate:
        times[f"{args.seeds} processes"] = []
    with tempfile.TemporaryDirectory() as tmp:
        for rep in range(args.reps):
            times["single"].append(timed([command(f"{tmp}/s{rep}", args.steps, args.device, args.extra, seed=0)]))
            times[f"batched x{args.seeds}"].append(
                timed([command(f"{tmp}/b{rep}", args.steps, args.device, args.extra, seed=0, seeds=args.seeds)]))
            if args.separate:
                times[f"{args.seeds} processes"].append(timed(
                    [command(f"{tmp}/p{rep}_{k}", args.steps, args.device, args.extra, seed=k) for k in range(args.seeds)]))
            print({k: [round(t, 1) for t in v] for k, v in times.items()}, flush=True)
    single = statistics.median(times["single"])
    for name, values in times.items():
        m = statistics.median(values)
        print(f"{name:>14}: median {m:7.1f} s  ratio to single {m / single:5.2f}  "
              f"({args.steps} env steps per agent, {args.device})")


if __name__ == "__main__":
    main()
