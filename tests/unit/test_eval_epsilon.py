"""`eval.epsilon`: the chance of a uniform random action at each evaluation step (rlrun.training.evaluation),
so that a greedy policy cannot stall a game for its whole episode cap (Dopamine's Atari 100k protocol: 0.001)."""

import gymnasium as gym
import numpy as np
import pytest
import torch

from rlrun.errors import ConfigError
from rlrun.training.evaluation import evaluate


class Counting(gym.vector.VectorEnv):
    """`num_envs` envs of 4 actions, whose episode ends after `length` steps with the count of steps that took
    action 3 as its return."""

    def __init__(self, num_envs: int, length: int = 200):
        self.num_envs, self.length = num_envs, length
        self.single_action_space = gym.spaces.Discrete(4)
        self.single_observation_space = gym.spaces.Box(0.0, 1.0, (2,))

    def reset(self, *, seed=None, options=None):
        self.t, self.hits = 0, np.zeros(self.num_envs)
        return np.zeros((self.num_envs, 2), np.float32), {}

    def step(self, actions):
        self.t += 1
        self.hits += np.asarray(actions) == 3
        done = np.full(self.num_envs, self.t == self.length)
        infos = {"_episode": done, "episode": {"r": self.hits.copy(), "l": np.full(self.num_envs, self.t)}}
        no = np.zeros(self.num_envs, bool)
        return np.zeros((self.num_envs, 2), np.float32), np.zeros(self.num_envs), done, no, infos


class AlwaysZero(torch.nn.Module):
    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        q = torch.zeros(obs.shape[0], 4)
        q[:, 0] = 1.0
        return q


def test_greedy_by_default_random_at_epsilon_one_and_the_same_for_the_same_seed():
    cpu = torch.device("cpu")
    assert evaluate(AlwaysZero(), Counting(3), [5], cpu).tolist() == [[0.0, 0.0, 0.0]]
    random = evaluate(AlwaysZero(), Counting(3), [5], cpu, epsilon=1.0)
    assert random.shape == (1, 3) and (np.abs(random - 50) < 25).all()  # action 3 a quarter of 200 steps
    assert np.array_equal(random, evaluate(AlwaysZero(), Counting(3), [5], cpu, epsilon=1.0))
    assert not np.array_equal(random, evaluate(AlwaysZero(), Counting(3), [6], cpu, epsilon=1.0))
    rare = evaluate(AlwaysZero(), Counting(3, length=20_000), [5], cpu, epsilon=0.01)
    assert (rare > 0).all() and (rare < 200).all()  # about 20000 * 0.01 / 4 = 50 each


def test_eval_epsilon_is_checked_and_the_atari_100k_presets_take_dopamines(compose):
    from rlrun.config.validate import validate

    for experiment in ("der_atari100k", "drq_eps_atari100k"):
        assert compose(f"+experiment={experiment}").eval.epsilon == 0.001
    assert compose().eval.epsilon == 0.0
    with pytest.raises(ConfigError, match="eval.epsilon"):
        validate(compose("eval.epsilon=1.5"))


def test_the_evaluate_command_takes_epsilon_or_the_runs(capsys):
    from rlrun.evaluate import parse

    assert parse(["run"])[1]["epsilon"] is None  # the run's eval.epsilon
    assert parse(["run", "epsilon=0.001"])[1]["epsilon"] == 0.001
    for bad in ("1.5", "nan", "x"):
        with pytest.raises(SystemExit) as e:
            parse(["run", f"epsilon={bad}"])
        assert e.value.code == 2
    assert "epsilon must be a number in [0, 1], got 'x'" in capsys.readouterr().err
