"""Which runs a report counts and how it names them (rlrun.sweeps.jobtable, rlrun.report.tables), and its
sensitivity figure (rlrun.report.aggregate.sensitivity), on made-up run directories."""

import json
import os
import warnings

import numpy as np
import pandas as pd
import pytest
import yaml

import rlrun.report
from rlrun.report import iqm_ci, load_runs, sensitivity, write_report

CARTPOLE_NET = {"encoder": "mlp", "dueling": False, "noisy": False, "num_atoms": 1, "num_quantiles": 0}


def make_run(run, seed, eval_return, overrides=(), cfg=None, written=None, choices=None, status="finished"):
    """A finished run as rlrun leaves it, as far as the report reads it."""
    (run / ".hydra").mkdir(parents=True)
    config = {"seed": seed, "env": {"id": "CartPole-v1"}, "optimizer": {"lr": 0.001}, **(cfg or {})}
    (run / ".hydra" / "config.yaml").write_text(yaml.safe_dump(config))
    (run / ".hydra" / "overrides.yaml").write_text(yaml.safe_dump(list(overrides)))
    if choices is not None:
        (run / ".hydra" / "hydra.yaml").write_text(yaml.safe_dump({"hydra": {"runtime": {"choices": choices}}}))
    summary = {"status": status, "final_eval_return": eval_return, "final_mean_return_100": eval_return / 2}
    summary |= {"reward_threshold": 475.0, "solved_step": None, "wall_time_s": 1.0}
    (run / "summary.json").write_text(json.dumps(summary))
    if written is not None:
        os.utime(run / "summary.json", (written, written))
    return run


def test_runs_of_one_configuration_and_seed_count_once_the_latest_kept(tmp_path, capsys):
    for seed, value in ((0, 100.0), (1, 200.0), (2, 300.0)):
        make_run(tmp_path / f"seed={seed}", seed, value, [f"seed={seed}"], written=1_000)
    # seed 0 again, later (its own run dir): it replaces the first; seed 1 again, earlier: it is the one left out
    make_run(tmp_path / "again_0", 0, 400.0, ["seed=0"], written=2_000)
    make_run(tmp_path / "again_1", 1, 999.0, ["seed=1"], written=10)
    # a later run of seed 2 that failed: the finished one is kept
    make_run(tmp_path / "again_2", 2, 0.0, ["seed=2"], written=3_000, status="failed")
    text = write_report(tmp_path, reps=100)
    table = pd.read_csv(tmp_path / "report.csv")
    assert list(table.seeds) == [3]  # seeds {0, 1, 2}, not six
    assert table.eval_return_iqm[0] == pytest.approx(np.mean([400.0, 200.0, 300.0]))  # 3 runs: nothing cut
    assert "3 repeats of a seed left out" in text
    assert "## Repeated seeds" in text
    assert f"- `{tmp_path / 'again_0'}` kept; left out: `{tmp_path / 'seed=0'}`" in text
    assert f"- `{tmp_path / 'seed=1'}` kept; left out: `{tmp_path / 'again_1'}`" in text
    assert f"- `{tmp_path / 'seed=2'}` kept; left out: `{tmp_path / 'again_2'}`" in text
    err = capsys.readouterr().err
    assert err.count("ran the same configuration and seed") == 3 and str(tmp_path / "again_1") in err


