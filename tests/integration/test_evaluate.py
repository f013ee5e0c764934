"""`python -m rlrun.evaluate`: greedy returns from a run dir or a checkpoint, repeatable by seed."""

import json
import os

import pytest
from launch import run_module
from test_reliability import in_process

RUN_ARGS = ["total_steps=1500", "algo.learning_starts=300", "eval.interval=0", "log.plot=false"]


def cli(*args):
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    assert args[0] == "-m"
    return run_module(*args[1:], env=env, timeout=300)


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("eval") / "run"
    proc = cli("-m", "rlrun.train", "network=noisy", *RUN_ARGS, f"hydra.run.dir={d}")
    assert proc.returncode == 0, proc.stderr
    return d


def test_same_seed_same_evaluation_from_dir_and_checkpoint(run_dir):
    a = in_process("rlrun.evaluate", run_dir, "episodes=3", "seed=7")
    assert a.returncode == 0, a.stderr
    first = json.loads((run_dir / "evaluation.json").read_text())
    b = in_process("rlrun.evaluate", run_dir / "checkpoint.pt", "episodes=3", "seed=7")
    second = json.loads((run_dir / "evaluation.json").read_text())
    assert b.returncode == 0 and first["returns"] == second["returns"] and len(first["returns"]) == 3
    assert "mean return" in a.stdout
    assert first["mean_return"] == pytest.approx(sum(first["returns"]) / 3)
    # every call kept: one line each in evaluations.jsonl, the latest also in evaluation.json
    calls = [json.loads(line) for line in (run_dir / "evaluations.jsonl").read_text().splitlines()]
    assert [c["source"] for c in calls[-2:]] == [str(run_dir), str(run_dir / "checkpoint.pt")]
    assert calls[-1] == second and calls[-2] == first and "time" in first


def test_bad_arguments_are_clear(run_dir, tmp_path):
    proc = in_process("rlrun.evaluate", run_dir, "episodes=many")
    assert proc.returncode != 0 and "episodes must be an integer" in proc.stderr and "Traceback" not in proc.stderr
    proc = in_process("rlrun.evaluate", run_dir, "num_envs=0")
    assert proc.returncode == 2 and "num_envs must be >= 1, got 0" in proc.stderr and "Traceback" not in proc.stderr
    proc = in_process("rlrun.evaluate", tmp_path)
    assert proc.returncode != 0 and "neither a checkpoint nor a run directory" in proc.stderr


def test_video(run_dir):
    pytest.importorskip("moviepy")
    pytest.importorskip("pygame")
    for _ in range(2):  # a second recording goes to a folder of its own
        proc = cli("-m", "rlrun.evaluate", str(run_dir), "episodes=1", "video=true")
        assert proc.returncode == 0, proc.stderr
        assert proc.stderr == "", proc.stderr  # no SDL or overwrite warnings
    folders = sorted((run_dir / "videos").iterdir())
    assert len(folders) == 2 and all(len(list(f.glob("*.mp4"))) == 1 for f in folders)
    assert f"videos: {folders[-1]}" in proc.stdout
    # the recorded episodes are the evaluated ones: the same returns as an evaluation without video
    recorded = json.loads((run_dir / "evaluation.json").read_text())["returns"]
    in_process("rlrun.evaluate", run_dir, "episodes=1", rc=0)
    assert json.loads((run_dir / "evaluation.json").read_text())["returns"] == recorded


@pytest.mark.parametrize(
    "argv, says",
    [
        (["run", "video=ture"], "video must be one of true, false, 1, 0, yes, no, got 'ture'"),  # was silently false
        (["no/such/run"], "no/such/run does not exist: give a run directory, its checkpoint.pt or its model.pt"),
    ],
)
def test_a_typo_or_a_missing_path_is_one_line(tmp_path, capsys, argv, says):
    from rlrun import evaluate

    with pytest.raises(SystemExit) as stop:
        evaluate.main([str(tmp_path / argv[0]) if argv[0] == "no/such/run" else argv[0], *argv[1:]])
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.strip().endswith(says[-60:]), err


def test_a_run_with_fewer_eval_envs_than_episodes_is_evaluated_again_the_same(tmp_path):
    """eval.num_envs=2 plays 5 episodes on 2 envs (3 + 2); `rlrun.evaluate` with the run's evaluation seed
    plays them the same way (the run's layout), so it repeats the run's final evaluation."""
    d = tmp_path / "run"
    args = ["total_steps=1500", "algo.learning_starts=300", "eval.interval=1500", "eval.episodes=5"]
    proc = cli("-m", "rlrun.train", *args, "eval.num_envs=2", "log.plot=false", f"hydra.run.dir={d}")
    assert proc.returncode == 0, proc.stderr
    summary = json.loads((d / "summary.json").read_text())
    seed = 1_000_000 + summary["env_steps"]  # the run's evaluation seed: seed + 1e6 + step (1504: 8 envs a step)
    again = in_process("rlrun.evaluate", d, "episodes=5", f"seed={seed}")
    assert again.returncode == 0, again.stderr
    result = json.loads((d / "evaluation.json").read_text())
    returns = result["returns"]
    assert len(returns) == 5 and sum(returns) / 5 == pytest.approx(summary["final_eval_return"])
    assert result["num_envs"] == 2  # the layout is recorded with the returns
    # num_envs=5: one env per episode, the layout of a run without eval.num_envs: other episodes
    wide = in_process("rlrun.evaluate", d, "episodes=5", f"seed={seed}", "num_envs=5")
    result = json.loads((d / "evaluation.json").read_text())
    assert wide.returncode == 0 and result["returns"] != returns and result["num_envs"] == 5


def test_a_long_evaluation_says_how_far_it_is_in_the_run_log_and_from_the_command(
    compose, tmp_path, monkeypatch, capsys
):
    """Lines come once a minute (EvalProgress.interval); at 0, one at every step of the evaluation: the run's
    final evaluation logs them (train.log, the console) and `rlrun.evaluate` prints them on stderr."""
    from rlrun import evaluate
    from rlrun.run import train
    from rlrun.training.evaluation import EvalProgress

    monkeypatch.setattr(EvalProgress, "interval", 0.0)
    d = tmp_path / "run"
    train(compose("total_steps=608", "algo.learning_starts=300", "eval.interval=608", "eval.episodes=3"), d)  # 8 envs
    logged = [line for line in (d / "train.log").read_text().splitlines() if "rlrun: evaluation at step 608:" in line]
    assert logged and logged[-1].endswith("3/3 episodes played in 0:00"), logged
    capsys.readouterr()
    evaluate.run([str(d), "episodes=2"])
    assert capsys.readouterr().err.splitlines()[-1] == "rlrun.evaluate: 2/2 episodes played in 0:00"
