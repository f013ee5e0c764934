"""Whole-loop env steps per second with one torch thread vs torch's default thread count.

Runs the same short training job (default config unless overrides are given) alternately with
`device.threads=1` and `device.threads=null`, `--reps` times each, and prints medians and their ratio.

    python scripts/bench_threads.py --steps 20000 --reps 3 [hydra overrides...]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile

import torch
from hydra import compose, initialize_config_module

import rlrun.train as rt


def sps(threads, steps: int, overrides: list[str]) -> float:
    with initialize_config_module(config_module="rlrun.conf", version_base="1.3"):
        cfg = compose("config", overrides=[f"total_steps={steps}", "eval.interval=0", "log.plot=false",
                                           f"device.threads={threads}", *overrides])
    with tempfile.TemporaryDirectory() as out:
        return rt.train(cfg, rt.Path(out))["sps"]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=20_000)
    p.add_argument("--reps", type=int, default=3)
    args, overrides = p.parse_known_args()
    default_threads = torch.get_num_threads()
    results: dict[str, list[float]] = {"1": [], "null": []}
    for _ in range(args.reps):
        for threads in results:
            results[threads].append(sps(threads, args.steps, overrides))
            torch.set_num_threads(default_threads)
    one, default = statistics.median(results["1"]), statistics.median(results["null"])
    print(f"torch default threads here: {default_threads}")
    print(f"median SPS, threads=1: {one:.0f}   threads=default: {default:.0f}   ratio 1/default: {one / default:.2f}")


if __name__ == "__main__":
    main()
