"""Population-based training against a search over the same space and against the preset alone, at equal
compute: each contestant is one batched run of K agents with the same env-step budget per agent.

    taskset -c 1 python scripts/pbt_bench.py --agents 16 --repeats 3 --root runs/pbt_bench
    # MinAtar Breakout with PQN's recipe at 1M frames; "solved": the paper DQN's 5M-frame value (10)
    taskset -c 0 python scripts/pbt_bench.py --agents 16 --repeats 3 --budget 1000000 --low 1e-4 --high 3e-3 \
        --env-overrides +experiment=pqn_minatar env.id=MinAtar/Breakout-v0 exploration.duration=100000 \
        eval.interval=100000 checkpoint.every=100000 env.reward_threshold=10 --pbt-overrides pbt.interval=100000 \
        --root runs/pbt_minatar

Contestants (the seeds of repetition r are first + K * r ... first + K * r + K - 1, fresh for each):
- preset: `seeds=K`, the env's preset as it is;
- search: an `agents` list of K learning rates spaced evenly in log between --low and --high (the space PBT explores);
- pbt: `seeds=K +pbt=truncation` with `pbt.space.optimizer.lr` over the same range.
The order of the contestants rotates between repetitions. A finished run under --root is reused, one that
was stopped resumes.
Printed: per contestant and repetition, the best agent (by its final 100-episode training mean) with its
final mean and last greedy evaluation, the agents that reached the env's threshold and the earliest step
one did, the wall time, and PBT's own time (ranking, copies, perturbations) as a share of it.
--plot PNG draws each contestant's agents' 100-episode training means over env steps (median and range over
the agents, one panel per repetition) from the runs under --root, running only those not finished.
"""

from __future__ import annotations

import argparse
import math
import statistics
import subprocess
import sys
from pathlib import Path


def lrs(low: float, high: float, k: int) -> list[float]:
    return [float(f"{math.exp(math.log(low) + i * (math.log(high) - math.log(low)) / (k - 1)):.3g}") for i in range(k)]


def contestants(args: argparse.Namespace, first: int) -> dict[str, list[str]]:
    k, base = args.agents, [*args.env_overrides, f"total_steps={args.budget}", "log.plot=false", "logger=[csv]"]
    entries = ",".join(f"{{seed:{first + i},optimizer.lr:{lr}}}" for i, lr in enumerate(lrs(args.low, args.high, k)))
    space = f"pbt.space.optimizer.lr={{low:{args.low},high:{args.high},log:true}}"
    return {
        "preset": [*base, f"seeds={k}", f"seed={first}"],
        "search": [*base, f"agents=[{entries}]"],
        "pbt": [*base, f"seeds={k}", f"seed={first}", "+pbt=truncation", space, *args.pbt_overrides],
    }


sys.path.insert(0, str(Path(__file__).resolve().parent))  # benchlib, next to this script

from benchlib.common import read_summary, refusing  # noqa: E402


def run(overrides: list[str], out: Path) -> dict:
    """The contestant's run in `out`: reused once finished, resumed where an earlier bench stopped it."""
    if not (out / "summary.json").exists():
        if (out / "checkpoint.pt").exists():
            cmd = [sys.executable, "-m", "rlrun.resume", str(out)]
        else:
            cmd = [sys.executable, "-m", "rlrun.train", *overrides, f"hydra.run.dir={out}"]
        print("$", " ".join(cmd), file=sys.stderr, flush=True)
        subprocess.run(cmd, check=True, capture_output=True)
    return read_summary(out, agents=True)


def figures(summary: dict) -> dict:
    agents = summary["agents"]
    best = max(agents, key=lambda a: (agents[a]["final_mean_return_100"] or -1e9, agents[a]["final_eval_return"] or 0))
    solved = [a["solved_step"] for a in agents.values() if a["solved_step"] is not None]
    wall = max(a["wall_time_s"] for a in agents.values())
    pbt = max((a.get("pbt_seconds", 0.0) for a in agents.values()), default=0.0)
    return {
        "best": best,
        "best_mean": agents[best]["final_mean_return_100"],
        "best_eval": agents[best]["final_eval_return"],
        "solved": len(solved),
        "first_solved": min(solved) if solved else None,
        "wall": wall,
        "pbt_share": pbt / wall,
    }


