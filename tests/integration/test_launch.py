"""tests/launch.py: a forked `python -m` behaves as a fresh interpreter's for what the tests read."""

import os
import subprocess
import sys
import textwrap
import time

from launch import run_module, start_module

PROBE = textwrap.dedent("""
    import atexit, os, sys, threading, time, warnings
    atexit.register(lambda: print("atexit ran"))
    def late():
        time.sleep(0.2)
        print("thread joined", flush=True)
    threading.Thread(target=late).start()
    print("path0", sys.path[0] == os.getcwd(), "argv", sys.argv[1:], "env", os.environ.get("PROBE_VALUE"))
    print("warnings", warnings.filters[0][0], file=sys.stderr)
    sys.exit(int(sys.argv[1]))
""")


def test_a_forked_command_exits_prints_and_sees_what_a_fresh_interpreter_would(tmp_path):
    (tmp_path / "probe_module.py").write_text(PROBE)
    env = {**os.environ, "PROBE_VALUE": "given", "PYTHONWARNINGS": "ignore"}
    forked = run_module("probe_module", 3, "x", cwd=tmp_path, env=env)
    fresh = subprocess.run([sys.executable, "-m", "probe_module", "3", "x"], cwd=tmp_path, env=env,
                           capture_output=True, text=True)  # fmt: skip
    assert (forked.returncode, forked.stdout, forked.stderr) == (fresh.returncode, fresh.stdout, fresh.stderr)
    assert forked.returncode == 3 and forked.stderr == "warnings ignore\n"
    assert forked.stdout.splitlines() == ["path0 True argv ['3', 'x'] env given", "thread joined", "atexit ran"]


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
