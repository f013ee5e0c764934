"""The end of a command's process: the interpreter's own exit steps, without freeing every module.

When a Python process exits, the interpreter joins its threads, runs the `atexit` handlers (logging's final
flush, multiprocessing's children, temporary folders) and flushes stdout and stderr; then it frees every
module and object one by one. With torch loaded that last part takes 0.6-2 s of CPU, a quarter of a short
run's whole process (docs/devices-and-benchmarks.md, "Start-up against CleanRL"), and nothing a command
writes depends on it: its files are closed before its `main` returns. So the commands that train end with
the steps that matter and `os._exit`, as tools such as Mercurial do. Only the `__main__` paths and console
scripts call this: a `main()` called from Python (a test, a notebook) returns as usual, and a process run
under a profiler or tracer (`python -m cProfile -m rlrun.train`, coverage) exits the usual way, so that the
tool writes what it measured after `main` returns.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import sys
import threading
from collections.abc import Callable
from typing import NoReturn


def run_then_exit(main: Callable[[], object]) -> NoReturn:
    """Run `main`, then end the process with its exit code (SystemExit's, as the interpreter reads it)."""
    if watched():  # the profiler writes its figures once main returns: the usual exit
        main()
        sys.exit(0)
    try:
        main()
        code = 0
    except SystemExit as e:
        code = exit_code(e.code)
    shutdown = getattr(threading, "_shutdown", None)  # what the interpreter calls first: joins non-daemon threads
    if shutdown is not None:
        shutdown()
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
        with contextlib.suppress(OSError, ValueError):  # a closed or broken stream: lost either way
            if stream is not None:
                stream.flush()
    os._exit(code)


def watched() -> bool:
    """Whether a profiler or tracer (cProfile, trace, coverage) watches this process."""
    return sys.getprofile() is not None or sys.gettrace() is not None


def exit_code(code: object) -> int:
    """SystemExit's code as the interpreter turns it into a status: None is 0, an int itself, anything else
    is printed on stderr and gives 1."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    with contextlib.suppress(OSError, ValueError):
        print(code, file=sys.stderr)
    return 1
