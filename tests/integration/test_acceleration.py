"""device.amp / device.compile / device.cuda_graphs agree with the plain fp32 path (CPU here, CUDA if present)."""

import warnings

import pytest
import torch

from rlrun.algos.dqn import dqn_learner
from rlrun.nets.networks import QNetwork
from rlrun.replay import Batch
from rlrun.training.build import build

DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


def make_batch(device, n=64, obs_dim=4):
    g = torch.Generator().manual_seed(1)
    return Batch(
        torch.randn(n, obs_dim, generator=g).to(device),
        torch.randint(0, 2, (n,), generator=g).to(device),
        torch.rand(n, generator=g).to(device),
        torch.randn(n, obs_dim, generator=g).to(device),
        torch.full((n,), 0.97, device=device),
        torch.arange(n, device=device),
        None,
        torch.zeros(n, device=device),
    )


def run_updates(device, steps=5, **kwargs):
    torch.manual_seed(0)
    net = QNetwork(4, 2, hidden_sizes=[64, 64], layer_norm=True).to(device)
    learner = dqn_learner(net, torch.optim.Adam(net.parameters(), lr=1e-3), loss="mse", tau=0.05, **kwargs)
    batch = make_batch(device)
    losses = [learner.update(batch)["td_loss"].item() for _ in range(steps)]
    return losses, net


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("amp,rtol", [("bf16", 5e-2), ("fp16", 5e-2)])
def test_amp_agrees_with_fp32(device, amp, rtol):
    ref, ref_net = run_updates(device)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got, net = run_updates(device, amp=amp)
    if any("not supported" in str(w.message) for w in caught):
        pytest.skip(f"{amp} autocast is not supported on {device} here (fell back with a warning)")
    # fp16's GradScaler starts at scale 2^16 and skips the first steps whose scaled gradients overflow:
    # the loss repeats while it backs off; after that the trajectory is the fp32 one.
    skipped = next(i for i in range(len(got)) if got[i + 1] != got[i]) if amp == "fp16" else 0
    assert skipped <= 3
    assert got[skipped:] == pytest.approx(ref[: len(ref) - skipped], rel=rtol)
    if skipped == 0:
        for p, q in zip(ref_net.parameters(), net.parameters()):
            torch.testing.assert_close(p, q, rtol=0.05, atol=5e-3)


@pytest.mark.parametrize("device", DEVICES)
def test_compile_agrees_with_eager(device):
    ref, ref_net = run_updates(device)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got, net = run_updates(device, compile=True)
    if any("torch.compile failed" in str(w.message) for w in caught):
        pytest.skip("torch.compile is unavailable here (fell back to eager with a warning)")
    assert got == pytest.approx(ref, rel=1e-4, abs=1e-6)
    for p, q in zip(ref_net.parameters(), net.parameters()):
        torch.testing.assert_close(p, q, rtol=1e-4, atol=1e-6)


def test_compile_failure_falls_back_with_a_warning(monkeypatch):
    def broken(fn, **kwargs):
        def raise_(*a, **k):
            raise RuntimeError("no compiler here")

        return raise_

    monkeypatch.setattr(torch, "compile", broken)
    ref, _ = run_updates("cpu", steps=2)
    with pytest.warns(UserWarning, match="torch.compile failed.*no compiler here"):
        got, _ = run_updates("cpu", steps=2, compile=True)
    assert got == ref


def test_cuda_graphs_without_cuda_warns_and_trains(tmp_path, compose):
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    import rlrun.train as rt

    cfg = compose(
        "device.cuda_graphs=true",
        "total_steps=320",
        "algo.learning_starts=100",
        "eval.interval=0",
        "log.plot=false",
        "log.progress_bar=false",
    )
    with pytest.warns(UserWarning, match="cuda_graphs=true needs a CUDA device"):
        summary = rt.train(cfg, tmp_path)
    assert summary["env_steps"] == 320


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_run_keeps_everything_on_the_device(tmp_path, compose):
    import rlrun.train as rt

    cfg = compose(
        "device=cuda",
        "buffer=per",
        "total_steps=2000",
        "algo.learning_starts=500",
        "eval.interval=0",
        "log.plot=false",
        "log.progress_bar=false",
        "log.interval=500",
    )
    parts = build(cfg)
    assert parts.buffer.obs.is_cuda and parts.buffer.tree.tree.is_cuda
    assert next(parts.learner.online.parameters()).is_cuda
    summary = rt.train(cfg, tmp_path)
    assert summary["env_steps"] == 2000
