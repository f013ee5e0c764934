"""device.amp / device.compile / device.cuda_graphs agree with the plain fp32 path (CPU here, CUDA if present)."""

import warnings

import pytest
import torch

from rlrun.algos.dqn import dqn_learner
from rlrun.nets.networks import QNetwork
from rlrun.replay import Batch
from rlrun.training.build import build
from rlrun.training.parts import set_group_lrs

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


def rmsprop_updates(lrs, compile_optimizer=False):
    """Updates of a centered-RMSprop learner (torch has no fused kernel for it) as `make_optimizer` builds it,
    the schedule setting the lr before each update."""
    torch.manual_seed(0)
    net = QNetwork(4, 2, hidden_sizes=[64, 64])
    optimizer = torch.optim.RMSprop(net.parameters(), lr=1e-3, alpha=0.95, eps=0.01, centered=True)
    if compile_optimizer:
        optimizer.param_groups[0]["lr"] = torch.tensor(1e-3)
    learner = dqn_learner(net, optimizer, loss="huber", tau=1.0, compile_optimizer=compile_optimizer)
    batch = make_batch("cpu")
    losses = []
    for lr in lrs:
        set_group_lrs(optimizer, [lr])
        losses.append(learner.update(batch)["td_loss"].item())
    return losses, net, learner


def test_a_compiled_optimizer_step_agrees_with_eager_and_follows_the_schedule_without_recompiling():
    """The compiled step reads the lr from the tensor the schedule fills: no recompilation per value (which
    raises here, and would be caught and reported as a fallback to eager)."""
    lrs = [1e-3, 8e-4, 6e-4, 4e-4, 2e-4, 1e-4]
    ref, ref_net, _ = rmsprop_updates(lrs)
    with torch._dynamo.config.patch(error_on_recompile=True), warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)  # the fallback's warning fails the test
        got, net, learner = rmsprop_updates(lrs, compile_optimizer=True)
    assert learner._optimizer_step is not None
    assert got == pytest.approx(ref, rel=1e-5)
    for p, q in zip(ref_net.parameters(), net.parameters()):
        torch.testing.assert_close(p, q, rtol=1e-5, atol=1e-7)


def test_a_resumed_learner_keeps_the_lr_tensor_its_step_reads():
    """A checkpoint holds the lr as its run held it (a float for an eager step); loading it must fill the
    tensor a compiled or CUDA-graphed step reads, not replace it (the schedule would then fill a tensor the
    step never reads)."""
    _, _, eager = rmsprop_updates([5e-4])
    _, _, compiled = rmsprop_updates([1e-3], compile_optimizer=True)
    read = compiled.optimizer.param_groups[0]["lr"]
    compiled.load_state_dict(eager.state_dict())
    assert compiled.optimizer.param_groups[0]["lr"] is read and read.item() == pytest.approx(5e-4)
    eager.load_state_dict(compiled.state_dict())  # and a tensor saved by a compiled run resumes an eager one
    assert isinstance(eager.optimizer.param_groups[0]["lr"], float)


def test_the_schedule_fills_each_agents_lr_tensor_in_place():
    a, b = torch.tensor(1.0), torch.tensor(1.0)
    optimizer = torch.optim.SGD(
        [{"params": [torch.nn.Parameter(torch.ones(1))], "lr": a, "agents": [0, 2]},
         {"params": [torch.nn.Parameter(torch.ones(1))], "lr": b, "agents": [2, 3]}],
        lr=1.0,
    )  # fmt: skip
    set_group_lrs(optimizer, [0.1, 0.1, 0.3])
    assert [g["lr"] for g in optimizer.param_groups] == [a, b] and (a.item(), b.item()) == pytest.approx((0.1, 0.3))
    assert all(g["lr"] is t for g, t in zip(optimizer.param_groups, (a, b)))


def test_device_compile_optimizer_builds_a_compiled_step_with_a_tensor_lr(compose):
    agents = "agents=[{seed:0,optimizer.lr:1e-3},{seed:1,optimizer.lr:2e-3}]"
    parts = build(compose("optimizer=rmsprop", "device.compile_optimizer=true", agents))
    groups = parts.learner.optimizer.param_groups
    assert parts.learner._optimizer_step is not None
    assert [round(float(g["lr"]), 6) for g in groups] == [1e-3, 2e-3]
    assert all(isinstance(g["lr"], torch.Tensor) for g in groups)


def test_a_built_run_flushes_subnormal_floats_to_zero(compose):
    """Adam's moments decay into the subnormal range, where x86 cores compute through slow microcode."""
    torch.set_flush_denormal(False)  # as in a fresh process (an earlier test's build set it)
    subnormal = torch.tensor([1e-39])
    try:
        assert (subnormal * 1.0).item() != 0.0
        parts = build(compose("total_steps=1000", "eval.interval=0"))
        parts.envs.close()
        assert (subnormal * 1.0).item() == 0.0
    finally:
        torch.set_flush_denormal(False)
