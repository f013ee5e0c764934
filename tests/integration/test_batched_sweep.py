"""Per-agent hyperparameters (`agents`, rlrun.training.agents) and the batched sweep launcher (hydra/launcher=batched).

Each maths piece that lets a value differ per agent is checked exactly against the single-agent code
(optimizer param groups, target lerp, clipping, n-step discounts, epsilon, PER exponents, reward scale).
Whole runs are checked as tests/test_batched.py checks seeds: short runs in which every agent plays the
same episodes as its single run, with parameters equal to 1e-4 (the batched backward pass sums in a
different order, so weights differ by float32 round-off).
"""

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from launch import run_module
from omegaconf import OmegaConf
from test_batched import SHORT as BATCHED_SHORT

from rlrun.algos import algorithm
from rlrun.algos.dqn import dqn_learner
from rlrun.algos.exploration import agent_epsilons
from rlrun.errors import ConfigError
from rlrun.nets.networks import QNetwork
from rlrun.nets.stacked import StackedQNetwork
from rlrun.nets.stacked_layers import clip_grad_norm_per_agent
from rlrun.replay import PrioritizedReplayBuffer, StackedPrioritizedReplayBuffer
from rlrun.replay.nstep import NStepAccumulator
from rlrun.training.agents import agent_param_groups, link_view_grads

K = 3


@pytest.mark.parametrize(
    "cls,kwargs",
    [
        (torch.optim.Adam, {"fused": True}),
        (torch.optim.Adam, {}),
        (torch.optim.RMSprop, {"alpha": 0.95, "eps": 1e-2, "centered": True}),
        (torch.optim.SGD, {"momentum": 0.9}),
    ],
)
def test_per_agent_param_groups_step_exactly_as_separate_optimizers(cls, kwargs):
    """Agents that share an lr share a param group (a slice of the stacked tensors); each agent still
    steps exactly as its own optimizer would."""
    torch.manual_seed(0)
    lrs = [1e-3, 1e-3, 3e-3, 2e-2, 2e-2, 1e-3]
    K = len(lrs)
    shapes = [(5, 7), (1, 7), (8, 16), (128,)]  # per-agent sizes 35 and 7: a view per agent; 128: one per group
    stacked = [torch.nn.Parameter(torch.randn(K, *shape)) for shape in shapes]
    singles = [[torch.nn.Parameter(p.detach()[k].clone()) for p in stacked] for k in range(K)]
    optimizer = cls(agent_param_groups(stacked, lrs, [1.0] * K), **kwargs)
    assert [g["agents"] for g in optimizer.param_groups] == [[0, 2], [2, 3], [3, 5], [5, 6]]
    assert [len(g["params"]) for g in optimizer.param_groups] == [2 + 2 + 1 + 1, 4, 6, 4]
    link_view_grads(optimizer, stacked)
    single_opts = [cls(singles[k], lr=lrs[k], **kwargs) for k in range(K)]
    for _ in range(20):
        grads = [torch.randn_like(p) for p in stacked]
        optimizer.zero_grad(set_to_none=True)
        sum((p * g).sum() for p, g in zip(stacked, grads)).backward()  # the grads arrive on the stacked tensors
        for group in optimizer.param_groups:  # an lr schedule writes each group's lr
            group["lr"] *= 0.99
        optimizer.step()
        for k in range(K):
            single_opts[k].param_groups[0]["lr"] *= 0.99
            for p, g in zip(singles[k], grads):
                p.grad = g[k].clone()
            single_opts[k].step()
        assert all(p.grad is None for p in stacked)  # dropped after the step: the next backward starts at 0
    for k in range(K):
        for p, s in zip(stacked, singles[k]):
            assert torch.equal(p.detach()[k], s.detach())  # bitwise: the same elementwise step


def make_nets():
    torch.manual_seed(0)
    return [QNetwork(4, 2, hidden_sizes=(16,)) for _ in range(K)]


def test_per_agent_tau_lerps_each_agent_as_its_single_run():
    nets = make_nets()
    taus = [0.05, 0.5, 1.0]
    stacked = StackedQNetwork(nets)
    learner = dqn_learner(stacked, torch.optim.SGD(stacked.parameters(), lr=0.1), tau=taus)
    singles = [dqn_learner(n, torch.optim.SGD(n.parameters(), lr=0.1), tau=t) for n, t in zip(nets, taus)]
    with torch.no_grad():
        for p in stacked.parameters():
            p.add_(torch.randn_like(p))
        for k, s in enumerate(singles):
            s.online.load_state_dict(stacked.agent_state_dict(k))
    learner.sync_target()
    for k, s in enumerate(singles):
        s.sync_target()
        target = learner.target.agent_state_dict(k)
        for name, value in s.target.state_dict().items():
            assert torch.equal(target[name], value), name


