"""A command's `main` run in the test process (`in_process`), for both tiers: what `python -m rlrun.<command>`
prints and exits with, without a subprocess and its seconds of imports."""

import os
import signal
import subprocess
import sys


def in_process(module, *args, cwd=None, rc=None):
    """test_reliability's `cli` without the subprocess: the command's `main` in this process, its
    stdout and stderr captured, its exit code read from its SystemExit; an exception it lets out fails the
    test with its traceback. For commands refused before they train, for resumes and evaluations, and for
    Hydra's --cfg and --info (printed, no job run): any other `rlrun.train` that gets past its checks into
    Hydra's app fails the test (run it with `cli`). As with `python -m`, the working directory comes first
    on sys.path during the call (a module it imports from a `cwd` given is forgotten after it)."""
    import importlib
    import io
    import logging
    from contextlib import redirect_stderr, redirect_stdout

    import rlrun.cli
    from rlrun.training import signals

    argv = [module, *map(str, args)]
    shows = {"--cfg", "-c", "--info", "-i"} & set(argv)  # Hydra prints and runs no job
    main = importlib.import_module("rlrun.cli" if module == "rlrun.train" else module).main

    def hydra_app():
        raise AssertionError(f"{' '.join(argv)} got past its checks into Hydra's app: run it with cli()")

    root = logging.getLogger()
    old_argv, old_cwd, old_path, old_modules = sys.argv, os.getcwd(), list(sys.path), set(sys.modules)
    old_handlers, old_level, old_in_sweep = list(root.handlers), root.level, signals.in_sweep
    old_hydra_main = rlrun.cli.hydra_main
    old_signals = {s: signal.getsignal(s) for s in signals.SIGNALS}
    out, err, code = io.StringIO(), io.StringIO(), 0
    try:
        sys.argv = list(argv)
        if not shows:
            rlrun.cli.hydra_main = hydra_app
        if cwd is not None:
            os.chdir(cwd)
        sys.path.insert(0, os.getcwd())
        with redirect_stdout(out), redirect_stderr(err):
            try:
                main() if module == "rlrun.train" else main(argv[1:])
            except SystemExit as e:
                code = e.code if isinstance(e.code, int) else int(e.code is not None)
    finally:
        for name in set(sys.modules) - old_modules:  # a user's module next to the run (`env.id=helpers:...`)
            if os.path.dirname(getattr(sys.modules[name], "__file__", None) or "") == os.getcwd() != old_cwd:
                del sys.modules[name]
        rlrun.cli.hydra_main = old_hydra_main
        sys.argv, sys.path[:], signals.in_sweep = old_argv, old_path, old_in_sweep
        os.chdir(old_cwd)
        for handler in set(root.handlers) - set(old_handlers):  # a resume logs to its run's train.log
            root.removeHandler(handler)
            handler.close()
        root.setLevel(old_level)
        for s, handler in old_signals.items():
            signal.signal(s, handler)
    proc = subprocess.CompletedProcess(argv, code, out.getvalue(), err.getvalue())
    if rc is not None:
        assert proc.returncode == rc, proc.stderr[-3000:]
        assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    return proc
