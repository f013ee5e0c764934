"""What the benchmark scripts hand to the processes they time (scripts/benchlib)."""

import json
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))

from benchlib import atari  # noqa: E402


def test_the_atari_env_alone_child_keeps_the_callers_pythonpath(monkeypatch, tmp_path):
    """An offline GPU machine carries gymnasium and ale-py on PYTHONPATH: the child must still see them."""
    seen = {}

    def fake_run(cmd, **kwargs):
        seen.update(kwargs["env"])
        out = json.dumps({"wall": 1.0, "sps": 8.0, "cpu_sps": 8.0})
        return subprocess.CompletedProcess(cmd, 0, stdout=out + "\n", stderr="")

    monkeypatch.setenv("PYTHONPATH", "/carried/site")
    monkeypatch.setattr(atari.subprocess, "run", fake_run)
    run = atari.env_alone(tmp_path, 8, 10, {})
    assert seen["PYTHONPATH"].split(":") == [str(tmp_path), "/carried/site"]
    assert run.wall == 1.0


def test_a_failing_env_alone_child_shows_its_error(monkeypatch, tmp_path):
    def fake_run(cmd, **kwargs):
        return subprocess.CompletedProcess(cmd, 1, stdout="", stderr="ModuleNotFoundError: No module named 'ale_py'")

    monkeypatch.setattr(atari.subprocess, "run", fake_run)
    try:
        atari.env_alone(tmp_path, 8, 10, {})
    except SystemExit as stop:
        assert "No module named 'ale_py'" in str(stop)
    else:
        raise AssertionError("a failed child must stop the bench")
