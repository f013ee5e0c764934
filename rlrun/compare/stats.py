"""Two settings compared on the same seeds: the paired statistics of `rlrun.compare` (and of the confirmation
step a preset change must pass, scripts/preset_seeds.py).

A binary score (each seed either reached the threshold within the budget or did not): with both settings run
on the same seeds, only the discordant seeds tell them apart (solved by one, not the other): McNemar's exact
test asks whether those split as a fair coin would. A paired bootstrap over seeds gives an interval for the
difference in solve rates, and the steps-to-threshold quantiles say how fast the solved ones got there.

A continuous score (a final return, the area under a learning curve): the paired sign-flip (randomization)
test of the mean difference, exact when the two settings' scores are exchangeable within a seed (which is
what "no difference" means for settings run on the same seeds), and a paired bootstrap interval of that
difference. The sequential rules that decide from these at several looks are in `rlrun.compare.sequential`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from scipy.stats import binomtest

EXACT_SIGN_FLIPS = 16  # up to this many pairs the sign-flip test enumerates all 2^n flips; above, it samples
SIGN_FLIP_DRAWS = 100_000  # sampled flips: a p-value as small as 1e-5, below the first looks' levels
BOOTSTRAP_DRAWS = 10_000  # resamples of the seeds for a paired-bootstrap interval, from seed 0: reproducible

ALPHA = 0.05  # a setting wins only with a two-sided p below this


def mcnemar_exact(only_a: int, only_b: int) -> float:
    """Two-sided exact McNemar p-value: `only_b` of the `only_a + only_b` discordant seeds against p = 1/2."""
    n = only_a + only_b
    return 1.0 if n == 0 else float(binomtest(only_b, n, 0.5).pvalue)


def rate_interval(solved: int, n: int) -> tuple[float, float]:
    """The exact (Clopper-Pearson) 95% interval of a solve rate."""
    ci = binomtest(solved, n).proportion_ci(confidence_level=0.95, method="exact")
    return float(ci.low), float(ci.high)


def bootstrap_difference(a: Sequence[bool], b: Sequence[bool]) -> tuple[float, float]:
    """95% paired-bootstrap interval of rate(b) - rate(a): seeds resampled with replacement, both kept paired."""
    x, y = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    idx = np.random.default_rng(0).integers(0, len(x), size=(BOOTSTRAP_DRAWS, len(x)))
    diffs = y[idx].mean(axis=1) - x[idx].mean(axis=1)
    low, high = np.percentile(diffs, [2.5, 97.5])
    return float(low), float(high)


def quantile_step(steps: Sequence[int | None], q: float) -> int | None:
    """The nearest-rank q-quantile of steps to threshold over all seeds, a seed that never got there counting
    as later than any; None when the quantile falls on such a seed."""
    ordered = sorted(steps, key=lambda s: math.inf if s is None else s)
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


@dataclass
class Comparison:
    incumbent: str
    candidate: str
    seeds: list[int]  # the seeds both ran
    only_incumbent: list[int]  # seeds solved by the incumbent alone
    only_candidate: list[int]
    solved_incumbent: int
    solved_candidate: int
    p_value: float
    rate_difference: tuple[float, float]  # 95% paired-bootstrap interval of candidate's rate - incumbent's

    @property
    def outcome(self) -> str:
        """'candidate', 'incumbent' (the one that solved significantly more seeds) or 'tie'."""
        if self.p_value >= ALPHA or self.solved_candidate == self.solved_incumbent:
            return "tie"
        return "candidate" if self.solved_candidate > self.solved_incumbent else "incumbent"

    @property
    def decision(self) -> str:
        """The candidate replaces the incumbent only when it wins; a tie keeps the incumbent."""
        if self.outcome == "candidate":
            return f"{self.candidate} replaces {self.incumbent}"
        return f"{self.incumbent} stays"


def compare(
    incumbent: str, candidate: str, steps_a: Mapping[int, int | None], steps_b: Mapping[int, int | None]
) -> Comparison:
    """Pair the two settings' per-seed steps to threshold (None: not reached) on the seeds both ran."""
    seeds = sorted(set(steps_a) & set(steps_b))
    if not seeds:
        raise ValueError("the two settings share no seed")
    a = [steps_a[s] is not None for s in seeds]
    b = [steps_b[s] is not None for s in seeds]
    only_a = [s for s, x, y in zip(seeds, a, b) if x and not y]
    only_b = [s for s, x, y in zip(seeds, a, b) if y and not x]
    return Comparison(
        incumbent,
        candidate,
        seeds,
        only_a,
        only_b,
        sum(a),
        sum(b),
        mcnemar_exact(len(only_a), len(only_b)),
        bootstrap_difference(a, b),
    )


