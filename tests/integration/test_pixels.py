"""Pixels without surprises (issue 26): an ALE id without env=atari and any image env without a frame stack
are refused before anything is written; replay's size is announced when large and refused when it cannot
fit the available memory (naming the capacity that fits); games that wait for FIRE get it at the start of
every life with either Atari backend, and games that do not are played as before."""

import gymnasium as gym
import numpy as np
import pytest
from test_reliability import in_process

from rlrun.config import preflight, replay_memory as memory
from rlrun.errors import ConfigError

pytest.importorskip("ale_py")
pytest.importorskip("cv2")


class Screen(gym.Env):
    """A uint8 image env: `shape` pixels, two actions, ten steps an episode."""

    def __init__(self, shape=(48, 48)):
        self.observation_space = gym.spaces.Box(0, 255, shape, np.uint8)
        self.action_space = gym.spaces.Discrete(2)
        self.t = 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return self.observation_space.sample(), {}

    def step(self, action):
        self.t += 1
        return self.observation_space.sample(), 1.0, self.t >= 10, False, {}


gym.register("rlrun_pixels/Gray-v0", entry_point=Screen)
gym.register("rlrun_pixels/Colour-v0", entry_point=Screen, kwargs={"shape": (48, 48, 3)})
gym.register("rlrun_pixels/Tiny-v0", entry_point=Screen, kwargs={"shape": (8, 8)})


def check(*overrides, available=None, monkeypatch=None):
    """The pre-flight of one job (`rlrun.config.preflight.check_job`), with the memory reader patched if asked."""
    if available is not None:
        monkeypatch.setattr(memory, "available_memory", lambda: available)
    preflight.check_job(preflight.task_config(preflight.compose(list(overrides))), {})


# --- image observations ---------------------------------------------------------------------------------------


def test_an_ale_id_without_env_atari_is_one_line_naming_the_command_and_writes_nothing(tmp_path):
    run = tmp_path / "run"
    proc = in_process("rlrun.train", "env.id=ALE/Breakout-v5", f"hydra.run.dir={run}", rc=2)
    assert proc.stderr.strip().splitlines() == [
        "rlrun: Invalid config value env.id='ALE/Breakout-v5': allowed an ALE game with env=atari: "
        "python -m rlrun.train env=atari env.id=ALE/Breakout-v5 (its preprocessing, frame stack and CNN)."
    ]
    assert not run.exists() and not any(tmp_path.iterdir())


def test_images_without_a_frame_stack_or_the_cnn_are_refused_naming_the_fix():
    with pytest.raises(ConfigError, match=r"env.frame_stack=0: allowed > 0 .*env.frame_stack=4 network=cnn"):
        check("env.id=rlrun_pixels/Gray-v0")
    with pytest.raises(ConfigError, match=r"env.frame_stack=0: allowed > 0 .*\(84, 84\) uint8"):
        check("env=atari", "env.frame_stack=0", "network.encoder=mlp", "device=cpu")
    with pytest.raises(ConfigError, match=r"env.id='rlrun_pixels/Colour-v0': .*\(48, 48, 3\) uint8 images"):
        check("env.id=rlrun_pixels/Colour-v0", "env.frame_stack=4", "network=cnn")
    with pytest.raises(ConfigError, match=r"env.frame_stack=4: allowed 0 with network=mlp .*at least 36x36"):
        check("env.id=rlrun_pixels/Tiny-v0", "env.frame_stack=4", "network=cnn")
    check("env.id=rlrun_pixels/Gray-v0", "env.frame_stack=4", "network=cnn", "device=cpu")  # what they point to


# --- replay memory ----------------------------------------------------------------------------------------------


def test_replay_that_does_not_fit_is_refused_naming_the_capacity_that_does(tmp_path, monkeypatch):
    monkeypatch.setattr(memory, "available_memory", lambda: 2 * 10**9)
    run = tmp_path / "run"
    proc = in_process("rlrun.train", "env=atari", "device=cpu", f"hydra.run.dir={run}", rc=2)
    line = proc.stderr.strip()
    assert line.startswith("rlrun: Invalid config value buffer.capacity=1000000: allowed at most 209,000 here")
    assert "~7.6 GB (1,000,000 frames of 84x84 per agent), and 2.0 GB of memory is available" in line
    assert len(proc.stderr.strip().splitlines()) == 1 and not run.exists()
    fits, too_many = (memory.replay_bytes(c, (4, 84, 84), 4, 1) for c in (209_000, 210_000))
    assert fits <= 0.8 * 2 * 10**9 < too_many  # the capacity offered leaves a fifth to the rest of the run
    check("env=atari", "device=cpu", "buffer.capacity=209000", available=2 * 10**9, monkeypatch=monkeypatch)
    with pytest.raises(ConfigError, match="buffer.capacity=1000000: allowed at most 51,000 here"):  # 4 agents
        check("env=atari", "device=cpu", "seeds=4", available=2 * 10**9, monkeypatch=monkeypatch)


