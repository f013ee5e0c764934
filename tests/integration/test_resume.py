"""Checkpoints, resume, preemption, determinism and non-finite guards, with real runs."""

import json
import os
import signal
import time

import pytest
import torch
from launch import overriding, start_module
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from test_reliability import copy_run, in_process

from rlrun.errors import NonFiniteError
from rlrun.storage import checkpoint as ckpt

ARGS = [
    "algo.learning_starts=300",
    "log.interval=200",
    "eval.interval=0",
    "log.plot=false",
    "checkpoint.every=500",
    "buffer=per",
    "env.num_envs=4",
]  # 4 envs: the step counts below are whole vector steps
TIME_BASED = {"charts/SPS"}


def start(run_dir, *args):
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    return start_module("rlrun.train", *overriding(ARGS, *args), f"hydra.run.dir={run_dir}", env=env)


def finish(proc, rc=0):
    out, err = proc.communicate(timeout=600)
    assert proc.returncode == rc, err[-3000:]
    return out, err


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    """A finished 1,500-step run, shared by the module: a test that changes it works on a copy."""
    run = tmp_path_factory.mktemp("resume") / "run"
    finish(start(run, "total_steps=1500"))
    return run


def train_in_process(compose, run_dir, *args):
    import rlrun.train as rt

    return rt.train(compose(*ARGS, "log.progress_bar=false", *args), run_dir)


def scalars(run_dir):
    acc = EventAccumulator(str(run_dir), size_guidance={"scalars": 0})
    acc.Reload()
    return {t: [(e.step, e.value) for e in acc.Scalars(t)] for t in acc.Tags()["scalars"]}


def wait_for(path, proc, timeout=300):
    t0 = time.time()
    while not path.exists():
        assert proc.poll() is None, "the run ended before it could be interrupted"
        assert time.time() - t0 < timeout
        time.sleep(0.05)


def test_sigkill_then_resume_reaches_the_end_with_one_value_per_step(tmp_path):
    run = tmp_path / "run"
    proc = start(run, "total_steps=6000")
    wait_for(run / ckpt.PREVIOUS, proc)  # at least two checkpoints written
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    saved_step = torch.load(run / ckpt.LATEST, weights_only=True)["step"]
    assert 0 < saved_step < 6000

    in_process("rlrun.train", *ARGS, f"resume={run}", "total_steps=6000", rc=0)  # in this process
    summary = json.loads((run / "summary.json").read_text())
    assert summary["env_steps"] == 6000 and summary["status"] == "finished"
    tags = scalars(run)
    for tag in ["losses/td_loss", "charts/epsilon", "per/beta", "charts/mean_return_100"]:
        steps = [s for s, _ in tags[tag]]
        assert len(steps) == len(set(steps)), f"{tag} has duplicated steps"
    assert [s for s, _ in tags["charts/epsilon"]] == list(range(200, 6001, 200))
    rows = (run / "episodes.csv").read_text().splitlines()[1:]
    episode_numbers = [int(r.split(",")[1]) for r in rows]
    assert episode_numbers == list(range(1, len(rows) + 1))  # no episode lost or doubled


def test_sigterm_saves_and_resume_equals_an_uninterrupted_run(compose, tmp_path):
    """The uninterrupted run in this process, the interrupted one in a subprocess, its resume in this
    process again: the values also agree across processes."""
    whole, parts = tmp_path / "whole", tmp_path / "parts"
    train_in_process(compose, whole, "total_steps=4000")

    proc = start(parts, "total_steps=4000")
    wait_for(parts / ckpt.LATEST, proc)
    proc.send_signal(signal.SIGTERM)
    _, err = finish(proc, rc=75)
    assert "rlrun.resume" in err
    assert torch.load(parts / ckpt.LATEST, weights_only=True)["step"] < 4000
    in_process("rlrun.train", *ARGS, f"resume={parts}", rc=0)  # resumed in this process, the same values

    assert (parts / "episodes.csv").read_text() == (whole / "episodes.csv").read_text()
    a, b = torch.load(whole / "model.pt"), torch.load(parts / "model.pt")
    assert all(torch.equal(a[k], b[k]) for k in a)
    sa, sb = scalars(whole), scalars(parts)
    for tag in set(sa) - TIME_BASED:
        assert sa[tag] == sb[tag], tag


