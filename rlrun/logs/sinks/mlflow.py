"""logger=mlflow: one MLflow run per agent, through MLflow's own client (the `mlflow` extra).

By default the store is SQLite (`mlflow.db`, artifacts in `artifacts/`) shared by the runs of one outputs
folder: `<sweep dir>/mlruns/` for a sweep's jobs, else `mlruns/` next to the run directory
(`outputs/mlruns/`), so `mlflow ui --backend-store-uri sqlite:///outputs/mlruns/mlflow.db` lists and
compares them; MLflow's telemetry is off. `logger.mlflow.tracking_uri` (or `$MLFLOW_TRACKING_URI`) sends
the runs to a server or another store instead (use a server for a sweep over several machines: SQLite on
a network filesystem does not lock reliably). Params are the
flattened config, metrics the scalars (sent in batches), and the summary's numbers are `summary/*`
metrics with `summary.json` and `config.yaml` as artifacts. The run id is kept in `mlflow_run.json` in the
agent's directory: a resumed run continues the same MLflow run where its store holds it (else a new one).

MLflow's cost stays off the training path: importing it, opening (or, the first time, making) its store and
sending anything happen on one background thread of the sink (`Worker`), in the order the run asked; the
loop only queues. `flush` (at each checkpoint) and `close` wait for what was queued to be sent, so a
checkpoint never runs ahead of the metrics before it; a failure of MLflow's is raised in the run when it
next hands the worker something (metrics are handed over in batches, at a flush and at the end).
"""

from __future__ import annotations

import json
import logging
import os
import queue
import threading
import time
from collections.abc import Callable
from contextlib import nullcontext
from pathlib import Path
from typing import Any

from filelock import FileLock

from rlrun.logs.sinks.base import SinkRun, numeric, sweep_dir
from rlrun.storage import bounded, rundir

STATE_FILE = "mlflow_run.json"
BATCH = 1000  # MLflow's limit of metrics per log_batch call
FLUSH_SECONDS = 15.0  # send buffered metrics at least this often while they arrive
PARAM_BATCH, PARAM_VALUE_MAX = 100, 6000  # MLflow's limits per call and per value
LOCK = ".rlrun-store.lock"


def local_store(run: SinkRun) -> tuple[str, str]:
    """(tracking URI, artifact location) of the default store, made if new: `<sweep dir>/mlruns/` for a sweep's
    job, else `mlruns/` next to the run directory (`outputs/mlruns/`), shared by the runs there, so `mlflow ui`
    compares them. Never through a link (the store, its database, artifacts or lock file as one is refused:
    rlrun.storage.rundir's rule)."""
    sweep = sweep_dir(run.root)
    store = (sweep if sweep is not None else Path(os.path.abspath(run.root)).parent) / "mlruns"
    for path in (store, store / "mlflow.db", store / "artifacts", store / LOCK):
        if path.is_symlink():
            raise rundir.RunDirError(f"{path} is a link: rlrun never writes through a link; remove it")
    store.mkdir(parents=True, exist_ok=True)
    return f"sqlite:///{store / 'mlflow.db'}", (store / "artifacts").as_uri()


def sqlite_artifacts(uri: str) -> str | None:
    """Where a new experiment in a SQLite store keeps its artifacts: `artifacts/` next to the database (MLflow's
    own default is `./mlruns` in the working directory, which is no place of the run's or the store's)."""
    if not uri.startswith("sqlite:///"):
        return None  # a server decides for itself
    return (Path(uri.removeprefix("sqlite:///")).parent / "artifacts").resolve().as_uri()


class Worker:
    """One background thread that runs the calls it is given, in order. The first failure is kept (`error`)
    and the calls after it are dropped; `wait` blocks until every call given so far has run."""

    def __init__(self, name: str):
        self.calls: queue.Queue[Callable[[], None] | None] = queue.Queue()
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, name=name, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while True:
            call = self.calls.get()
            try:
                if call is None:
                    return
                if self.error is None:
                    call()
            except BaseException as e:  # raised in the run by `check`
                self.error = e
            finally:
                self.calls.task_done()

    def put(self, call: Callable[[], None]) -> None:
        self.check()
        self.calls.put(call)

    def wait(self) -> None:
        self.calls.join()
        self.check()

    def stop(self) -> None:
        self.calls.put(None)
        self.thread.join()

    def check(self) -> None:
        if self.error is not None:
            raise self.error


