"""Deciding at several looks without inflating the error rate: the comparison looks at its evidence after
every round of seeds, and stops as soon as it is decided, so a fixed-sample test at each look would decide
wrongly far more often than its level says. Two rules, one per kind of score:

- Binary (solved or not): an e-process on the discordant seeds (Ramdas, Grünwald, Vovk and Shafer 2023,
  "Game-theoretic statistics and safe anytime-valid inference"). Under "no difference" each discordant
  seed is a fair coin: B-only or A-only with probability 1/2. The Krichevsky-Trofimov mixture (a
  Beta(1/2, 1/2) prior over the coin's bias) of the likelihood ratio against the fair coin,
  E_n = B(k + 1/2, n - k + 1/2) / B(1/2, 1/2) * 2^n for k B-only seeds among n discordant ones, is a
  nonnegative martingale with E_0 = 1 under that hypothesis, so by Ville's inequality
  P(E_n >= 1/alpha for some n) <= alpha, however many looks, whenever they are taken (Robbins 1970). The
  comparison decides when E reaches 1/alpha; 1 / max E is its anytime-valid p-value. It depends on the
  discordant counts only, so it needs no plan of the looks, and a budget may be raised later.
- Continuous (a final return, an AUC): the paired sign-flip test (`rlrun.compare.stats.sign_flip_p`) at each
  of the planned looks, at the level that an alpha-spending function spends there (Lan and DeMets 1983,
  "Discrete sequential boundaries for clinical trials"), with the O'Brien-Fleming-type function
  alpha(t) = 2 - 2 Phi(z_{1-alpha/2} / sqrt(t)) of the information fraction t = seeds so far / seed budget.
  The levels of the looks add up to alpha, so by the union bound the chance of any wrong decision is at most
  alpha, whatever the correlation between looks (a conservative use of the spending function: it gives up a
  little power for a guarantee that needs no normal approximation). Early looks spend very little, so a
  comparison stops early only on overwhelming evidence.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from scipy.special import betaln
from scipy.stats import norm


def e_value(only_a: int, only_b: int) -> float:
    """E of the discordant seeds: the Krichevsky-Trofimov mixture over the coin's bias of the likelihood ratio
    against a fair coin (order-free: it depends on the counts only), computed in logs."""
    n = only_a + only_b
    return math.exp(float(betaln(only_b + 0.5, only_a + 0.5) - betaln(0.5, 0.5) + n * math.log(2)))


def anytime_p(e_values: Sequence[float]) -> float:
    """The anytime-valid p-value after looks with these e-values: 1 / the largest of them (at most 1)."""
    return min(1.0, 1.0 / max([1.0, *e_values]))


def spent(t: float, alpha: float) -> float:
    """The O'Brien-Fleming-type alpha-spending function of Lan and DeMets: alpha spent by information fraction
    t in [0, 1]; alpha(1) = alpha."""
    if t <= 0:
        return 0.0
    return float(2 - 2 * norm.cdf(norm.ppf(1 - alpha / 2) / math.sqrt(min(t, 1.0))))


def look_levels(seeds_at_looks: Sequence[int], budget: int, alpha: float) -> list[float]:
    """The level each look may use: what the spending function spends between the previous look and this one
    (information fraction: paired seeds so far / the seed budget). They add up to alpha when the last look is
    at the budget."""
    levels, before = [], 0.0
    for n in seeds_at_looks:
        now = spent(n / budget, alpha)
        levels.append(max(0.0, now - before))
        before = max(before, now)
    return levels


def planned_looks(per_round: int, budget: int) -> list[int]:
    """Paired seeds at each look: after every round of `per_round` seeds, the last one at the budget."""
    return [min(n, budget) for n in range(per_round, budget + per_round, per_round)]
