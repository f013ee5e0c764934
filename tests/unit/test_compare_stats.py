"""rlrun.compare's statistics and sequential rules against values computed by hand, and the exact chance that
the sequential rule for the solved metric decides wrongly (Ville's bound)."""

import math

import numpy as np
import pytest
from scipy.stats import norm

from rlrun.compare import sequential, stats


def test_e_value_is_the_krichevsky_trofimov_mixture_against_a_fair_coin():
    # KT probability of a sequence: 1/2 for the first coin, then (count of its side + 1/2) / (n + 1); E = that * 2^n
    assert sequential.e_value(0, 0) == pytest.approx(1.0)
    assert sequential.e_value(0, 1) == pytest.approx(1.0)  # one coin says nothing: 1/2 * 2
    assert sequential.e_value(0, 2) == pytest.approx(1.5)  # 1/2 * 3/4 * 4
    assert sequential.e_value(1, 1) == pytest.approx(0.5)  # 1/2 * 1/4 * 4: a split is evidence for the fair coin
    assert sequential.e_value(0, 5) == pytest.approx(945 / 3840 * 32)  # 1/2 3/4 5/6 7/8 9/10 * 2^5 = 7.875
    assert sequential.e_value(2, 5) == sequential.e_value(5, 2)  # two-sided: either side
    # KT of 3 heads, 1 tail in any order: (1/2 * 3/4 * 5/6) * (1/2) / 4 ... = 5/128
    assert sequential.e_value(1, 3) == pytest.approx(5 / 128 * 16)


def test_seven_discordant_seeds_all_one_way_decide_at_five_percent_six_do_not():
    assert sequential.e_value(0, 6) == pytest.approx(0.2255859375 * 64)  # 14.4 < 20
    assert sequential.e_value(0, 7) >= 20 > sequential.e_value(0, 6)
    assert sequential.anytime_p([sequential.e_value(0, 7)]) == pytest.approx(1 / 26.8125, rel=1e-4)
    assert sequential.anytime_p([0.5, 3.0, 2.0]) == pytest.approx(1 / 3)  # the largest e-value so far counts
    assert sequential.anytime_p([0.5]) == 1.0
    # the fixed-sample McNemar test needs six (2 * 0.5^6 = 0.031): the price of looking as often as one likes
    assert stats.mcnemar_exact(0, 6) < 0.05


def crossing_probability(n_max: int, decides) -> float:
    """Exactly, the chance that `decides(a_only, b_only)` holds at some look within n_max fair-coin discordant
    seeds, looking after each one (absorbed once it does)."""
    alive = {0: 1.0}  # B-only count -> probability, among paths that have not crossed
    crossed = 0.0
    for n in range(1, n_max + 1):
        step: dict[int, float] = {}
        for k, p in alive.items():
            for k2 in (k, k + 1):
                step[k2] = step.get(k2, 0.0) + p / 2
        alive = {}
        for k, p in step.items():
            if decides(n - k, k):
                crossed += p
            else:
                alive[k] = p
    return crossed


def test_the_e_process_decides_wrongly_at_most_alpha_however_often_it_looks():
    """Looking after every discordant seed (more often than any comparison looks), up to 300 of them: the
    exact chance of ever declaring a winner between two equal settings stays under alpha (Ville)."""
    for alpha in (0.05, 0.1):
        wrong = crossing_probability(300, lambda a, b, alpha=alpha: sequential.e_value(a, b) >= 1 / alpha)
        assert 0.25 * alpha < wrong <= alpha, wrong


def test_a_fixed_sample_test_repeated_at_every_look_would_not():
    """What the sequential rule is for: McNemar's exact test at 5% after every discordant seed up to 100
    declares a winner between equal settings far more often than 5% of the time."""
    wrong = crossing_probability(100, lambda a, b: stats.mcnemar_exact(a, b) <= 0.05)
    assert wrong > 0.15


def test_obrien_fleming_spending_by_hand():
    assert sequential.spent(1.0, 0.05) == pytest.approx(0.05)
    assert sequential.spent(0.0, 0.05) == 0.0
    z = norm.ppf(0.975)
    assert sequential.spent(0.5, 0.05) == pytest.approx(2 - 2 * norm.cdf(z / math.sqrt(0.5)))  # 0.00557
    assert sequential.spent(0.5, 0.05) == pytest.approx(0.00557, abs=1e-5)
    assert sequential.spent(0.25, 0.05) == pytest.approx(8.9e-5, abs=1e-6)  # z / 0.5 = 3.92


