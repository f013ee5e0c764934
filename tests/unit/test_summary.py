"""summary.json (rlrun.storage.summary): the same bytes as ever for each kind, read back as written, damage refused."""

from pathlib import Path

import pytest
from omegaconf import OmegaConf

from rlrun.storage import summary
from rlrun.storage.summary import DamagedJob
from rlrun.training.build import config_record

RUN = summary.of_run(
    status="solved",
    env_steps=100,
    episodes=7,
    final_mean_return_100=12.5,
    best_mean_return_100=13.0,
    final_eval_return=None,
    reward_threshold=10.0,
    solved_step=96,
    solved_episode=6,
    wall_time_s=4.0,
    extra={"gradient_updates": 30},
)
RUN_JSON = """{
  "status": "solved",
  "env_steps": 100,
  "episodes": 7,
  "final_mean_return_100": 12.5,
  "best_mean_return_100": 13.0,
  "final_eval_return": null,
  "reward_threshold": 10.0,
  "solved_step": 96,
  "solved_episode": 6,
  "wall_time_s": 4.0,
  "sps": 25.0,
  "gradient_updates": 30,
  "logged_to": {
    "tensorboard": {
      "logdir": "/runs/a"
    }
  }
}
"""
BATCHED_JSON = """{
  "status": "finished",
  "seeds": [
    0,
    1
  ],
  "env_steps_per_agent": 100,
  "final_mean_return_100": 12.5,
  "solved": 1,
  "failed": 1,
  "agents": {
    "0": {
      "status": "solved",
      "env_steps": 100,
      "episodes": 7,
      "final_mean_return_100": 12.5,
      "best_mean_return_100": 13.0,
      "final_eval_return": null,
      "reward_threshold": 10.0,
      "solved_step": 96,
      "solved_episode": 6,
      "wall_time_s": 4.0,
      "sps": 25.0,
      "gradient_updates": 30
    },
    "1": {
      "status": "failed",
      "env_steps": 50,
      "episodes": 1,
      "final_mean_return_100": null,
      "best_mean_return_100": null,
      "final_eval_return": null,
      "reward_threshold": null,
      "solved_step": null,
      "solved_episode": null,
      "wall_time_s": 0.0,
      "sps": null,
      "error": "loss is nan"
    }
  }
}
"""


def test_a_runs_summary_is_written_in_its_fields_order_with_two_space_indent(tmp_path):
    run = {**RUN, "logged_to": {"tensorboard": {"logdir": "/runs/a"}}}
    summary.write(tmp_path, run)
    assert (tmp_path / "summary.json").read_text() == RUN_JSON
    assert summary.read(tmp_path) == run


def test_the_run_logger_writes_that_summary(tmp_path, monkeypatch):
    """RunLogger.close goes through rlrun.storage.summary: the file of a run with no logging backend."""
    import rlrun.logs.logger

    clock = iter([100.0, 104.0])  # the logger's start, then its close: 4 s of wall time
    monkeypatch.setattr(rlrun.logs.logger.time, "perf_counter", lambda: next(clock))
    logger = rlrun.logs.logger.RunLogger(
        tmp_path, config_record(OmegaConf.create({"seed": 0})), 100, 10.0, progress_bar=False, sinks=[]
    )
    logger.episodes_end(8, [(8, 1.0, 8), (8, 3.0, 8)])
    closed = logger.close(8, extra={"gradient_updates": 2})
    assert (tmp_path / "summary.json").read_text() == (
        '{\n  "status": "finished",\n  "env_steps": 8,\n  "episodes": 2,\n  "final_mean_return_100": 2.0,\n'
        '  "best_mean_return_100": null,\n  "final_eval_return": null,\n  "reward_threshold": 10.0,\n'
        '  "solved_step": null,\n  "solved_episode": null,\n  "wall_time_s": 4.0,\n  "sps": 2.0,\n'
        '  "gradient_updates": 2\n}\n'
    )
    assert summary.read(tmp_path) == closed


def test_a_batched_runs_summary_holds_its_agents_and_their_mean_final_return(tmp_path):
    failed = summary.of_run(
        status="failed",
        env_steps=50,
        episodes=1,
        final_mean_return_100=None,
        best_mean_return_100=None,
        final_eval_return=None,
        reward_threshold=None,
        solved_step=None,
        solved_episode=None,
        wall_time_s=0.0,
        extra={"error": "loss is nan"},
    )
    joint = summary.of_agents("finished", [0, 1], 100, {"0": RUN, "1": failed}, 1)
    summary.write(tmp_path, joint)
    assert (tmp_path / "summary.json").read_text() == BATCHED_JSON
    assert summary.read(tmp_path) == joint
    assert summary.objective(joint) == 12.5


