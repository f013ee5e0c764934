"""Autoreset, truncation and termination: the stored transitions and the TD targets, by hand."""

import numpy as np
import pytest
import torch

from rlrun.algos.dqn import dqn_learner
from rlrun.envs.vector import finished_episodes, make_vector_env, next_obs_for_storage
from rlrun.replay import Batch
from rlrun.replay.nstep import NStepAccumulator


def rollout(env_id, num_envs, steps, gamma=0.9):
    """The trainer's path from env step to stored transition, with one-step returns."""
    envs = make_vector_env(env_id, num_envs)
    acc = NStepAccumulator(num_envs, 1, gamma, (1,))
    obs, _ = envs.reset(seed=0)
    out, episodes = [], []
    for _ in range(steps):
        actions = np.zeros(num_envs, dtype=np.int64)
        next_obs, rew, term, trunc, infos = envs.step(actions)
        s, _, r, stored_next, disc = acc.step(obs, actions, rew, next_obs_for_storage(next_obs, infos), term, trunc)
        np.testing.assert_array_equal(s, obs)  # with n=1 every step stores exactly its own transition
        np.testing.assert_array_equal(r, rew)
        out.append((obs.copy(), stored_next, disc, term, trunc))
        episodes += finished_episodes(infos)
        obs = next_obs
    envs.close()
    return out, episodes


def test_termination_does_not_bootstrap_and_never_links_episodes():
    out, episodes = rollout("rlrun_tests/Terminating-v0", num_envs=2, steps=7)
    for obs, stored_next, disc, _term, trunc in out:
        # Every stored transition goes from t to t+1 of the same episode, never to the next reset obs.
        np.testing.assert_array_equal(stored_next, obs + 1)
        np.testing.assert_allclose(disc, np.where(obs[:, 0] + 1 == 3, 0.0, 0.9))
        assert not trunc.any()
    # obs sequence: 0,1,2 | 0,1,2 | 0 -> after a terminal step the env restarts at 0 in the same step.
    assert [o[0][0, 0] for o in out] == [0, 1, 2, 0, 1, 2, 0]
    assert episodes == [(0, 3.0, 3), (1, 3.0, 3), (0, 3.0, 3), (1, 3.0, 3)]


def test_truncation_bootstraps():
    out, episodes = rollout("rlrun_tests/TimeLimited-v0", num_envs=1, steps=5)
    obs, stored_next, disc, term, trunc = out[3]
    assert trunc[0] and not term[0]
    assert stored_next[0, 0] == 4.0  # the state where the time limit hit, not the reset state
    assert disc[0] == np.float32(0.9)  # truncated: the next state still has a value
    assert out[4][0][0, 0] == 0.0
    assert episodes == [(0, 4.0, 4)]


def test_td_targets_by_hand():
    # Q(s) = [s, 2s] for a scalar state s: a linear net with known weights.
    net = torch.nn.Linear(1, 2, bias=False)
    with torch.no_grad():
        net.weight.copy_(torch.tensor([[1.0], [2.0]]))
    learner = dqn_learner(net, torch.optim.SGD(net.parameters(), lr=0.0), double=False)
    batch = Batch(
        obs=torch.tensor([[0.0], [1.0], [2.0]]),
        actions=torch.tensor([0, 1, 0]),
        rewards=torch.tensor([1.0, 1.0, 1.0]),
        next_obs=torch.tensor([[1.0], [2.0], [3.0]]),
        discounts=torch.tensor([0.9, 0.0, 0.9]),  # running, terminated, truncated
        indices=torch.arange(3),
        weights=None,
        age=torch.zeros(3),
    )
    # max_a Q(s') = 2 s'  ->  1 + 0.9*2, 1 + 0, 1 + 0.9*6
    torch.testing.assert_close(learner.loss.td_target(batch), torch.tensor([2.8, 1.0, 6.4]))


def test_double_dqn_target_uses_online_argmax_and_target_values():
    online = torch.nn.Linear(1, 2, bias=False)
    with torch.no_grad():
        online.weight.copy_(torch.tensor([[2.0], [1.0]]))  # online prefers action 0 for s' > 0
    learner = dqn_learner(online, torch.optim.SGD(online.parameters(), lr=0.0), double=True)
    with torch.no_grad():
        learner.target.weight.copy_(torch.tensor([[1.0], [5.0]]))  # target would prefer action 1
    batch = Batch(
        torch.zeros(1, 1),
        torch.zeros(1, dtype=torch.long),
        torch.tensor([0.5]),
        torch.tensor([[2.0]]),
        torch.tensor([0.5]),
        torch.arange(1),
        None,
        torch.zeros(1),
    )
    # a* = argmax online(2) = 0; Q_target(2, 0) = 2  ->  0.5 + 0.5 * 2
    torch.testing.assert_close(learner.loss.td_target(batch), torch.tensor([1.5]))


def test_polyak_and_hard_target_updates():
    net = torch.nn.Linear(1, 1, bias=False)
    learner = dqn_learner(net, torch.optim.SGD(net.parameters(), lr=0.0), tau=0.25)
    with torch.no_grad():
        learner.target.weight.fill_(0.0)
        net.weight.fill_(4.0)
    learner.sync_target()
    assert learner.target.weight.item() == 1.0  # 0 + 0.25 * (4 - 0)
    learner.tau = 1.0
    learner.sync_target()
    assert learner.target.weight.item() == 4.0


def test_reward_transforms_change_learning_rewards_not_logged_returns():
    envs = make_vector_env("rlrun_tests/Terminating-v0", 1, reward_scale=0.5, clip_reward=0.2)
    envs.reset(seed=0)
    rewards, episodes = [], []
    for _ in range(3):
        _, r, _, _, infos = envs.step(np.zeros(1, dtype=np.int64))
        rewards.append(float(r[0]))
        episodes += finished_episodes(infos)
    assert rewards == [pytest.approx(0.2)] * 3  # 1 * 0.5, clipped to 0.2
    assert episodes == [(0, 3.0, 3)]  # the logged return is the env's own


@pytest.mark.parametrize(
    "num_envs,train_freq,gradient_steps,expected",
    [
        # Phases at env steps 400, 400 + period, ..., 2000 (both ends included).
        (1, 4, 1, (2000 - 400) // 4 + 1),  # one update every 4 env steps
        (8, 4, 1, ((2000 - 400) // 8 + 1) * 2),  # 8 envs: two updates per vector step keep 1 update / 4 env steps
        (2, 4, 3, ((2000 - 400) // 4 + 1) * 3),  # a phase every 2 vector steps, 3 updates each
    ],
)
def test_vector_envs_keep_the_update_ratio(tmp_path, compose, num_envs, train_freq, gradient_steps, expected):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from rlrun.train import train

    cfg = compose(
        f"env.num_envs={num_envs}",
        f"algo.train_freq={train_freq}",
        f"algo.gradient_steps={gradient_steps}",
        "total_steps=2000",
        "algo.learning_starts=400",
        "algo.batch_size=32",
        "eval.interval=0",
        "log.plot=false",
        "checkpoint.every=0",
        "device=cpu",
        "network.hidden_sizes=[16]",
    )
    train(cfg, tmp_path)
    acc = EventAccumulator(str(tmp_path))
    acc.Reload()
    assert acc.Scalars("charts/updates")[-1].value == expected
