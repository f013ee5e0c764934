"""The end of a command's process: the interpreter's own exit steps, without freeing every module.

When a Python process exits, the interpreter joins its threads, runs the `atexit` handlers (logging's final
flush, multiprocessing's children, temporary folders) and flushes stdout and stderr; then it frees every
module and object one by one. With torch loaded that last part takes 0.6-2 s of CPU, a quarter of a short
run's whole process (docs/devices-and-benchmarks.md, "Start-up against CleanRL"), and nothing a command
writes depends on it: its files are closed before its `main` returns. So the commands that train end with
the steps that matter and `os._exit`, as tools such as Mercurial do, through public APIs only: `register`
puts one atexit handler in first, and atexit runs its handlers last-in, first-out, so that one runs after
the interpreter has joined the threads and after every handler registered later; it flushes the streams
and ends the process with the command's exit code. `python -m rlrun.train`, `python -m rlrun.resume` and
the console scripts (`rlrun.entrypoints`) register it before importing anything that
registers a handler of its own (`import rlrun` registers none). Where a caller registers it late, after the
handlers of logging, filelock and multiprocessing, the handler shuts logging down and ends
multiprocessing's children itself, as those would; the others release what the process's end releases
anyway (file locks, descriptors).

Only the `__main__` paths and console scripts call `run_then_exit`: a `main()` called from Python (a test, a
notebook) returns as usual; a process run under a profiler or tracer (`python -m cProfile -m rlrun.train`,
coverage) exits the usual way, so that the tool writes what it measured after `main` returns; and a `main`
that raises anything but SystemExit (a traceback) exits the usual way too.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import sys
from collections.abc import Callable
from typing import NoReturn

_registered = False
_exit_code: int | None = None  # set once `main` has ended: the handler ends the process with it


def register() -> None:
    """Register the handler that ends the process; first thing in a command's process, so that it runs last."""
    global _registered
    if not _registered:
        atexit.register(_end_process)
        _registered = True


def run_then_exit(main: Callable[[], object]) -> NoReturn:
    """Run `main`, then end the process with its exit code (SystemExit's, as the interpreter reads it)."""
    global _exit_code
    if watched():  # the profiler writes its figures once main returns: the usual exit
        main()
        sys.exit(0)
    register()  # a no-op where the command registered it first
    try:
        main()
        code = 0
    except SystemExit as e:
        code = exit_code(e.code)
    _exit_code = code
    sys.exit(code)  # the interpreter joins the threads and runs the atexit handlers, `_end_process` last


def _end_process() -> None:
    """The last atexit handler: logging's and multiprocessing's exit steps (their own handlers ran before
    it unless they were registered first), the streams flushed, then the process ends without freeing its
    modules."""
    if _exit_code is None:  # main raised (a traceback), or run_then_exit was not used: the usual exit
        return
    if "logging" in sys.modules:
        sys.modules["logging"].shutdown()
    if "multiprocessing" in sys.modules:  # daemonic children terminated, the others waited for
        for child in sys.modules["multiprocessing"].active_children():
            if child.daemon:
                child.terminate()
            child.join()
    for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
        with contextlib.suppress(OSError, ValueError):  # a closed or broken stream: lost either way
            if stream is not None:
                stream.flush()
    os._exit(_exit_code)


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
