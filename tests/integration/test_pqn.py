"""PQN (algo=pqn): the lambda-returns by hand, the rollout and its minibatches, the config, and real runs
(resume, batched seeds, every key read) on small budgets; the CartPole learning bar is `slow`."""

import numpy as np
import pytest
import torch
from omegaconf import OmegaConf
from test_config import _leaf_keys, config_reads  # noqa: F401  (a fixture)

from rlrun.algos.pqn import lambda_returns, pqn_learner
from rlrun.config.saved import from_saved
from rlrun.config.validate import validate
from rlrun.errors import ConfigError
from rlrun.replay.rollout import Rollout

# --- Q(lambda) returns, by hand -------------------------------------------------------------------------
# gamma = 0.5, lambda = 0.5, every reward 1, next values v' = 2, 4, 6, 8 at t = 0..3.
# Column 0, no episode end:            G3 = 1 + .5 * 8 = 5
#   G2 = 1 + .5 * (.5 * 6 + .5 * 5) = 3.75;  G1 = 1 + .5 * (.5 * 4 + .5 * 3.75) = 2.9375
#   G0 = 1 + .5 * (.5 * 2 + .5 * 2.9375) = 2.234375
# Column 1, truncated at t = 1, terminated at t = 2:
#   G3 = 5;  G2 = 1 (terminated: no bootstrap);  G1 = 1 + .5 * 4 = 3 (truncated: v' of the real final
#   observation, nothing from the next episode);  G0 = 1 + .5 * (.5 * 2 + .5 * 3) = 2.25
# Column 2, terminated at the rollout's last step t = 3:
#   G3 = 1;  G2 = 1 + .5 * (.5 * 6 + .5 * 1) = 2.75;  G1 = 1 + .5 * (.5 * 4 + .5 * 2.75) = 2.6875
#   G0 = 1 + .5 * (.5 * 2 + .5 * 2.6875) = 2.171875
REWARDS = torch.ones(4, 3)
NEXT_VALUES = torch.tensor([2.0, 4.0, 6.0, 8.0]).unsqueeze(1).expand(4, 3).clone()
TERMINATED = torch.tensor([[0, 0, 0], [0, 0, 0], [0, 1, 0], [0, 0, 1]], dtype=torch.bool)
TRUNCATED = torch.tensor([[0, 0, 0], [0, 1, 0], [0, 0, 0], [0, 0, 0]], dtype=torch.bool)


def test_lambda_returns_by_hand_with_truncation_and_termination_mid_rollout():
    got = lambda_returns(REWARDS, NEXT_VALUES, TERMINATED, TRUNCATED, gamma=0.5, q_lambda=0.5)
    expected = torch.tensor([[2.234375, 2.25, 2.171875], [2.9375, 3.0, 2.6875], [3.75, 1.0, 2.75], [5.0, 5.0, 1.0]])
    assert torch.allclose(got, expected, rtol=0, atol=1e-6), got


def test_lambda_zero_is_one_step_q_learning_and_one_is_the_bootstrapped_return():
    one_step = lambda_returns(REWARDS, NEXT_VALUES, TERMINATED, TRUNCATED, gamma=0.5, q_lambda=0.0)
    expected = REWARDS + 0.5 * NEXT_VALUES * ~TERMINATED
    assert torch.allclose(one_step, expected)
    # lambda = 1, column 0: G3 = 5, G2 = 1 + .5 * 5 = 3.5, G1 = 2.75, G0 = 2.375 (no v' but the last).
    monte_carlo = lambda_returns(REWARDS, NEXT_VALUES, TERMINATED, TRUNCATED, gamma=0.5, q_lambda=1.0)
    assert torch.allclose(monte_carlo[:, 0], torch.tensor([2.375, 2.75, 3.5, 5.0]))
    assert torch.allclose(monte_carlo[:, 1], torch.tensor([1 + 0.5 * 3.0, 3.0, 1.0, 5.0]))


class DoubleObs(torch.nn.Module):
    """Q(s) = (s, 2s) for a one-number observation: max_a Q(s', a) = 2 s', known by hand."""

    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.tensor([1.0, 2.0]))

    def forward(self, obs):
        return obs * self.w


def filled_rollout(agents=1, num_envs=2, steps=4):
    """obs of env e at step t = 10 t + e; the real next obs = obs + 1; env 1 truncates at t = 1."""
    rollout = Rollout(steps, agents, num_envs, (1,), np.float32)
    rows = agents * num_envs
    for t in range(steps):
        obs = (10.0 * t + np.arange(rows, dtype=np.float32)).reshape(rows, 1)
        truncated = np.zeros(rows, dtype=bool)
        if t == 1:
            truncated[1] = True
        rollout.add(
            obs, np.zeros(rows, dtype=np.int64), np.ones(rows, np.float32), obs + 1, np.zeros(rows, bool), truncated
        )
    return rollout


