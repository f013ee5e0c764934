"""`python -m <module> ...` for the integration tests, as a child forked from an interpreter that has already
imported torch, torch._dynamo, Hydra and rlrun.

A fresh `python -m rlrun.train` spends about 4.5 of its first 6 seconds importing (torch 2 s, and torch._dynamo
2 s, which the first optimizer pulls in); the suite starts a few hundred of them. `run_module` starts each
as a child of multiprocessing's fork server with those modules preloaded, then runs the module as `python
-m` would: `runpy` as `__main__`, sys.argv, sys.path with the working directory first, the environment
given, PYTHONWARNINGS applied, stdout and stderr to files, non-daemon threads joined and atexit handlers
run before it exits with the module's exit code; `start_module` is the Popen of it (pid, poll, wait,
signals). What differs from a fresh interpreter: modules already imported. Tests of start-up itself (which
modules a run imports, a signal during the imports, a closed pipe) use `subprocess` directly.
RLRUN_TESTS_EXEC=1 runs every command as a real subprocess instead, to check that both agree (Windows,
without a fork server, always does).
"""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

PRELOAD = ["torch", "torch._dynamo", "hydra", "omegaconf", "gymnasium", "rlrun.cli", "rlrun.run"]
# Read by the interpreter at start-up: a child forked from the server cannot take another value of these.
_SET_AT_START = ("PYTHONWARNINGS", "PYTHONPATH")

_context: multiprocessing.context.ForkServerContext | None = None
_fresh_path: list[str] = []


def _ensure_server() -> multiprocessing.context.ForkServerContext:
    """The fork server, started once per pytest process with a clean PYTHONWARNINGS and PYTHONPATH."""
    global _context, _fresh_path
    if _context is None:
        clean = {k: v for k, v in os.environ.items() if k not in _SET_AT_START}
        probe = "import json, sys; print(json.dumps(sys.path[1:]))"  # a fresh interpreter's path after its first entry
        _fresh_path = json.loads(subprocess.run([sys.executable, "-c", probe], env=clean, capture_output=True,
                                                text=True, check=True).stdout)  # fmt: skip
        saved = dict(os.environ)
        try:  # the server inherits the environment at its start
            os.environ.clear()
            os.environ.update(clean)
            context = multiprocessing.get_context("forkserver")
            context.set_forkserver_preload(PRELOAD)
            from multiprocessing import forkserver

            forkserver.ensure_running()
        finally:
            os.environ.clear()
            os.environ.update(saved)
        _context = context
    return _context


def _child(argv: list[str], cwd: str, env: dict[str, str], path: list[str], out: str, err: str,
           first: str | None) -> None:  # fmt: skip
    """In the forked child: become `python -m argv[0] argv[1:]` run in cwd with env, then exit with its code."""
    import atexit
    import importlib
    import runpy
    import threading
    import traceback
    import warnings

    sys.stdout.flush()
    sys.stderr.flush()
    for name, fd in ((out, 1), (err, 2)):
        target = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        os.dup2(target, fd)
        os.close(target)
    os.environ.clear()
    os.environ.update(env)
    os.chdir(cwd)
    extra = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    sys.path[:] = [cwd, *extra, *path]
    if env.get("PYTHONWARNINGS"):
        warnings._processoptions(env["PYTHONWARNINGS"].split(","))  # type: ignore[attr-defined]
    sys.argv = list(argv)
    code = 0
    try:
        if first:
            importlib.import_module(first)
        runpy.run_module(argv[0], run_name="__main__", alter_sys=True)
    except SystemExit as e:
        if isinstance(e.code, int) or e.code is None:
            code = e.code or 0
        else:  # sys.exit("message"): printed, exit code 1, as the interpreter does
            print(e.code, file=sys.stderr)
            code = 1
    except BaseException:
        traceback.print_exc()
        code = 1
    threading._shutdown()  # type: ignore[attr-defined]  # the interpreter's exit: threading's exit hooks, joins
    atexit._run_exitfuncs()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


