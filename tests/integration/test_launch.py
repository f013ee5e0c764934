"""tests/launch.py: a forked `python -m` behaves as a fresh interpreter's for what the tests read."""

import os
import subprocess
import sys
import textwrap
import time

import launch
from launch import run_module, start_module

PROBE = textwrap.dedent("""
    import atexit, os, sys, threading, time
    atexit.register(lambda: print("atexit ran"))
    def late():
        time.sleep(0.2)
        print("thread joined", flush=True)
    threading.Thread(target=late).start()
    print("path0", sys.path[0] == os.getcwd(), "argv", sys.argv[1:], "env", os.environ.get("PROBE_VALUE"))
    print("to stderr", file=sys.stderr)
    if sys.argv[1] == "interrupt":
        raise KeyboardInterrupt
    sys.exit(int(sys.argv[1]))
""")


def both(module, *args, cwd, env, last_line=False):
    """The command forked and fresh: the same exit code, stdout and stderr (its last line only, for a traceback,
    whose frames differ)."""
    forked = run_module(module, *args, cwd=cwd, env=env)
    fresh = subprocess.run([sys.executable, "-m", module, *args], cwd=cwd, env=env, capture_output=True, text=True)
    errs = [p.stderr.rstrip().splitlines()[-1] if last_line else p.stderr for p in (forked, fresh)]
    assert (forked.returncode, forked.stdout, errs[0]) == (fresh.returncode, fresh.stdout, errs[1])
    return forked


def test_a_forked_command_exits_prints_and_sees_what_a_fresh_interpreter_would(tmp_path):
    (tmp_path / "probe_module.py").write_text(PROBE)
    env = {**os.environ, "PROBE_VALUE": "given"}
    proc = both("probe_module", "3", "x", cwd=tmp_path, env=env)
    assert proc.returncode == 3 and proc.stderr == "to stderr\n"
    assert proc.stdout.splitlines() == ["path0 True argv ['3', 'x'] env given", "thread joined", "atexit ran"]
    proc = both("probe_module", "interrupt", cwd=tmp_path, env=env, last_line=True)  # then death by SIGINT
    assert proc.returncode == -2 and proc.stderr.rstrip().endswith("KeyboardInterrupt")


def test_the_preloaded_modules_leave_warnings_and_registries_as_a_fresh_import_would(tmp_path):
    """The probe imports what the fork server preloads. Warnings filters as the interpreter orders them
    (PYTHONWARNINGS at start-up, each import's own in front); and the preload registers no resolver, config
    schema or env id, which a child would otherwise find where its command never registered it."""
    probe = textwrap.dedent("""
        import sys
        for name in sys.argv[1:]:  # in the fork server's order: each import puts its filters in front
            __import__(name)
        import gymnasium, warnings
        from hydra.core.config_store import ConfigStore
        from omegaconf import OmegaConf
        print([(f[0], f[2].__name__, str(f[3])) for f in warnings.filters])
        print(OmegaConf.has_resolver("rlrun_exp_name"), [k for k in gymnasium.registry if k.startswith("MinAtar")],
              sorted(set(ConfigStore.instance().repo) - {"hydra", "_dummy_empty_config_.yaml"}))
    """)
    (tmp_path / "preload_probe.py").write_text(probe)
    env = {**os.environ, "PYTHONWARNINGS": "ignore,error::ResourceWarning"}
    proc = both("preload_probe", *launch.PRELOAD, cwd=tmp_path, env=env)
    filters, registered = proc.stdout.splitlines()
    assert "('error', 'ResourceWarning', 'None')" in filters
    assert registered == "False [] []"


def test_a_started_command_is_killed_and_reports_the_signal_as_popen_does(tmp_path):
    (tmp_path / "sleeper.py").write_text(
        "import pathlib, time\nprint('started')\npathlib.Path('up').touch()\ntime.sleep(60)\n"
    )
    proc = start_module("sleeper", cwd=tmp_path)
    while not (tmp_path / "up").exists():
        assert proc.poll() is None
        time.sleep(0.01)
    proc.kill()
    assert proc.wait(timeout=10) == -9 and proc.communicate() == ("started\n", "")
    left = start_module("sleeper", cwd=tmp_path)  # one a failed test left running: killed at pytest's exit
    launch._kill_leftovers()
    assert left.poll() == -9


_BEFORE = {}


def test_a_start_up_variable_set_in_the_test_process_is_set_here():
    """As torch.compile in the test process does (inductor sets TORCHINDUCTOR_CACHE_DIR); the next test checks
    that it does not outlive this one (tests/conftest.py), so later commands are still forked."""
    _BEFORE["value"] = os.environ.get("TORCHINDUCTOR_CACHE_DIR")
    import torch._inductor.runtime.cache_dir_utils as inductor_cache  # importing inductor may set it already

    inductor_cache.cache_dir()
    assert os.environ.get("TORCHINDUCTOR_CACHE_DIR")


def test_the_next_test_starts_without_it_and_its_commands_are_forked():
    assert _BEFORE, "runs after the test above"
    assert os.environ.get("TORCHINDUCTOR_CACHE_DIR") == _BEFORE["value"]
    assert os.environ.get("RLRUN_TESTS_EXEC") == "1" or not launch._exec_instead(dict(os.environ))