def test_look_levels_spend_alpha_once_over_the_planned_looks():
    assert sequential.planned_looks(10, 25) == [10, 20, 25]
    assert sequential.planned_looks(10, 10) == [10]
    levels = sequential.look_levels([10, 20, 30, 40], 40, 0.05)
    assert sum(levels) == pytest.approx(0.05)  # the union bound: at most alpha in all
    assert levels == pytest.approx([8.86e-5, 0.005486, 0.018051, 0.026375], abs=1e-5)
    assert levels == sorted(levels)  # O'Brien-Fleming: little early, most at the end
    assert sequential.look_levels([40], 40, 0.05) == pytest.approx([0.05])  # one look: the whole of alpha


def test_sign_flip_p_enumerates_every_swap_for_small_samples():
    assert stats.sign_flip_p([0, 0, 0], [1, 2, 3]) == pytest.approx(2 / 8)  # only all-plus and all-minus reach 6
    # differences 1, 1, 1, -1: a sum of four +-1 is 0 in 6 of 16 flips, else at least as far from 0 as 2
    assert stats.sign_flip_p([0, 0, 0, 1], [1, 1, 1, 0]) == pytest.approx(10 / 16)
    assert stats.sign_flip_p([1.0, 2.0], [1.0, 2.0]) == 1.0  # no seed tells them apart
    assert stats.sign_flip_p([0.1, 0.2, 0.3], [0.3, 0.4, 0.5]) == pytest.approx(2 / 8)  # floating-point ties kept


def test_sign_flip_p_samples_above_sixteen_pairs_and_stays_valid():
    a, b = np.zeros(20), np.ones(20)  # the exact p is 2 / 2^20
    p = stats.sign_flip_p(a, b, draws=20_000)
    assert 1 / 20_001 <= p <= 3 / 20_001  # (1 + hits) / (1 + draws): never 0
    rng = np.random.default_rng(1)
    x = rng.normal(size=30)
    y = x + rng.normal(size=30)  # no difference in mean
    assert stats.sign_flip_p(x, y) > 0.05
    assert stats.sign_flip_p(x, x + 1 + 0.1 * rng.normal(size=30)) < 1e-4


def test_paired_bootstrap_of_a_mean_difference():
    assert stats.paired_bootstrap([1, 2, 3], [3, 4, 5]) == pytest.approx((2.0, 2.0))  # constant difference
    low, high = stats.paired_bootstrap(np.arange(10.0), np.arange(10.0) + np.array([1, -1] * 5) + 0.5)
    assert low < 0.5 < high
    wide = stats.paired_bootstrap(np.zeros(10), np.arange(10.0), level=0.99)
    narrow = stats.paired_bootstrap(np.zeros(10), np.arange(10.0), level=0.5)
    assert wide[0] < narrow[0] < 4.5 < narrow[1] < wide[1]


def test_sign_flip_p_is_never_below_its_exact_minimum():
    """Two-sided, n pairs: the observed signs and their mirror are always as extreme, so p >= 2 / 2^n (4 pairs
    cannot decide at 5%); scores whose differences overflow are scaled first, and a non-finite one is refused
    (before: an infinite score gave p = 0)."""
    rng = np.random.default_rng(1)
    for n in range(1, 9):
        for scale in (1.0, 1e300, 1e-300):
            a, b = rng.normal(size=n) * scale, rng.normal(size=n) * scale + scale
            assert stats.sign_flip_p(a, b) >= 2 / 2**n
    assert stats.sign_flip_p([1e308] * 4, [-1e308] * 4) == pytest.approx(2 / 16)  # b - a overflows to -inf
    for bad in (math.inf, -math.inf, math.nan):
        with pytest.raises(ValueError, match="finite"):
            stats.sign_flip_p([bad, 1.0, 2.0, 3.0], [21.0, 22.0, 23.0, 24.0])
        with pytest.raises(ValueError, match="finite"):
            stats.paired_bootstrap([bad, 1.0, 2.0, 3.0], [21.0, 22.0, 23.0, 24.0])
    assert stats.paired_bootstrap([1e308, 1e308], [0.0, 0.0]) == pytest.approx((-1e308, -1e308))  # no overflow
