"""scripts/atari100k_bench.py's table: run folders read back, human-normalised scores and rliable's IQM."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))

import atari100k_bench as bench  # noqa: E402
from benchlib.atari100k_data import GAMES, HUMAN, RANDOM, human_normalised  # noqa: E402


def write_run(root: Path, name: str, score: float | None, wall: float = 600.0) -> None:
    run = root / name
    run.mkdir(parents=True)
    if score is not None:
        (run / "summary.json").write_text(json.dumps({"final_eval_return": score, "wall_time_s": wall}))


def scores_for(hns: list[float]) -> list[float]:
    """Raw scores whose human-normalised values are `hns`, one per game of GAMES."""
    return [RANDOM[g] + h * (HUMAN[g] - RANDOM[g]) for g, h in zip(GAMES, hns)]


def test_human_normalised_scores_by_hand():
    assert human_normalised("Pong", -20.7) == 0.0
    assert human_normalised("Pong", 14.6) == pytest.approx(1.0)
    assert human_normalised("Breakout", 16.1) == pytest.approx((16.1 - 1.7) / (30.5 - 1.7))


def test_collect_reads_each_run_and_skips_set_aside_ones(tmp_path):
    write_run(tmp_path, "der__Pong__seed0", 3.0, wall=1200.0)
    write_run(tmp_path, "der__Pong__seed1", None)  # unfinished: no summary.json
    write_run(tmp_path, "der__Pong__seed2.stopped-1", 9.0)
    found = bench.collect(tmp_path)
    assert found == {"der": {"Pong": {0: {"score": 3.0, "wall": 1200.0}, 1: {"score": None, "wall": None}}}}


def test_iqm_of_known_scores_is_the_hand_computed_middle_mean(tmp_path, capsys):
    # 3 seeds x 5 games, human-normalised 0.0, 0.1, ..., 1.4: the IQM drops the lowest and highest 25% of
    # the 15 (scipy's trim_mean cuts int(0.25 * 15) = 3 each side) and averages 0.3 ... 1.1: 0.7
    hns = [[0.1 * (seed * 5 + g) for g in range(5)] for seed in range(3)]
    for seed, row in enumerate(hns):
        for game, score in zip(GAMES, scores_for(row)):
            write_run(tmp_path, f"drq_eps__{game}__seed{seed}", score)
    iqm, lo, hi = bench.iqm_with_interval(hns, reps=500)
    assert iqm == pytest.approx(0.7)
    assert lo <= iqm <= hi and lo >= 0.0 and hi <= 1.4
    bench.aggregate(SimpleNamespace(root=str(tmp_path), reps=500))
    out = capsys.readouterr().out
    table = out.split("IQM of human-normalised scores")[1]
    row = next(line for line in table.splitlines() if line.startswith("| drq_eps"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[:3] == ["drq_eps", "3", "0.700"]
    # Pong's seed-0 run: 0.0 human-normalised, its raw score the random one
    pong = next(line for line in out.splitlines() if line.startswith("| drq_eps | Pong"))
    assert [c.strip() for c in pong.strip("|").split("|")][:5] == ["drq_eps", "Pong", "0", "-20.7", "0.000"]
    assert [c.strip() for c in pong.strip("|").split("|")][5:7] == ["-19.3", "-9.1"]  # DER, DrQ(eps) published


def test_a_row_with_a_missing_game_is_left_out_of_the_iqm(tmp_path, capsys):
    for game, score in zip(GAMES[:4], scores_for([0.5] * 4)):
        write_run(tmp_path, f"der__{game}__seed0", score)
    bench.aggregate(SimpleNamespace(root=str(tmp_path), reps=100))
    out = capsys.readouterr().out
    assert "left out: der: finished runs per game" in out and "Asterix 0" in out


def test_learn_skips_finished_runs_and_names_one_dir_per_row_game_seed(tmp_path, monkeypatch):
    write_run(tmp_path, "der__Pong__seed0", 1.0)
    started = []
    monkeypatch.setattr(subprocess, "run", lambda cmd: started.append(cmd) or SimpleNamespace(returncode=0))
    args = SimpleNamespace(root=str(tmp_path), rows=["der"], games=["Pong"], seeds=2, first_seed=0, overrides=[])
    bench.learn(args)
    assert len(started) == 1
    cmd = started[0]
    assert "+experiment=der_atari100k" in cmd and "env.id=ALE/Pong-v5" in cmd and "seed=1" in cmd
    assert f"hydra.run.dir={tmp_path / 'der__Pong__seed1'}" in cmd


@pytest.mark.parametrize(
    "code, says", [(75, "stopped; the same command resumes it"), (3, "exit 3 (see its train.log)")]
)
def test_a_stopped_or_failed_run_ends_learn_in_one_line_with_its_code(tmp_path, monkeypatch, capsys, code, says):
    """Before: subprocess.run(check=True) raised CalledProcessError, a traceback, when a run was stopped."""
    started = []
    monkeypatch.setattr(sys, "argv", ["scripts/atari100k_bench.py", "learn"])
    monkeypatch.setattr(subprocess, "run", lambda cmd: started.append(cmd) or SimpleNamespace(returncode=code))
    args = SimpleNamespace(root=str(tmp_path), rows=["der"], games=["Pong"], seeds=2, first_seed=0, overrides=[])
    with pytest.raises(SystemExit) as exit_:
        bench.learn(args)
    err = capsys.readouterr().err.splitlines()
    assert exit_.value.code == code and len(started) == 1  # seed 1 never started
    assert err[-1] == f"atari100k_bench: {tmp_path / 'der__Pong__seed0'}: {says}; the runs after it did not start"
