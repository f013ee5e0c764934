"""ALE games through rlrun.envs.atari, both backends, on real ROMs: what the loop stores and logs.

Final observations are the real last frames, time limits truncate, a life loss ends an episode for
learning while the logged episode is the whole game, stacks restart at every episode start, seeds
reproduce, and a short env=atari run writes episodes.
"""

from typing import Any

import numpy as np
import pytest

pytest.importorskip("ale_py")
pytest.importorskip("cv2")

from rlrun.envs.vector import finished_episodes, make_vector_env, next_obs_for_storage  # noqa: E402

ATARI = {"noop_max": 30, "frame_skip": 4, "screen_size": 84, "terminal_on_life_loss": True}
BACKENDS = ["vector", "gymnasium"]


def atari_env(game="Breakout", num_envs=2, backend="vector", **kwargs):
    train = kwargs.pop("train", True)
    return make_vector_env(
        f"ALE/{game}-v5", num_envs, frame_stack=4, atari={**ATARI, "backend": backend}, train=train, **kwargs
    )


def fixed_actions(n_actions, num_envs, steps, seed=0):
    return np.random.default_rng(seed).integers(n_actions, size=(steps, num_envs))


def is_new_stack(obs):
    """A new episode's stack: its first frame repeated."""
    return all((obs[k] == obs[-1]).all() for k in range(len(obs) - 1))


@pytest.mark.parametrize("backend", BACKENDS)
def test_final_obs_is_the_real_last_stack_and_new_stacks_restart(backend):
    """At every episode end (life loss or game over) the stored next obs continues the stack before it,
    and the next episode's first obs holds no frame of the episode before."""
    envs = atari_env(backend=backend, num_envs=2)
    obs, _ = envs.reset(seed=5)
    ends = game_overs = 0
    for a in fixed_actions(4, 2, 200):
        next_obs, _, terminated, truncated, infos = envs.step(a)
        real = next_obs_for_storage(next_obs, infos)
        done = terminated | truncated
        for i in range(2):
            assert (real[i, :-1] == obs[i, 1:]).all()  # one stack, moved on by one frame
            if done[i]:
                assert infos["_final_obs"][i] and is_new_stack(next_obs[i])
                if not infos.get("_episode", np.zeros(2, bool))[i]:  # a life lost: the game goes on
                    assert (next_obs[i, -1] == real[i, -1]).all()
        ends += int(done.sum())
        game_overs += len(finished_episodes(infos))
        obs = next_obs
    envs.close()
    assert ends > game_overs >= 1  # life losses and at least one whole game


@pytest.mark.parametrize("backend", BACKENDS)
def test_final_obs_matches_the_same_game_played_on(backend):
    """The truncated episode's final obs is exactly what the uncapped game shows at that step (not the
    reset frame), its next obs is a fresh game, and the time limit truncates without terminating."""
    capped = atari_env("Pong", 2, backend=backend, max_episode_steps=30)
    free = atari_env("Pong", 2, backend=backend)
    capped.reset(seed=11)
    free.reset(seed=11)
    for t, a in enumerate(fixed_actions(6, 2, 30), start=1):
        next_obs, rewards, terminated, truncated, infos = capped.step(a)
        free_obs, free_rewards, *_ = free.step(a)
        assert (rewards == free_rewards).all()
        if t < 30:
            assert (next_obs == free_obs).all() and not truncated.any()
    assert truncated.all() and not terminated.any()
    assert (next_obs_for_storage(next_obs, infos) == free_obs).all()
    assert is_new_stack(next_obs[0]) and not (next_obs == free_obs).all()
    assert [(i, length) for i, _, length in finished_episodes(infos)] == [(0, 30), (1, 30)]
    capped.close()
    free.close()