def test_per_agent_clipping_thresholds():
    grads = [torch.randn(K, 5, 7) * 10, torch.randn(K, 1, 7) * 10]
    params = [torch.zeros_like(g, requires_grad=True) for g in grads]
    for p, g in zip(params, grads):
        p.grad = g.clone()
    limits = torch.tensor([1.0, float("inf"), 0.5])  # inf: algo.max_grad_norm=null for agent 1
    clip_grad_norm_per_agent(params, limits)
    for k, limit in enumerate(limits.tolist()):
        single = [torch.zeros_like(g[k], requires_grad=True) for g in grads]
        for p, g in zip(single, grads):
            p.grad = g[k].clone()
        torch.nn.utils.clip_grad_norm_(single, limit)
        for p, s in zip(params, single):
            assert torch.allclose(p.grad[k], s.grad, rtol=1e-6), k
    assert torch.equal(params[0].grad[1], grads[0][1])  # unclipped: untouched


def nstep_step(acc, rewards, ended):
    m = len(rewards)
    obs = np.zeros((m, 1), dtype=np.float32)
    return acc.step(obs, np.zeros(m, dtype=np.int64), np.asarray(rewards), obs, ended, np.zeros(m, dtype=bool))


@pytest.mark.parametrize("n", [1, 3])
def test_nstep_discounts_per_env(n):
    """Env 0 with gamma 0.5, env 1 with 0.9: each env's transitions equal an accumulator with its gamma alone."""
    both = NStepAccumulator(2, n, [0.5, 0.9], (1,))
    alone = [NStepAccumulator(1, n, g, (1,)) for g in (0.5, 0.9)]
    rewards = [1.0, 2.0]
    for t in range(6):
        ended = np.array([t == 3, False])
        out = nstep_step(both, rewards, ended)
        for i, acc in enumerate(alone):
            one = nstep_step(acc, rewards[i : i + 1], ended[i : i + 1])
            mine = both.last_envs == i if out is not None else np.zeros(0, dtype=bool)
            if one is None:
                assert not mine.any()
                continue
            assert np.array_equal(out[2][mine], one[2]) and np.array_equal(out[4][mine], one[4])


def test_nstep_full_window_per_env_by_hand():
    """R = r (1 + g + g^2), discount g^3, with each env's own g."""
    acc = NStepAccumulator(2, 3, [0.5, 0.9], (1,))
    no = np.zeros(2, dtype=bool)
    assert nstep_step(acc, [1.0, 2.0], no) is None and nstep_step(acc, [1.0, 2.0], no) is None
    _, _, ret, _, disc = nstep_step(acc, [1.0, 2.0], no)
    assert np.allclose(ret, [1.75, 2.0 * 2.71]) and np.allclose(disc, [0.125, 0.729])


def test_agent_epsilons_are_each_agents_schedule():
    eps = agent_epsilons("linear", [1.0, 0.5], [0.1, 0.0], [100, 1000], 2, 50)
    assert eps.shape == (2, 1) and np.allclose(eps.ravel(), [0.55, 0.475])
    assert np.allclose(agent_epsilons("linear", 1.0, 0.0, [10, 20], 2, 15).ravel(), [0.0, 0.25])


def test_per_agent_per_exponents_equal_single_buffers():
    capacity, batch, alphas, betas = 40, 8, [0.4, 0.7, 0.5], [0.3, 0.5, 1.0]
    gens = lambda: [torch.Generator().manual_seed(10 + k) for k in range(K)]  # noqa: E731
    singles = [
        PrioritizedReplayBuffer(capacity, (2,), generator=g, alpha=a, beta_start=b)
        for g, a, b in zip(gens(), alphas, betas)
    ]
    stacked = StackedPrioritizedReplayBuffer(K, capacity, (2,), gens(), alpha=alphas, beta_start=betas)
    rng = np.random.default_rng(0)
    for step in range(30):
        agent = np.repeat(np.arange(K), 2)
        t = (
            rng.normal(size=(6, 2)).astype(np.float32),
            rng.integers(0, 3, 6),
            rng.normal(size=6).astype(np.float32),
            rng.normal(size=(6, 2)).astype(np.float32),
            rng.random(6).astype(np.float32),
        )
        stacked.add(agent, *t)
        for k, single in enumerate(singles):
            single.add(*(v[agent == k] for v in t))
        if step >= 5:
            beta = stacked.beta(step * 10, 1000)
            got = stacked.sample(batch, beta)
            td = torch.from_numpy(rng.normal(size=(K, batch)).astype(np.float32))
            stacked.update_priorities(got.indices, td)
            for k, single in enumerate(singles):
                assert beta[k] == single.beta(step * 10, 1000)
                want = single.sample(batch, single.beta(step * 10, 1000))
                assert torch.equal(got.indices[k], want.indices) and torch.equal(got.weights[k], want.weights)
                single.update_priorities(want.indices, td[k])


