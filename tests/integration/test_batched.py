"""Many seeds in one process (`seeds=K`): each stacked agent is the single-seed run with its seed.

Tolerance, stated once: the stacked forward pass is bitwise equal to the single network's (checked
exactly below; the dueling value head, a matrix-vector product for one agent, differs by round-off),
but the backward pass of a batched matmul sums in a different order than a plain one, so parameters
drift apart by float32 round-off (about 1e-9 after one update, 1e-7 after fifty). Replay contents,
sampled indices and PER weights are exact. Short real runs therefore match step for step (identical
episodes and evaluation returns) with parameters equal to 1e-4.
"""

import copy
import json

import numpy as np
import pytest
import torch
from launch import run_module
from test_reliability import in_process
from torch import nn

from rlrun.algos.dqn import dqn_learner
from rlrun.errors import ConfigError
from rlrun.evaluate import run as evaluate_run
from rlrun.nets.networks import QNetwork
from rlrun.nets.stacked import StackedQNetwork, VmapQNetwork, stack_networks
from rlrun.nets.stacked_layers import clip_grad_norm_per_agent
from rlrun.replay import (
    Batch,
    PrioritizedReplayBuffer,
    ReplayBuffer,
    StackedPrioritizedReplayBuffer,
    StackedReplayBuffer,
)
from rlrun.run import train

K = 3


def random_batch(gen, size=32):
    """K agents' batches of random CartPole-shaped transitions (discount 0.9, importance weights in [0, 1))."""
    return Batch(
        torch.randn(K, size, 4, generator=gen),
        torch.randint(0, 2, (K, size), generator=gen),
        torch.randn(K, size, generator=gen),
        torch.randn(K, size, 4, generator=gen),
        torch.full((K, size), 0.9),
        torch.zeros(K, size, dtype=torch.long),
        torch.rand(K, size, generator=gen),
        torch.zeros(K, size),
    )


def assert_updates_match(learner, singles, batch, names, atol, priority_tol=None):
    """One update of the stacked learner and of each single one on its agent's rows: the same metrics."""
    metrics = learner.update(batch)
    for k, single in enumerate(singles):
        m = single.update(Batch(*[None if t is None else t[k] for t in batch]))
        for name in names:
            assert torch.allclose(metrics[name][k], m[name], rtol=1e-4, atol=atol), name
        if priority_tol is not None:  # (rtol, atol)
            assert torch.allclose(metrics["priority"][k], m["priority"], *priority_tol)


def make_nets(dueling=False, layer_norm=True):
    torch.manual_seed(0)
    return [QNetwork(4, 2, hidden_sizes=(32, 32), dueling=dueling, layer_norm=layer_norm) for _ in range(K)]


@pytest.mark.parametrize("dueling,layer_norm", [(False, True), (True, True), (True, False)])
def test_stacked_network_is_each_agent_exactly(dueling, layer_norm):
    nets = make_nets(dueling, layer_norm)
    stacked = StackedQNetwork(copy.deepcopy(nets))
    x = torch.randn(K, 64, 4)
    out = stacked(x)
    assert out.shape == (K, 64, 2)
    for k, net in enumerate(nets):
        # One agent's batched matmul and its own linear layer sum in the same order where the CPU's GEMM
        # kernels agree (bitwise on AVX-512 Xeons); on others (AVX2 EPYCs) a small output layer may differ
        # by an ulp, and the dueling head's 1-output value layer is a matrix-vector product: round-off only.
        # Whole runs still play the same episodes as their single runs on both
        # (test_each_agent_of_a_batched_run_is_its_single_seed_run).
        assert torch.allclose(out[k], net(x[k]), rtol=0, atol=1e-6)
        state = stacked.agent_state_dict(k)
        assert state.keys() == net.state_dict().keys()
        fresh = QNetwork(4, 2, hidden_sizes=(32, 32), dueling=dueling, layer_norm=layer_norm)
        fresh.load_state_dict(state)
        assert torch.equal(fresh(x[k]), net(x[k]))