class Started:
    """The part of `subprocess.Popen` the tests use (pid, poll, wait, communicate, send_signal, kill,
    returncode), for a forked `python -m`; its stdout and stderr are read when it has ended."""

    def __init__(self, command: list[str], child: multiprocessing.process.BaseProcess,
                 tmp: tempfile.TemporaryDirectory):  # fmt: skip
        self.args, self.child, self.pid = command, child, child.pid
        self._tmp = tmp  # the output files, removed with this object
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None and not self.child.is_alive():
            self.child.join()
            self.returncode = self.child.exitcode  # -N for a child killed by signal N, as Popen's
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        self.child.join(timeout)
        if self.poll() is None:
            raise subprocess.TimeoutExpired(self.args, timeout or 0)
        return self.returncode  # type: ignore[return-value]

    def communicate(self, timeout: float | None = None) -> tuple[str, str]:
        self.wait(timeout)
        return self.output("stdout"), self.output("stderr")

    def output(self, stream: str) -> str:
        path = os.path.join(self._tmp.name, stream)
        return Path(path).read_text(errors="replace") if os.path.exists(path) else ""

    def send_signal(self, sig: int) -> None:
        if self.poll() is None:
            os.kill(self.pid, sig)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


def start_module(module: str, *args: object, cwd: str | Path | None = None, env: dict[str, str] | None = None,
                 first: str | None = None) -> Started | subprocess.Popen:  # fmt: skip
    """`subprocess.Popen([sys.executable, "-m", module, *args], stdout=PIPE, stderr=PIPE, text=True, ...)`,
    forked (a real Popen where `_exec_instead`). `first`: a module imported before the command runs, as a
    user's package that registers its envs."""
    command = [sys.executable, "-m", module, *map(str, args)]
    if first:
        code = f"import {first}, runpy; runpy.run_module({module!r}, run_name='__main__', alter_sys=True)"
        command = [sys.executable, "-c", code, *map(str, args)]
    env = dict(os.environ if env is None else env)
    if _exec_instead(env):
        pipe = subprocess.PIPE
        return subprocess.Popen(command, stdout=pipe, stderr=pipe, text=True, cwd=cwd, env=env)
    context = _ensure_server()
    tmp = tempfile.TemporaryDirectory(prefix="rlrun-test-")
    out, err = os.path.join(tmp.name, "stdout"), os.path.join(tmp.name, "stderr")
    argv, where = [module, *map(str, args)], os.path.abspath(cwd or os.getcwd())
    child = context.Process(target=_child, args=(argv, where, env, _fresh_path, out, err, first))
    child.start()
    return Started(command, child, tmp)


def run_module(module: str, *args: object, cwd: str | Path | None = None, env: dict[str, str] | None = None,
               timeout: float = 600, first: str | None = None) -> subprocess.CompletedProcess:  # fmt: skip
    """`subprocess.run([sys.executable, "-m", module, *args], capture_output=True, text=True, ...)`, forked."""
    proc = start_module(module, *args, cwd=cwd, env=env, first=first)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        raise subprocess.TimeoutExpired(proc.args, timeout, out, err) from None
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)  # type: ignore[arg-type]


def _exec_instead(env: dict[str, str]) -> bool:
    """A real subprocess instead of a forked child: where asked (RLRUN_TESTS_EXEC=1), where there is no fork
    server (Windows), or where env gives an interpreter start-up variable (other than the two the child
    applies itself) another value than the fork server started with."""
    if os.environ.get("RLRUN_TESTS_EXEC") == "1" or "forkserver" not in multiprocessing.get_all_start_methods():
        return True
    keys = {k for k in (*env, *os.environ) if k.startswith("PYTHON") and k not in _SET_AT_START}
    return any(env.get(k) != os.environ.get(k) for k in keys)