class MLflowSink:
    def __init__(self, run: SinkRun, tracking_uri: str | None = None, experiment: str | None = None):
        os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")  # it writes ~/.config/mlflow and calls home
        uri = tracking_uri or os.environ.get("MLFLOW_TRACKING_URI")
        shared = not uri  # the default store, which the runs of an outputs folder share
        uri, artifacts = (uri, sqlite_artifacts(uri)) if uri else local_store(run)
        self.uri, self.run_id = uri, ""
        self._metrics: list[tuple[str, float, int, int]] = []  # (tag, value, ms since the epoch, step)
        self._sent = time.monotonic()
        self.worker = Worker(f"rlrun-mlflow-{run.name}")
        self.worker.put(lambda: self._connect(run, shared, artifacts, experiment))

    def _connect(self, run: SinkRun, shared: bool, artifacts: str | None, experiment: str | None) -> None:
        """The client, its store (made if new), the experiment and the MLflow run: seconds of MLflow's imports
        and, for a new SQLite store, its migrations, on the worker."""
        # the mlflow extra: imported (here and below) only when logger=mlflow
        from mlflow import MlflowClient

        for name in ("mlflow", "alembic"):  # "Creating initial MLflow database tables..." is not for users
            logging.getLogger(name).setLevel(logging.WARNING)  # after the import, which sets mlflow's to INFO
        state = run.dir / STATE_FILE
        # The client makes the default store's tables when it is new, and MLflow's migrations are not safe to run
        # concurrently (a second job fails with "duplicate column name"): jobs that start together make it one at
        # a time, under a lock file next to the database. Writes after that are SQLite transactions, which MLflow
        # makes wait up to 20 s for each other (busy_timeout).
        lock = FileLock(str(Path(self.uri.removeprefix("sqlite:///")).parent / LOCK)) if shared else nullcontext()
        with lock:
            self.client = MlflowClient(tracking_uri=self.uri)
            resumed = self._resumed_run(state) if run.resume_step is not None else None
            experiment_id = None if resumed is not None else self._experiment(experiment or run.experiment, artifacts)
        if resumed is not None:
            self.run_id = resumed
            self.client.update_run(self.run_id, status="RUNNING")
        else:
            assert experiment_id is not None
            tags = {"rlrun.run_dir": str(run.dir.resolve())} | ({"rlrun.group": run.group} if run.group else {})
            self.run_id = self.client.create_run(experiment_id, run_name=run.name, tags=tags).info.run_id
            rundir.write_text(state, json.dumps({"tracking_uri": self.uri, "run_id": self.run_id}, indent=2) + "\n")

    def _resumed_run(self, state: Path) -> str | None:
        """The MLflow run a resumed run continues: the one in `mlflow_run.json`, if this store holds it (a
        resume may log to another store than the run did: then it starts a new MLflow run there)."""
        from mlflow.exceptions import MlflowException

        try:
            run_id = bounded.load_json(state)["run_id"]
            self.client.get_run(run_id)
        except (ValueError, KeyError, TypeError, MlflowException):  # bounded.FileRefused is a ValueError
            return None
        return str(run_id)

    def _experiment(self, name: str, artifact_location: str | None) -> str:
        from mlflow.exceptions import MlflowException

        found = self.client.get_experiment_by_name(name)
        if found is not None:
            return found.experiment_id
        try:
            return self.client.create_experiment(name, artifact_location=artifact_location)
        except MlflowException:  # another job created it meanwhile
            found = self.client.get_experiment_by_name(name)
            if found is None:
                raise
            return found.experiment_id

    def start(self, params: dict[str, Any], config_yaml: str) -> None:
        def send() -> None:
            from mlflow.entities import Param

            items = [Param(k, str(v)[:PARAM_VALUE_MAX]) for k, v in params.items()]
            for i in range(0, len(items), PARAM_BATCH):
                self.client.log_batch(self.run_id, params=items[i : i + PARAM_BATCH])
            self.client.log_text(self.run_id, config_yaml, "config.yaml")

        self.worker.put(send)

    def scalar(self, tag: str, value: float, step: int) -> None:
        self._metrics.append((tag, float(value), int(time.time() * 1000), int(step)))
        if len(self._metrics) >= BATCH or time.monotonic() - self._sent > FLUSH_SECONDS:
            self._send_metrics()

    def text(self, tag: str, text: str, step: int) -> None:
        self.worker.put(lambda: self.client.set_tag(self.run_id, tag, text[:PARAM_VALUE_MAX]))

    def _send_metrics(self) -> None:
        """Hand the buffered metrics to the worker, in batches of MLflow's size."""
        metrics, self._metrics, self._sent = self._metrics, [], time.monotonic()

        def send() -> None:
            from mlflow.entities import Metric

            batch = [Metric(*m) for m in metrics]
            for i in range(0, len(batch), BATCH):
                self.client.log_batch(self.run_id, metrics=batch[i : i + BATCH])

        if metrics:
            self.worker.put(send)

    def flush(self) -> None:
        self._send_metrics()
        self.worker.wait()

    def close(self, summary: dict[str, Any]) -> dict[str, Any]:
        def finish() -> None:
            self.client.log_dict(self.run_id, summary, "summary.json")
            self.client.set_terminated(self.run_id, status="FINISHED")

        try:
            for key, value in numeric(summary).items():
                self.scalar(f"summary/{key}", value, summary["env_steps"])
            self._send_metrics()
            self.worker.put(finish)
            self.worker.wait()
        finally:
            self.worker.stop()
        return {"tracking_uri": self.uri, "run_id": self.run_id}
