"""Real Hydra multiruns with tiny budgets: job names, one event file per job, the report, failures."""

import json
import os
import re

import numpy as np
import pandas as pd
import pytest
from launch import run_module
from test_reliability import in_process

from rlrun.report import load_sweep

TINY = ["total_steps=600", "algo.learning_starts=200", "log.interval=200", "eval.interval=0", "log.plot=false"]


def multirun(sweep_dir, *args):
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    proc = run_module("rlrun.train", "-m", *args, *TINY, f"hydra.sweep.dir={sweep_dir}", env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


def check_lr_seed_sweep(sweep_dir):
    jobs = sorted(p.parent.relative_to(sweep_dir).as_posix() for p in sweep_dir.rglob("summary.json"))
    assert jobs == [f"optimizer.lr={lr}/seed={s}" for lr in ("0.001", "0.002") for s in (0, 1)]  # the swept keys
    for job in jobs:
        assert len(list((sweep_dir / job).glob("events.out.tfevents.*"))) == 1

    report = pd.read_csv(sweep_dir / "report.csv")
    assert list(report.configuration) == ["optimizer.lr=0.001", "optimizer.lr=0.002"]
    for row in report.itertuples():
        lr = row.configuration.split("=")[1]
        finals = np.array(
            [
                json.loads((sweep_dir / j / "summary.json").read_text())["final_mean_return_100"]
                for j in jobs
                if f"optimizer.lr={lr}/" in j
            ]
        )
        assert row.seeds == 2
        assert row.train_return_mean == pytest.approx(finals.mean())
        assert row.train_return_iqm == pytest.approx(finals.mean())  # the IQM of two runs cuts nothing
        assert row.train_return_ci95_low <= finals.mean() <= row.train_return_ci95_high
        assert row.solved == "0/2" and np.isnan(row.eval_return_iqm)  # eval.interval=0: no greedy evaluation
    assert (sweep_dir / "curves.png").read_bytes()[:4] == b"\x89PNG"
    assert (sweep_dir / "profile.png").read_bytes()[:4] == b"\x89PNG"
    assert (sweep_dir / "sensitivity.png").read_bytes()[:4] == b"\x89PNG"  # the swept lr against the return
    report = (sweep_dir / "report.md").read_text()
    assert "optimizer.lr=0.001" in report and "Probability of improvement" in report
    assert "![sensitivity](sensitivity.png)" in report
    assert "fewer than 5 seeds" in report and not re.search(r"\bnan\b", report, re.IGNORECASE)


def test_lr_by_seed_sweep_names_jobs_and_reports(tmp_path):
    proc = multirun(tmp_path, "optimizer.lr=1e-3,2e-3", "seed=0,1")
    check_lr_seed_sweep(tmp_path)
    assert "Sweep report" in proc.stdout  # printed by the Hydra callback
    assert "No path found" not in proc.stdout + proc.stderr  # TensorBoard's watcher stays quiet


def test_joblib_launcher_runs_the_same_sweep_in_parallel(tmp_path):
    multirun(tmp_path, "hydra/launcher=joblib", "hydra.launcher.n_jobs=2", "optimizer.lr=1e-3,2e-3", "seed=0,1")
    check_lr_seed_sweep(tmp_path)


@pytest.mark.slow
def test_submitit_local_launcher(tmp_path):
    multirun(tmp_path, "hydra/launcher=submitit_local", "optimizer.lr=1e-3,2e-3", "seed=0,1")
    check_lr_seed_sweep(tmp_path)


def test_one_failing_job_keeps_the_others(tmp_path):
    proc = multirun(tmp_path, "optimizer.lr=1e30,1e-3")  # lr 1e30 diverges at its second update
    runs = load_sweep(tmp_path)
    assert sorted(runs.status) == ["failed", "finished"]
    failed = runs[runs.status == "failed"].iloc[0]
    assert "non-finite" in failed.error
    report = (tmp_path / "report.md").read_text()
    assert "## Failed jobs" in report and "optimizer.lr=1e+30" in report
    assert "job 0 failed" in proc.stderr


def test_a_sweep_with_a_bad_value_is_refused_before_any_job_runs(tmp_path):
    sweep = tmp_path / "sweep"
    proc = in_process("rlrun.train", "-m", "optimizer.lr=1e-3,-1", *TINY, f"hydra.sweep.dir={sweep}", rc=2)
    assert "optimizer.lr=-1.0" in proc.stderr
    assert not sweep.exists()


def test_optuna_preset_runs_trials_and_returns_the_objective(tmp_path):
    args = [
        "+hparams_search=optuna",
        "hydra.sweeper.n_trials=3",
        "~hydra.callbacks.report",  # the sweep report has tests of its own: seconds saved here
        *TINY,
        f"hydra.sweep.dir={tmp_path}",
    ]
    proc = run_module("rlrun.train", *args, env={**os.environ, "PYTHONWARNINGS": "ignore"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    runs = load_sweep(tmp_path)
    assert len(runs) == 3 and set(runs.status) == {"finished"}
    best = (tmp_path / "optimization_results.yaml").read_text()
    assert "best_value" in best
    assert float(best.split("best_value:")[1].split()[0]) == pytest.approx(runs.final_mean_return_100.max())
    assert "setup plugin alembic" not in proc.stdout + proc.stderr  # Optuna's alembic import is quiet


def test_the_robust_search_scores_each_trial_over_its_seeds(tmp_path):
    from rlrun.storage import summary

    args = [
        "+hparams_search=robust",
        "hydra.sweeper.n_trials=2",
        "seeds=2",
        "total_steps=1200",
        "eval.interval=600",
        "~hydra.callbacks.report",
    ]  # the sweep report has tests of its own: seconds saved here
    args += ["algo.learning_starts=200", f"hydra.sweep.dir={tmp_path}"]
    proc = run_module("rlrun.train", *args, env={**os.environ, "PYTHONWARNINGS": "ignore"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    jobs = [json.loads(p.read_text()) for p in sorted(tmp_path.rglob("summary.json"))]
    trials = [j for j in jobs if "agents" in j]  # the agents' own summary.json files have none
    assert len(trials) == 2 and all(sorted(t["agents"]) == ["1000", "1001"] for t in trials)
    scores = [summary.robust_score(t) for t in trials]
    assert all(0 <= s < 0.5 for s in scores)  # 1,200 steps: no seed solves; the tie-break alone
    best = float((tmp_path / "optimization_results.yaml").read_text().split("best_value:")[1].split()[0])
    assert best == pytest.approx(max(scores))


@pytest.mark.slow  # a sweep and a notebook kernel: ~14 s on one core
def test_notebook_plots_a_sweep(tmp_path):
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    pytest.importorskip("ipykernel")
    from pathlib import Path

    multirun(tmp_path, "seed=0,1")
    nb = nbformat.read(Path(__file__).parents[2] / "scripts" / "sweep_report.ipynb", as_version=4)
    os.environ["RLRUN_SWEEP_DIR"] = str(tmp_path)
    try:
        nbclient.NotebookClient(nb, timeout=300, kernel_name="python3").execute()
    finally:
        del os.environ["RLRUN_SWEEP_DIR"]
    assert (tmp_path / "notebook_curves.png").exists()
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