def test_gradient_clipping_is_per_agent():
    scale = torch.tensor([0.01, 1.0, 100.0]).view(K, 1, 1)  # agent 0 far below max_norm, agent 2 far above
    grads = [torch.randn(K, 5, 7) * scale, torch.randn(K, 1, 7) * scale]
    params = [torch.zeros_like(g, requires_grad=True) for g in grads]
    for p, g in zip(params, grads):
        p.grad = g.clone()
    norms = clip_grad_norm_per_agent(params, max_norm=1.0)
    for k in range(K):
        single = [torch.zeros_like(g[k], requires_grad=True) for g in grads]
        for p, g in zip(single, grads):
            p.grad = g[k].clone()
        expected = nn.utils.clip_grad_norm_(single, 1.0)
        assert torch.allclose(norms[k], expected, rtol=1e-6)
        for p, s in zip(params, single):
            assert torch.allclose(p.grad[k], s.grad, rtol=1e-6, atol=1e-9)
    assert norms[0] < 1.0 and norms[2] > 1.0  # one agent clipped, another not: independent


def test_stacked_updates_match_single_agent_updates():
    nets = make_nets(dueling=True)
    stacked = StackedQNetwork(copy.deepcopy(nets))
    adam = lambda params: torch.optim.Adam(params, lr=1e-3)  # noqa: E731
    singles = [dqn_learner(n, adam(n.parameters()), loss="huber", tau=0.1, max_grad_norm=0.5) for n in nets]
    learner = dqn_learner(stacked, adam(stacked.parameters()), loss="huber", tau=0.1, max_grad_norm=0.5)
    gen = torch.Generator().manual_seed(1)
    for _ in range(50):
        assert_updates_match(
            learner, singles, random_batch(gen), ("td_loss", "q_mean", "q_var", "grad_norm"), 1e-6, (1e-5, 1e-5)
        )
    for k, single in enumerate(singles):
        for which, net in (("online", stacked), ("target", learner.target)):
            agent = net.agent_state_dict(k)
            for name, value in getattr(single, which).state_dict().items():
                assert torch.allclose(agent[name], value, atol=1e-5), (which, name)


@pytest.mark.parametrize("prioritized", [False, True])
def test_stacked_replay_holds_and_samples_what_single_buffers_do(prioritized):
    capacity, batch = 50, 16
    rng = np.random.default_rng(0)
    gens = lambda: [torch.Generator().manual_seed(10 + k) for k in range(K)]  # noqa: E731
    if prioritized:
        singles = [PrioritizedReplayBuffer(capacity, (2,), generator=g, alpha=0.7) for g in gens()]
        stacked = StackedPrioritizedReplayBuffer(K, capacity, (2,), gens(), alpha=0.7)
    else:
        singles = [ReplayBuffer(capacity, (2,), generator=g) for g in gens()]
        stacked = StackedReplayBuffer(K, capacity, (2,), gens())
    for step in range(60):  # uneven arrivals per agent, wrapping the rings at different times
        counts = rng.integers(0, 4, size=K)
        agent = np.repeat(np.arange(K), counts)
        n = agent.size
        t = (
            rng.normal(size=(n, 2)).astype(np.float32),
            rng.integers(0, 3, n),
            rng.normal(size=n).astype(np.float32),
            rng.normal(size=(n, 2)).astype(np.float32),
            rng.random(n).astype(np.float32),
        )
        stacked.add(agent, *t)
        for k, single in enumerate(singles):
            mask = agent == k
            if mask.any():
                single.add(*(v[mask] for v in t))
        if step >= 10 and step % 5 == 0:
            beta = 0.5
            got = stacked.sample(batch, beta)
            for k, single in enumerate(singles):
                want = single.sample(batch, beta)
                assert torch.equal(got.indices[k], want.indices)
                for field in ("obs", "actions", "rewards", "next_obs", "discounts", "age"):
                    assert torch.equal(getattr(got, field)[k], getattr(want, field)), field
                if prioritized:
                    assert torch.equal(got.weights[k], want.weights)
            if prioritized:
                td = torch.from_numpy(rng.normal(size=(K, batch)).astype(np.float32))
                stacked.update_priorities(got.indices, td)
                for k, single in enumerate(singles):
                    single.update_priorities(got.indices[k], td[k])
    assert list(stacked.sizes) == [len(s) for s in singles]
    if prioritized:
        stats = stacked.stats()
        for k, single in enumerate(singles):
            for name, value in single.stats().items():
                assert torch.allclose(stats[name][k], value, rtol=1e-9), name