@pytest.mark.parametrize("at_step", [2000, 3000])
def test_a_signal_during_an_evaluation_stops_it_and_the_resume_runs_it_first(compose, tmp_path, monkeypatch, at_step):
    """An evaluation of long episodes can outlast a scheduler's grace after SIGTERM: the signal stops it at
    its next env step, the checkpoint owes that step's evaluation, and the resume runs it before the next
    step, so the resumed run logs what an uninterrupted one does (before: the signal waited for the whole
    evaluation). The final evaluation too: its run, at its budget, is not finished until the resume runs it
    (before: refused as finished, with neither model.pt nor summary.json)."""
    import rlrun.training.loop as loop
    from rlrun.train import Preempted

    evals = ("total_steps=3000", "eval.interval=1000", "eval.episodes=2")
    whole, parts = tmp_path / "whole", tmp_path / "parts"
    train_in_process(compose, whole, *evals)

    real, stopped_at = loop.evaluate, []

    def signal_during_the_second(q_net, envs, seeds, device, stopped, **kwargs):
        if len(stopped_at) == 0 and seeds[0] == 1_000_000 + at_step:  # seed 0
            signal.raise_signal(signal.SIGTERM)  # into the loop's handler, as from a scheduler
            returns = real(q_net, envs, seeds, device, stopped, **kwargs)
            stopped_at.append(returns)
            return returns
        return real(q_net, envs, seeds, device, stopped, **kwargs)

    monkeypatch.setattr(loop, "evaluate", signal_during_the_second)
    with pytest.raises(Preempted):
        train_in_process(compose, parts, *evals)
    assert stopped_at == [None]  # stopped before its first step
    state = torch.load(parts / ckpt.LATEST, weights_only=True)
    assert (state["step"], state["pending"]) == (at_step, ["eval"])
    assert not (parts / "summary.json").exists()
    monkeypatch.undo()

    in_process("rlrun.train", *overriding(ARGS, *evals), f"resume={parts}", rc=0)
    assert json.loads((parts / "summary.json").read_text())["status"] == "finished"
    sa, sb = scalars(whole), scalars(parts)
    assert [s for s, _ in sb["eval/mean_return"]] == [1000, 2000, 3000]
    for tag in set(sa) - TIME_BASED:
        assert sa[tag] == sb[tag], tag
    assert (parts / "episodes.csv").read_text() == (whole / "episodes.csv").read_text()


def test_a_resume_without_evaluations_owes_none(compose, tmp_path, monkeypatch):
    """A checkpoint owing an evaluation, resumed with eval.interval=0: the run goes on without it (before: a
    traceback, as no evaluation envs were built)."""
    import rlrun.training.loop as loop
    from rlrun.train import Preempted

    def signal_at_the_first(q_net, envs, seeds, device, stopped, **kwargs):
        signal.raise_signal(signal.SIGTERM)
        return real(q_net, envs, seeds, device, stopped, **kwargs)

    real, parts = loop.evaluate, tmp_path / "parts"
    monkeypatch.setattr(loop, "evaluate", signal_at_the_first)
    with pytest.raises(Preempted):
        train_in_process(compose, parts, "total_steps=2000", "eval.interval=1000", "eval.episodes=2")
    monkeypatch.undo()
    assert torch.load(parts / ckpt.LATEST, weights_only=True)["pending"] == ["eval"]
    in_process("rlrun.resume", parts, "eval.interval=0", rc=0)
    assert json.loads((parts / "summary.json").read_text())["env_steps"] == 2000
    assert "eval/mean_return" not in scalars(parts)


