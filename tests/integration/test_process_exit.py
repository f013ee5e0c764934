"""A command's process ends with the interpreter's own exit steps but without freeing its modules
(`rlrun.process_exit`): threads joined, atexit handlers run, buffered output flushed, the exit code kept,
logging shut down even where its handler was registered before the one that ends the process."""

import subprocess
import sys

import pytest

from rlrun.process_exit import exit_code

PROGRAM = """
import atexit, sys, threading, time
from pathlib import Path
from rlrun.process_exit import run_then_exit

out = Path(sys.argv[1])

def main():
    atexit.register(lambda: (out / "atexit").write_text("ran"))
    def late():
        time.sleep(0.3)
        (out / "thread").write_text("joined")
    threading.Thread(target=late).start()  # not a daemon: the interpreter waits for it
    sys.stdout.write("buffered, no newline")
    {end}

run_then_exit(main)
"""


@pytest.mark.parametrize(
    "end, code, stderr",
    [("pass", 0, ""), ("sys.exit(3)", 3, ""), ("sys.exit('refused')", 1, "refused\n"), ("sys.exit(None)", 0, "")],
)
def test_the_process_ends_as_the_interpreter_would_end_it(tmp_path, end, code, stderr):
    program = PROGRAM.format(end=end)
    proc = subprocess.run([sys.executable, "-c", program, str(tmp_path)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == code, proc.stderr
    assert proc.stdout == "buffered, no newline"  # a pipe's buffer flushed
    assert proc.stderr == stderr
    assert (tmp_path / "atexit").read_text() == "ran"
    assert (tmp_path / "thread").read_text() == "joined"


def test_exit_codes_read_as_the_interpreter_reads_them():
    assert [exit_code(c) for c in (None, 0, 2, 75, 256 + 4)] == [0, 0, 2, 75, 4]


def test_a_profiled_command_exits_the_usual_way_so_the_profile_is_written(tmp_path):
    program = tmp_path / "command.py"
    program.write_text("from rlrun.process_exit import run_then_exit\nrun_then_exit(lambda: print('ran'))\n")
    profile = tmp_path / "profile.out"
    proc = subprocess.run(
        [sys.executable, "-m", "cProfile", "-o", str(profile), str(program)], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "ran\n"
    assert profile.stat().st_size > 0


TEARDOWN = """
import sys
from pathlib import Path
{before}
from rlrun import process_exit

out = Path(sys.argv[1])


class Freed:
    def __del__(self):
        (out / "freed").write_text("module teardown ran")


kept = Freed()  # a module global: freed only by the interpreter's module teardown
{end}
"""


LOGS = """
import logging.handlers
target = logging.FileHandler(out / "log")
logging.getLogger().addHandler(logging.handlers.MemoryHandler(100, target=target))  # written when flushed
logging.getLogger().warning("kept")
process_exit.run_then_exit(lambda: None)
"""


@pytest.mark.parametrize(
    "before",
    [
        "from rlrun import process_exit\nprocess_exit.register()",  # python -m rlrun.train: before any handler
        "import logging\nfrom rlrun import process_exit",  # a console script: after logging's own handler
    ],
    ids=["registered first", "registered after logging's"],
)
def test_the_process_ends_without_freeing_its_modules_and_logging_is_shut_down(tmp_path, before):
    program = TEARDOWN.format(before=before, end=LOGS)
    proc = subprocess.run([sys.executable, "-c", program, str(tmp_path)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "log").read_text() == "kept\n"  # logging.shutdown ran: the MemoryHandler flushed
    assert not (tmp_path / "freed").exists()


def test_a_usual_exit_frees_the_modules(tmp_path):
    """The check above can see a teardown: without run_then_exit the object is freed."""
    program = TEARDOWN.format(before="", end="")
    subprocess.run([sys.executable, "-c", program, str(tmp_path)], check=True, timeout=60)
    assert (tmp_path / "freed").read_text() == "module teardown ran"
