"""Sweep report aggregates (rliable) on small hand-checkable inputs, and the report written for a made-up sweep."""

import json
import re

import numpy as np
import pandas as pd
import pytest
import yaml

from rlrun.report import improvement_probability, iqm_ci, trimmed_mean, write_report


def test_iqm_is_the_mean_of_the_middle_half_with_a_bracketing_ci():
    iqm, lo, hi = iqm_ci(np.arange(1.0, 9.0), reps=500)  # middle half of 1..8: 3, 4, 5, 6
    assert iqm == pytest.approx(4.5)
    assert 1.0 <= lo < 4.5 < hi <= 8.0
    iqm, lo, hi = iqm_ci(np.array([100.0, 200.0, 450.0, 480.0, 500.0]), reps=200)  # 5 runs: one cut at each end
    assert iqm == pytest.approx((200 + 450 + 480) / 3)
    assert iqm_ci(np.array([7.0, 7.0, 7.0]), reps=100) == (7.0, 7.0, 7.0)
    assert np.isnan(iqm_ci(np.array([]))[0])


def test_trimmed_mean_is_rliables_iqm_bit_for_bit():
    """The bootstrap's aggregate is scipy's trim_mean (rliable's aggregate_iqm) without its wrapper."""
    from rliable import metrics
    from scipy import stats

    rng = np.random.default_rng(0)
    for n in range(1, 30):
        runs = rng.normal(size=(n, 1)) * 100
        assert trimmed_mean(runs) == metrics.aggregate_iqm(runs)
        curves = rng.normal(size=(n, 7))
        assert np.array_equal(trimmed_mean(curves, axis=0), stats.trim_mean(curves, 0.25, axis=0))
    assert trimmed_mean(np.array([[1.0], [2.0], [3.0], [4.0], [100.0]])) == 3.0  # the middle three


def test_bootstrap_is_repeatable_and_leaves_numpys_generator_alone():
    np.random.seed(123)
    expected_next = np.random.random()
    np.random.seed(123)
    first = iqm_ci(np.array([1.0, 5.0, 2.0, 9.0, 4.0]), reps=200)
    assert iqm_ci(np.array([1.0, 5.0, 2.0, 9.0, 4.0]), reps=200) == first
    assert np.random.random() == expected_next


def test_probability_of_improvement_counts_pairs_and_half_ties():
    # pairs (x, y) with x > y: 3>1, 3>2, 4>all three, 5>all three = 8, plus the tie 3=3 counted half: 8.5/9
    p, lo, hi = improvement_probability(np.array([3.0, 4.0, 5.0]), np.array([1.0, 2.0, 3.0]), reps=300)
    assert p == pytest.approx(8.5 / 9)
    assert lo <= p <= hi <= 1.0
    assert improvement_probability(np.array([1.0, 2.0]), np.array([1.0, 2.0]), reps=100)[0] == 0.5


def test_the_fast_statistics_are_rliables_bit_for_bit_with_their_bootstrap_intervals():
    """The functions the bootstraps call once per resample: rliable's own metrics without their per-call
    overhead (scipy's Mann-Whitney test; a Python call per tau). Same values, same intervals."""
    from rliable import library as rly, metrics

    from rlrun.report.aggregate import bootstrap_seed, pairwise_improvement
    from rlrun.report.plots import score_distribution

    # by hand: x > y in 2 of 6 pairs (3 > 2 twice), x == y in 2 (2 = 2 twice): (2 + 0.5 * 2) / 6
    assert pairwise_improvement(np.array([[1.0], [2.0], [3.0]]), np.array([[2.0], [2.0]])) == 0.5
    taus = np.array([0.5, 1.5, 2.5, 3.5])
    assert score_distribution(np.array([[1.0], [2.0], [3.0]]), taus).tolist() == [1.0, 2 / 3, 1 / 3, 0.0]
    rng = np.random.default_rng(0)
    for n, m in [(1, 1), (2, 5), (7, 3), (10, 10)]:
        x, y = np.round(rng.normal(size=(n, 2)) * 2) / 2, np.round(rng.normal(size=(m, 2)) * 2) / 2  # with ties
        assert pairwise_improvement(x, y) == metrics.probability_of_improvement(x, y)
        taus = np.linspace(-3, 3, 13)
        assert np.array_equal(score_distribution(x, taus), rly.score_distributions(x, taus))
        got = []
        for fn in (pairwise_improvement, metrics.probability_of_improvement):
            with bootstrap_seed(0):
                got.append(rly.get_interval_estimates({"xy": (x, y)}, fn, reps=100))
        assert got[0][0]["xy"] == got[1][0]["xy"] and np.array_equal(got[0][1]["xy"], got[1][1]["xy"])


