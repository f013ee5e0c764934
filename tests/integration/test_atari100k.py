"""The Atari 100k presets run (a few hundred steps on Pong, updates included) and their protocol key holds:
env.atari.repeat_action_probability=0.0 plays without sticky actions."""

from __future__ import annotations

import json

import numpy as np
import pytest

pytest.importorskip("ale_py")
pytest.importorskip("cv2")


def test_sticky_actions_off_plays_as_the_emulator_without_them():
    from ale_py.vector_env import AtariVectorEnv

    from rlrun.envs.atari import make_atari_env

    actions = np.random.default_rng(0).integers(0, 6, size=(100, 2))

    def frames(env, stacked):
        env.reset(seed=np.array([4, 9]))
        out = []
        for a in actions:
            obs = env.step(a)[0]
            out.append(obs[:, -1] if stacked else obs[:, 0])
        env.close()
        return np.stack(out)

    ours = frames(make_atari_env("ALE/Pong-v5", 2, noop_max=30, frame_skip=4, screen_size=84,
                                 terminal_on_life_loss=False, repeat_action_probability=0.0), stacked=True)  # fmt: skip
    kwargs = dict(autoreset_mode="SameStep", stack_num=1, noop_max=31, use_fire_reset=False, reward_clipping=False)
    plain = frames(AtariVectorEnv("pong", 2, repeat_action_probability=0.0, **kwargs), stacked=False)
    assert (ours == plain).all()


@pytest.mark.parametrize("preset", ["der_atari100k", "drq_eps_atari100k"])
def test_each_preset_trains_a_few_hundred_steps_on_pong(compose, tmp_path, preset):
    from rlrun.train import train

    cfg = compose(
        f"+experiment={preset}",
        "total_steps=300",
        "algo.learning_starts=200",  # 100 updates
        "buffer.capacity=1000",
        "env.max_episode_steps=200",
        "eval.interval=300",
        "eval.episodes=2",
        "log.plot=false",
        "log.progress_bar=false",
        "checkpoint.every=0",
        "device=cpu",
    )
    assert train(cfg, tmp_path)["status"] == "finished"
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["gradient_updates"] >= 100 and summary["final_eval_return"] is not None
