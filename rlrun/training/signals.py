"""SIGINT and SIGTERM outside the training loop: one line, the right exit code, nothing half-made left.

`stop_on_signal()` is installed before a command's heavy imports. The handler acts at once rather than
raising an exception: an exception raised from a signal handler can be swallowed by C code that clears
errors (an `isinstance` check through `abc`, for one), and the run would go on as if nothing happened.
A new run that has no checkpoint yet has its directory removed; a run with a checkpoint keeps it (exit
75, resume it); a sweep keeps its jobs (exit 75, `python -m rlrun.resume <sweep dir>` continues it). The
training loop installs its own handler, which checkpoints first (`rlrun.train`).
"""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path
from types import FrameType, ModuleType

from rlrun.errors import Exit

SIGNALS = (signal.SIGINT, signal.SIGTERM)
in_sweep = False  # set by the command line: a sweep keeps the jobs it ran
sweep_dir: Path | None = None  # the sweep's directory, once known: its continue command is printed


def continue_sweep(rundir: ModuleType) -> str:
    """How a stopped sweep goes on (rlrun.sweeps.continuation); `rundir`: the module rlrun.storage.rundir, not
    imported here: called from the handler."""
    return f"Continue the sweep with: python -m rlrun.resume {rundir.shell_quote(sweep_dir)}"


def _stop_now(signum: int, frame: FrameType | None) -> None:
    # Nothing is imported here: a signal can land in the middle of an import (a half-made `logging` or
    # `dataclasses`), and importing from the handler then fails. A process that has not imported
    # rlrun.storage.rundir owns no run directory.
    rundir = sys.modules.get("rlrun.storage.rundir")
    name = signal.Signals(signum).name
    owned = rundir.owned_paths() if rundir is not None else []
    kept = [path for path in owned if (path / "checkpoint.pt").exists()]
    removed = [path for path in owned if rundir is not None and rundir.discard_unstarted(path, release=False)]
    if in_sweep and sweep_dir is not None and rundir is not None:
        where = f"; the last checkpoint in {kept[0]} is kept" if kept else ""
        message = f"sweep stopped by {name}{where}; the jobs it ran are kept. {continue_sweep(rundir)}"
        code: int = Exit.STOPPED
    elif kept and rundir is not None:  # (kept paths are owned ones: rundir is imported)
        resume = rundir.resume_command(kept[0])
        message = f"stopped by {name}; the last checkpoint in {kept[0]} is kept. Continue with: {resume}"
        code = Exit.STOPPED
    elif in_sweep:
        message, code = f"sweep stopped by {name}; the jobs it ran are kept", 128 + signum
    else:
        what = "its directory was removed" if removed else "nothing was written"
        message, code = f"stopped by {name} before the run started; {what}", 128 + signum
    print(f"rlrun: {message}", file=sys.stderr, flush=True)
    os._exit(code)  # the OS drops the run directory's lock with the process


def stop_on_signal() -> None:
    for s in SIGNALS:
        signal.signal(s, _stop_now)
