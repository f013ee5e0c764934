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


def test_pbt_bench_curves_are_each_agents_100_episode_mean_at_the_grid(tmp_path):
    import math

    import pbt_bench

    agent = tmp_path / "run" / "seed=0"
    agent.mkdir(parents=True)
    rows = [(10 * (i + 1), float(i)) for i in range(150)]  # episode i ends at step 10(i+1) with return i
    agent.joinpath("episodes.csv").write_text(
        "env_step,episode,return,length\n" + "".join(f"{s},{i + 1},{r},10\n" for i, (s, r) in enumerate(rows))
    )
    [curve] = pbt_bench.curves(tmp_path / "run", [5, 10, 25, 1000, 1500, 99999])
    assert math.isnan(curve[0])  # before the first episode
    assert curve[1:3] == [0.0, 0.5]  # returns 0 and 0, 1
    assert curve[3] == sum(range(100)) / 100  # the first 100 episodes: 49.5
    assert curve[4] == curve[5] == sum(range(50, 150)) / 100  # the last 100: 99.5
