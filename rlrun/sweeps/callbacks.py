"""Hydra callbacks. Kept apart from rlrun.report so that every job does not import pandas and rliable."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hydra.experimental.callback import Callback

if TYPE_CHECKING:
    from omegaconf import DictConfig

log = logging.getLogger(__name__)


class ReportCallback(Callback):
    """Writes and prints the sweep report (rlrun.report) when a multirun ends."""

    def on_multirun_start(self, config: DictConfig, **kwargs: object) -> None:
        from rlrun.training import signals

        signals.sweep_dir = Path(str(config.hydra.sweep.dir))  # a stop names the sweep's continue command

    def on_multirun_end(self, config: DictConfig, **kwargs: object) -> None:
        # pandas and rliable only when a multirun ends, not in every job
        from rlrun.report import ReportExtraMissing

        try:
            from rlrun.report import write_report  # ReportExtraMissing without the report extra

            print(write_report(Path(config.hydra.sweep.dir)))
        except ReportExtraMissing as e:  # the sweep itself finished
            log.warning("no sweep report: %s", e)
        except Exception as e:  # a report must never turn a finished sweep into a failed one
            log.warning("could not write the sweep report: %s", e)
        lines = backend_lines(Path(config.hydra.sweep.dir))
        if lines:
            print("\n".join(lines))


def backend_lines(sweep_dir: Path) -> list[str]:
    """Where the sweep's jobs were logged, as a single run says it (`tensorboard --logdir`, `mlflow ui ...`):
    from the `logged_to` of the jobs' summaries."""
    # the job machinery only when a multirun ends
    from rlrun.storage import summary as run_summary
    from rlrun.training.jobs import backend_lines as run_lines

    summaries: list[dict[str, Any]] = []
    for path in sorted(sweep_dir.rglob(run_summary.FILE)):
        try:
            summary = run_summary.read(path.parent)
        except (OSError, run_summary.DamagedJob):
            continue
        if summary.get("logged_to"):  # a job's (or agent's) own: not a batched run's summary of its agents
            summaries.append(dict(summary))
    return run_lines(summaries, sweep_dir) if summaries else []
