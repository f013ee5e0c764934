"""logger=mlflow keeps MLflow's cost off the training path: importing it, opening or making its store and
sending run on the sink's own thread; the run only queues, `flush` and `close` wait for what was queued, and
a failure of MLflow's is raised in the run."""

import threading
import time

import pytest

pytest.importorskip("mlflow")

from rlrun.logs.sinks.base import SinkRun  # noqa: E402
from rlrun.logs.sinks.mlflow import MLflowSink  # noqa: E402


class FakeClient:
    def __init__(self):
        self.metrics, self.threads, self.finished = [], set(), False

    def log_batch(self, run_id, metrics=(), params=()):
        self.threads.add(threading.current_thread())
        self.metrics += list(metrics)

    def log_dict(self, run_id, summary, name):
        pass

    def set_terminated(self, run_id, status):
        self.finished = True


def sink_in(tmp_path, monkeypatch, connect):
    monkeypatch.setattr(MLflowSink, "_connect", connect)
    run = tmp_path / "run"
    run.mkdir()
    return MLflowSink(SinkRun(run, run, "run", "exp"))


def test_the_store_is_opened_and_metrics_sent_off_the_training_thread(tmp_path, monkeypatch):
    opened, client = threading.Event(), FakeClient()

    def slow_connect(self, *args):  # MLflow's import and store: seconds
        opened.wait(timeout=10)
        self.client, self.run_id = client, "abc"

    started = time.perf_counter()
    sink = sink_in(tmp_path, monkeypatch, slow_connect)
    for step in range(5):
        sink.scalar("charts/x", float(step), step)
    assert time.perf_counter() - started < 2  # the run went on while the store was being opened
    opened.set()
    sink.flush()  # waits until what was queued is sent
    assert [m.value for m in client.metrics] == [0.0, 1.0, 2.0, 3.0, 4.0]
    assert threading.current_thread() not in client.threads
    assert sink.close({"status": "finished", "env_steps": 5}) == {
        "tracking_uri": f"sqlite:///{tmp_path}/mlruns/mlflow.db",
        "run_id": "abc",
    }
    assert client.finished and not sink.worker.thread.is_alive()


def test_a_failure_of_mlflow_is_raised_in_the_run(tmp_path, monkeypatch):
    def failing_connect(self, *args):
        raise ConnectionError("the tracking server went away")

    sink = sink_in(tmp_path, monkeypatch, failing_connect)
    sink.scalar("charts/x", 1.0, 1)
    with pytest.raises(ConnectionError, match="went away"):
        sink.flush()
    with pytest.raises(ConnectionError):
        sink.close({"status": "finished", "env_steps": 1})
    assert not sink.worker.thread.is_alive()
