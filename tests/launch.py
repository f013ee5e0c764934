"""`python -m <module> ...` for the integration tests, as a child forked from an interpreter that has already
imported torch, torch._dynamo, Hydra and gymnasium.

A fresh `python -m rlrun.train` spends about 4.5 of its first 6 seconds importing (torch 2 s, and torch._dynamo
2 s, which the first optimizer pulls in); the suite starts a few hundred of them. `run_module` starts each
as a child of multiprocessing's fork server with those modules preloaded, then runs the module as `python
-m` would: `runpy` as `__main__`, sys.argv, sys.path with the working directory first, the environment
given, PYTHONPATH and PYTHONWARNINGS applied (the warnings filters in the interpreter's order), stdout and
stderr to files, threading's exit and atexit handlers run before it exits with the module's exit code;
`start_module` is the Popen of it (pid, poll, wait, signals). What differs from a fresh interpreter: the
preloaded modules (warnings they printed on import are not repeated), the hash seed (one for all children)
and stdin (/dev/null). Tests of start-up itself (which modules a run imports, a signal during the imports, a
closed pipe) use `subprocess` directly. RLRUN_TESTS_EXEC=1 runs every command as a real subprocess instead,
to check that both agree (off Linux it always does).
"""

from __future__ import annotations

import atexit
import json
import multiprocessing
import multiprocessing.util  # noqa: F401  (its exit hook registers before ours, below)
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

# The heavy imports, and of rlrun's only modules that register nothing when imported (no OmegaConf resolver,
# config schema or env id; tests/integration/test_launch.py checks): what a command registers happens in its
# child as in a fresh process, so a command that misses a registration still fails here.
PRELOAD = ["torch", "torch._dynamo", "torch.utils.tensorboard", "hydra", "omegaconf", "gymnasium", "filelock",
           "tabulate", "rliable.library", "rlrun.cli", "rlrun.training.build"]  # fmt: skip
# The two start-up variables the child applies itself; any other that an env changes (or one read when the
# preloaded modules were imported) makes a real subprocess (`_exec_instead`).
_SET_AT_START = ("PYTHONWARNINGS", "PYTHONPATH")
_FIXED_AT_START = ("PYTHON", "LANG", "LC_", "TMPDIR", "OMP_", "MKL_", "TORCH", "CUDA")

_context: multiprocessing.context.ForkServerContext | None = None
_server_env: dict[str, str] = {}
_fresh_path: list[str] = []  # a fresh interpreter's sys.path after its first entry
_fresh_filters = 0  # how many warnings filters a fresh interpreter starts with
_started: list[Started | subprocess.Popen] = []


def _ensure_server() -> multiprocessing.context.ForkServerContext:
    """The fork server, started once per pytest process without PYTHONWARNINGS, -W options or PYTHONPATH."""
    global _context, _server_env, _fresh_path, _fresh_filters
    if _context is None:
        clean = {k: v for k, v in os.environ.items() if k not in _SET_AT_START}
        probe = "import json, sys, warnings; print(json.dumps([sys.path[1:], len(warnings.filters)]))"
        _fresh_path, _fresh_filters = json.loads(subprocess.run([sys.executable, "-c", probe], env=clean,
                                                 capture_output=True, text=True, check=True).stdout)  # fmt: skip
        saved, options = dict(os.environ), list(sys.warnoptions)
        try:  # the server inherits the environment and the -W options (sys.warnoptions) at its start
            os.environ.clear()
            os.environ.update(clean)
            sys.warnoptions[:] = []
            context = multiprocessing.get_context("forkserver")
            context.set_forkserver_preload(PRELOAD)
            from multiprocessing import forkserver

            forkserver.ensure_running()
        finally:
            os.environ.clear()
            os.environ.update(saved)
            sys.warnoptions[:] = options
        _context, _server_env = context, clean
    return _context


def _kill_leftovers() -> None:
    """A command a failed test left running would keep pytest from exiting (multiprocessing waits for its
    children); a real Popen's would be orphaned. Kill them."""
    for proc in _started:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


# Registered after multiprocessing's own exit hook (multiprocessing.util imports it), so it runs before it.
atexit.register(_kill_leftovers)


def _child(argv: list[str], cwd: str, env: dict[str, str], fresh: tuple[list[str], int], out: str, err: str,
           first: str | None) -> None:  # fmt: skip
    """In the forked child: become `python -m argv[0] argv[1:]` run in cwd with env, then exit with its code."""
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
    path, startup_filters = fresh
    sys.path[:] = [cwd, *extra, *path]
    if env.get("PYTHONWARNINGS"):  # where the interpreter puts them: after the filters modules added since
        added = len(warnings.filters) - startup_filters
        imported, warnings.filters[:] = warnings.filters[:added], warnings.filters[added:]
        warnings._processoptions(env["PYTHONWARNINGS"].split(","))  # type: ignore[attr-defined]
        warnings.filters[:0] = imported
        warnings._filters_mutated()  # type: ignore[attr-defined]
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
    except KeyboardInterrupt:  # the interpreter's way: the traceback, the exit below, then death by SIGINT
        traceback.print_exc()
        code = -signal.SIGINT
    except BaseException:
        traceback.print_exc()
        code = 1
    threading._shutdown()  # type: ignore[attr-defined]  # the interpreter's exit: threading's exit hooks, joins
    atexit._run_exitfuncs()
    sys.stdout.flush()
    sys.stderr.flush()
    if code == -signal.SIGINT:
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
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
        _started.append(subprocess.Popen(command, stdout=pipe, stderr=pipe, text=True, cwd=cwd, env=env))
        return _started[-1]
    context = _ensure_server()
    tmp = tempfile.TemporaryDirectory(prefix="rlrun-test-")
    out, err = os.path.join(tmp.name, "stdout"), os.path.join(tmp.name, "stderr")
    argv, where = [module, *map(str, args)], os.path.abspath(cwd or os.getcwd())
    child = context.Process(target=_child, args=(argv, where, env, (_fresh_path, _fresh_filters), out, err, first))
    child.start()
    _started[:] = [p for p in _started if p.returncode is None]  # those that ended: read and done with
    _started.append(Started(command, child, tmp))
    return _started[-1]


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
    """A real subprocess instead of a forked child: where asked (RLRUN_TESTS_EXEC=1), off Linux (no fork
    server on Windows; on macOS forking after importing torch is unsafe), or where env gives a variable read at
    start-up (other than the two the child applies itself) another value than the fork server started with."""
    if os.environ.get("RLRUN_TESTS_EXEC") == "1" or sys.platform != "linux":  # macOS: fork after torch is unsafe
        return True
    started_with = _server_env if _context is not None else os.environ
    keys = {k for k in (*env, *started_with) if k.startswith(_FIXED_AT_START) and k not in _SET_AT_START}
    return any(env.get(k) != started_with.get(k) for k in keys)


def overriding(base: list[str] | tuple[str, ...], *args: object) -> list[str]:
    """`base`'s overrides less the keys that `args` give, then `args`: rlrun refuses a key given twice, so a
    test that sets a key of its base command line replaces it."""
    from rlrun.config.overrides import split

    given = {split(str(a))[0] for a in args if "=" in str(a)}
    return [o for o in base if split(o)[0] not in given] + [str(a) for a in args]
