"""Logging backends behind one interface: `RunLogger` fans every scalar, the config and the summary out to
the backends chosen in the `logger` group (tensorboard, mlflow, wandb, csv; several at once).

One module per backend. MLflow and W&B are optional extras, imported only when chosen; rlrun.config.validate
refuses a chosen backend whose package is missing before anything is written. By default every backend
writes only under the outputs folder (the run's directory; MLflow's default store is shared by the runs of
an outputs folder or a sweep, next to them); a resumed run continues the same backend run where the backend
allows it (the MLflow run id and W&B id are kept in the agent's directory).
"""

from __future__ import annotations

from typing import Any

from rlrun.logs.sinks.base import Sink, SinkRun, numeric, run_name

__all__ = ["Sink", "SinkRun", "make_sinks", "numeric", "run_name"]


def make_sinks(settings: dict[str, Any], run: SinkRun) -> list[Sink]:
    """The backends chosen in `settings` (the `logger` config node as plain values: name -> options, None
    for a backend not chosen), in a fixed order."""
    sinks: list[Sink] = []  # each backend's client is imported only when its logger is chosen
    if settings.get("tensorboard") is not None:
        from rlrun.logs.sinks.tensorboard import TensorBoardSink

        sinks.append(TensorBoardSink(run.dir, run.resume_step))
    if settings.get("csv") is not None:
        from rlrun.logs.sinks.csv import CsvSink

        sinks.append(CsvSink(run.dir, run.resume_step))
    if settings.get("mlflow") is not None:
        from rlrun.logs.sinks.mlflow import MLflowSink

        sinks.append(MLflowSink(run, **settings["mlflow"]))
    if settings.get("wandb") is not None:
        from rlrun.logs.sinks.wandb import WandbSink

        sinks.append(WandbSink(run, **settings["wandb"]))
    return sinks