def run_cli(*args, check=True):
    proc = run_module("rlrun.train", *args)
    if check:
        assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


SHORT = [
    "device=cpu",
    "algo.learning_starts=300",
    "eval.episodes=2",
    "log.interval=300",
    "log.plot=false",
    "checkpoint.every=0",
    "network.hidden_sizes=[64,64]",
]


# PER is the more sensitive case: a priority that differs by round-off can move a stratified draw across
# a leaf boundary, after which the two runs sample different transitions. Its horizon is shorter.
PIXELS = [
    "env=atari",
    "network=cnn",
    "env.id=ALE/Pong-v5",
    "env.max_episode_steps=200",
    "buffer.capacity=2000",
    "algo.batch_size=16",
    "network.hidden_sizes=[32]",
    "total_steps=600",
    "eval.interval=600",
    "algo.train_freq=8",
]


# The default variant stays in the default test run; there the other variants' stacked networks are checked
# against their single networks too (test_stacked_c51_noisy_and_pixel_networks_are_each_agent), and a whole
# batched PER run against its single runs (tests/test_batched_sweep.py); their whole runs here are `-m slow`.
SLOW = pytest.mark.slow


@pytest.mark.parametrize(
    "variant",
    [
        pytest.param(["total_steps=1500", "eval.interval=750"], id="default"),
        pytest.param(
            ["total_steps=900", "eval.interval=450", "network=dueling", "buffer=per", "algo.loss=huber"],
            id="dueling-per",
            marks=SLOW,
        ),
        pytest.param(
            ["total_steps=900", "eval.interval=450", "network=c51", "network.dueling=true"], id="c51", marks=SLOW
        ),
        pytest.param(
            ["total_steps=900", "eval.interval=450", "network=noisy", "network.dueling=false", "buffer=uniform"],
            id="noisy",
            marks=SLOW,
        ),
        # network=noisy's own dueling head and PER: PER's horizon (round-off moved a draw at ~800 steps)
        pytest.param(["total_steps=600", "eval.interval=300", "network=noisy"], id="noisy-dueling-per", marks=SLOW),
        pytest.param(
            ["total_steps=600", "eval.interval=300", "network=qrdqn", "buffer=per"], id="qrdqn-per", marks=SLOW
        ),
        # lr 2e-3: CartPole's lr for IQN (3e-3, conf/env_network) drifts the weights past 1e-4 in 600 steps
        pytest.param(
            ["total_steps=600", "eval.interval=300", "network=iqn", "network.dueling=true", "optimizer.lr=2e-3"],
            id="iqn-dueling",
            marks=SLOW,
        ),
        pytest.param(PIXELS, id="atari-frames", marks=SLOW),
    ],
)
def test_each_agent_of_a_batched_run_is_its_single_seed_run(compose, tmp_path, variant):
    # In this process, as the runs of the next test (a subprocess costs seconds of imports; the CLI's own
    # path to a batched run: test_batched_multirun_reports_agents_as_seeds)
    batched = tmp_path / "batched"
    train(compose(*SHORT, *variant, "seed=5", "seeds=2"), batched)
    for seed in (5, 6):
        single = tmp_path / f"single{seed}"
        train(compose(*SHORT, *variant, f"seed={seed}"), single)
        agent = batched / f"seed={seed}"
        # Step for step: the same episodes (so the same actions), the same evaluation returns.
        assert (agent / "episodes.csv").read_text() == (single / "episodes.csv").read_text()
        a, s = (json.loads((d / "summary.json").read_text()) for d in (agent, single))
        for key in ("episodes", "final_mean_return_100", "final_eval_return", "env_steps"):
            assert a[key] == s[key], key
        a_model, s_model = (torch.load(d / "model.pt", weights_only=True) for d in (agent, single))
        assert a_model.keys() == s_model.keys()
        for name in s_model:
            assert torch.allclose(a_model[name], s_model[name], atol=1e-4), name
        # rlrun.evaluate takes an agent's dir like a single run's dir, and plays the same episodes.
        assert (
            evaluate_run([str(agent), "episodes=3"])["returns"] == evaluate_run([str(single), "episodes=3"])["returns"]
        )
    top = json.loads((batched / "summary.json").read_text())
    assert top["seeds"] == [5, 6] and set(top["agents"]) == {"5", "6"}
    # the agents share the process: one wall time and speed (before: each agent's ended after the agents
    # before it had saved their models and drawn their figures)
    walls = {json.loads((batched / f"seed={s}" / "summary.json").read_text())["wall_time_s"] for s in (5, 6)}
    assert len(walls) == 1, walls


