"""How often `python -m rlrun.compare` declares a winner between two settings that do not differ, measured
on real training runs: the simulation's question (scripts/compare_calibration.py) asked of real agents.

On a CPU a run is bitwise repeatable from its seed, so one config under two names on the same seeds trains
identical agents and never decides. The honest null pair is two independent agents of one config per
paired seed: this script trains a pool of agents of one setting (batched, `seeds=K` per run, resumable: a
finished pool is read again, a stopped run is continued with `python -m rlrun.resume`), then forms
repetitions in which arm A's and arm B's i-th seeds are two different agents of the pool (no agent twice in
one repetition) and runs each through the comparison's own looks (`rlrun.compare.run.looks_of`: rounds of
`--per-round` seeds up to `--budget`, the rule of each metric at its level).

    python scripts/compare_null_real.py --pool /work/compare_runs/null_pool --agents 1600
    python scripts/compare_null_real.py --pool DIR --agents 1600 --resampled 400   # a finished pool: read only

Two kinds of repetitions: disjoint ones (every agent in at most one: independent, so the exact
Clopper-Pearson interval of the decided share holds) and, with `--resampled R`, R repetitions drawn from the
whole pool (agents shared between repetitions: their share comes without an exact interval). A Markdown
table under the date, the hardware and the command goes to stdout; progress to stderr.
"""

from __future__ import annotations

import argparse
import shlex
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import pandas as pd

from rlrun.compare import arms, stats
from rlrun.compare.rounds import Plan, RoundError, Runner, state
from rlrun.compare.run import looks_of
from rlrun.machine import hardware


def missing_chunks(have: set[int], first: int, agents: int, per_run: int) -> list[tuple[int, int]]:
    """(first seed, agents) of the batched runs still to train: the pool's missing seeds, in contiguous runs
    of at most `per_run` (a run stopped mid-way counts as missing and is continued under its own name)."""
    chunks: list[tuple[int, int]] = []
    for seed in range(first, first + agents):
        if seed in have:
            continue
        if chunks and chunks[-1][0] + chunks[-1][1] == seed and chunks[-1][1] < per_run:
            chunks[-1] = (chunks[-1][0], chunks[-1][1] + 1)
        else:
            chunks.append((seed, 1))
    return chunks


def train_pool(pool: Path, overrides: list[str], first: int, agents: int, per_run: int) -> None:
    """Every seed first..first+agents-1 trained under `pool` (one batched run per chunk, `seeds<a>-<b>`)."""
    have = set(arms.read_arm("pool", pool).index) if pool.exists() else set()
    runner = Runner(f"python {shlex.join(sys.argv)}")
    runner.install()
    for start, n in missing_chunks(have, first, agents, per_run):
        out = pool / f"seeds{start}-{start + n - 1}"
        run_overrides = [*overrides, f"seed={start}", f"seeds={n}"]
        try:
            now = state(out, run_overrides)
        except RoundError as e:
            sys.exit(f"compare_null_real: {e}")
        began = time.monotonic()
        if now == "stopped":
            runner.run(["-m", "rlrun.resume", str(out)], f"the pool's run {out}")
        elif now == "new":
            runner.run(["-m", "rlrun.train", *run_overrides, f"hydra.run.dir={out}"], f"the pool's run {out}")
        print(f"compare_null_real: {out}: {n} agents, {time.monotonic() - began:.0f} s", file=sys.stderr, flush=True)


def pool_scores(pool: Path, first: int, agents: int) -> pd.DataFrame:
    """Each agent's solved, final and auc, indexed by its seed (the comparison's own readers)."""
    table = arms.read_arm("pool", pool)
    table = table[table.index.isin(range(first, first + agents))]
    return arms.with_auc(table, arms.curves(table, "pool"))


def decided_at(pool: pd.DataFrame, a_seeds: np.ndarray, b_seeds: np.ndarray, plan: Plan) -> int:
    """Paired seeds at which the comparison's looks decided between these agents, or 0 (undecided)."""
    tables = {
        arm: pool.loc[seeds].set_index(pd.RangeIndex(len(seeds)) + plan.first_seed)
        for arm, seeds in (("A", a_seeds), ("B", b_seeds))
    }
    for look, _, _ in looks_of(plan, lambda first, n: tables):
        if look.decided:
            return look.seeds
    return 0