def test_reward_scale_per_sub_env():
    from rlrun.envs.vector import make_vector_env

    envs = make_vector_env("CartPole-v1", 4, reward_scale=[1.0, 1.0, 0.5, 2.0])
    envs.reset(seed=0)
    _, rewards, *_ = envs.step(np.zeros(4, dtype=np.int64))
    assert rewards.tolist() == [1.0, 1.0, 0.5, 2.0]
    envs.close()


@pytest.mark.parametrize(
    "override,key",
    [
        ("agents=[{network.dueling:true},{seed:1}]", "agents[0].network.dueling"),
        ("agents=[{optimizer.lr:-1},{seed:1}]", "agents[0].optimizer.lr"),
        ("agents=[{buffer.alpha:0.5},{seed:1}]", "agents[0].buffer.alpha"),
        ("agents=[{seed:1}]", "agents"),
        ("agents=[{seed:1},{seed:1}]", "agents"),
    ],
)
def test_bad_agents_lists_are_refused_by_key(compose, override, key):
    from rlrun.config.validate import validate

    with pytest.raises(ConfigError) as e:
        validate(compose(override))
    assert str(e.value).startswith(f"Invalid config value {key}=")


SHORT = [*BATCHED_SHORT, "total_steps=1500", "eval.interval=750"]
# Every batchable key differs between the agents (besides the seed), with values that act within the
# horizon: clipping that bites, a fast target, a short exploration schedule, a decaying lr.
AGENTS = {
    "dqn": [
        {
            "seed": 5,
            "optimizer.lr": 1e-3,
            "algo.gamma": 0.9,
            "algo.tau": 0.5,
            "algo.max_grad_norm": 0.5,
            "exploration.start": 0.8,
            "exploration.end": 0.1,
            "exploration.duration": 800,
            "env.reward_scale": 0.5,
        },
        {
            "seed": 6,
            "optimizer.lr": 3e-3,
            "algo.lr_end_factor": 1.0,
            "algo.gamma": 0.99,
            "algo.tau": 0.05,
            "algo.max_grad_norm": None,
            "exploration.end": 0.0,
            "env.reward_scale": 2.0,
        },
    ],  # fmt: skip
    "per": [
        {"seed": 5, "buffer.alpha": 0.4, "buffer.beta_start": 0.2},
        {"seed": 5, "buffer.alpha": 0.8, "buffer.beta_start": 0.6, "optimizer.lr": 5e-4},
    ],
}


def flow(entry):
    return "{" + ",".join(f"{k}:{'null' if v is None else v}" for k, v in entry.items()) + "}"


def train_in_process(compose, tmp_path, name, *overrides):
    from rlrun.train import train

    out = tmp_path / name
    train(compose(*SHORT, *overrides), out)
    return out


@pytest.mark.parametrize("variant", ["dqn", "per"])
def test_each_agent_with_its_own_values_is_its_single_run(compose, tmp_path, variant):
    extra = ["buffer=per", "algo.loss=huber"] if variant == "per" else []
    entries = AGENTS[variant]
    batched = train_in_process(compose, tmp_path, "batched", *extra, f"agents=[{','.join(map(flow, entries))}]")
    dirs = sorted(p.parent for p in batched.rglob("episodes.csv"))
    assert len(dirs) == 2
    for k, entry in enumerate(entries):
        own = [f"{key}={'null' if v is None else v}" for key, v in entry.items()]
        single = train_in_process(compose, tmp_path, f"single{k}", *extra, *own)
        label = "/".join(f"{key}={entry[key]}" for key in sorted(entry) if key != "seed")
        agent = batched / label / f"seed={entry['seed']}"
        assert (agent / "episodes.csv").read_text() == (single / "episodes.csv").read_text()
        a, s = (json.loads((d / "summary.json").read_text()) for d in (agent, single))
        for key in ("episodes", "final_mean_return_100", "final_eval_return", "env_steps"):
            assert a[key] == s[key], key
        a_model, s_model = (torch.load(d / "model.pt", weights_only=True) for d in (agent, single))
        for name in s_model:
            assert torch.allclose(a_model[name], s_model[name], atol=1e-4), name