def test_unfinished_jobs_are_listed_apart_with_how_each_goes_on(tmp_path):
    """A job without a summary is unfinished, not failed: the report says how it continues (before: "Failed
    jobs ... (incomplete): None", also for every job of a preempted batched group)."""
    make_run(tmp_path / "done", 0, 100.0, ["seed=0"])
    for name, seed in (("own", 1), ("grouped", 2), ("none", 3)):
        make_run(tmp_path / name, seed, 0.0, [f"seed={seed}"])
        (tmp_path / name / "summary.json").unlink()
    (tmp_path / "own" / "checkpoint.pt").write_bytes(b"")
    (tmp_path / "grouped" / ".hydra" / "hydra.yaml").write_text(yaml.safe_dump({"hydra": {"job": {"num": 5}}}))
    (tmp_path / ".batched" / "jobs4-7").mkdir(parents=True)
    (tmp_path / ".batched" / "jobs4-7" / "checkpoint.pt").write_bytes(b"")
    text = write_report(tmp_path, reps=100)
    assert "## Failed jobs" not in text and "None" not in text
    assert f"- `{tmp_path / 'own'}`: stopped; continue with python -m rlrun.resume {tmp_path / 'own'}" in text
    group = tmp_path / ".batched" / "jobs4-7"
    assert (
        f"- `{tmp_path / 'grouped'}`: stopped with its batched group; continue with python -m rlrun.resume {group}"
        in text
    )
    assert f"- `{tmp_path / 'none'}`: no summary and no checkpoint" in text


def test_seeds_come_from_the_composed_config(tmp_path):
    """Two single runs with no seed on their command lines (both seed 0 by default) are one seed; a run of
    another configuration with the same seed is not merged."""
    make_run(tmp_path / "a", 0, 10.0, [], written=1)
    make_run(tmp_path / "b", 0, 20.0, [], written=2)
    make_run(tmp_path / "c", 0, 30.0, ["optimizer.lr=0.01"], cfg={"optimizer": {"lr": 0.01}})
    text = write_report(tmp_path, reps=100)
    table = pd.read_csv(tmp_path / "report.csv").set_index("configuration")
    assert table.seeds.to_dict() == {"optimizer.lr=0.001": 1, "optimizer.lr=0.01": 1}
    assert table.eval_return_iqm["optimizer.lr=0.001"] == 20.0  # the later run
    assert "1 repeat of a seed left out" in text


def test_a_run_with_another_run_inside_it_counts_while_a_batched_run_counts_as_its_agents(tmp_path):
    """A single run whose folder holds another run (a `hydra.run.dir` chosen inside it) is a run of its own
    (before: left out, as though it were the parent of a batched run); a batched run (seeds=2) is its agents."""
    from rlrun.sweeps.jobtable import run_dirs

    make_run(tmp_path / "outer", 0, 10.0, [], cfg={"seeds": 1, "agents": []})
    make_run(tmp_path / "outer" / "inner", 1, 20.0, ["seed=1"], cfg={"seeds": 1})
    make_run(tmp_path / "batched", 2, 30.0, ["seeds=2"], cfg={"seeds": 2})
    for k in (2, 3):
        make_run(tmp_path / "batched" / f"seed={k}", k, 30.0 + k, [f"seed={k}"])
    pbt = make_run(tmp_path / "pbt", 4, 0.0, [], cfg={"agents": [{"seed": 4}, {"seed": 5}]})
    make_run(pbt / "a", 4, 1.0, [])
    make_run(pbt / "b", 5, 2.0, [])
    names = [d.relative_to(tmp_path).as_posix() for d in run_dirs(tmp_path)]
    assert names == ["batched/seed=2", "batched/seed=3", "outer", "outer/inner", "pbt/a", "pbt/b"]


def test_a_report_of_several_folders(tmp_path, monkeypatch, capsys):
    for folder, lr in (("a", 0.001), ("b", 0.01)):
        for seed in (0, 1):
            cfg = {"optimizer": {"lr": lr}}
            make_run(tmp_path / folder / f"seed={seed}", seed, 100.0 * seed + lr, [f"optimizer.lr={lr}"], cfg)
    out = tmp_path / "out"
    out.mkdir()
    text = write_report([tmp_path / "a", tmp_path / "b"], reps=100, out=out)
    assert "4 jobs (4 finished), 2 configurations" in text
    assert set(pd.read_csv(out / "report.csv").configuration) == {"optimizer.lr=0.001", "optimizer.lr=0.01"}
    assert not (tmp_path / "a" / "report.md").exists() and not (tmp_path / "b" / "report.md").exists()

    monkeypatch.chdir(tmp_path)  # the command line: into a new outputs/reports/<time> by default
    rlrun.report.main(["a", "b"])
    [written] = (tmp_path / "outputs" / "reports").iterdir()
    assert (written / "report.md").read_text().startswith("# Sweep report: a, b")
    assert f"written into {written.relative_to(tmp_path)}" in capsys.readouterr().err