def test_a_solved_run_is_finished_and_a_signal_at_its_solving_step_does_not_change_it(compose, tmp_path, monkeypatch):
    """stop_on_solve: a resume of the solved run is refused in one line naming stop_on_solve=false, which trains
    it on (before: each resume trained one more vector step and rewrote model.pt); a signal arriving at the
    step that solves lets the run finish solved (before: the resume trained a step past it)."""
    args = ("total_steps=20000", "stop_on_solve=true", "env.reward_threshold=15")
    solved = tmp_path / "solved"
    summary = train_in_process(compose, solved, *args)
    assert summary["status"] == "solved"
    before = (solved / "model.pt").read_bytes()
    proc = in_process("rlrun.resume", solved, rc=2)
    assert "stop_on_solve=true stopped it" in proc.stderr and "stop_on_solve=false" in proc.stderr, proc.stderr
    assert (solved / "model.pt").read_bytes() == before
    in_process("rlrun.resume", solved, "stop_on_solve=false", "total_steps=" + str(summary["env_steps"] + 400), rc=0)
    assert json.loads((solved / "summary.json").read_text())["status"] == "finished"

    from rlrun.training.population import Population

    real = Population.episodes_end

    def signal_when_solved(self, step, episodes):
        real(self, step, episodes)
        if self.all_solved:
            signal.raise_signal(signal.SIGTERM)

    monkeypatch.setattr(Population, "episodes_end", signal_when_solved)
    signalled = train_in_process(compose, tmp_path / "signalled", *args)
    assert (signalled["status"], signalled["env_steps"]) == ("solved", summary["env_steps"])
    assert (tmp_path / "signalled" / "model.pt").read_bytes() == before


def test_two_runs_with_the_same_seed_log_identical_values(compose, tmp_path):
    """In one process (two processes give the same values: the SIGTERM test above)."""
    train_in_process(compose, tmp_path / "a", "total_steps=2000", "network=dueling")
    train_in_process(compose, tmp_path / "b", "total_steps=2000", "network=dueling")
    sa, sb = scalars(tmp_path / "a"), scalars(tmp_path / "b")
    assert set(sa) == set(sb)
    for tag in set(sa) - TIME_BASED:
        assert sa[tag] == sb[tag], tag


def test_resume_extends_a_finished_run_and_refuses_experiment_changes(finished, tmp_path):
    run = copy_run(finished, tmp_path / "run")
    err = in_process("rlrun.train", *ARGS, f"resume={run}", "network.hidden_sizes=[32]", rc=2).stderr
    assert "network.hidden_sizes" in err
    err = in_process("rlrun.resume", run, "algo.gamma=0.9", rc=2).stderr  # the value as typed and the saved one
    assert "Invalid config value algo.gamma=0.9: allowed only the saved value 0.99 when resuming" in err, err
    in_process("rlrun.train", *ARGS, f"resume={run}", "total_steps=2500", rc=0)
    assert json.loads((run / "summary.json").read_text())["env_steps"] == 2500
    assert (run / ".hydra" / "overrides.yaml").read_text().count("total_steps=1500") == 1  # original kept


def test_resume_of_a_finished_run_says_it_is_finished_and_how_to_extend_it(finished, tmp_path):
    run = copy_run(finished, tmp_path / "run")
    before = sorted(p.name for p in (run / ".hydra").iterdir()), (run / "summary.json").read_bytes()
    for command in (["rlrun.resume", str(run)], ["rlrun.train", *ARGS, f"resume={run}"]):
        err = in_process(*command, rc=2).stderr
        assert err.strip().splitlines() == [
            f"rlrun: {run} is finished: it trained 1,500 env steps of total_steps=1,500; to train it further, "
            f"resume it with a budget above the steps trained, e.g. python -m rlrun.resume {run} total_steps=3000"
        ], err
    # a budget below the steps trained: the example is above them (before: twice the budget typed, 1,000)
    err = in_process("rlrun.resume", run, "total_steps=500", rc=2).stderr
    assert "it trained 1,500 env steps, more than the asked total_steps=500; to train it further, name a larger " in err
    assert err.strip().endswith("total_steps=3000"), err
    assert (sorted(p.name for p in (run / ".hydra").iterdir()), (run / "summary.json").read_bytes()) == before


def test_corrupt_checkpoint_falls_back_to_the_previous_one(finished, tmp_path):
    run = copy_run(finished, tmp_path / "run")
    (run / ckpt.LATEST).write_bytes(b"not a checkpoint")
    state, path = ckpt.load(run)
    assert path.name == ckpt.PREVIOUS and state["step"] == 1500
    (run / ckpt.PREVIOUS).write_bytes((run / ckpt.PREVIOUS).read_bytes()[:100])  # truncated
    with pytest.raises(ckpt.CheckpointError, match="no loadable checkpoint"):
        ckpt.load(run)
    err = in_process("rlrun.train", *ARGS, f"resume={run}", "total_steps=2000", rc=2).stderr
    assert "resume" in err and "no loadable checkpoint" in err