def test_batched_multirun_reports_agents_as_seeds(tmp_path):
    from rlrun.report import load_sweep

    sweep = tmp_path / "sweep"
    run_cli(
        "-m",
        "optimizer.lr=1e-3,3e-3",
        "seeds=2",
        "device=cpu",
        "total_steps=640",
        "algo.learning_starts=200",
        "eval.interval=0",
        "log.plot=false",
        "checkpoint.every=0",
        f"hydra.sweep.dir={sweep}",
    )
    df = load_sweep(sweep)
    assert len(df) == 4
    assert sorted(df["cfg.seed"]) == [0, 0, 1, 1]
    assert sorted(df["configuration"].unique()) == ["optimizer.lr=0.001", "optimizer.lr=0.003"]
    assert (df["status"] == "finished").all() and (df["env_steps"] == 640).all()
    assert "![sensitivity](sensitivity.png)" in (sweep / "report.md").read_text()  # lr swept, batched too
    assert (sweep / "sensitivity.png").exists()
    # Each agent's own config is that of the single-seed run it equals, ready for rlrun.evaluate.
    from omegaconf import OmegaConf

    cfgs = [OmegaConf.load(p) for p in sweep.rglob("seed=*/.hydra/config.yaml")]
    assert len(cfgs) == 4 and all(c.seeds == 1 for c in cfgs)


LR_AGENTS = "agents=[{seed:0,optimizer.lr:1e-3},{seed:1,optimizer.lr:1e-3},{seed:2,optimizer.lr:3e-3}]"


