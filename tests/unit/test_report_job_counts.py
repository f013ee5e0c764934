"""The report's counts and advice on made-up run directories: every job a sweep planned is counted (not
started ones too, with the sweep's continue command), and the 'fewer than 5 seeds' advice fits the runs."""

import yaml
from test_report_runs import make_run

from rlrun.report import write_report
from rlrun.sweeps.continuation import BASIC_SWEEPER


def test_a_stopped_sweep_counts_its_planned_jobs_and_says_how_to_continue(tmp_path):
    saved = {
        "hydra": {
            "sweep": {"dir": str(tmp_path), "subdir": "${rlrun_job_dir:}"},
            "sweeper": {"_target_": BASIC_SWEEPER, "params": None},
            "overrides": {"task": ["seed=0,1,2", "total_steps=600"], "hydra": []},
            "job": {"config": {"override_dirname": {"exclude_keys": []}}},
        }
    }
    (tmp_path / "multirun.yaml").write_text(yaml.safe_dump(saved))
    make_run(tmp_path / "seed=0", 0, 10.0, ["seed=0", "total_steps=600"])
    stopped = make_run(tmp_path / "seed=1", 1, 10.0, ["seed=1", "total_steps=600"])
    (stopped / "summary.json").unlink()  # stopped before its first checkpoint
    text = write_report(tmp_path, reps=100)
    assert "3 jobs (1 finished, 1 unfinished, 1 not started)" in text  # it said '2 jobs (1 finished)'
    command = f"python -m rlrun.resume {tmp_path}"
    assert f"- `{stopped}`: stopped before its first checkpoint (or still running); continue the sweep" in text
    assert f"- `{tmp_path / 'seed=2'}`: continue the sweep with {command}" in text


def test_the_advice_for_more_seeds_of_a_seeds_k_run_is_seeds_5(tmp_path):
    make_run(tmp_path / "pbt", 0, 0.0, ["seeds=4"], cfg={"seeds": 4})
    for k in range(4):
        make_run(tmp_path / "pbt" / f"seed={k}", k, 10.0 + k, [f"seed={k}"])
    text = write_report(tmp_path, reps=100)
    assert "fewer than 5 seeds (4)" in text and "(e.g. `seeds=5` for the agents of a batched or PBT run)" in text
    assert "seed=0,1,2,3,4" not in text


def test_the_advice_for_more_seeds_of_single_jobs_is_a_seed_sweep(tmp_path):
    for k in range(2):
        make_run(tmp_path / f"seed={k}", k, 10.0 + k, [f"seed={k}"])
    assert "(e.g. `seed=0,1,2,3,4`)" in write_report(tmp_path, reps=100)