def test_a_large_replay_is_announced_in_one_line_and_a_small_one_is_not(monkeypatch, capsys):
    check("env=atari", "device=cpu", available=24 * 10**9, monkeypatch=monkeypatch)
    assert capsys.readouterr().err.splitlines() == [
        "rlrun: replay will hold ~7.6 GB (1,000,000 frames of 84x84 per agent); available 24.0 GB"
    ]
    monkeypatch.setattr(memory, "available_memory", lambda: None)  # not readable: announced, never refused
    check("env.id=rlrun_pixels/Gray-v0", "env.frame_stack=4", "network=cnn", "device=cpu", "buffer.capacity=900000")
    assert capsys.readouterr().err.splitlines() == [
        "rlrun: replay will hold ~2.3 GB (900,000 frames of 48x48 per agent)"
    ]
    check("buffer.capacity=1000000", available=10**8, monkeypatch=monkeypatch)  # CartPole: 56 MB
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize(
    "overrides",
    [
        ["buffer.capacity=5000", "seeds=2", "buffer=per"],
        ["env=atari", "buffer.capacity=3000", "seeds=2", "env.num_envs=2"],
    ],
)
def test_the_estimate_is_what_build_allocates(compose, overrides):
    """Every byte of replay storage `rlrun.training.build` allocates, as the estimate counts it."""
    from rlrun.training.build import build

    cfg = compose(*overrides, "device=cpu", "eval.interval=0")
    parts = build(cfg)
    buffer, frames = parts.buffer, parts.frames
    allocated = sum(getattr(buffer, k).nbytes for k in buffer.STORAGE)
    allocated += frames.frames.nbytes if frames is not None else 0
    allocated += buffer.tree.tree.nbytes if buffer.prioritized else 0
    parts.envs.close()
    shape = tuple(parts.envs.single_observation_space.shape)
    prioritized = buffer.prioritized
    e = cfg.env
    assert allocated == 2 * memory.replay_bytes(cfg.buffer.capacity, shape, e.frame_stack, e.num_envs, prioritized)


# --- FIRE to start ----------------------------------------------------------------------------------------------

ATARI = {"noop_max": 30, "frame_skip": 4, "screen_size": 84, "terminal_on_life_loss": True}


def noop_play(game, backend, fire_reset, steps, train=False, seed=3):
    """Lives after `steps` agent steps of NOOP (an untrained greedy agent that never presses FIRE), and the
    frames seen."""
    from rlrun.envs.vector import make_vector_env

    atari = {**ATARI, "backend": backend, "fire_reset": fire_reset}
    envs = make_vector_env(f"ALE/{game}-v5", 2, frame_stack=4, atari=atari, train=train)
    obs, infos = envs.reset(seed=[seed, seed + 1])
    frames = [obs]
    for _ in range(steps):
        obs, _, _, _, infos = envs.step(np.zeros(2, dtype=np.int64))
        frames.append(obs)
    envs.close()
    return infos["lives"], np.stack(frames)


@pytest.mark.parametrize("backend", ["vector", "gymnasium"])
def test_breakout_gets_fire_at_every_life_start_with_either_backend(backend):
    """NOOP alone: the ball never comes without FIRE, so no life is ever lost; with fire_reset=auto the
    first ball comes at the game's start and the next after the life lost (Breakout loses one every 25
    steps of NOOP), in an evaluation env (whole games) and a training env (life loss ends episodes)."""
    assert list(noop_play("Breakout", backend, "false", 60)[0]) == [5, 5]
    assert list(noop_play("Breakout", backend, "auto", 60)[0]) == [3, 3]
    assert list(noop_play("Breakout", backend, "auto", 60, train=True)[0]) == [3, 3]


def test_games_that_do_not_wait_for_fire_are_played_as_before(compose):
    """auto presses nothing in a game that moves by itself (Pong's documented figures stay as they were),
    true presses FIRE in any game that has it, and a game without FIRE is the same either way."""
    from rlrun.envs.vector import make_vector_env

    assert compose("env=atari").env.atari.fire_reset == "auto"
    pong = make_vector_env("ALE/Pong-v5", 1, frame_stack=4, atari={**ATARI, "fire_reset": "auto"})
    assert pong.fire_action is None
    pong.close()
    tennis = noop_play("Tennis", "vector", "auto", 40)[1]
    assert (tennis == noop_play("Tennis", "vector", "false", 40)[1]).all()
    assert not (tennis == noop_play("Tennis", "vector", "true", 40)[1]).all()  # FIRE serves
    freeway = noop_play("Freeway", "vector", "true", 40)[1]  # no FIRE among Freeway's actions
    assert (freeway == noop_play("Freeway", "vector", "false", 40)[1]).all()
    with pytest.raises(ConfigError, match="env.atari.fire_reset='maybe': allowed auto, true or false"):
        check("env=atari", "env.atari.fire_reset=maybe", "device=cpu")