def make_run(root, lr, seed, eval_return, train_return, solved_step, **extra):
    run = root / f"optimizer.lr={lr}" / f"seed={seed}"
    (run / ".hydra").mkdir(parents=True)
    cfg = {"seed": seed, "optimizer": {"lr": lr}, "env": {"id": "CartPole-v1"}}
    (run / ".hydra" / "config.yaml").write_text(yaml.safe_dump(cfg))
    (run / ".hydra" / "overrides.yaml").write_text(yaml.safe_dump([f"optimizer.lr={lr}", f"seed={seed}"]))
    summary = {
        "status": "finished",
        "final_eval_return": eval_return,
        "final_mean_return_100": train_return,
        "reward_threshold": 475.0,
        "solved_step": solved_step,
        "wall_time_s": 10.0,
        **extra,
    }
    (run / "summary.json").write_text(json.dumps(summary))


def test_report_of_two_configurations(tmp_path):
    a = [(500.0, 300.0, 10_000), (480.0, 310.0, 12_000), (200.0, 100.0, None), (450.0, 290.0, 14_000)]
    a.append((100.0, 50.0, None))
    for seed, (ev, tr, solved) in enumerate(a):
        make_run(tmp_path, 0.001, seed, ev, tr, solved)
    for seed, (ev, tr) in enumerate([(150.0, 90.0), (160.0, 100.0)]):
        make_run(tmp_path, 0.01, seed, ev, tr, None)

    text = write_report(tmp_path, reps=400)

    table = pd.read_csv(tmp_path / "report.csv").set_index("configuration")
    good, bad = table.loc["optimizer.lr=0.001"], table.loc["optimizer.lr=0.01"]
    assert good.seeds == 5 and bad.seeds == 2
    assert good.eval_return_iqm == pytest.approx((200 + 450 + 480) / 3)  # sorted 100 200 450 480 500
    assert good.train_return_iqm == pytest.approx((100 + 290 + 300) / 3)
    assert bad.eval_return_iqm == pytest.approx(155.0)  # two runs: nothing is cut
    assert good.steps_to_threshold_median == 12_000 and good.solved == "3/5" and bad.solved == "0/2"
    assert good.eval_return_ci95_low <= good.eval_return_iqm <= good.eval_return_ci95_high

    assert "2 configurations" in text and "7 jobs (7 finished)" in text
    assert "1 configuration with fewer than 5 seeds (2)" in text  # only lr=0.01
    assert "12,000 (3/5)" in text and "not reached (0/2)" in text
    assert not re.search(r"\bnan\b", text, re.IGNORECASE)
    # P(lr=0.001 > lr=0.01): 500, 480, 450 and 200 beat both of 150 and 160, 100 beats neither: 8/10
    assert "| optimizer.lr=0.001 | optimizer.lr=0.01 | 0.80 [" in text
    assert (tmp_path / "profile.png").read_bytes()[:4] == b"\x89PNG"
    assert not (tmp_path / "curves.png").exists()  # no TensorBoard events in these made-up runs


def test_one_configuration_without_evaluations(tmp_path):
    for seed in range(5):
        make_run(tmp_path, 0.001, seed, None, 20.0 + seed, None)
    text = write_report(tmp_path, reps=200)
    assert "1 configuration;" in text and "fewer than 5 seeds" not in text
    assert "not evaluated" in text and "22.0 [" in text
    assert "Probability of improvement" not in text and not re.search(r"\bnan\b", text, re.IGNORECASE)


def test_a_batched_jobs_wall_time_is_its_share_of_the_process_and_says_so(tmp_path):
    for seed in range(5):  # lr=0.001: agents of a process of 5 (wall 10 s each: the process's); lr=0.01: alone
        make_run(tmp_path, 0.001, seed, 100.0, 20.0, None, process_agents=5)
        make_run(tmp_path, 0.01, seed, 100.0, 20.0, None)
    text = write_report(tmp_path, reps=100)
    table = pd.read_csv(tmp_path / "report.csv").set_index("configuration")
    assert table.loc["optimizer.lr=0.001"].wall_time_s_mean == pytest.approx(2.0)
    assert table.loc["optimizer.lr=0.01"].wall_time_s_mean == pytest.approx(10.0)
    assert "Wall time: 5 runs trained as agents of batched processes" in text


def without(monkeypatch, package):
    """As if `package` were not installed (for rlrun.report's check of its extra)."""
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == package else real(name, *a))


def test_the_report_without_its_extra_says_how_to_install_it(monkeypatch, tmp_path, capsys):
    import rlrun.report

    without(monkeypatch, "rliable")
    with pytest.raises(SystemExit) as exit_:
        rlrun.report.main([str(tmp_path)])
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and err.count("\n") == 1
    assert 'pip install "rlrun[report]"' in err and "rliable missing" in err
    with pytest.raises(ImportError, match=r"rlrun\[report\]"):
        rlrun.report.write_report  # noqa: B018 (the API says the same)


def test_a_sweep_without_the_report_extra_ends_with_one_line_saying_so(monkeypatch, tmp_path, caplog):
    from omegaconf import OmegaConf

    from rlrun.sweeps.callbacks import ReportCallback

    without(monkeypatch, "scipy")
    ReportCallback().on_multirun_end(OmegaConf.create({"hydra": {"sweep": {"dir": str(tmp_path)}}}))
    (line,) = caplog.messages
    assert line.startswith("no sweep report: the sweep report needs the report extra") and "scipy missing" in line
    assert not list(tmp_path.iterdir())
