"""External backends (issue 28): a logging server that does not answer is refused in the pre-flight with one
line and exit 2 before anything is written; a Ray job whose worker dies resumes from its checkpoint."""

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from launch import run_module
from test_reliability import TINY

from rlrun.logs.sinks.reachable import PROBE_SECONDS, check_backends, mlflow_problem

ENV = {**os.environ, "PYTHONWARNINGS": "ignore"}


def run_train(tmp_path, *args, env=None, timeout=120):
    """`python -m rlrun.train` into tmp_path/run; (process, seconds it took)."""
    t0 = time.monotonic()
    args = (*TINY, f"hydra.run.dir={tmp_path / 'run'}", *args)
    proc = run_module("rlrun.train", *args, cwd=tmp_path, env={**ENV, **(env or {})}, timeout=timeout)
    return proc, time.monotonic() - t0


def assert_refused(proc, tmp_path, *words):
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    for word in words:
        assert word in proc.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == [], "a refused command wrote something"


@pytest.fixture
def silent_server():
    """A loopback port that accepts connections and never answers (a server that hangs)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(8)
        yield f"http://127.0.0.1:{s.getsockname()[1]}"


def closed_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # nothing listens there once the socket is closed


def test_an_mlflow_server_that_does_not_answer_is_refused_in_the_preflight(tmp_path, silent_server):
    pytest.importorskip("mlflow")
    proc, seconds = run_train(tmp_path, "logger=mlflow", f"logger.mlflow.tracking_uri={silent_server}")
    assert_refused(proc, tmp_path, "logger.mlflow.tracking_uri", silent_server, f"no answer within {PROBE_SECONDS} s")
    assert seconds < 60  # MLflow's own retries take minutes


def test_an_unknown_mlflow_scheme_from_the_environment_is_refused_naming_the_variable(tmp_path):
    pytest.importorskip("mlflow")
    proc, _ = run_train(tmp_path, "logger=mlflow", env={"MLFLOW_TRACKING_URI": "nosuchscheme://x"})
    assert_refused(proc, tmp_path, "MLFLOW_TRACKING_URI='nosuchscheme://x'", "not a scheme MLflow knows")


def test_wandb_online_without_its_server_is_refused_in_the_preflight(tmp_path):
    """Credentials set (so W&B goes online) and no server: wandb.init retried for ~2 minutes, then a traceback."""
    pytest.importorskip("wandb")
    url = f"http://127.0.0.1:{closed_port()}"
    env = {"WANDB_API_KEY": "0" * 40, "WANDB_BASE_URL": url, "WANDB_MODE": ""}
    proc, seconds = run_train(tmp_path, "logger=wandb", env=env)
    assert_refused(proc, tmp_path, "logger.wandb.mode", url, "logger.wandb.mode=offline")
    assert seconds < 60


def test_local_mlflow_stores_are_checked_on_disk_without_being_made(tmp_path, monkeypatch):
    mlflow = pytest.importorskip("mlflow")
    store = tmp_path / "store"
    assert mlflow_problem(f"sqlite:///{store}/mlflow.db") == f"{store} is not a directory"
    store.mkdir()
    assert mlflow_problem(f"sqlite:///{store}/mlflow.db") is None
    assert mlflow_problem("sqlite:////proc/nope/mlflow.db") == "/proc/nope is not a directory"
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    assert mlflow_problem((store / "mlruns").as_uri()) is None
    assert "cannot be created" in mlflow_problem("file:///proc/nope")
    monkeypatch.delenv("MLFLOW_ALLOW_FILE_STORE")
    if hasattr(mlflow.environment_variables, "MLFLOW_ALLOW_FILE_STORE"):  # MLflow 3.7+
        assert "MLFLOW_ALLOW_FILE_STORE=true" in mlflow_problem((store / "mlruns").as_uri())
    assert list(store.iterdir()) == []
    # the default store in the run directory and W&B offline need no question; nothing is written
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    check_backends({"mlflow": {"tracking_uri": None}, "wandb": {"mode": "offline"}}, {})


@pytest.mark.slow  # MLflow's import and two resumes (~50 s)
def test_a_resume_into_another_mlflow_store_starts_a_new_mlflow_run_there(tmp_path):
    """A resume may log elsewhere than the run did (saved locations are never used: issue 28); the MLflow
    run id in mlflow_run.json is then unknown to that store, and a new MLflow run is made there. A
    `logger.mlflow.*` option alone keeps the run's backends; `logger=[...]` chooses them."""
    pytest.importorskip("mlflow")
    proc, _ = run_train(tmp_path, "logger=[tensorboard,mlflow]")
    assert proc.returncode == 0, proc.stderr[-3000:]
    (tmp_path / "other").mkdir()
    for steps, backends in ((960, []), (1280, ["logger=[tensorboard,mlflow]"])):
        uri = f"sqlite:///{tmp_path / 'other' / f'{steps}.db'}"
        args = [tmp_path / "run", f"total_steps={steps}", *backends, f"logger.mlflow.tracking_uri={uri}"]
        proc = run_module("rlrun.resume", *args, env=ENV, timeout=300, cwd=tmp_path)
        assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
        summary = json.loads((tmp_path / "run" / "summary.json").read_text())
        assert summary["env_steps"] == steps and summary["logged_to"]["mlflow"]["tracking_uri"] == uri
    # the new store's artifacts lie next to its database, not in the working directory (MLflow's default)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mlruns", "other", "run"]  # mlruns: the first run's
    assert (tmp_path / "other" / "artifacts").is_dir()


