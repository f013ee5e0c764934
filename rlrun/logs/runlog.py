"""The run's log lines (its start, progress, PBT rounds, warnings) where `rlrun.run.train` is called from Python.

rlrun logs through Python's `logging`, under the `rlrun` logger. The command line's Hydra app already sends
every line to the console and to `<run dir>/train.log`; a script or notebook that calls `train()` has
configured nothing, so `logging_to(out_dir)` does, for the run only:

- `train.log` in the run directory gets the lines in the command line's format, unless a handler already
  writes to it (Hydra's, `rlrun.resume`'s);
- where no handler would show them at all (logging not configured), they are printed to stdout as they are;
- the `rlrun` logger shows INFO lines unless the caller set its level: `logging.getLogger("rlrun")
  .setLevel(logging.WARNING)` silences the progress lines (train.log then has the warnings only).
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from rlrun.storage import rundir

LOG_NAME = "train.log"
# Hydra's job logging format (the command line's console and train.log)
FILE_FORMAT = "[%(asctime)s][%(name)s][%(levelname)s] - %(message)s"
ROOT = "rlrun"


def _writes_to(handler: logging.Handler, path: str) -> bool:
    target = getattr(handler, "baseFilename", None) or getattr(handler, "rlrun_log", None)
    return target is not None and os.path.realpath(target) == path


def _handlers(logger: logging.Logger) -> Iterator[logging.Handler]:
    """The handlers a record of `logger` reaches (the logger's own and its ancestors' while they propagate)."""
    current: logging.Logger | None = logger
    while current is not None:
        yield from current.handlers
        current = current.parent if current.propagate else None


@contextmanager
def logging_to(out_dir: Path) -> Iterator[None]:
    """For the block: the `rlrun` logger's lines into `<out_dir>/train.log` (appended, never through a link)
    and, where logging is not configured, onto stdout (see the module's docstring)."""
    logger = logging.getLogger(ROOT)
    path = os.path.realpath(Path(out_dir) / LOG_NAME)
    reached = list(_handlers(logger))
    added: list[logging.Handler] = []
    if not reached:  # nothing would show them: a script or notebook that has not configured logging
        console = logging.StreamHandler(sys.stdout)
        console.setFormatter(logging.Formatter("%(message)s"))
        added.append(console)
    if not any(_writes_to(h, path) for h in reached):
        file = logging.StreamHandler(rundir.open_append(Path(path)))
        file.rlrun_log = path  # type: ignore[attr-defined]
        file.setFormatter(logging.Formatter(FILE_FORMAT))
        added.append(file)
    level = logger.level
    if level == logging.NOTSET and logger.getEffectiveLevel() > logging.INFO:
        logger.setLevel(logging.INFO)
    for handler in added:
        logger.addHandler(handler)
    try:
        yield
    finally:
        for handler in added:
            logger.removeHandler(handler)
            if getattr(handler, "rlrun_log", None):
                handler.stream.close()  # type: ignore[attr-defined]
        logger.setLevel(level)
