"""Population-based training in real CartPole runs: pbt.csv and the TensorBoard values follow the rounds, the
run names its best agent, and a checkpointed run resumes exactly (PBT's state and random stream included)."""

import csv
import json

import pytest
import torch
from launch import run_module, start_module

from rlrun.run import train

PBT_RUN = ("seeds=4", "+pbt=truncation", "pbt.interval=800", "pbt.fitness=train", "eval.interval=0",
           "algo.learning_starts=320", "algo.lr_end_factor=1.0", "logger=[csv]", "log.plot=false",
           "log.interval=800")  # fmt: skip


def rows(run):
    with open(run / "pbt.csv") as f:
        return list(csv.DictReader(f))


def test_a_pbt_run_records_its_rounds(compose, tmp_path, caplog):
    caplog.set_level("INFO")
    summary = train(compose(*PBT_RUN, "total_steps=3200"), tmp_path)
    events = rows(tmp_path)
    first, copies = events[:4], events[4:]
    assert [r["env_step"] for r in first] == ["0"] * 4 and [r["agent"] for r in first] == [
        f"seed={s}" for s in range(4)
    ]
    assert [int(r["env_step"]) for r in copies] == [800, 1600, 2400]  # one of 4 agents per round; none at the end
    for r in copies:
        assert r["agent"] != r["copied_from"] and float(r["fitness"]) <= float(r["source_fitness"])
    assert all(1e-4 <= float(r["optimizer.lr"]) <= 1e-2 for r in events)
    # each agent's lr over time in its own scalars (pbt/optimizer.lr), the last as pbt.csv leaves it
    for k in range(4):
        with open(tmp_path / f"seed={k}" / "scalars.csv") as f:
            lrs = [float(r["value"]) for r in csv.DictReader(f) if r["tag"] == "pbt/optimizer.lr"]
        mine = [float(r["optimizer.lr"]) for r in events if r["agent"] == f"seed={k}"]
        assert lrs[0] == mine[0] and lrs[-1] == mine[-1]
    assert "PBT best agent seed=" in caplog.text and "its schedule: 0: optimizer.lr" in caplog.text
    assert all(a["pbt_seconds"] > 0 for a in summary["agents"].values())  # its share: scripts/pbt_bench.py


def test_sigterm_then_resume_equals_an_uninterrupted_pbt_run(compose, tmp_path):
    """PBT's state (values, random stream, events, fitness bookkeeping) goes into the checkpoint that SIGTERM
    writes; the resumed run makes the same copies and ends with the same agents as an uninterrupted one."""
    import signal
    import time

    from test_reliability import in_process

    straight, parts = tmp_path / "straight", tmp_path / "parts"
    args = [*PBT_RUN, "total_steps=3200", "checkpoint.every=800"]
    train(compose(*args), straight)
    proc = start_module("rlrun.train", *args, f"hydra.run.dir={parts}")
    while not (parts / "checkpoint.pt").exists():
        assert proc.poll() is None and time.sleep(0.05) is None
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=600)
    assert proc.returncode == 75, err[-2000:]
    assert torch.load(parts / "checkpoint.pt", weights_only=True)["step"] < 3200
    in_process("rlrun.resume", parts, rc=0)
    assert (parts / "pbt.csv").read_text() == (straight / "pbt.csv").read_text()
    for k in range(4):
        a, b = (torch.load(d / f"seed={k}" / "model.pt", weights_only=True) for d in (straight, parts))
        assert all(torch.equal(a[n], b[n]) for n in a), k
        assert (straight / f"seed={k}" / "episodes.csv").read_text() == (
            parts / f"seed={k}" / "episodes.csv"
        ).read_text()
    assert json.loads((parts / "summary.json").read_text())["env_steps_per_agent"] == 3200