def test_returns_bootstrap_from_the_real_next_observation_under_the_current_network():
    rollout = filled_rollout()
    learner = pqn_learner(
        DoubleObs(), torch.optim.SGD([torch.zeros(1)], lr=0.1), [torch.Generator()], num_envs=2, gamma=0.5, q_lambda=0.5
    )
    data = rollout.tensors(torch.device("cpu"))
    next_values = 2 * (data["next_obs"][..., 0])  # max_a Q(s', a) = 2 s'
    expected = lambda_returns(data["rewards"], next_values, data["terminated"], data["truncated"], 0.5, 0.5)
    assert torch.allclose(learner.batches.rollout_returns(data), expected)
    assert expected[1, 1] == 1 + 0.5 * 2 * 12  # truncated: r + gamma * max Q(final obs 12)


def test_minibatches_cover_the_rollout_once_per_epoch_per_agent():
    agents, num_envs, steps = 2, 2, 4
    rollout = filled_rollout(agents, num_envs, steps)
    from rlrun.nets.networks import QNetwork
    from rlrun.nets.stacked import stack_networks

    nets = [QNetwork(1, 2, hidden_sizes=[8]) for _ in range(agents)]
    net = stack_networks(nets)
    gens = [torch.Generator().manual_seed(k) for k in range(agents)]
    learner = pqn_learner(
        net, torch.optim.Adam(net.parameters()), gens, num_envs=num_envs, update_epochs=2, num_minibatches=2
    )
    batches = list(learner.batches(rollout))
    assert len(batches) == 4 and batches[0].obs.shape == (agents, 4, 1)
    for epoch in (batches[:2], batches[2:]):
        idx = torch.cat([b.indices for b in epoch], dim=1)  # (K, T * N): each step of the agent exactly once
        assert (idx.sort(dim=1).values == torch.arange(steps * num_envs)).all()
        obs = torch.cat([b.obs[..., 0] for b in epoch], dim=1)
        for k in range(agents):  # agent k's rows only: obs 10 t + e with e in its own envs
            assert set((obs[k] % 10).long().tolist()) == {2 * k, 2 * k + 1}
    b = batches[0]
    assert (b.discounts == 0).all()
    # Age: transitions stored after it in its rollout (step t of 4, 2 envs: (3 - t) * 2).
    assert torch.equal(b.age, (3 - b.indices // num_envs) * num_envs)


def test_rollout_restarts_when_full_and_round_trips_through_its_state():
    rollout = filled_rollout()
    assert rollout.full and len(rollout) == 8
    obs = np.full((2, 1), 99.0, np.float32)
    rollout.add(obs, np.ones(2, np.int64), np.zeros(2, np.float32), obs, np.ones(2, bool), np.zeros(2, bool))
    assert rollout.t == 1 and rollout.completed == 1 and not rollout.full
    copy = Rollout(4, 1, 2, (1,), np.float32)
    copy.load_state_dict(rollout.state_dict(include_storage=False))
    assert copy.t == 1 and copy.completed == 1 and copy.obs[0, 0, 0] == 99 and copy.terminated[0].all()


# --- config ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "overrides", [["algo=pqn"], ["+experiment=pqn_cartpole"], ["+experiment=pqn_atari"], ["+experiment=pqn_minatar"]]
)
def test_pqn_options_compose_validate_and_survive_a_save(compose, overrides):
    cfg = compose(*overrides)
    validate(cfg)
    assert cfg.algo.kind == "pqn"
    saved = from_saved(OmegaConf.to_container(cfg, resolve=True))
    assert OmegaConf.to_container(saved) == OmegaConf.to_container(cfg, resolve=True)
    assert "kind" not in compose().algo  # DQN's config is unchanged


@pytest.mark.parametrize(
    "overrides,key",
    [
        (["algo.num_minibatches=3"], "algo.num_minibatches"),  # 128 x 16 steps do not split in 3
        (["algo.q_lambda=1.5"], "algo.q_lambda"),
        (["buffer=per"], "buffer"),
        (["network=c51"], "network.num_atoms"),
        (["algo.kind=dqn"], "algo.kind"),
        (["device.cuda_graphs=true"], "device.cuda_graphs"),  # a rollout's minibatches are cut on the host
    ],
)
def test_bad_pqn_values_are_refused_by_key(compose, overrides, key):
    with pytest.raises(ConfigError) as e:
        validate(compose("algo=pqn", *overrides))
    assert e.value.key == key


def test_a_saved_config_with_an_unknown_algo_kind_is_refused(compose):
    saved = OmegaConf.to_container(compose("algo=pqn"), resolve=True)
    saved["algo"]["kind"] = "evil"
    with pytest.raises(ConfigError) as e:
        from_saved(saved)
    assert e.value.key == "algo.kind"


# --- real runs ------------------------------------------------------------------------------------------
# 4 envs x 16-step rollouts: an update phase every 64 env steps; 900 stops mid-rollout.
TINY = [
    "algo=pqn",
    "device=cpu",
    "env.num_envs=4",
    "algo.num_steps=16",
    "algo.num_minibatches=4",
    "algo.update_epochs=2",
    "network.hidden_sizes=[32,32]",
    "exploration.duration=1000",
    "algo.lr_end_factor=1.0",
    "log.interval=200",
    "log.plot=false",
    "eval.interval=0",
    "checkpoint.every=400",
]


def _models_equal(a, b, atol=0.0):
    ma, mb = (torch.load(d / "model.pt", weights_only=True) for d in (a, b))
    return ma.keys() == mb.keys() and all(torch.allclose(ma[k], mb[k], rtol=0, atol=atol) for k in ma)


def test_a_resumed_pqn_run_continues_exactly(compose, tmp_path):
    from rlrun.resume import load_checkpoint
    from rlrun.run import train

    straight, parts = tmp_path / "straight", tmp_path / "parts"
    summary = train(compose(*TINY, "total_steps=1600"), straight)
    assert summary["gradient_updates"] == 1600 // 64 * 8
    train(compose(*TINY, "total_steps=900"), parts)  # its last checkpoint holds a part-filled rollout
    saved, state = load_checkpoint(parts)
    assert state["buffer"]["t"] == 900 // 4 % 16
    saved.total_steps = 1600
    train(saved, parts, state)
    assert (parts / "episodes.csv").read_text() == (straight / "episodes.csv").read_text()
    assert _models_equal(parts, straight)


def test_a_pqn_run_logs_rollout_metrics_not_replay_ones(compose, tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from rlrun.run import train

    train(compose(*TINY, "total_steps=400"), tmp_path / "run")
    acc = EventAccumulator(str(tmp_path / "run"), size_guidance={"scalars": 0})
    acc.Reload()
    tags = set(acc.Tags()["scalars"])
    assert not {t for t in tags if t.startswith("replay/")}, tags  # a rollout is no replay
    returns = [e.value for e in acc.Scalars("rollout/lambda_return")]
    assert len(returns) == 2 and all(np.isfinite(returns))  # logs at 200 and 400, after updates from step 64
    assert {"losses/td_loss", "losses/q_mean"} <= tags


def test_each_agent_of_a_batched_pqn_run_is_its_single_seed_run(compose, tmp_path):
    from rlrun.run import train

    train(compose(*TINY, "total_steps=800", "seed=5", "seeds=2"), tmp_path / "batched")
    for seed in (5, 6):
        single = tmp_path / f"single{seed}"
        train(compose(*TINY, "total_steps=800", f"seed={seed}"), single)
        agent = tmp_path / "batched" / f"seed={seed}"
        assert (agent / "episodes.csv").read_text() == (single / "episodes.csv").read_text()
        assert _models_equal(agent, single, atol=1e-4)


def test_a_pqn_run_reads_every_key_but_the_replay_ones(compose, config_reads, tmp_path):  # noqa: F811
    """Like tests/test_config.py's dead-key test, against a DQN run of the same tiny config: what algo=pqn
    leaves unread beyond it is exactly what PQN ignores (DQN's replay keys, the buffer group, and what
    validate refuses with PQN), and PQN's own keys are all read."""
    from rlrun.run import train

    def unread(*overrides):
        cfg = compose(*overrides, "total_steps=200", "eval.interval=100", "eval.episodes=1", "env.max_episode_steps=50")
        keys = set(_leaf_keys(OmegaConf.to_container(cfg)))
        config_reads.clear()
        train(cfg, tmp_path / str(len(list(tmp_path.iterdir()))))
        return keys, keys - config_reads

    pqn_keys, pqn_unread = unread(*TINY)
    _, dqn_unread = unread(*(o for o in TINY if not o.startswith(("algo=", "algo.num_", "algo.update_"))))
    ignored = {f"algo.{k}" for k in ("batch_size", "train_freq", "gradient_steps", "target_update_period", "tau")}
    ignored |= {"algo.double"}  # no target net: Double DQN has nothing to choose
    ignored |= {k for k in pqn_keys if k.startswith("buffer.") or k in QUANTILE_LOSS_KEYS}
    assert pqn_unread - dqn_unread <= ignored, sorted(pqn_unread - dqn_unread - ignored)  # nothing else
    assert ignored <= pqn_unread, sorted(ignored - pqn_unread)  # and these really are unused
    assert not pqn_unread & {
        "algo.kind",
        "algo.num_steps",
        "algo.q_lambda",
        "algo.update_epochs",
        "algo.num_minibatches",
    }


QUANTILE_LOSS_KEYS = {"algo.kappa", "algo.iqn_taus", "algo.iqn_target_taus"}


@pytest.mark.slow
def test_pqn_cartpole_reaches_475_within_500k_steps_for_4_of_5_seeds(compose, tmp_path):
    """The bar of docs/algorithms.md: CartPole-v1's 100-episode training mean reaches 475 within 500k env
    steps for at least 4 of 5 seeds (trained here as one batched run of 5 agents)."""
    from rlrun.run import train

    summary = train(compose("+experiment=pqn_cartpole", "seeds=5", "stop_on_solve=true", "log.plot=false"), tmp_path)
    steps = {seed: agent["solved_step"] for seed, agent in summary["agents"].items()}
    assert sum(s is not None and s <= 500_000 for s in steps.values()) >= 4, steps
