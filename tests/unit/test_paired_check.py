"""The paired check a preset change must pass (rlrun.compare.stats, used by scripts/preset_seeds.py), against
values computed by hand."""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))

from rlrun.compare.stats import compare, mcnemar_exact, quantile_step, rate_interval  # noqa: E402


def test_mcnemar_exact_is_the_two_sided_binomial_tail_of_the_discordant_seeds():
    assert mcnemar_exact(7, 0) == pytest.approx(2 * 0.5**7)  # 0.015625: 7 discordant seeds all one way
    assert mcnemar_exact(0, 7) == pytest.approx(0.015625)
    assert mcnemar_exact(1, 4) == pytest.approx(2 * (1 + 5) / 32)  # P(X <= 1) for n = 5, doubled: 0.375
    assert mcnemar_exact(3, 3) == 1.0  # an even split; the doubled tail is capped at 1
    assert mcnemar_exact(0, 0) == 1.0  # no discordant seed: nothing tells the two apart


def test_rate_interval_is_clopper_pearson():
    assert rate_interval(0, 10) == pytest.approx((0.0, 1 - 0.025 ** (1 / 10)))  # upper 0.3085
    assert rate_interval(10, 10) == pytest.approx((0.025 ** (1 / 10), 1.0))  # lower 0.6915
    low, high = rate_interval(97, 100)
    assert (round(100 * low), round(100 * high)) == (91, 99)


def test_quantile_step_ranks_a_seed_that_never_got_there_last():
    steps = [None, 10, 30, 20]  # sorted: 10, 20, 30, never
    assert quantile_step(steps, 0.5) == 20  # nearest rank: ceil(0.5 * 4) = 2nd
    assert quantile_step(steps, 0.75) == 30
    assert quantile_step(steps, 0.9) is None  # ceil(3.6) = 4th: the unsolved seed
    assert quantile_step([5], 0.0) == 5


def test_compare_counts_the_discordant_seeds_and_decides():
    incumbent = {1: 100, 2: None, 3: 300, 4: None, 5: 500, 6: None, 7: None, 8: None, 9: None, 10: 10}
    candidate = {1: 90, 2: 200, 3: None, 4: 400, 5: 450, 6: 60, 7: 70, 8: 80, 9: 90, 10: 20, 11: 5}
    c = compare("inc", "cand", incumbent, candidate)
    assert c.seeds == list(range(1, 11))  # seed 11 ran for the candidate only: left out
    assert (c.only_incumbent, c.only_candidate) == ([3], [2, 4, 6, 7, 8, 9])
    assert (c.solved_incumbent, c.solved_candidate) == (4, 9)
    assert c.p_value == pytest.approx(2 * (1 + 7) / 2**7)  # n = 7 discordant, 1 one way: 0.125
    assert c.outcome == "tie" and c.decision == "inc stays"  # more solved, not significantly
    low, high = c.rate_difference
    assert low <= 0.5 <= high  # the observed difference, 9/10 - 4/10, lies in its bootstrap interval

    all_on = {s: 1 for s in range(20)}
    none = dict.fromkeys(range(20))
    win = compare("inc", "cand", none, all_on)
    assert win.p_value == pytest.approx(2 * 0.5**20)
    assert win.outcome == "candidate" and win.decision == "cand replaces inc"
    assert win.rate_difference == (1.0, 1.0)
    lose = compare("inc", "cand", all_on, none)
    assert lose.outcome == "incumbent" and lose.decision == "inc stays"
    with pytest.raises(ValueError, match="no seed"):
        compare("inc", "cand", {1: 1}, {2: 2})


def test_a_kept_run_is_reused_across_a_new_schema_key_but_not_a_changed_value(compose):
    """preset_seeds reuses a kept run only when its saved config is the variant's composed one. A run saved
    before a key existed (here `pbt`, added with PBT) has the same config; one with another lr does not."""
    from benchlib.common import same_config
    from omegaconf import OmegaConf

    composed = OmegaConf.to_container(compose("network=qrdqn", "seeds=20"), resolve=True)
    older = {k: v for k, v in composed.items() if k != "pbt"}
    assert same_config(older, composed)
    assert older != composed  # what the check compared before: the run was refused as another config's
    changed = {**older, "optimizer": {**older["optimizer"], "lr": 1e-3}}
    assert not same_config(changed, composed)