def curves(run_dir: Path, grid: list[int]) -> list[list[float]]:
    """Each agent's 100-episode training mean at the env steps of `grid` (nan before its first episode)."""
    import numpy as np
    from benchlib.common import moving_means

    out = []
    for path in sorted(run_dir.rglob("episodes.csv")):
        steps, means = moving_means(path)
        last = np.searchsorted(steps, grid, side="right") - 1  # the last episode ended at or before each point
        out.append([means[i] if i >= 0 else float("nan") for i in last])
    return out


def plot(root: Path, repeats: range, budget: int, threshold: float | None, png: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    grid = [round(budget * i / 100) for i in range(1, 101)]
    fig, axes = plt.subplots(1, len(repeats), figsize=(5 * len(repeats), 3.6), sharey=True, squeeze=False)
    for ax, r in zip(axes[0], repeats):
        for name, color in (("preset", "tab:gray"), ("search", "tab:blue"), ("pbt", "tab:red")):
            if not (root / f"{name}_rep{r}" / "summary.json").exists():
                continue
            values = np.array(curves(root / f"{name}_rep{r}", grid))
            ax.plot(grid, np.nanmedian(values, axis=0), color=color, label=f"{name} (median)")
            ax.fill_between(grid, np.nanmin(values, axis=0), np.nanmax(values, axis=0), color=color, alpha=0.15)
        if threshold is not None:
            ax.axhline(threshold, color="black", lw=0.8, ls=":")
        ax.set_title(f"repetition {r}")
        ax.set_xlabel("env steps per agent")
    axes[0][0].set_ylabel("100-episode training mean (band: all agents)")
    axes[0][0].legend(loc="upper left", fontsize=8)
    fig.tight_layout()
    fig.savefig(png, dpi=110)
    print(f"plot: {png}", file=sys.stderr)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--agents", type=int, default=16)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument(
        "--repeat-from", type=int, default=0, help="the first repetition to run: split the repetitions over processes"
    )
    p.add_argument("--first", type=int, default=9000, help="the first seed (fresh seeds: not used for tuning)")
    p.add_argument("--budget", type=int, default=100_000, help="env steps per agent")
    p.add_argument("--low", type=float, default=1e-4)
    p.add_argument("--high", type=float, default=1e-2)
    p.add_argument("--env-overrides", nargs="*", default=[])
    p.add_argument("--pbt-overrides", nargs="*", default=[])
    p.add_argument("--root", type=Path, default=Path("runs/pbt_bench"))
    p.add_argument("--plot", type=Path, default=None, help="draw the agents' curves into this PNG")
    p.add_argument("--threshold", type=float, default=None, help="a dotted line at this return on the plot")
    args = p.parse_args()
    results: dict[str, list[dict]] = {}
    for r in range(args.repeat_from, args.repeats):
        runs = list(contestants(args, args.first + args.agents * r).items())
        shift = r % len(runs)
        for name, overrides in runs[shift:] + runs[:shift]:
            results.setdefault(name, []).append(figures(run(overrides, args.root / f"{name}_rep{r}")))
    header = ["contestant", "rep", "best agent", "its final 100-ep mean", "its last eval", "agents solved"]
    print("| " + " | ".join([*header, "first solved at", "wall s", "PBT's share"]) + " |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name, reps in results.items():
        for r, f in enumerate(reps, start=args.repeat_from):
            first = "-" if f["first_solved"] is None else f"{f['first_solved']:,}"
            share = f"{100 * f['pbt_share']:.3f}%" if name == "pbt" else "-"
            cells = [name, r, f["best"], f"{f['best_mean']:.1f}", f["best_eval"], f"{f['solved']}/{args.agents}"]
            print("| " + " | ".join(map(str, [*cells, first, f"{f['wall']:.0f}", share])) + " |")
    if args.plot:
        plot(args.root, range(args.repeat_from, args.repeats), args.budget, args.threshold, args.plot)
    print()
    for name, reps in results.items():
        print(f"{name}: median best final mean {statistics.median(f['best_mean'] for f in reps):.1f}, "
              f"median wall {statistics.median(f['wall'] for f in reps):.0f} s")  # fmt: skip


if __name__ == "__main__":
    refusing(main)