def test_a_resume_takes_only_logger_option_names_from_a_checkpoint():
    from rlrun.cli import config_groups
    from rlrun.resume import LOGGER_OPTIONS, with_saved_backends

    assert sorted(LOGGER_OPTIONS) == config_groups()["logger"]
    saved = {"logger": {"tensorboard": {}, "mlflow": {"tracking_uri": None}, "../../evil": {}, "wandb": None}}
    assert with_saved_backends(["logger.mlflow.experiment=x"], saved) == [
        "logger=[tensorboard,mlflow]",
        "logger.mlflow.experiment=x",
    ]
    assert with_saved_backends(["total_steps=5"], saved) == ["total_steps=5"]
    assert with_saved_backends(["logger=[csv]", "logger.csv.x=1"], saved) == ["logger=[csv]", "logger.csv.x=1"]


# --- Ray: a job whose worker dies -----------------------------------------------------------------------


def lock_holder(lock):
    """The pid holding the flock on `lock` (/proc/locks: `1: FLOCK ADVISORY WRITE <pid> <dev>:<inode> ...`)."""
    inode = os.stat(lock).st_ino
    for line in Path("/proc/locks").read_text().splitlines():
        fields = line.split()
        if fields[1] == "FLOCK" and int(fields[5].rsplit(":", 1)[1]) == inode:
            return int(fields[4])
    return None


def tensorboard_points(run, tag="charts/episodic_return"):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(run), size_guidance={"scalars": 0})
    acc.Reload()
    return [e.step for e in acc.Scalars(tag)]


@pytest.mark.slow  # Ray starts in 10-20 s; ~100 s on 2 busy cores
def test_a_ray_job_whose_worker_is_killed_resumes_from_its_checkpoint(tmp_path):
    """Ray runs the task of a SIGKILLed worker again: it resumes the job's checkpoint in the job's dir (before:
    started over in it, the checkpoint overwritten, TensorBoard with more points than episodes)."""
    pytest.importorskip("ray")
    steps = 1920
    sweep = subprocess.Popen(
        [sys.executable, "-m", "rlrun.train", "-m", "hydra/launcher=ray_cluster", "hydra.launcher.address=local"]
        + ["+hydra.launcher.init.num_cpus=2", "seed=0,1", *TINY, f"total_steps={steps}", "hydra.sweep.dir=sweep"],
        cwd=tmp_path,
        env={**ENV, "RAY_ADDRESS": ""},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 240
        while not (found := [p for p in (tmp_path / "sweep").rglob("checkpoint.pt") if "seed=1" in p.parts]):
            assert sweep.poll() is None and time.monotonic() < deadline, sweep.communicate()[1][-3000:]
            time.sleep(0.02)
        job = found[0].parent
        worker = lock_holder(job / ".rlrun.lock")
        hydra_config = (job / ".hydra" / "config.yaml").read_bytes()
        os.kill(worker, 9)
        assert not (job / "summary.json").exists(), "the job ended before its worker was killed"
        out, err = sweep.communicate(timeout=300)
    finally:
        if sweep.poll() is None:
            sweep.kill()
    assert sweep.returncode == 0, err[-3000:]
    for seed in (0, 1):
        summary = json.loads((job.parent.parent / f"seed={seed}" / job.name / "summary.json").read_text())
        assert summary["status"] == "finished" and summary["env_steps"] == steps
    assert (job / ".hydra" / "config.yaml").read_bytes() == hydra_config  # the first attempt's record kept
    rows = [int(r.split(",")[0]) for r in (job / "episodes.csv").read_text().splitlines()[1:]]
    assert rows == sorted(rows) and len(rows) == summary["episodes"]
    assert tensorboard_points(job) == rows  # one point per episode, none twice
    # (the worker's "resumes from its checkpoint" line reaches the driver's output only when Ray forwards
    # the worker's log before the sweep ends: not asserted; the files above show the resume)
