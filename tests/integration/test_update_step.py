"""The one update step (rlrun.algos.update) serves every algorithm: PQN gets what DQN has (fp16 with its loss
scaler, torch.compile, a stacked agent that turns non-finite stops alone)."""

import warnings

import pytest
import torch

from rlrun.algos.pqn import pqn_learner
from rlrun.errors import NonFiniteError
from rlrun.nets.networks import QNetwork
from rlrun.nets.stacked import stack_networks
from rlrun.replay import Batch


def pqn_batch(returns: torch.Tensor, agents: int | None = None, n: int = 16) -> Batch:
    """A PQN minibatch: lambda-returns as rewards, discounts 0 (the shape PQN's `batches` yields)."""
    g = torch.Generator().manual_seed(0)
    lead = () if agents is None else (agents,)
    obs = torch.randn(*lead, n, 4, generator=g)
    return Batch(
        obs=obs,
        actions=torch.randint(0, 2, (*lead, n), generator=g),
        rewards=returns.expand(*lead, n).clone(),
        next_obs=obs,
        discounts=torch.zeros(*lead, n),
        indices=torch.arange(n).expand(*lead, n),
        weights=None,
        age=torch.zeros(*lead, n),
    )


def nets(k: int) -> list[QNetwork]:
    out = []
    for seed in range(k):
        torch.manual_seed(seed)
        out.append(QNetwork(4, 2, hidden_sizes=[32, 32]))
    return out


def test_a_diverging_stacked_pqn_agent_stops_alone():
    """Agent 1's returns are infinite: it is recorded as failed with its state before the update and
    frozen; agent 0 keeps training (before the one update step, PQN stopped every agent)."""
    stacked = stack_networks(nets(2))
    learner = pqn_learner(stacked, torch.optim.SGD(stacked.parameters(), lr=0.1), [torch.Generator()] * 2, num_envs=1)
    before = [stacked.agent_state_dict(k) for k in range(2)]
    returns = torch.tensor([[1.0], [float("inf")]])  # (K, 1): agent 1's targets are infinite
    metrics = learner.update(pqn_batch(returns, agents=2))
    assert metrics is not None
    assert [k for k, _, _ in learner.failures] == [1]
    assert "non-finite td_loss" in learner.failures[0][1]
    after = [stacked.agent_state_dict(k) for k in range(2)]
    assert any(not torch.equal(before[0][n], after[0][n]) for n in before[0])  # agent 0 trained
    assert all(torch.equal(before[1][n], after[1][n]) for n in before[1])  # agent 1 frozen
    assert torch.equal(learner.failures[0][2]["online"]["head.weight"], before[1]["head.weight"])
    learner.failures.clear()
    learner.update(pqn_batch(torch.tensor([[1.0], [1.0]]), agents=2))  # finite again: agent 1 stays frozen
    assert all(torch.equal(before[1][n], stacked.agent_state_dict(1)[n]) for n in before[1])


def test_a_diverging_single_pqn_agent_stops_the_run():
    net = nets(1)[0]
    learner = pqn_learner(net, torch.optim.SGD(net.parameters(), lr=0.1), [torch.Generator()], num_envs=1)
    with pytest.raises(NonFiniteError, match="non-finite td_loss"):
        learner.update(pqn_batch(torch.tensor([float("inf")])))


def pqn_losses(steps: int = 6, **update) -> list[float]:
    net = nets(1)[0]
    learner = pqn_learner(
        net, torch.optim.Adam(net.parameters(), lr=1e-3), [torch.Generator()], num_envs=1, loss="mse", **update
    )
    batch = pqn_batch(torch.tensor([2.0]), n=64)
    return [learner.update(batch)["td_loss"].item() for _ in range(steps)]


def test_pqn_trains_with_fp16_and_its_loss_scaler():
    ref = pqn_losses()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = pqn_losses(amp="fp16")
    if any("not supported" in str(w.message) for w in caught):
        pytest.skip("fp16 autocast is not supported on this CPU's torch (fell back with a warning)")
    # The GradScaler starts at 2^16 and skips the first steps whose scaled gradients overflow.
    skipped = next(i for i in range(len(got) - 1) if got[i + 1] != got[i])
    assert skipped <= 3
    assert got[skipped:] == pytest.approx(ref[: len(ref) - skipped], rel=5e-2)


def test_pqn_trains_compiled():
    ref = pqn_losses()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = pqn_losses(compile=True)
    if any("torch.compile failed" in str(w.message) for w in caught):
        pytest.skip("torch.compile cannot build here (no compiler toolchain): it fell back with a warning")
    assert got == pytest.approx(ref, rel=1e-4)


def test_pqn_with_fp16_and_compile_is_a_valid_config_and_runs(compose, tmp_path):
    """Refused before the one update step; now validated and trained end to end (on the CPU either may fall
    back to the plain path with a warning)."""
    from rlrun.run import train

    cfg = compose(
        "+experiment=pqn_cartpole",
        "device.amp=fp16",
        "device.compile=true",
        "env.num_envs=2",
        "algo.num_steps=16",
        "total_steps=96",
        "eval.interval=0",
        "log.plot=false",
        "log.progress_bar=false",
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        summary = train(cfg, tmp_path / "run")
    assert summary["status"] == "finished" and summary["gradient_updates"] > 0