def test_a_diverging_agent_stops_alone(compose, tmp_path):
    """An lr of 1e30 overflows agent 1's Q-values at its second update; agent 0 trains on unchanged."""
    entries = [{"seed": 3, "optimizer.lr": 1e-3}, {"seed": 3, "optimizer.lr": 1e30}]
    batched = train_in_process(compose, tmp_path, "batched", f"agents=[{','.join(map(flow, entries))}]")
    good, bad = (batched / f"optimizer.lr={e['optimizer.lr']}" / "seed=3" for e in entries)
    bad_summary = json.loads((bad / "summary.json").read_text())
    assert bad_summary["status"] == "failed" and "non-finite" in bad_summary["error"]
    assert bad_summary["env_steps"] < 1500 and (bad / "nonfinite.pt").exists() and (bad / "model.pt").exists()
    state = torch.load(bad / "nonfinite.pt", weights_only=True)
    assert all(torch.isfinite(v).all() for v in state["online"].values())  # the state before the bad update
    top = json.loads((batched / "summary.json").read_text())
    assert top["failed"] == 1 and top["status"] == "finished"
    single = train_in_process(compose, tmp_path, "single", "seed=3", "optimizer.lr=1e-3")
    assert (good / "episodes.csv").read_text() == (single / "episodes.csv").read_text()
    assert json.loads((good / "summary.json").read_text())["status"] == "finished"


def test_jobs_group_by_everything_but_batchable_keys(compose):
    from rlrun.sweeps.batching import plan_chunks

    cfgs = [
        compose(f"optimizer.lr={lr}", f"seed={seed}", f"network.hidden_sizes={h}")
        for h in ("[32]", "[64]")
        for lr in (1e-3, 3e-3)
        for seed in (0, 1, 2)
    ]
    cfgs.append(compose("seeds=2"))  # runs alone: it is already a batched run
    cfgs.append(compose("algo.batch_size=64"))
    assert plan_chunks(cfgs, max_agents=64, n_jobs=1) == [list(range(6)), list(range(6, 12)), [12], [13]]
    assert plan_chunks(cfgs, max_agents=4, n_jobs=1) == [[0, 1, 2], [3, 4, 5], [6, 7, 8], [9, 10, 11], [12], [13]]
    assert plan_chunks(cfgs[:6], max_agents=64, n_jobs=2) == [[0, 1, 2], [3, 4, 5]]


def sweep(tmp_path, name, *launcher):
    args = [
        "-m",
        "optimizer.lr=1e-3,3e-3",
        "seed=0,1",
        "device=cpu",
        "total_steps=600",
        "algo.learning_starts=200",
        "eval.interval=0",
        "log.plot=false",
        "checkpoint.every=0",
        "network.hidden_sizes=[32]",
        *launcher,
        f"hydra.sweep.dir={tmp_path / name}",
    ]
    proc = run_module("rlrun.train", *args)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return tmp_path / name


def test_grouped_sweep_reports_as_the_basic_launcher(tmp_path):
    import pandas as pd

    from rlrun.report import load_sweep

    basic = sweep(tmp_path, "basic")
    batched = sweep(tmp_path, "batched", "hydra/launcher=batched", "hydra.launcher.max_agents=3")
    reports = [pd.read_csv(d / "report.csv").drop(columns="wall_time_s_mean") for d in (basic, batched)]
    pd.testing.assert_frame_equal(*reports)
    jobs = [load_sweep(d).set_index("configuration").sort_values("job") for d in (basic, batched)]
    for key in ("status", "episodes", "final_mean_return_100", "env_steps"):
        assert jobs[0][key].tolist() == jobs[1][key].tolist(), key
    jobs_dirs = sorted(p.parent for p in basic.rglob("episodes.csv"))
    assert len(jobs_dirs) == 4
    for job in jobs_dirs:  # each job directory as its own run left it
        twin = batched / job.relative_to(basic)
        assert (twin / "episodes.csv").read_text() == (job / "episodes.csv").read_text()
        assert (twin / ".hydra" / "config.yaml").read_text() == (job / ".hydra" / "config.yaml").read_text()
        assert {p.name for p in twin.iterdir()} >= {"model.pt", "summary.json", ".hydra"}
    groups = sorted(p.name for p in (batched / ".batched").iterdir())
    assert groups == ["jobs0-1", "jobs2-3"]  # max_agents=3: the 4 jobs as two processes of 2
    assert (batched / ".batched" / "jobs0-1" / "checkpoint.pt").exists()  # python -m rlrun.resume <group>
    assert not (basic / ".batched").exists() and Path(basic).exists()


@pytest.mark.parametrize("variant", ["dqn", "per"])
def test_values_read_from_the_entries_equal_the_agents_composed_configs(compose, variant):
    """`agents.values` reads each key from the entries and the run's config; composing each agent's
    whole config (what it stands for) gives the same value, or list of values, for every batchable key."""
    from rlrun.training import agents

    extra = ["buffer=per"] if variant == "per" else []
    cfg = compose(*extra, f"agents=[{','.join(map(flow, AGENTS[variant]))}]")
    configs = agents.agent_configs(cfg)
    for key in algorithm(cfg.algo).batchable:
        if OmegaConf.select(cfg, key, default="<absent>") != "<absent>":
            assert agents.values(cfg, key) == agents.per_agent(configs, key), key
