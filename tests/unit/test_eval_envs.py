"""`eval.num_envs`: fewer evaluation envs than episodes, each env playing a fixed share of them in turn
(rlrun.training.evaluation), so that one stalled game does not keep every other env stepping."""

import gymnasium as gym
import numpy as np
import pytest
import torch
from gymnasium.vector import AutoresetMode

from rlrun.errors import ConfigError
from rlrun.training.evaluation import EvalProgress, evaluate

CPU = torch.device("cpu")


class Scheduled(gym.Env):
    """Episode r of this env lasts lengths[r] steps (the last length repeats) and returns 1000 * env + r,
    paid on its last step: each return names the env and the episode it came from."""

    def __init__(self, env: int, lengths: list[int]):
        self.env, self.lengths, self.episode = env, lengths, -1
        self.observation_space = gym.spaces.Box(0.0, 1.0, (2,))
        self.action_space = gym.spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.episode, self.t = self.episode + 1, 0
        return np.zeros(2, np.float32), {}

    def step(self, action):
        self.t += 1
        end = self.t >= self.lengths[min(self.episode, len(self.lengths) - 1)]
        return np.zeros(2, np.float32), float(1000 * self.env + self.episode) if end else 0.0, end, False, {}


class StepCount(gym.vector.VectorWrapper):
    def __init__(self, env):
        super().__init__(env)
        self.steps = 0

    def step(self, actions):
        self.steps += 1
        return self.env.step(actions)


def envs(lengths: list[list[int]]) -> StepCount:
    vec = gym.vector.SyncVectorEnv(
        [lambda j=j, ls=ls: Scheduled(j, ls) for j, ls in enumerate(lengths)],
        autoreset_mode=AutoresetMode.SAME_STEP,
    )
    return StepCount(gym.wrappers.vector.RecordEpisodeStatistics(vec))


class First(torch.nn.Module):
    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return torch.tensor([[1.0, 0.0]]).expand(obs.shape[0], 2)


def test_each_env_plays_its_share_in_order_and_the_columns_say_which():
    returns = evaluate(First(), envs([[3, 5, 2], [4], [1]]), [0], CPU, episodes=7)
    # env j plays episodes j, j + 3, j + 6: its r-th episode is column j + 3r
    assert returns.tolist() == [[0, 1000, 2000, 1, 1001, 2001, 2]]


def test_progress_hears_every_step_with_the_episodes_counted_and_owed():
    heard = []
    evaluate(First(), envs([[3, 5, 2], [4], [1]]), [0], CPU, episodes=7, progress=lambda *a: heard.append(a))
    # env 2's one-step episodes land at steps 1, 2, 3, ..., the others' at 3, 4, 8, 8, 10 (a column < 7 each)
    assert heard[0] == (1, 7) and heard[-1] == (7, 7) and len(heard) == 10
    assert [c for c, _ in heard] == sorted(c for c, _ in heard)


def test_a_long_evaluation_writes_a_line_a_minute_a_short_one_none(monkeypatch):
    clock = iter([0.0, 30.0, 61.0, 90.0, 125.0])  # the start, then one reading per call
    monkeypatch.setattr("rlrun.training.evaluation.time.perf_counter", lambda: next(clock))
    lines: list[str] = []
    progress = EvalProgress("rlrun: evaluation at step 100,000", lines.append)
    for counted in (1, 12, 20, 37):
        progress(counted, 100)
    assert lines == [
        "rlrun: evaluation at step 100,000: 12/100 episodes played in 1:01",
        "rlrun: evaluation at step 100,000: 37/100 episodes played in 2:05",
    ]


def test_one_env_per_episode_keeps_the_first_episode_of_each():
    assert evaluate(First(), envs([[3, 1], [5], [2]]), [0], CPU).tolist() == [[0, 1000, 2000]]


def test_two_agents_each_get_their_own_envs_and_columns():
    returns = evaluate(First(), envs([[2]] * 4), [0, 1], CPU, episodes=3)
    assert returns.tolist() == [[0, 1000, 1], [2000, 3000, 2001]]


def test_a_stalled_game_holds_up_its_own_env_not_all_of_them():
    """100 episodes of 10 steps and one of 1000: one env per episode steps 100 envs 1000 times; 10 envs
    that play 10 episodes each step 10 envs 1000 + 9 * 10 times."""
    stalled = [[1000, 10]] + [[10]] * 99
    wide = envs(stalled)
    assert len(evaluate(First(), wide, [0], CPU)[0]) == 100
    assert wide.steps * wide.num_envs == 100 * 1000
    narrow = envs(stalled[:10])
    returns = evaluate(First(), narrow, [0], CPU, episodes=100)
    assert narrow.steps * narrow.num_envs == 10 * (1000 + 9 * 10)
    assert sorted(returns[0] % 1000) == sorted(list(range(10)) * 10)  # 10 episodes of each env, none skipped


def test_eval_num_envs_is_checked_and_the_atari_100k_presets_take_10(compose):
    from rlrun.config.validate import validate
    from rlrun.training.build import eval_num_envs

    assert compose().eval.num_envs is None and eval_num_envs(compose("eval.episodes=7")) == 7
    assert eval_num_envs(compose("eval.num_envs=6")) == 5  # at most one per episode
    for experiment in ("der_atari100k", "drq_eps_atari100k"):
        cfg = compose(f"+experiment={experiment}")
        assert (cfg.eval.num_envs, cfg.eval.episodes, eval_num_envs(cfg)) == (10, 100, 10)
        assert eval_num_envs(compose(f"+experiment={experiment}", "eval.episodes=4")) == 4
    with pytest.raises(ConfigError, match=r"eval.num_envs=0.*a number > 0"):
        validate(compose("eval.num_envs=0"))


class NotANumber(Scheduled):
    def step(self, action):
        obs, _, end, truncated, info = super().step(action)
        return obs, float("nan") if end else 0.0, end, truncated, info


@pytest.mark.timeout(60)  # before: played on forever, every slot still NaN
def test_an_episode_whose_return_is_nan_is_counted_not_played_forever():
    vec = gym.vector.SyncVectorEnv([lambda: NotANumber(0, [2])], autoreset_mode=AutoresetMode.SAME_STEP)
    wrapped = StepCount(gym.wrappers.vector.RecordEpisodeStatistics(vec))
    returns = evaluate(First(), wrapped, [0], CPU, episodes=3)
    assert np.isnan(returns).all() and wrapped.steps == 6