def paired_bootstrap(a: Sequence[float], b: Sequence[float], level: float = 0.95) -> tuple[float, float]:
    """The `level` paired-bootstrap (percentile) interval of mean(b - a): seeds resampled with replacement,
    each keeping both of its scores."""
    d, scale = scaled_differences(a, b)
    idx = np.random.default_rng(0).integers(0, len(d), size=(BOOTSTRAP_DRAWS, len(d)))
    tail = 100 * (1 - level) / 2
    low, high = np.percentile(d[idx].mean(axis=1), [tail, 100 - tail])
    return float(low * scale), float(high * scale)


def scaled_differences(a: Sequence[float], b: Sequence[float]) -> tuple[np.ndarray, float]:
    """The paired differences b - a divided by the largest score's magnitude (so that neither they nor their
    sums overflow), and that scale; a ValueError for a score that is not a finite number (no test can weigh
    it: an infinite score would be "as extreme" as no flip of it, p = 0)."""
    x, y = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if not (np.isfinite(x).all() and np.isfinite(y).all()):
        raise ValueError(f"scores must be finite numbers: {[v for v in (*x, *y) if not np.isfinite(v)][:3]}")
    scale = float(max(np.abs(x).max(initial=0.0), np.abs(y).max(initial=0.0)))
    if scale == 0.0:
        return y - x, 1.0
    return y / scale - x / scale, scale


def sign_flip_p(a: Sequence[float], b: Sequence[float], draws: int = SIGN_FLIP_DRAWS, seed: int = 0) -> float:
    """Two-sided p-value of the paired sign-flip test of mean(b - a) = 0: the share of the 2^n ways of swapping
    the two scores within seeds whose mean difference is at least as far from 0 as the observed one.
    Enumerated for up to `EXACT_SIGN_FLIPS` pairs; sampled above, as (1 + hits) / (1 + draws), which keeps the
    test valid (Phipson and Smyth 2010). A tolerance of 1e-9 of the scale keeps ties ties in floating point.
    The observed signs and their mirror image are always as extreme as the observed, so p is never below
    2 / 2^n (enumerated): 4 pairs cannot decide at 5%. A score that is not a finite number is a ValueError."""
    d, _ = scaled_differences(a, b)  # the p-value does not depend on the scale
    n = len(d)
    observed = abs(d.mean()) if n else 0.0
    scale = float(np.abs(d).max()) if n else 0.0
    if scale == 0.0:
        return 1.0  # no seed tells the two apart
    tol = 1e-9 * scale
    if n <= EXACT_SIGN_FLIPS:
        signs = 1 - 2 * ((np.arange(2**n)[:, None] >> np.arange(n)) & 1)
        return max(2 / 2**n, float(np.mean(np.abs(signs @ d) / n >= observed - tol)))
    rng = np.random.default_rng(seed)
    hits, done = 0, 0
    while done < draws:  # in chunks: draws x n signs at once would be large
        m = min(10_000, draws - done)
        signs = rng.choice(np.array([-1.0, 1.0]), size=(m, n))
        hits += int(np.sum(np.abs(signs @ d) / n >= observed - tol))
        done += m
    return (1 + hits) / (1 + draws)
