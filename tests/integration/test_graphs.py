"""Recorded update phases (rlrun.training.graphs): what a CUDA graph needs, checked on the CPU; the graphs on CUDA.

A step recorded in a CUDA graph must never read a value back to the host (a read during recording fails,
and one that slipped through would be frozen into the graph). On the CPU the same step code runs eagerly,
so these tests run it with every host read of a tensor made to fail.
"""

from __future__ import annotations

import contextlib
import copy

import numpy as np
import pytest
import torch

from rlrun.errors import NonFiniteError
from rlrun.training.build import build
from rlrun.training.graphs import GraphedUpdates

CONFIGS = {
    "default": [],
    "per": ["buffer=per"],
    "c51-dueling-per": ["network=c51", "network.dueling=true", "buffer=per"],
    "noisy": ["network=noisy"],
    "seeds2-per": ["seeds=2", "buffer=per"],
    "seeds2-uniform": ["seeds=2"],
}


def fill(parts, n=300, seed=0):
    """`n` random CartPole-shaped transitions per agent in the parts' replay buffer."""
    rng = np.random.default_rng(seed)
    buffer = parts.buffer
    agents = getattr(parts.learner, "agents", None) or 1
    obs = rng.normal(size=(agents * n, 4)).astype(np.float32)
    args = (
        obs,
        rng.integers(0, 2, agents * n),
        rng.normal(size=agents * n).astype(np.float32),
        obs + 0.1,
        np.full(agents * n, 0.97, dtype=np.float32),
    )
    if agents == 1:
        buffer.add(*args)
    else:
        buffer.add(np.repeat(np.arange(agents), n), *args)


@contextlib.contextmanager
def no_host_reads(monkeypatch):
    """Every way a tensor's value reaches Python fails inside the block."""

    def refuse(*args, **kwargs):
        raise AssertionError("a recorded step read a tensor back to the host")

    with monkeypatch.context() as m:
        for name in ("item", "tolist", "numpy", "__bool__", "__int__", "__float__", "__index__"):
            m.setattr(torch.Tensor, name, refuse)
        yield


@pytest.mark.parametrize("name", list(CONFIGS))
def test_a_recorded_update_phase_reads_nothing_back_to_the_host(name, compose, monkeypatch):
    cfg = compose("device=cpu", "algo.batch_size=32", *CONFIGS[name])
    parts = build(cfg)
    fill(parts)
    graphed = GraphedUpdates(parts.learner, parts.buffer, parts.frames, 32, 2, parts.generators)
    parts.buffer.prepare_graph_replay()
    before = [p.detach().clone() for p in parts.learner.online.parameters()]
    with no_host_reads(monkeypatch):
        steps = graphed._steps()
    assert len(steps) == 2 and set(steps[0]) == {"td_loss", "q_mean", "q_var", "grad_norm", "sample_age", "indices"}
    assert all(torch.isfinite(s["td_loss"]).all() for s in steps)
    assert any(not torch.equal(p, q) for p, q in zip(before, parts.learner.online.parameters()))
    parts.envs.close()


def test_graph_mode_updates_equal_eager_updates_on_the_same_batch(compose):
    cfg = compose("device=cpu", "algo.batch_size=32", "buffer=per")
    eager = build(cfg)
    fill(eager)
    graph = copy.deepcopy(eager.learner)
    graph.enter_graph_mode()
    batch = eager.buffer.sample(32, 0.5)
    for _ in range(3):
        a, b = eager.learner.update(batch), graph.update(batch)
        assert a is not None and b is not None
        for k in ("td_loss", "q_mean", "grad_norm", "priority"):
            torch.testing.assert_close(a[k], b[k], rtol=0, atol=0)
    for p, q in zip(eager.learner.online.parameters(), graph.online.parameters()):
        assert torch.equal(p, q)
    for p, q in zip(eager.learner.target.parameters(), graph.target.parameters()):
        assert torch.equal(p, q)
    eager.envs.close()


def test_sampling_from_device_counts_stays_in_the_filled_part(compose):
    cfg = compose("device=cpu", "seeds=2", "buffer.capacity=1000")
    parts = build(cfg)
    fill(parts, n=50)
    parts.buffer.keep_counts_on_device()
    parts.buffer.prepare_graph_replay()
    batch = parts.buffer.sample(4096)
    assert batch.indices.min() >= 0 and batch.indices.max() == 49  # 4096 draws cover all 50 slots
    assert len(batch.indices.unique()) == 50
    assert (batch.age >= 0).all() and (batch.age <= 49).all()
    parts.envs.close()


def test_a_non_finite_update_is_flagged_on_the_device_and_raised_at_the_check(compose):
    cfg = compose("device=cpu", "algo.batch_size=32")
    parts = build(cfg)
    fill(parts)
    parts.buffer.rewards[:] = float("inf")
    graphed = GraphedUpdates(parts.learner, parts.buffer, parts.frames, 32, 1, parts.generators)
    parts.buffer.prepare_graph_replay()
    graphed._steps()  # no exception inside the step: the flag is set on the device
    with pytest.raises(NonFiniteError, match="non-finite"):
        graphed.check()
    graphed.check()  # the flag was cleared
    parts.envs.close()


def test_graph_mode_refuses_what_cannot_be_recorded(compose):
    parts = build(compose("device=cpu", "algo.on_nonfinite=skip"))
    with pytest.raises(ValueError, match="on_nonfinite"):
        parts.learner.enter_graph_mode()
    parts.envs.close()


cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")


@cuda
@pytest.mark.parametrize("overrides", [[], ["buffer=per", "network=dueling"], ["seeds=4"], ["network=c51"]])
def test_a_cuda_graph_run_trains(tmp_path, overrides):
    import subprocess
    import sys

    out = tmp_path / "run"
    proc = subprocess.run(
        [sys.executable, "-m", "rlrun.train", "device=cuda", "device.cuda_graphs=true", "total_steps=20000",
         "log.progress_bar=false", f"hydra.run.dir={out}", *overrides],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr


@cuda
def test_the_graphed_actor_acts_as_the_eager_actor():
    from rlrun.algos.acting import GreedyActor
    from rlrun.nets.networks import QNetwork
    from rlrun.training.graphs import GraphedActor

    net = QNetwork(4, 2).cuda()
    actor = GreedyActor(net, torch.device("cuda"))
    graphed = GraphedActor(actor, (16, 4), np.dtype(np.float32), torch.device("cuda"))
    rng = np.random.default_rng(0)
    for _ in range(6):
        obs = rng.normal(size=(16, 4)).astype(np.float32)
        assert np.array_equal(graphed.act(obs), actor.act(obs))


@pytest.mark.parametrize("override", ["algo.on_nonfinite=skip", "device.amp=fp16"])
def test_cuda_graphs_refuse_what_decides_on_the_host_per_update(override, compose):
    from rlrun.config.validate import validate
    from rlrun.errors import ConfigError

    with pytest.raises(ConfigError, match=override.split("=")[0]):
        validate(compose("device.cuda_graphs=true", override))
