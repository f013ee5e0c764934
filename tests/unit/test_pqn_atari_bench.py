"""scripts/pqn_atari_bench.py: the commands `learn` starts, and the curve and paired tables read back."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))

import pqn_atari_bench as bench  # noqa: E402


def write_run(root: Path, name: str, returns: list[float], summary: dict, evals: list[tuple[int, float]]) -> None:
    """Episode i ends at env step 5,000 (i + 1) with return returns[i]; evaluations in scalars.csv."""
    run = root / name
    run.mkdir(parents=True)
    rows = "".join(f"{5000 * (i + 1)},{i + 1},{r},100\n" for i, r in enumerate(returns))
    (run / "episodes.csv").write_text("env_step,episode,return,length\n" + rows)
    (run / "scalars.csv").write_text("env_step,tag,value\n" + "".join(f"{s},eval/mean_return,{v}\n" for s, v in evals))
    (run / "summary.json").write_text(json.dumps(summary))


def table_rows(out: str, title: str) -> list[list[str]]:
    section = out.split(title)[1].split("\n## ")[0]
    lines = [line for line in section.splitlines() if line.startswith("| ") and not line.startswith("| row")]
    return [[c.strip() for c in line.strip("|").split("|")] for line in lines]


def test_learn_starts_the_row_with_the_budget_and_the_overrides_in_its_place(tmp_path, monkeypatch):
    started = []
    monkeypatch.setattr(subprocess, "run", lambda cmd: started.append(cmd) or SimpleNamespace(returncode=0))
    args = SimpleNamespace(
        root=str(tmp_path), rows=["der_convln"], games=["Breakout"], seeds=[100, 101],
        overrides=["total_steps=2500000", "device.threads=2"],
    )  # fmt: skip
    bench.learn(args)
    assert len(started) == 2
    cmd = started[0]
    assert cmd[1:3] == ["-m", "rlrun.train"]
    assert {"+experiment=pqn_atari", "network=der", "network.conv_layer_norm=true"} <= set(cmd)
    assert {"env.id=ALE/Breakout-v5", "seed=100", "exploration.duration=100000"} <= set(cmd)
    # each key once: the override, not the budget's
    assert [c for c in cmd if c.startswith("total_steps=")] == ["total_steps=2500000"]
    assert [c for c in cmd if c.startswith("device.threads=")] == ["device.threads=2"]
    assert cmd[-1] == f"hydra.run.dir={tmp_path / 'der_convln__Breakout__seed100'}"


def test_aggregate_reads_the_curve_at_the_marks_and_pairs_rows_by_seed(tmp_path, capsys):
    # 300 episodes, returns rising 0, 0.2, ..., 59.8: the 100-episode mean at 500k (episode 100) is
    # 0.2 x 49.5 = 9.9; at 1M (episode 200) 0.2 x 149.5 = 29.9; it first reaches 18 at episode 141 (0.2 x 90.5
    # = 18.1), env step 705,000, 19.6 minutes at 600 env steps/s
    rising = [0.2 * i for i in range(300)]
    write_run(tmp_path, "der_convln__Pong__seed1", rising,
              {"final_mean_return_100": 49.9, "final_eval_return": 20.0, "sps": 600.0, "wall_time_s": 2520.0},
              [(500_000, -5.0), (1_500_000, 20.0)])  # fmt: skip
    write_run(tmp_path, "preset__Pong__seed1", [-20.0] * 300,
              {"final_mean_return_100": -20.0, "final_eval_return": -21.0, "sps": 200.0, "wall_time_s": 7500.0},
              [(1_500_000, -21.0)])  # fmt: skip
    # no pair for seed 2; its summary damaged (a string, a bool, NaN): shown as missing, not a traceback
    write_run(tmp_path, "preset__Pong__seed2", [-20.0] * 300, {"sps": "fast", "final_mean_return_100": True}, [])
    (tmp_path / "preset__Pong__seed2" / "summary.json").write_text('{"final_eval_return": NaN, "sps": "fast"}')
    (tmp_path / "der_convln__Pong__seed1.stopped-1").mkdir()  # set aside: not read
    bench.aggregate(SimpleNamespace(root=str(tmp_path), marks=[500_000, 1_000_000, 2_000_000], base="preset"))
    out = capsys.readouterr().out
    runs = table_rows(out, "PQN on Atari: each run")
    assert runs[0] == ["der_convln", "Pong", "1", "9.9", "29.9", "-", "49.9", "-5.0 / 20.0", "600", "42",
                       "705,000 (20 min)"]  # fmt: skip
    assert runs[1][:10] == ["preset", "Pong", "1", "-20.0", "-20.0", "-", "-20.0", "-21.0", "200", "125"]
    assert runs[1][10] == "-" and len(runs) == 3
    assert runs[2][6:10] == ["-", "-", "-", "-"]
    paired = table_rows(out, "each row against preset")
    assert paired == [["der_convln", "Pong", "1", "49.9 - -20.0 = +69.9", "20.0 - -21.0 = +41.0", "3.00x"]]


def test_steps_to_the_goal_count_only_full_100_episode_windows(tmp_path):
    """Before: a first episode of 20 counted as a 100-episode mean of 20."""
    write_run(tmp_path, "preset__Pong__seed1", [20.0] + [-20.0] * 150, {"sps": 100.0}, [])
    assert bench.measure(tmp_path / "preset__Pong__seed1", [])["reached"] is None


def test_aggregate_of_no_runs_says_so(tmp_path):
    try:
        bench.aggregate(SimpleNamespace(root=str(tmp_path / "none"), marks=[1], base="preset"))
    except SystemExit as stop:
        assert str(stop) == f"no runs under {tmp_path / 'none'}"
    else:
        raise AssertionError("no runs must stop the aggregate")