def test_checkpoints_load_without_running_code(finished):
    state = torch.load(finished / ckpt.LATEST, weights_only=True)
    assert {"learner", "buffer", "rng", "exploration", "envs", "nstep", "loggers", "config"} <= set(state)
    assert state["buffer"]["size"] == state["buffer"]["obs"].shape[0] > 0


def test_nonfinite_loss_stops_with_a_checkpoint_from_before(tmp_path):
    from hydra import compose, initialize_config_module

    import rlrun.train as rt

    with initialize_config_module(config_module="rlrun.conf", version_base="1.3"):
        cfg = compose(
            "config",
            overrides=[
                "env.id=rlrun_tests/Exploding-v0",
                "env.num_envs=1",
                "total_steps=600",
                "algo.learning_starts=50",
                "eval.interval=0",
                "log.plot=false",
                "log.progress_bar=false",
                "buffer.n_step=1",
            ],
        )
    out = tmp_path / "run"
    out.mkdir()
    with pytest.raises(NonFiniteError, match=r"non-finite td_loss.*at env step \d+"):
        rt.train(cfg, out)
    state = torch.load(out / "nonfinite.pt", weights_only=True)
    assert all(torch.isfinite(v).all() for v in state["learner"]["online"].values())

    cfg.algo.on_nonfinite = "skip"
    summary = rt.train(cfg, tmp_path)
    assert summary["env_steps"] == 600


def test_checkpoint_from_an_incompatible_config_is_refused_clearly(compose, finished, tmp_path):
    small, big = tmp_path / "small", copy_run(finished, tmp_path / "big")
    train_in_process(compose, small, "total_steps=600", "network.hidden_sizes=[16]")
    state = torch.load(small / ckpt.LATEST, weights_only=True)
    state["config"] = torch.load(big / ckpt.LATEST, weights_only=True)["config"]  # weights of another shape
    torch.save(state, big / ckpt.LATEST)
    err = in_process("rlrun.train", *ARGS, f"resume={big}", "total_steps=900", rc=2).stderr
    assert "does not fit this config" in err


def test_runs_started_together_get_separate_directories(tmp_path):
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    args = ["total_steps=50", "eval.interval=0", "log.plot=false"]
    procs = [start_module("rlrun.train", *args, cwd=tmp_path, env=env) for _ in range(3)]
    for p in procs:
        assert p.wait(timeout=120) == 0
    runs = list((tmp_path / "outputs").iterdir())
    assert len(runs) == 3 and all((r / "summary.json").exists() for r in runs)


def test_resume_of_a_missing_directory_is_refused_without_creating_it(tmp_path):
    missing = tmp_path / "no_such_run"
    err = in_process("rlrun.train", *ARGS, f"resume={missing}", f"hydra.run.dir={tmp_path / 'unused'}", rc=2).stderr
    assert "resume" in err and "an existing run directory" in err
    assert not missing.exists()


def test_a_checkpoint_of_the_numpy_cartpole_env_resumes_though_auto_now_picks_sync(compose, tmp_path, monkeypatch):
    """`env.vectorization=auto` took the numpy CartPole env for any number of sub-envs before it took the
    sync vector env below 4 (the faster one there): such a checkpoint's env state fits only the numpy env,
    and its run resumes with it."""
    import rlrun.envs.vector as vector

    two_envs = [a for a in ARGS if not a.startswith("env.num_envs")] + ["env.num_envs=2"]
    run = tmp_path / "run"
    monkeypatch.setattr(vector, "NUMPY_CARTPOLE_FROM", 1)
    rt = __import__("rlrun.train", fromlist=["train"])
    rt.train(compose(*two_envs, "log.progress_bar=false", "total_steps=1000"), run)
    monkeypatch.undo()
    assert vector.NUMPY_CARTPOLE_FROM == 4
    in_process("rlrun.train", *two_envs, f"resume={run}", "total_steps=1600", rc=0)
    assert json.loads((run / "summary.json").read_text())["env_steps"] == 1600