def test_a_signal_during_the_evaluation_a_round_ranks_by_defers_both_to_the_resume(compose, tmp_path, monkeypatch):
    """PBT ranking by greedy evaluations: a signal that stops the evaluation at a round's step leaves the
    evaluation and the round owed in the checkpoint; the resume does both first and ends as an uninterrupted
    run."""
    import signal

    from test_reliability import in_process

    import rlrun.training.loop as loop
    from rlrun.train import Preempted

    straight, parts = tmp_path / "straight", tmp_path / "parts"
    args = [*PBT_RUN, "pbt.fitness=eval", "eval.interval=800", "eval.episodes=2", "total_steps=2400"]
    train(compose(*args), straight)
    real = loop.evaluate

    def signal_at_1600(q_net, envs, seeds, device, stopped, **kwargs):
        if seeds[0] == 1_000_000 + 1600:
            signal.raise_signal(signal.SIGTERM)
        return real(q_net, envs, seeds, device, stopped, **kwargs)

    monkeypatch.setattr(loop, "evaluate", signal_at_1600)
    with pytest.raises(Preempted):
        train(compose(*args), parts)
    state = torch.load(parts / "checkpoint.pt", weights_only=True)
    assert (state["step"], state["pending"]) == (1600, ["eval", "pbt"])
    monkeypatch.undo()
    in_process("rlrun.resume", parts, rc=0)
    assert (parts / "pbt.csv").read_text() == (straight / "pbt.csv").read_text()
    for k in range(4):
        a, b = (torch.load(d / f"seed={k}" / "model.pt", weights_only=True) for d in (straight, parts))
        assert all(torch.equal(a[n], b[n]) for n in a), k


def test_a_pbt_run_resumed_without_evaluations_ranks_by_training_returns(compose, tmp_path, monkeypatch):
    """pbt.fitness=auto ranks by the greedy evaluations while they run: a resume with eval.interval=0 ranks its
    rounds by training returns (before: by the last evaluation before the resume, at every round after it)."""
    from test_reliability import in_process

    from rlrun.training.pbt import PBT

    args = [*PBT_RUN, "pbt.fitness=auto", "eval.interval=800", "eval.episodes=2", "total_steps=1600"]
    train(compose(*args), tmp_path)
    ranked_by, real = [], PBT.round

    def recording(self, trainer, step):
        ranked_by.append((step, self.eval_fitness))
        real(self, trainer, step)

    monkeypatch.setattr(PBT, "round", recording)
    in_process("rlrun.resume", tmp_path, "total_steps=3200", "eval.interval=0", rc=0)
    assert ranked_by == [(2400, None)]  # none at the end of a run (1600)


@pytest.mark.slow  # a sweep of two populations with its report: about a minute
def test_a_batched_sweep_runs_several_populations(tmp_path):
    args = ["-m", "hydra/launcher=batched", "seeds=4", "+pbt=truncation", "seed=0,4", "total_steps=1600",
            "pbt.interval=400", "algo.learning_starts=320", "eval.interval=0", "log.plot=false",
            f"hydra.sweep.dir={tmp_path}"]  # fmt: skip
    proc = run_module("rlrun.train", *args)
    assert proc.returncode == 0, proc.stderr[-3000:]
    for first in (0, 4):
        events = rows(tmp_path / f"seed={first}")
        assert [r["agent"] for r in events[:4]] == [f"seed={s}" for s in range(first, first + 4)]
        assert [int(r["env_step"]) for r in events[4:]] == [400, 800, 1200]
    assert "8 runs, the agents of 2 jobs (8 finished)" in (tmp_path / "report.md").read_text()


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # the frozen agent's numpy actor overflows until replaced
def test_a_diverging_agent_is_replaced_at_the_next_round(compose, tmp_path, caplog):
    """An lr of 1e30 overflows agent seed=3's update; PBT freezes it, copies a top agent into its slot at the
    round at step 800, and it trains on: the run and all four agents finish."""
    caplog.set_level("INFO")
    entries = ",".join(f"{{seed:{s},optimizer.lr:{lr}}}" for s, lr in enumerate([1e-3, 1e-3, 1e-3, 1e30]))
    cfg = compose(
        f"agents=[{entries}]", "pbt.initial=config", "total_steps=3200", *(o for o in PBT_RUN if o != "seeds=4")
    )
    summary = train(cfg, tmp_path / "run")
    assert "seed=3: non-finite" in caplog.text and "PBT replaces it" in caplog.text
    replaced = next(r for r in rows(tmp_path / "run") if r["agent"].endswith("seed=3") and r["env_step"] != "0")
    assert (
        replaced["env_step"] == "800"
        and replaced["fitness"] == "-inf"
        and 1e-4 <= float(replaced["optimizer.lr"]) <= 1e-2
    )
    assert summary["failed"] == 0 and all(a["status"] == "finished" for a in summary["agents"].values())
    model = torch.load(tmp_path / "run" / "optimizer.lr=1e+30" / "seed=3" / "model.pt", weights_only=True)
    assert all(torch.isfinite(v).all() for v in model.values())