@pytest.mark.parametrize(
    "agents,dirs",
    [
        ("seeds=2", ["seed=0", "seed=1"]),
        # two param groups, one over a slice of two agents (rlrun.training.agents.agent_param_groups)
        (LR_AGENTS, ["optimizer.lr=0.001/seed=0", "optimizer.lr=0.001/seed=1", "optimizer.lr=0.003/seed=2"]),
    ],
)
def test_resumed_batched_run_equals_an_uninterrupted_one(compose, tmp_path, agents, dirs):
    # Schedules that do not depend on total_steps, so that extending a finished run is an interruption.
    args = [
        agents,
        "device=cpu",
        "algo.learning_starts=300",
        "eval.interval=0",
        "log.plot=false",
        "checkpoint.every=500",
        "buffer=per",
        "network.hidden_sizes=[32]",
        "algo.lr_end_factor=1.0",
        "buffer.beta_anneal_steps=1600",
    ]
    straight, parts = tmp_path / "straight", tmp_path / "parts"
    train(compose(*args, "total_steps=1600"), straight)
    train(compose(*args, "total_steps=900"), parts)
    if agents == "seeds=2":  # an agent's folder names the run that holds its checkpoint, and how it goes on
        err = in_process("rlrun.resume", parts / "seed=1", "total_steps=1600", rc=2).stderr
        resume = f"python -m rlrun.resume {parts}"
        assert (
            f"checkpointed with its batched run {parts}: it has finished; train it further with {resume} total_steps="
            in err
        )
    in_process("rlrun.train", f"resume={parts}", "total_steps=1600", rc=0)
    for agent in dirs:
        a, b = straight / agent, parts / agent
        assert (a / "episodes.csv").read_text() == (b / "episodes.csv").read_text()
        ma, mb = (torch.load(d / "model.pt", weights_only=True) for d in (a, b))
        assert all(torch.equal(ma[k], mb[k]) for k in ma)


@pytest.mark.parametrize(
    "override,key",
    [
        ("env.normalize_reward=true", "env.normalize_reward"),
        ("algo.on_nonfinite=skip", "algo.on_nonfinite"),
        ("seeds=0", "seeds"),
    ],
)
def test_unsupported_batched_options_are_refused_by_key(compose, override, key):
    from rlrun.config.validate import validate

    seeds = [] if override.startswith("seeds=") else ["seeds=4"]
    with pytest.raises(ConfigError) as e:
        validate(compose(override, *seeds))
    assert key in str(e.value)


def test_refusal_happens_before_anything_is_written(tmp_path):
    run = tmp_path / "run"
    proc = in_process("rlrun.train", "seeds=3", "env.normalize_reward=true", f"hydra.run.dir={run}")
    assert proc.returncode == 2
    assert "env.normalize_reward" in proc.stderr and "seeds > 1" in proc.stderr
    assert not list(run.glob("seed=*")) and not (run / "checkpoint.pt").exists()


VMAP_VARIANTS = {
    "c51-dueling": dict(num_atoms=11, v_min=-5.0, v_max=5.0, dueling=True),
    "noisy": dict(noisy=True),
    "rainbow-net": dict(num_atoms=11, v_min=-5.0, v_max=5.0, dueling=True, noisy=True),
    "nature-cnn": dict(encoder="nature_cnn", obs_shape=[4, 84, 84], hidden_sizes=[32]),
    "nature-cnn-conv-ln": dict(encoder="nature_cnn", obs_shape=[4, 84, 84], hidden_sizes=[32], conv_layer_norm=True),
    "qrdqn-dueling": dict(num_quantiles=5, dueling=True),
    "iqn-noisy-dueling": dict(tau_embedding_dim=8, noisy=True, dueling=True),
    "iqn-cnn": dict(tau_embedding_dim=8, encoder="nature_cnn", obs_shape=[4, 84, 84], hidden_sizes=[32]),
}


@pytest.mark.parametrize("variant", VMAP_VARIANTS, ids=list(VMAP_VARIANTS))
def test_stacked_c51_noisy_and_pixel_networks_are_each_agent(variant):
    kw = VMAP_VARIANTS[variant]
    pixels = "obs_shape" in kw
    nets = []
    for seed in range(K):
        torch.manual_seed(seed)
        nets.append(QNetwork(4 * 84 * 84 if pixels else 4, 3, **kw))
    stacked = stack_networks(copy.deepcopy(nets))
    assert isinstance(stacked, VmapQNetwork if pixels else StackedQNetwork)
    x = torch.randint(0, 255, (K, 5, 4, 84, 84), dtype=torch.uint8) if pixels else torch.randn(K, 5, 4)
    if kw.get("noisy"):  # each agent's noise from its own generator, drawn as its single network draws it
        stacked.reset_noise([torch.Generator().manual_seed(k) for k in range(K)])
        for k, net in enumerate(nets):
            net.reset_noise(torch.Generator().manual_seed(k))
    out = stacked(x)
    if kw.get("tau_embedding_dim"):  # IQN's quantiles at sampled fractions, agent by agent
        taus = torch.rand(K, 5, 6)
        quantiles = stacked.quantile_values(x, taus)
        for k, net in enumerate(nets):
            assert torch.allclose(quantiles[k], net.quantile_values(x[k], taus[k]), atol=1e-5)
    for k, net in enumerate(nets):
        assert torch.allclose(out[k], net(x[k]), atol=1e-5)
        fresh = QNetwork(4 * 84 * 84 if pixels else 4, 3, **kw)
        fresh.load_state_dict(stacked.agent_state_dict(k))
        fresh.eval(), net.eval()
        assert torch.allclose(fresh(x[k]), net(x[k]), atol=1e-5)  # eval: the mean weights of noisy layers