def test_a_folder_of_links_to_runs_is_read_through_them_and_written_beside_them(tmp_path):
    runs = tmp_path / "runs"
    for seed in (0, 1):
        make_run(runs / f"run{seed}", seed, 10.0 + seed, [f"seed={seed}"])
    picked = tmp_path / "picked"
    picked.mkdir()
    (picked / "first").symlink_to(runs / "run0")
    (picked / "second").symlink_to(runs / "run1")
    (picked / "again").symlink_to(runs / "run1")  # the same run twice: counted once
    (picked / "loop").symlink_to(picked)  # a loop: walked once
    (picked / "report.md").symlink_to(runs / "run0" / "summary.json")  # a planted link: replaced, not written through
    before = (runs / "run0" / "summary.json").read_text()

    text = write_report(picked, reps=100)
    assert "2 jobs (2 finished), 1 configuration" in text
    assert not (picked / "report.md").is_symlink() and (picked / "report.md").read_text() == text
    assert (runs / "run0" / "summary.json").read_text() == before
    assert sorted(p.name for p in runs.rglob("report*")) == []


def test_a_report_that_finds_no_run_is_one_line_and_exit_2(tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    with pytest.raises(SystemExit) as exit_:
        rlrun.report.main([str(tmp_path / "empty")])
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and err.count("\n") == 1
    assert err.startswith(f"rlrun.report: no readable runs under {tmp_path / 'empty'}")
    assert list((tmp_path / "empty").iterdir()) == []


def make_population(run_dir, values, space=None):
    """A PBT population: the run directory with the population's config, an agent per `seed=K`."""
    space = space or {"optimizer": {"lr": {"low": 1e-4, "high": 1e-2}}, "algo": {"tau": {"low": None, "high": None}}}
    (run_dir / ".hydra").mkdir(parents=True)
    (run_dir / ".hydra" / "config.yaml").write_text(yaml.safe_dump({"seed": 0, "pbt": {"space": space}}))
    over = ["+pbt=truncation", "seeds=4"]
    for seed, value in enumerate(values):
        cfg = {"optimizer": {"lr": float(10 ** -(seed + 1))}, "pbt": None}  # each agent's own starting lr
        make_run(run_dir / f"seed={seed}", seed, value, [*over, f"seed={seed}"], cfg)


def test_a_pbt_population_is_labelled_as_one_with_its_explored_keys(tmp_path):
    make_population(tmp_path / "pbt", [10.0, 20.0, 30.0, 40.0])
    for seed in (0, 1):
        make_run(tmp_path / f"plain{seed}", seed, 5.0, ["optimizer.lr=0.001", f"seed={seed}"])
    runs = load_runs([tmp_path])
    labels = runs.groupby("configuration")["job"].count().to_dict()
    assert labels == {"PBT (truncation) exploring optimizer.lr": 4, "optimizer.lr=0.001": 2}
    text = write_report(tmp_path, reps=100)
    assert "| PBT (truncation) exploring optimizer.lr |" in text


def test_labels_of_config_groups_come_from_the_composed_config(tmp_path):
    """MinAtar's CNN under the default option network=mlp, PQN chosen by an experiment preset: the label says
    what the runs trained, not the option chosen."""
    minatar_net = {**CARTPOLE_NET, "encoder": "minatar_cnn", "dueling": True}
    mlp = {"network": CARTPOLE_NET, "algo": {"gamma": 0.99}}
    make_run(tmp_path / "cartpole", 0, 1.0, ["network=mlp"], mlp, choices={"network": "mlp", "algo": "dqn"})
    cfg = {"network": minatar_net, "algo": {"gamma": 0.99}, "env": {"id": "MinAtar/Breakout-v0"}}
    make_run(tmp_path / "minatar", 0, 2.0, ["env=minatar"], cfg, choices={"network": "mlp", "algo": "dqn"})
    cfg = {"network": {**minatar_net, "dueling": False}, "algo": {"kind": "pqn"}, "env": {"id": "MinAtar/Breakout-v0"}}
    make_run(tmp_path / "pqn", 0, 3.0, ["+experiment=pqn_minatar"], cfg, choices={"network": "mlp", "algo": "pqn"})
    runs = load_runs([tmp_path]).set_index("job")
    label = {os.path.basename(job): c for job, c in runs.configuration.items()}
    assert "network=mlp" in label["cartpole"] and "algo=dqn" in label["cartpole"]
    assert "network=minatar_cnn+dueling" in label["minatar"] and "algo=dqn" in label["minatar"]
    assert "network=minatar_cnn" in label["pqn"].split() and "algo=pqn" in label["pqn"]
    assert "env=MinAtar/Breakout-v0" in label["pqn"]


def test_a_single_sweep_is_named_after_its_folder(tmp_path, monkeypatch):
    sweep = tmp_path / "CartPole-v1__dqn__2026"
    sweep.mkdir()
    (sweep / "multirun.yaml").write_text(
        yaml.safe_dump({"hydra": {"overrides": {"task": ["total_steps=100", "seed=0,1"]}}})
    )
    for seed in (0, 1):
        make_run(sweep / f"seed={seed}", seed, 1.0, [f"seed={seed}", "total_steps=100"])
    monkeypatch.chdir(sweep)
    runs = load_runs([sweep.relative_to(sweep)])  # `python -m rlrun.report .` inside the sweep
    assert set(runs.sweep) == {"CartPole-v1__dqn__2026"}
    text = write_report(sweep, reps=100)
    assert f"Every job of the sweep `{sweep}` has `total_steps=100`." in text
    assert "`.`" not in text


def lr_sweep(root, scores, nets=("mlp",)):
    """`scores[lr]` per seed for each lr, for each network option."""
    for net in nets:
        for lr, values in scores.items():
            for seed, value in enumerate(values):
                over = [f"optimizer.lr={lr}", f"network={net}", f"seed={seed}"]
                cfg = {"optimizer": {"lr": lr}}
                make_run(root / f"net={net}" / f"lr={lr}" / f"seed={seed}", seed, value + (net == "dueling"), over, cfg)


def test_the_sensitivity_figure_is_the_iqm_and_its_interval_at_each_setting(tmp_path, monkeypatch):
    scores = {
        0.0001: [1.0, 2.0, 3.0, 4.0, 100.0],
        0.001: [10.0, 10.0, 10.0, 10.0, 10.0],
        0.01: [0.0, 8.0, 4.0, 6.0, 2.0],
    }
    lr_sweep(tmp_path, scores, nets=("mlp", "dueling"))
    points = sensitivity(load_runs([tmp_path]), reps=300)
    assert set(points.key) == {"optimizer.lr"} and set(points.others) == {"network=mlp", "network=dueling"}
    mlp = points[points.others == "network=mlp"].set_index("value")
    # by hand: the IQM of 5 seeds is the mean of the middle 3 (one cut at each end)
    assert mlp.iqm.to_dict() == pytest.approx({0.0001: 3.0, 0.001: 10.0, 0.01: 4.0})
    assert (mlp.ci95_low[0.001], mlp.ci95_high[0.001]) == (10.0, 10.0)  # every resample of 10s is 10
    assert list(mlp.seeds) == [5, 5, 5] and set(points.score) == {"final_eval_return"}
    dueling = points[points.others == "network=dueling"].set_index("value")
    assert dueling.iqm.to_dict() == pytest.approx({0.0001: 4.0, 0.001: 11.0, 0.01: 5.0})
    # the interval is rliable's stratified bootstrap of its IQM, as the table's
    from rliable import library as rly, metrics

    np.random.seed(0)
    _, ci = rly.get_interval_estimates({"x": np.array(scores[0.0001])[:, None]}, metrics.aggregate_iqm, reps=300)
    assert (mlp.ci95_low[0.0001], mlp.ci95_high[0.0001]) == pytest.approx(tuple(ci["x"][:, 0]))
    assert (mlp.ci95_low[0.0001], mlp.ci95_high[0.0001]) == pytest.approx(iqm_ci(scores[0.0001], reps=300)[1:])

    drawn = {}

    def keep(fig, path):
        drawn[path.name] = fig
        return path

    monkeypatch.setattr("rlrun.report.plots._save", keep)
    text = write_report(tmp_path, reps=300)
    assert "![sensitivity](sensitivity.png)" in text
    assert text.index("![sensitivity]") < text.index("## Probability of improvement")  # beside the table
    [ax] = drawn["sensitivity.png"].axes
    assert ax.get_xscale() == "log" and ax.get_xlabel() == "optimizer.lr"
    lines = {tuple(line.get_ydata()) for line in ax.get_lines() if len(line.get_xdata()) == 3}
    assert (3.0, 10.0, 4.0) in lines and (4.0, 11.0, 5.0) in lines


def test_the_sensitivity_figure_is_written_and_linear_where_settings_span_less_than_10x(tmp_path):
    for gamma in (0.9, 0.99):
        for seed in range(3):
            over = [f"algo.gamma={gamma}", f"seed={seed}"]
            make_run(tmp_path / f"g{gamma}s{seed}", seed, 10.0 * gamma + seed, over, {"algo": {"gamma": gamma}})
    over = ["algo.gamma=0.95", "network=dueling", "seed=0"]  # a line of one point
    make_run(tmp_path / "dueling", 0, 5.0, over, {"algo": {"gamma": 0.95}})
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # pandas' and matplotlib's deprecations too
        write_report(tmp_path, reps=100)
    assert (tmp_path / "sensitivity.png").read_bytes()[:4] == b"\x89PNG"
    from rlrun.report.plots import log_axis

    assert not log_axis([0.9, 0.99]) and log_axis([1e-4, 1e-3]) and not log_axis([0.0, 1.0, 100.0])


def test_no_sensitivity_figure_without_a_swept_number(tmp_path):
    for net in ("mlp", "dueling"):
        make_run(tmp_path / net, 0, 1.0, [f"network={net}"])
    text = write_report(tmp_path, reps=100)
    assert "![sensitivity]" not in text and not (tmp_path / "sensitivity.png").exists()


def test_a_report_counts_the_agents_of_seeds_k_jobs_as_runs_and_names_their_jobs(tmp_path):
    """Two jobs of `seeds=2` are 4 seeds in the table but 2 jobs: the count says so (it said '4 jobs')."""
    for job, first in (("seed=0", 0), ("seed=10", 10)):
        make_run(tmp_path / job, first, 0.0, ["seeds=2", f"seed={first}"], cfg={"seeds": 2})
        for k in (first, first + 1):
            make_run(tmp_path / job / f"seed={k}", k, 10.0 + k, [f"seed={k}"])
    make_run(tmp_path / "single", 20, 5.0, ["seed=20"], cfg={"seeds": 1})
    for out in ("out", "out2"):
        (tmp_path / out).mkdir()
    text = write_report(tmp_path, reps=100, out=tmp_path / "out")
    assert "5 runs, 4 of them the agents of 2 jobs (5 finished)" in text
    (tmp_path / "single" / ".hydra" / "config.yaml").unlink()  # now the agents alone
    text = write_report(tmp_path, reps=100, out=tmp_path / "out2")
    assert "4 runs, the agents of 2 jobs (4 finished)" in text
