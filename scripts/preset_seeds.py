"""How robust a preset is on seeds it was not tuned on: `seeds=N` agents of the preset in one process (seeds
S..S+N-1, batched: rlrun.population), then per preset the figures docs/algorithms.md reports.

    python scripts/preset_seeds.py                                   # every preset, seeds 2000-2019
    python scripts/preset_seeds.py --presets default qrdqn --seeds 20 --first 2000
    python scripts/preset_seeds.py --keep outputs/presets            # keep the runs (else a temporary dir)

Per preset: seeds whose 100-episode training mean reached the env's threshold within the budget (n/N), the
median and the worst step at which they did, how many of those held it (final 100-episode mean still at the
threshold and the last greedy evaluation at the env's maximum, 500 on CartPole), and the median first step
at which the greedy evaluation (`eval.interval` 10k steps by default, 5 episodes) reached the threshold, and
how many of each seed's last 100 training episodes ended below the threshold, summed over the seeds (a seed
that collapses mid-run and recovers shows there, where the solved and held counts only see its end).
A Markdown table under the date, the hardware and the command.
"""

from __future__ import annotations

import argparse
import csv
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from statistics import median

sys.path.insert(0, str(Path(__file__).resolve().parent))  # benchlib, next to this script

from benchlib.common import report  # noqa: E402

PRESETS = {
    "default": ([], 100_000),
    "qrdqn": (["network=qrdqn"], 100_000),
    "iqn": (["network=iqn"], 100_000),
    "noisy": (["network=noisy"], 100_000),
    "rainbow": (["+experiment=rainbow"], 100_000),
    "pqn": (["+experiment=pqn_cartpole"], 500_000),
}
MAX_RETURN = 500.0  # CartPole-v1's


def run_preset(name: str, first: int, seeds: int, root: Path) -> tuple[dict, float]:
    overrides, budget = PRESETS[name]
    out = root / name
    cmd = [sys.executable, "-m", "rlrun.train", *overrides, f"seeds={seeds}", f"seed={first}",
           f"total_steps={budget}", "logger=[tensorboard,csv]", "log.plot=false", f"hydra.run.dir={out}"]  # fmt: skip
    start = time.perf_counter()
    subprocess.run(cmd, check=True, capture_output=True)
    return json.loads((out / "summary.json").read_text()), time.perf_counter() - start


def first_eval_at(agent_dir: Path, threshold: float) -> int | None:
    """The first step at which the greedy evaluation reached `threshold` (scalars.csv: env_step,tag,value)."""
    with open(agent_dir / "scalars.csv") as f:
        for row in csv.DictReader(f):
            if row["tag"] == "eval/mean_return" and float(row["value"]) >= threshold:
                return int(row["env_step"])
    return None


def late_misses(agent_dir: Path, threshold: float, last: int = 100) -> int:
    """How many of the agent's last `last` training episodes returned less than `threshold`."""
    with open(agent_dir / "scalars.csv") as f:
        returns = [float(r["value"]) for r in csv.DictReader(f) if r["tag"] == "charts/episodic_return"]
    return sum(r < threshold for r in returns[-last:])


def figures(name: str, summary: dict, root: Path, wall: float) -> list[str]:
    agents = summary["agents"]
    threshold = next(iter(agents.values()))["reward_threshold"]
    solved = {s: a["solved_step"] for s, a in agents.items() if a["solved_step"] is not None}
    held = [
        s
        for s in solved
        if agents[s]["final_mean_return_100"] >= threshold and agents[s]["final_eval_return"] == MAX_RETURN
    ]
    evals = [first_eval_at(root / name / f"seed={s}", threshold) for s in agents]
    reached = [e for e in evals if e is not None]
    misses = sum(late_misses(root / name / f"seed={s}", threshold) for s in agents)
    not_held = {
        s: (agents[s]["final_mean_return_100"], agents[s]["final_eval_return"]) for s in solved if s not in held
    }
    return [
        name,
        f"{len(solved)}/{len(agents)}",
        f"{median(solved.values()):,.0f}" if solved else "-",
        f"{max(solved.values()):,}" if solved else "-",
        f"{len(held)}/{len(solved)}" + (f" (not: {not_held})" if not_held else ""),
        f"{median(reached):,.0f} ({len(reached)}/{len(agents)})" if reached else "-",
        f"{misses}",
        f"{wall:.0f} s",
    ]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--presets", nargs="+", default=list(PRESETS), choices=list(PRESETS))
    p.add_argument("--seeds", type=int, default=20, help="agents per preset (default 20)")
    p.add_argument("--first", type=int, default=2000, help="the first seed (default 2000: never used for tuning)")
    p.add_argument("--keep", type=Path, default=None, help="keep the runs in this folder")
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = args.keep or Path(tmp)
        rows = []
        for name in args.presets:
            summary, wall = run_preset(name, args.first, args.seeds, root)
            rows.append(figures(name, summary, root, wall))
            print(" | ".join(rows[-1]), file=sys.stderr, flush=True)
    report(
        f"presets on seeds {args.first}-{args.first + args.seeds - 1} (seeds={args.seeds} in one process)",
        [
            "preset",
            "solved",
            "median step",
            "worst step",
            "held",
            "greedy eval >= threshold: median step",
            "last 100 episodes below threshold (all seeds)",
            "wall",
        ],
        rows,
        ["budget: 100k env steps per seed (pqn: 500k); held: final 100-episode mean >= threshold, last eval 500"],
    )


if __name__ == "__main__":
    main()