def test_stacked_c51_updates_match_single_agent_updates():
    nets = []
    for seed in range(K):
        torch.manual_seed(seed)
        nets.append(QNetwork(4, 2, hidden_sizes=(16,), num_atoms=11, v_min=-2.0, v_max=2.0))
    stacked = stack_networks(copy.deepcopy(nets))
    adam = lambda params: torch.optim.Adam(params, lr=1e-3)  # noqa: E731
    singles = [dqn_learner(n, adam(n.parameters()), loss="cross_entropy", tau=0.1) for n in nets]
    learner = dqn_learner(stacked, adam(stacked.parameters()), loss="cross_entropy", tau=0.1)
    gen = torch.Generator().manual_seed(1)
    for _ in range(20):
        b = Batch(
            torch.randn(K, 32, 4, generator=gen),
            torch.randint(0, 2, (K, 32), generator=gen),
            torch.randn(K, 32, generator=gen),
            torch.randn(K, 32, 4, generator=gen),
            torch.full((K, 32), 0.9),
            torch.zeros(K, 32, dtype=torch.long),
            None,
            torch.zeros(K, 32),
        )
        assert_updates_match(learner, singles, b, ("td_loss", "q_mean", "grad_norm"), 1e-6)


@pytest.mark.parametrize("kind", ["qrdqn", "iqn"])
def test_stacked_quantile_updates_match_single_agent_updates(kind):
    """QR-DQN and IQN (with PER weights, dueling and noisy heads): agent k's update is its single one; IQN's
    fractions and the noise come from agent k's own generator, drawn in its single run's order."""
    kw = dict(num_quantiles=9) if kind == "qrdqn" else dict(tau_embedding_dim=8, noisy=True)
    nets = []
    for seed in range(K):
        torch.manual_seed(seed)
        nets.append(QNetwork(4, 2, hidden_sizes=(16,), dueling=True, **kw))
    stacked = stack_networks(copy.deepcopy(nets))
    adam = lambda params: torch.optim.Adam(params, lr=1e-3)  # noqa: E731
    gens = lambda: [torch.Generator().manual_seed(10 + k) for k in range(K)]  # noqa: E731
    singles = [
        dqn_learner(n, adam(n.parameters()), loss="quantile_huber", tau=0.1, noise_generator=g, iqn_taus=6)
        for n, g in zip(nets, gens())
    ]
    learner = dqn_learner(
        stacked, adam(stacked.parameters()), loss="quantile_huber", tau=0.1, noise_generator=gens(), iqn_taus=6
    )
    gen = torch.Generator().manual_seed(1)
    for _ in range(20):
        assert_updates_match(
            learner, singles, random_batch(gen), ("td_loss", "q_mean", "grad_norm"), 1e-5, (1e-4, 1e-5)
        )
    for k, single in enumerate(singles):
        agent = stacked.agent_state_dict(k)
        for name, value in single.online.state_dict().items():
            assert torch.allclose(agent[name], value, atol=1e-5), name