def test_a_failed_jobs_summary_is_its_status_and_error(tmp_path):
    summary.write(tmp_path, summary.of_failure("env raised"))
    assert (tmp_path / "summary.json").read_text() == '{\n  "status": "failed",\n  "error": "env raised"\n}\n'
    assert summary.read(tmp_path) == {"status": "failed", "error": "env raised"}


def test_the_objective_is_the_final_training_return_and_none_for_a_failed_or_missing_job(tmp_path):
    from rlrun.sweeps.batching import objective

    assert summary.objective(RUN) == 12.5
    assert summary.objective(summary.of_failure("x")) is None
    assert summary.objective(None) is None
    assert objective(tmp_path) is None  # a job without summary.json
    summary.write(tmp_path, RUN)
    assert objective(tmp_path) == 12.5
    summary.write(tmp_path, summary.of_failure("x"))
    assert objective(tmp_path) is None


@pytest.mark.parametrize(
    "text, message",
    [
        ('{"status": "finished", "final_eval', "summary.json is not JSON (Unterminated string"),  # cut by a full disk
        ("[1, 2]", "summary.json holds a list, not a dict"),
        ('{"status": "finished", "final_eval_return": "high"}', "summary.json: final_eval_return is 'high', not"),
        ('{"status": "finished", "solved_step": true}', "summary.json: solved_step is True, not a number"),
        ('{"status": 3}', "summary.json: status is 3, not a word"),
        (b"\xff\xfe", "summary.json is not JSON ("),
    ],
)
def test_a_damaged_summary_is_refused_naming_what_is_wrong(tmp_path, text, message):
    path = tmp_path / "summary.json"
    path.write_bytes(text) if isinstance(text, bytes) else path.write_text(text)
    with pytest.raises(DamagedJob) as refused:
        summary.read(tmp_path)
    assert str(refused.value).startswith(message)


def test_non_finite_scores_and_a_missing_status_are_read_not_refused(tmp_path):
    """NaN is what a diverged run reports (json writes it); the report names such a job instead."""
    (tmp_path / "summary.json").write_text('{"final_eval_return": NaN, "wall_time_s": 1}')
    read = summary.read(tmp_path)
    assert read["final_eval_return"] != read["final_eval_return"] and "status" not in read


def agent(solved_step, final, last_eval=500.0):
    return {"solved_step": solved_step, "final_mean_return_100": final, "final_eval_return": last_eval,
            "reward_threshold": 475.0}  # fmt: skip


def test_the_robust_objective_counts_seeds_that_solved_and_held_then_the_80th_percentile():
    agents = {
        "1000": agent(40_000, 490.0),
        "1001": agent(60_000, 480.0),
        "1002": agent(50_000, 470.0),  # solved, fell back below 475: not held
        "1003": agent(30_000, 500.0, last_eval=200.0),  # its last greedy evaluation fell back: not held
        "1004": agent(None, 300.0),  # never solved: counts the whole budget
    }
    batched = {"status": "finished", "env_steps_per_agent": 100_000, "agents": agents}
    # 2 of 5 held; steps 30k, 40k, 50k, 60k, 100k: numpy's 80th percentile 0.8 * 4 = 3.2 -> 60k + 0.2 * 40k = 68k
    assert summary.robust_score(batched) == pytest.approx(2 / 5 + (1 - 68_000 / 100_000) / 6)
    assert summary.objective(batched, "robust") == summary.robust_score(batched)
    # one more seed held always outweighs any speed: 3/5 with the whole budget beats 2/5 solved at step 0
    assert 3 / 5 + 0 > 2 / 5 + (1 - 0) / 6
    # a single run is K = 1; no threshold, or a failed job: nothing to score
    single = {"status": "finished", "env_steps": 100_000, **agent(50_000, 480.0)}
    assert summary.objective(single, "robust") == pytest.approx(1 + 0.5 / 2)
    assert summary.robust_score({**single, "reward_threshold": None}) is None
    assert summary.objective({"status": "failed", "error": "x"}, "robust") == 0.0  # none held: the worst score
    assert summary.objective(None, "robust") == 0.0  # a job that failed before its summary
    assert summary.objective(batched) is None  # the default: final_mean_return_100, which this one lacks


def test_the_tensorboard_hint_of_a_batched_launcher_group_is_its_sweep_folder(tmp_path):
    """A group of the batched launcher (`<sweep>/.batched/<group>`, resumed on its own) writes its events in
    the sweep's job folders: the hint opens the sweep (before: the group folder, which holds no events)."""
    from rlrun.training.jobs import backend_lines

    runs = [{"logged_to": {"tensorboard": {"logdir": str(tmp_path / "sw" / f"lr={lr}" / "seed=0")}}} for lr in (1, 2)]
    group = tmp_path / "sw" / ".batched" / "jobs0-1"
    assert backend_lines(runs, group) == [f"  tensorboard --logdir {tmp_path / 'sw'}"]
    assert backend_lines(runs[:1], tmp_path / "run") == [f"  tensorboard --logdir {tmp_path / 'run'}"]


