"""External backends (issue 28): a logging server that does not answer is refused in the pre-flight with one
line and exit 2 before anything is written; a Ray job whose worker dies resumes from its checkpoint."""

import os
import socket
import subprocess
import sys
import time

import pytest
from test_reliability import TINY

from rlrun.sinks.reachable import PROBE_SECONDS, check_backends, mlflow_problem

ENV = {**os.environ, "PYTHONWARNINGS": "ignore"}


def run_train(tmp_path, *args, env=None, timeout=120):
    """`python -m rlrun.train` into tmp_path/run; (process, seconds it took)."""
    t0 = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "rlrun.train", *TINY, f"hydra.run.dir={tmp_path / 'run'}", *args],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**ENV, **(env or {})},
        timeout=timeout,
    )
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
