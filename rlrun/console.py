"""The console of a command: a closed, full or broken stdout or stderr never fails a run.

What a run keeps is in its directory; the console only shows it. So `python -m rlrun.train ... 2>&-` (a
closed stream), `... | head -1` (a reader that leaves) and `... > /dev/full` (a full disk) train as usual:
a closed stream is opened on /dev/null at the start, and a stream whose write fails is sent to /dev/null
from then on, silently (no "--- Logging error ---" traceback, no exit code of its own).
"""

from __future__ import annotations

import contextlib
import os
import sys
from typing import IO, Any

STREAMS = ((1, "stdout"), (2, "stderr"))


class Console:
    """A text stream that stops writing, without an error, once its file fails (EPIPE, ENOSPC, EIO)."""

    def __init__(self, stream: IO[str], fd: int):
        self._stream, self._fd = stream, fd

    def write(self, text: str) -> int:
        try:
            return self._stream.write(text)
        except OSError:
            self._lost()
            return len(text)

    def flush(self) -> None:
        try:
            self._stream.flush()
        except OSError:
            self._lost()

    def _lost(self) -> None:
        """From now on the stream's descriptor is /dev/null: what its buffer still holds goes there too."""
        _on_devnull(self._fd)
        with contextlib.suppress(OSError):
            self._stream.flush()

    def __getattr__(self, name: str) -> Any:  # fileno, isatty, encoding, ...: the stream's own
        return getattr(self._stream, name)


def _on_devnull(fd: int) -> None:
    null = os.open(os.devnull, os.O_WRONLY)
    if null != fd:  # a closed `fd` is the lowest free descriptor: /dev/null is opened on it directly
        os.dup2(null, fd)
        os.close(null)


def guard() -> None:
    """Make stdout and stderr safe to write for the rest of the process (a command calls it first)."""
    for fd, name in STREAMS:
        try:
            os.fstat(fd)
        except OSError:  # closed (`2>&-`): anything opened later would take its number and receive the output
            _on_devnull(fd)
        stream = getattr(sys, name)
        if stream is None:
            stream = os.fdopen(fd, "w", buffering=1, closefd=False)
        try:
            real = stream.fileno() == fd
        except (AttributeError, OSError, ValueError):  # a captured stream (tests): nothing to guard
            real = False
        if real and not isinstance(stream, Console):
            setattr(sys, name, Console(stream, fd))
        elif getattr(sys, name) is None:
            setattr(sys, name, stream)
