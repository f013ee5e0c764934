"""A sweep stopped by a signal, then continued with the one command it prints: `python -m rlrun.resume <sweep
dir>` keeps the finished jobs (not rerun), resumes the stopped one from its checkpoint and runs the ones
never started; the report in between counts every planned job."""

import json
import os
import signal
import time

import pytest
from launch import run_module, start_module

SWEEP = ["seed=0,1,2", "total_steps=2000", "checkpoint.every=400", "algo.learning_starts=200", "log.interval=400"]
SWEEP += ["eval.interval=0", "log.plot=false"]
ENV = {**os.environ, "PYTHONWARNINGS": "ignore"}


def stop_during_job_1(sweep_dir, *args, wait_for="seed=1/checkpoint.pt"):
    """Start the sweep, SIGINT it once job 1 has checkpointed (as Ctrl-C does): exit 75, naming the continue command."""
    proc = start_module("rlrun.train", "-m", *SWEEP, *args, f"hydra.sweep.dir={sweep_dir}", env=ENV)
    deadline = time.monotonic() + 600
    while not (sweep_dir / wait_for).exists():
        assert proc.poll() is None, proc.communicate()[1][-3000:]
        assert time.monotonic() < deadline
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=600)
    assert proc.returncode == 75, err[-3000:]
    assert f"Continue the sweep with: python -m rlrun.resume {sweep_dir}" in err
    return err


def finished(job_dir):
    return json.loads((job_dir / "summary.json").read_text())["status"] == "finished"


def listing(path):
    """Every path under `path` (directories too) with its modification time and size."""
    return {str(p.relative_to(path)): (p.stat().st_mtime_ns, p.stat().st_size) for p in sorted(path.rglob("*"))}


def check_continued(sweep_dir, kept):
    """The continue command finishes the sweep: the job finished before is untouched (nothing written in it,
    not even a record removed again), every job finished."""
    before = {d: listing(d) for d in kept}
    proc = run_module("rlrun.resume", sweep_dir, env=ENV)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert all(finished(sweep_dir / f"seed={s}") for s in range(3))
    for d, files in before.items():
        assert listing(d) == files
    assert "3 jobs (3 finished)" in (sweep_dir / "report.md").read_text()
    return proc


def test_a_stopped_sweep_continues_with_the_command_it_prints(tmp_path):
    sweep_dir = tmp_path / "sweep"
    stop_during_job_1(sweep_dir)
    assert finished(sweep_dir / "seed=0") and not (sweep_dir / "seed=1" / "summary.json").exists()
    assert not (sweep_dir / "seed=2").exists()

    report = run_module("rlrun.report", sweep_dir, env=ENV)
    assert report.returncode == 0, report.stderr[-3000:]
    text = (sweep_dir / "report.md").read_text()
    assert "3 jobs (1 finished, 1 unfinished, 1 not started)" in text  # every planned job counted
    assert f"`{sweep_dir / 'seed=2'}`: continue the sweep with python -m rlrun.resume {sweep_dir}" in text
    assert f"continue the sweep (every job not finished) with python -m rlrun.resume {sweep_dir}" in text

    proc = check_continued(sweep_dir, [sweep_dir / "seed=0"])
    assert f"resuming {sweep_dir / 'seed=1'} from env step" in proc.stdout  # from its checkpoint
    records = list((sweep_dir / "seed=1" / ".hydra").glob("resume_*"))  # Hydra's record of the resumed job
    assert len(records) == 1 and sorted(p.name for p in records[0].iterdir()) == [
        "config.yaml", "hydra.yaml", "overrides.yaml"
    ]  # fmt: skip
    assert (sweep_dir / "seed=2" / ".hydra" / "config.yaml").is_file()  # a job started now: its own .hydra/
    assert sorted(p.name for p in (sweep_dir / "seed=0" / ".hydra").iterdir()) == [
        "config.yaml", "hydra.yaml", "overrides.yaml"
    ]  # fmt: skip


@pytest.mark.parametrize("launcher", ["batched", "joblib"])
def test_a_stopped_sweep_of_another_launcher_continues(tmp_path, launcher):
    """The batched launcher (one group per job here, so that one finishes before the stop) and joblib."""
    if launcher == "joblib":
        pytest.importorskip("hydra_plugins.hydra_joblib_launcher")
    sweep_dir = tmp_path / "sweep"
    if launcher == "batched":
        args = ["hydra/launcher=batched", "hydra.launcher.max_agents=1"]
    else:
        args = ["hydra/launcher=joblib", "hydra.launcher.n_jobs=1"]
    stop_during_job_1(sweep_dir, *args)
    assert finished(sweep_dir / "seed=0")
    check_continued(sweep_dir, [sweep_dir / "seed=0"])