@pytest.mark.parametrize("backend", BACKENDS)
def test_life_loss_terminates_for_learning_but_the_logged_episode_is_the_whole_game(backend):
    """The same seed and actions with and without life-loss ends: the same game (rewards, logged whole
    games), with one extra termination per life lost."""
    learn = atari_env(backend=backend, num_envs=1)
    whole = atari_env(backend=backend, num_envs=1, train=False)
    learn.reset(seed=2)
    whole.reset(seed=2)
    lives_lost, learn_eps, whole_eps, learn_terms = 0, [], [], 0
    lives = 5
    for a in fixed_actions(4, 1, 1500):
        _, r1, te1, _, i1 = learn.step(a)
        _, r2, te2, _, i2 = whole.step(a)
        assert r1 == r2
        learn_terms += int(te1[0])
        if int(i1["lives"][0]) < lives and not te2[0]:
            lives_lost += 1
            assert te1[0] and not i1.get("_episode", [False])[0]  # a life lost: no episode logged
        lives = int(i1["lives"][0])
        learn_eps += finished_episodes(i1)
        whole_eps += finished_episodes(i2)
        if whole_eps:
            break
    learn.close()
    whole.close()
    assert whole_eps and learn_eps == whole_eps  # whole games, identical logged return and length
    assert lives_lost == 4 and learn_terms == 5  # Breakout: 5 lives, the last one ends the game
    assert whole_eps[0][2] > 100  # the game's agent steps, not one life's


def test_seeds_reproduce_first_obs_and_trajectory():
    runs = []
    for _ in range(2):
        envs = atari_env("Pong", 2)
        obs, _ = envs.reset(seed=[7, 8])
        frames, rewards = [obs], []
        for a in fixed_actions(6, 2, 60):
            obs, r, *_ = envs.step(a)
            frames.append(obs)
            rewards.append(r)
        envs.close()
        runs.append((np.stack(frames), np.stack(rewards)))
    assert (runs[0][0] == runs[1][0]).all() and (runs[0][1] == runs[1][1]).all()
    assert runs[0][0].shape == (61, 2, 4, 84, 84) and runs[0][0].dtype == np.uint8


def test_vector_backend_keeps_the_registered_sticky_actions():
    """ALE/Pong-v5 repeats the previous action with probability 0.25 per frame: rlrun's vector backend
    plays exactly as AtariVectorEnv with 0.25 does, and not as it does without sticky actions."""
    from ale_py.vector_env import AtariVectorEnv

    def frames(env, stacked):
        env.reset(seed=np.array([4, 9]))
        out = []
        for a in fixed_actions(6, 2, 100):
            obs = env.step(a)[0]
            out.append(obs[:, -1] if stacked else obs[:, 0])
        env.close()
        return np.stack(out)

    ours = frames(atari_env("Pong", 2), stacked=True)
    kwargs: dict[str, Any] = dict(
        autoreset_mode="SameStep", stack_num=1, noop_max=31, use_fire_reset=False, reward_clipping=False
    )
    sticky = frames(AtariVectorEnv("pong", 2, repeat_action_probability=0.25, **kwargs), stacked=False)
    plain = frames(AtariVectorEnv("pong", 2, repeat_action_probability=0.0, **kwargs), stacked=False)
    assert (ours == sticky).all() and not (ours == plain).all()


def test_bad_backend_names_the_key(compose):
    from rlrun.config.validate import validate
    from rlrun.errors import ConfigError

    with pytest.raises(ConfigError, match="env.atari.backend"):
        validate(compose("env=atari", "env.atari.backend=envpool"))
    with pytest.raises(ConfigError, match="env.atari.threads"):
        validate(compose("env=atari", "env.atari.threads=0"))


def test_train_smoke_run_with_the_vector_backend_writes_episodes(compose, tmp_path):
    from rlrun.train import train

    cfg = compose(
        "env=atari",
        "env.atari.backend=vector",
        "env.max_episode_steps=100",
        "env.num_envs=2",
        "total_steps=2000",
        "algo.learning_starts=1800",
        "buffer.capacity=2000",
        "eval.interval=0",
        "log.plot=false",
        "log.progress_bar=false",
        "log.interval=1000",
        "checkpoint.every=0",
        "device=cpu",
    )
    assert train(cfg, tmp_path)["status"] == "finished"
    rows = (tmp_path / "episodes.csv").read_text().splitlines()[1:]
    assert len(rows) >= 10  # 2 envs x 1000 steps each, games cut at 100 steps
    assert {row.split(",")[3] for row in rows} == {"100"}
