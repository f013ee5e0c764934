"""Hydra callbacks. Kept apart from rlrun.report so that every job does not import pandas and rliable."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback

log = logging.getLogger(__name__)


class ReportCallback(Callback):
    """Writes and prints the sweep report (rlrun.report) when a multirun ends."""

    def on_multirun_end(self, config, **kwargs: Any) -> None:
        # pandas and rliable only when a multirun ends, not in every job
        from rlrun.report import ReportExtraMissing

        try:
            from rlrun.report import write_report  # ReportExtraMissing without the report extra

            print(write_report(Path(config.hydra.sweep.dir)))
        except ReportExtraMissing as e:  # the sweep itself finished
            log.warning("no sweep report: %s", e)
        except Exception as e:  # a report must never turn a finished sweep into a failed one
            log.warning("could not write the sweep report: %s", e)
