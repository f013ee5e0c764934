"""The unit tier passes on a fresh machine: there matplotlib builds its font cache on first import by
running `fc-list`, which the unit tier's no-subprocess guard (tests/unit/conftest.py) must not count.
Slow (about 25 s, the font cache built from scratch): CI's own unit-tier run on its fresh runner is the same
check, so the default run leaves it to `pytest -m slow`."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_a_unit_test_that_plots_passes_without_a_matplotlib_font_cache(tmp_path):
    env = {**os.environ, "MPLCONFIGDIR": str(tmp_path)}  # an empty config and cache dir: a fresh machine's
    test = "tests/unit/test_files_checks.py::test_the_report_replaces_linked_outputs_and_never_writes_through_them"
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", test], cwd=ROOT,
                          env=env, capture_output=True, text=True)  # fmt: skip
    assert done.returncode == 0, done.stdout[-2000:]
    assert any(tmp_path.glob("fontlist-*.json")), "matplotlib did not build its font cache in the fresh dir"
