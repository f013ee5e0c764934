"""Every way into `python -m rlrun.train` checks before it writes (issue 28): `--config-dir`, `--config-name`
and `--config-path` compose, check and claim the run directory as the plain command does; an env that raises
in `step()` is one line and exit 5, its run removed or kept at its last checkpoint; a run that logged to no
backend says where its data is."""

import json
import os
from pathlib import Path

import pytest
import torch
from launch import run_module
from test_reliability import ENV, TINY, cli, digest, in_process, train

from rlrun.errors import Exit
from rlrun.training import jobs

CONF = Path(__file__).resolve().parents[2] / "conf"  # rlrun's own configs (the package rlrun.conf)
TESTS = Path(__file__).resolve().parent


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory):
    """A finished run that logged to no backend (logger=[]), and what the command printed."""
    run = tmp_path_factory.mktemp("runs") / "run"
    proc = train(f"hydra.run.dir={run}", "logger=[]", rc=0)
    return run, proc.stdout


@pytest.fixture(scope="module")
def config_dir(tmp_path_factory):
    """A user's config directory: a config extending rlrun's, and an experiment of its own."""
    d = tmp_path_factory.mktemp("conf")
    (d / "mine.yaml").write_text("defaults:\n  - config\n  - _self_\n\nexp_name: mine\n")
    (d / "experiment").mkdir()
    (d / "experiment" / "short.yaml").write_text("# @package _global_\ntotal_steps: 320\n")
    return d


ENTRY_PATHS = {
    "config-dir": lambda d: ["--config-dir", d, "+experiment=short"],
    "config-dir and config-name": lambda d: ["--config-dir", d, "--config-name", "mine"],
    "config-name": lambda d: ["--config-name", "config"],
    "config-path": lambda d: ["--config-path", CONF],
    "config-path relative to rlrun.cli": lambda d: ["--config-path", "conf"],
}


def train_with(flags, *args, rc=None, run=cli):
    """A tiny run with Hydra's flags first (its parser takes no flag after the overrides)."""
    return run("rlrun.train", *flags, *TINY, *args, rc=rc)


@pytest.mark.parametrize("path", ENTRY_PATHS)
def test_every_entry_path_refuses_a_run_directory_and_a_bad_value_before_writing(
    finished_run, config_dir, tmp_path, path
):
    flags = ENTRY_PATHS[path](config_dir)
    run, _ = finished_run
    before = digest(run)
    proc = train_with(flags, f"hydra.run.dir={run}", rc=2, run=in_process)
    assert "already holds a run" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert digest(run) == before, "a new run wrote into a finished run"
    fresh = tmp_path / "fresh"
    proc = train_with(flags, "algo.gamma=1.5", f"hydra.run.dir={fresh}", rc=2, run=in_process)
    assert "algo.gamma" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert not fresh.exists(), "a refused command left files behind"


def test_a_user_config_still_runs_and_the_other_flags_still_work(config_dir, tmp_path):
    run = tmp_path / "mine"
    flags = ["--config-dir", config_dir, "--config-name", "mine"]
    train_with(flags, "logger=[]", f"hydra.run.dir={run}", rc=0)
    assert "exp_name: mine" in (run / ".hydra" / "config.yaml").read_text()
    assert "exp_name: mine" in in_process("rlrun.train", *flags, "--cfg", "job", rc=0).stdout
    assert "exp_name: mine" in in_process("rlrun.train", *flags, "--help", rc=0).stdout
    assert "Hydra" in in_process("rlrun.train", *flags, "--info", rc=0).stdout
    for bad in (["--config-path", "no_such_dir"], ["--config-dir", tmp_path / "missing"]):
        proc = in_process("rlrun.train", *bad, f"hydra.run.dir={tmp_path / 'never'}", rc=2)
        assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    proc = in_process("rlrun.train", "--experimental-rerun", tmp_path / "config.pickle", rc=2)
    assert "rlrun.resume" in proc.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mine"]


# --- an env that raises in step() ---------------------------------------------------------------------


def with_raising_env(module, *args, cwd=None):
    """`python -m <module> args` after importing tests/raising_env.py, as a user's package registering its env."""
    env = {**ENV, "PYTHONPATH": os.pathsep.join([str(TESTS), ENV.get("PYTHONPATH", "")])}
    return run_module(module, *args, cwd=cwd, env=env, first="raising_env")


def one_line(proc, rc, says):
    assert proc.returncode == rc, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert says in proc.stderr, proc.stderr


def test_an_env_that_raises_before_the_first_checkpoint_leaves_no_directory(tmp_path):
    run = tmp_path / "run"
    proc = with_raising_env("rlrun.train", *TINY, "env.id=rlrun_tests/RaisesEarly-v0", f"hydra.run.dir={run}")
    one_line(proc, Exit.ENV_FAILED, "rlrun: the env rlrun_tests/RaisesEarly-v0 raised in step(): ValueError: simulated")
    assert "removed" in proc.stderr and not run.exists()


def test_an_env_that_raises_after_a_checkpoint_keeps_it_and_the_run_resumes(tmp_path):
    run = tmp_path / "run"
    proc = with_raising_env("rlrun.train", *TINY, "env.id=rlrun_tests/RaisesLate-v0", f"hydra.run.dir={run}")
    one_line(proc, Exit.ENV_FAILED, "rlrun: the env rlrun_tests/RaisesLate-v0 raised in step(): ValueError: simulated")
    assert "python -m rlrun.resume" in proc.stderr
    assert torch.load(run / "checkpoint.pt", weights_only=True)["step"] == 320
    # a new process (here the test's, with the env registered as the subprocess had it): the env raises 496
    # steps after the resumed step 320, past total_steps
    import raising_env  # noqa: F401

    in_process("rlrun.resume", run, rc=0)
    assert json.loads((run / "summary.json").read_text())["env_steps"] == 640
    steps = [int(r.split(",")[0]) for r in (run / "episodes.csv").read_text().splitlines()[1:]]
    assert steps == sorted(steps) and max(steps) > 320


@pytest.mark.slow  # a sweep (~15 s); a failing sweep job is in test_sweeps
def test_an_env_that_raises_fails_its_sweep_job_alone(tmp_path):
    proc = with_raising_env(
        "rlrun.train", "-m", *TINY, "env.id=rlrun_tests/RaisesEarly-v0", "seed=0,1", f"hydra.sweep.dir={tmp_path}/s"
    )
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    summaries = sorted((tmp_path / "s").rglob("summary.json"))
    assert len(summaries) == 2
    for summary in summaries:
        assert json.loads(summary.read_text())["status"] == "failed"
        assert "ValueError: simulated failure" in (summary.parent / "error.txt").read_text()
    assert proc.stderr.count("raised in step(): ValueError") == 2


# --- where the run's data is --------------------------------------------------------------------------


def test_a_run_without_a_logging_backend_does_not_point_to_tensorboard(finished_run):
    run, printed = finished_run
    assert not list(run.glob("events.out.tfevents.*"))
    assert "tensorboard" not in printed and "no logging backend: see episodes.csv and summary.json" in printed
    summary = json.loads((run / "summary.json").read_text())
    assert "tensorboard" not in jobs.summary_lines(summary, run)
    logged = {**summary, "logged_to": {"tensorboard": {"logdir": str(run)}}}
    assert f"tensorboard --logdir {run}" in jobs.summary_lines(logged, run)
