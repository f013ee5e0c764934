"""How often `python -m rlrun.compare` declares a winner between two settings that do not differ (its type-I
error, which must stay at or below alpha), and how soon it decides a real difference, by simulating the
statistics it decides with, round by round, as the command runs them (rlrun.compare.sequential and .stats).

    python scripts/compare_calibration.py                      # 10,000 null comparisons per metric
    python scripts/compare_calibration.py --reps 2000 --draws 5000

- solved: each seed is solved by each arm with probability q (CartPole's presets: 0.84 to 0.99 on 100
  held-out seeds, docs/results/cartpole-presets.md), the two arms' outcomes of a seed correlated through a
  shared seed effect; "no difference": both arms the same q. Rounds of 10 seeds up to 100. Compared with
  McNemar's exact test repeated at every look (what a user would do by hand), and, for real differences
  (q 0.91 against 0.99, the default against algo=mdqn on seeds 7000-7099), with McNemar's test once at 100.
- final: each seed's final return drawn from a CartPole-like mixture (most seeds near 500, some collapsed),
  the arms' returns of a seed sharing a seed effect; "no difference": the same mixture for both. Rounds of
  10 seeds up to 40 (the issue's cheap setting), the sign-flip test at each look's spent level.

A Markdown table under the date, the hardware and the command.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from datetime import datetime, timezone

import numpy as np

from rlrun.compare import sequential, stats
from rlrun.machine import hardware


def solved_outcomes(rng: np.random.Generator, reps: int, seeds: int, q_a: float, q_b: float, rho: float):
    """Per rep and seed, whether each arm solved: a Gaussian copula with correlation rho between the arms."""
    from scipy.stats import norm

    shared = rng.normal(size=(reps, seeds))
    za = np.sqrt(rho) * shared + np.sqrt(1 - rho) * rng.normal(size=(reps, seeds))
    zb = np.sqrt(rho) * shared + np.sqrt(1 - rho) * rng.normal(size=(reps, seeds))
    return za < norm.ppf(q_a), zb < norm.ppf(q_b)


def solved_runs(a: np.ndarray, b: np.ndarray, per_round: int, alpha: float) -> dict[str, np.ndarray]:
    """Per rep: whether the e-process decided by the budget, at how many seeds; and whether McNemar's test
    repeated at every look, or once at the budget, would have."""
    reps, budget = a.shape
    looks = sequential.planned_looks(per_round, budget)
    only_a = np.cumsum(a & ~b, axis=1)
    only_b = np.cumsum(b & ~a, axis=1)
    table = {}  # e-values and McNemar p-values of every (A-only, B-only) count that occurs
    decided_at = np.full(reps, -1)
    repeated = np.zeros(reps, bool)
    for n in looks:
        for r in range(reps):
            key = (int(only_a[r, n - 1]), int(only_b[r, n - 1]))
            if key not in table:
                table[key] = (sequential.e_value(*key), stats.mcnemar_exact(*key))
            e, p = table[key]
            if decided_at[r] < 0 and e >= 1 / alpha:
                decided_at[r] = n
            repeated[r] |= p <= alpha
    once = np.array([stats.mcnemar_exact(int(only_a[r, -1]), int(only_b[r, -1])) <= alpha for r in range(reps)])
    return {"decided_at": decided_at, "repeated": repeated, "once": once}


def final_returns(rng: np.random.Generator, reps: int, seeds: int, shift: float):
    """CartPole-like final returns: a seed effect shared by both arms, 85% of agents near the 500 cap, 15%
    collapsed somewhere in 50-400; B's returns moved by `shift` (0: no difference)."""

    def arm() -> np.ndarray:
        good = np.minimum(500.0, 470 + 25 * rng.standard_normal((reps, seeds)))
        bad = rng.uniform(50, 400, (reps, seeds))
        return np.where(rng.random((reps, seeds)) < 0.85, good, bad)

    seed_effect = 15 * rng.standard_normal((reps, seeds))
    return arm() + seed_effect, arm() + seed_effect + shift


def final_runs(a: np.ndarray, b: np.ndarray, per_round: int, alpha: float, draws: int) -> np.ndarray:
    """Per rep: the paired seeds at which the sign-flip test at the spent levels decided, or -1."""
    reps, budget = a.shape
    looks = sequential.planned_looks(per_round, budget)
    levels = sequential.look_levels(looks, budget, alpha)
    decided_at = np.full(reps, -1)
    for r in range(reps):
        for n, level in zip(looks, levels):
            if stats.sign_flip_p(a[r, :n], b[r, :n], draws=draws, seed=r) <= level:
                decided_at[r] = n
                break
    return decided_at


def share(x: np.ndarray) -> str:
    """A share of reps with its exact 95% interval."""
    low, high = stats.rate_interval(int(x.sum()), len(x))
    return f"{x.mean():.4f} ({low:.4f}-{high:.4f})"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--reps", type=int, default=10_000, help="simulated comparisons per setting (default 10,000)")
    p.add_argument("--draws", type=int, default=10_000, help="sign flips sampled per test above 16 seeds")
    p.add_argument("--alpha", type=float, default=0.05)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()
    rng = np.random.default_rng(args.seed)
    rows = []
    for q_a, q_b in ((0.91, 0.91), (0.84, 0.84), (0.5, 0.5), (0.91, 0.99), (0.84, 0.97)):
        a, b = solved_outcomes(rng, args.reps, 100, q_a, q_b, rho=0.3)
        r = solved_runs(a, b, 10, args.alpha)
        decided = r["decided_at"] > 0
        seeds = r["decided_at"][decided]
        rows.append([
            f"solved, q {q_a} vs {q_b}" + (" (no difference)" if q_a == q_b else ""),
            f"{(a != b).mean():.3f}", "10 x 10", share(decided),
            f"{np.median(seeds):.0f}" if len(seeds) else "-", share(r["repeated"]), share(r["once"]),
        ])  # fmt: skip
        print(" | ".join(rows[-1]), file=sys.stderr, flush=True)
    for shift in (0.0, 40.0):
        a, b = final_returns(rng, args.reps, 40, shift)
        decided_at = final_runs(a, b, 10, args.alpha, args.draws)
        decided = decided_at > 0
        rows.append([
            f"final, B - A shift {shift:g}" + (" (no difference)" if shift == 0 else ""), "-", "4 x 10",
            share(decided), f"{np.median(decided_at[decided]):.0f}" if decided.any() else "-", "-", "-",
        ])  # fmt: skip
        print(" | ".join(rows[-1]), file=sys.stderr, flush=True)
    header = ["simulated pair", "discordant share", "rounds x seeds", "decided (95% interval)",
              "median seeds when decided", "McNemar repeated at each look", "McNemar once at the budget"]  # fmt: skip
    print(f"{datetime.now(timezone.utc):%Y-%m-%d}, {hardware()}: python {shlex.join(sys.argv)}")
    print(f"alpha {args.alpha}, {args.reps} simulated comparisons per row\n")
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for row in rows:
        print("| " + " | ".join(row) + " |")


if __name__ == "__main__":
    main()