def test_a_resumed_group_whose_sweep_has_a_report_says_how_to_rewrite_it(tmp_path):
    from rlrun.training.jobs import summary_lines

    agent = {"env_steps": 10, "wall_time_s": 1.0, "final_mean_return_100": 1.0, "final_eval_return": None,
             "solved_step": None, "logged_to": {}}  # fmt: skip
    group = tmp_path / "sw" / ".batched" / "jobs0-1"
    hint = f"the sweep's report is older than this run: python -m rlrun.report {tmp_path / 'sw'}"
    assert hint not in summary_lines({"status": "finished", "agents": {"0": agent}}, group)
    group.mkdir(parents=True)
    (tmp_path / "sw" / "report.md").write_text("# Sweep report")
    assert hint in summary_lines({"status": "finished", "agents": {"0": agent}}, group)


def test_a_run_without_a_reward_threshold_says_so_instead_of_solved_0():
    """MinAtar has no threshold: "solved: 0/1" read as a run that failed to solve."""
    from rlrun.training.jobs import summary_lines

    run = {"env_steps": 10, "wall_time_s": 1.0, "final_mean_return_100": 1.0, "final_eval_return": None,
           "solved_step": None, "logged_to": {}}  # fmt: skip
    assert "solved: 0/1" in summary_lines({"status": "finished", **run, "reward_threshold": 475.0}, Path("r"))
    lines = summary_lines({"status": "finished", **run, "reward_threshold": None}, Path("r"))
    assert "solved: - (the env has no reward threshold" in lines and "0/1" not in lines


def test_a_single_run_stopped_by_a_non_finite_update_leaves_its_summary(tmp_path, capsys):
    """As a sweep job does: status failed and the error (before: no summary.json, so the report and compare
    read the run as unfinished)."""
    import json

    from rlrun.errors import Exit, NonFiniteError
    from rlrun.training.jobs import run_job

    def diverges():
        raise NonFiniteError("non-finite td_loss at env step 528")

    with pytest.raises(SystemExit) as e:
        run_job(diverges, tmp_path)
    assert e.value.code == Exit.NONFINITE
    written = json.loads((tmp_path / "summary.json").read_text())
    assert written["status"] == "failed" and "non-finite td_loss" in written["error"]
    assert "non-finite td_loss" in capsys.readouterr().err


def test_returns_are_written_rounded_whatever_the_episode_count(tmp_path, monkeypatch):
    """A mean over 31 episodes was written as 26.903225806451612 beside a full window's 25.33."""
    import rlrun.logs.logger

    logger = rlrun.logs.logger.RunLogger(
        tmp_path, config_record(OmegaConf.create({"seed": 0})), 100, 10.0, progress_bar=False, sinks=[]
    )
    logger.episodes_end(31, [(i + 1, 26.0 + (i < 28), 8) for i in range(31)])  # 834 / 31
    logger.scalars(31, {"eval/mean_return": 100 / 3})
    written = logger.close(31)
    assert (written["final_mean_return_100"], written["final_eval_return"]) == (26.9, 33.33)
    assert summary.read(tmp_path)["final_mean_return_100"] == 26.9
    joint = summary.of_agents("finished", [0, 1], 100, {"0": RUN, "1": {**RUN, "final_mean_return_100": 2 / 3}}, 0)
    assert joint["final_mean_return_100"] == round((RUN["final_mean_return_100"] + 2 / 3) / 2, 2)


@pytest.mark.parametrize("sink", ["tensorboard", "csv"])
def test_a_sink_opened_on_a_relative_path_says_where_it_logged_absolutely(tmp_path, monkeypatch, sink):
    """`python -m rlrun.resume outputs/<run>` opens its sinks on the path typed: summary.json's `logged_to`
    held it relative, a fresh run's absolute."""
    from rlrun.logs.sinks.csv import CsvSink
    from rlrun.logs.sinks.tensorboard import TensorBoardSink

    monkeypatch.chdir(tmp_path)
    (tmp_path / "run").mkdir()
    opened = (TensorBoardSink if sink == "tensorboard" else CsvSink)(Path("run"))
    where = opened.close({"env_steps": 0})
    run = tmp_path / "run"
    expected = {"logdir": str(run)} if sink == "tensorboard" else {"path": str(run / "scalars.csv")}
    assert where == expected