def repetitions(seeds: np.ndarray, budget: int, disjoint: bool, count: int, rng: np.random.Generator):
    """(A's agents, B's agents) per repetition, `budget` each, no agent twice in one repetition; disjoint:
    no agent in two repetitions either."""
    if disjoint:
        order = rng.permutation(seeds)
        for r in range(len(seeds) // (2 * budget)):
            chunk = order[2 * budget * r : 2 * budget * (r + 1)]
            yield chunk[:budget], chunk[budget:]
        return
    for _ in range(count):
        chunk = rng.choice(seeds, size=2 * budget, replace=False)
        yield chunk[:budget], chunk[budget:]


def share(decided: list[int], independent: bool) -> str:
    """The decided share; with its exact 95% interval where the repetitions are independent."""
    k, n = sum(d > 0 for d in decided), len(decided)
    if not independent:
        return f"{k}/{n} = {k / n:.3f} (repetitions share agents: no exact interval)"
    low, high = stats.rate_interval(k, n)
    return f"{k}/{n} = {k / n:.3f} ({low:.3f}-{high:.3f})"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--pool", type=Path, required=True, help="the pool's folder (outside the repository)")
    p.add_argument("--agents", type=int, default=1600, help="agents in the pool (default 1600)")
    p.add_argument("--first-seed", type=int, default=100_000, help="the pool's first seed (default 100000)")
    p.add_argument("--per-run", type=int, default=200, help="agents per batched run (default 200)")
    p.add_argument("--overrides", default="total_steps=20000", help="the one setting (default: total_steps=20000)")
    p.add_argument("--budget", type=int, default=40, help="the comparison's seed budget (default 40)")
    p.add_argument("--per-round", type=int, default=10, help="paired seeds per round (default 10)")
    p.add_argument("--alpha", type=float, default=0.05)
    p.add_argument("--metrics", default="final,auc,solved")
    p.add_argument("--resampled", type=int, default=0, help="also R repetitions drawn from the whole pool")
    p.add_argument("--seed", type=int, default=0, help="the draw of the repetitions")
    args = p.parse_args()
    overrides = shlex.split(args.overrides)
    began = time.monotonic()
    train_pool(args.pool, overrides, args.first_seed, args.agents, args.per_run)
    trained = time.monotonic() - began
    pool = pool_scores(args.pool, args.first_seed, args.agents)
    seeds = pool.index.to_numpy()
    print(f"compare_null_real: {len(pool)} agents in the pool ({trained:.0f} s training this call)", file=sys.stderr)
    rows = []
    for metric in args.metrics.split(","):
        usable = seeds[pool[metric].notna().to_numpy()] if metric != "solved" else seeds
        plan = Plan([], [], overrides, metric, args.per_round, args.budget, args.alpha, 0)
        kinds = [("disjoint", True, 0)] + ([("resampled", False, args.resampled)] if args.resampled else [])
        for kind, disjoint, count in kinds:
            rng = np.random.default_rng(args.seed)
            decided = [decided_at(pool, a, b, plan) for a, b in repetitions(usable, args.budget, disjoint, count, rng)]
            at = [d for d in decided if d > 0]
            rows.append([metric, kind, share(decided, disjoint), ", ".join(str(d) for d in sorted(at)) or "-"])
            print(" | ".join(rows[-1]), file=sys.stderr, flush=True)
    solved = int(pool["solved"].sum())
    print(f"{datetime.now(timezone.utc):%Y-%m-%d}, {hardware()}: python {shlex.join(sys.argv)}")
    print(
        f"pool: {len(pool)} agents of `{args.overrides}` (seeds {args.first_seed}-{args.first_seed + args.agents - 1}),"
        f" {solved} reached the threshold; final return mean {pool['final'].mean():.1f}, auc mean "
        f"{pool['auc'].mean():.1f}; looks: rounds of {args.per_round} up to {args.budget} paired seeds, alpha "
        f"{args.alpha}\n"
    )
    print("| metric | repetitions | decided (exact 95% interval) | paired seeds at each decision |")
    print("|---|---|---|---|")
    for row in rows:
        print("| " + " | ".join(row) + " |")


if __name__ == "__main__":
    main()
