"""ALE games for training and evaluation: two backends behind one adapter that gives the loop what it expects.

Both backends run whole games, each sub-env handing over one preprocessed 84x84 grayscale frame per step
(no-op starts, frame skip with max-pooling over the last two frames, sticky actions as the registered id sets
them): `vector` is ale-py's `AtariVectorEnv`, whose C++ threads emulate and preprocess all sub-envs; `gymnasium`
is gymnasium's `AtariPreprocessing` in a sync or async vector env. `AtariEpisodes` does everything else once,
for both:

- frame stacking, restarted (the new first frame repeated) at every episode start, as FrameStackObservation
  pads and as `rlrun.replay.frames.FrameStore` rebuilds stacks;
- SAME_STEP data: the step that ends an episode returns the next one's first observation and the real last
  one in `infos["final_obs"]` (masked by `infos["_final_obs"]`), as `rlrun.envs.vector.next_obs_for_storage` reads;
- life loss (`terminal_on_life_loss`, training only): `terminated` for learning, while the game goes on;
- the time limit `max_episode_steps`, in agent steps: `truncated` (bootstrapped), and a new game;
- episode statistics of whole games: `infos["episode"]` (raw return "r", agent steps "l", masked by
  `infos["_episode"]`) when a game ends (game over or time limit), never at a life loss;
- FIRE to start (`fire_reset`, games that stand still until it is pressed): the first agent step of every
  life, a game's first included, plays FIRE whatever the agent chose, in every env (training or
  evaluation). Like a sticky action, the transition keeps the agent's action.
"""

from __future__ import annotations

import os
from functools import partial
from typing import Any, cast

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode
from numpy.typing import ArrayLike

from rlrun.envs.spec import env_spec
from rlrun.errors import ConfigError

BACKENDS = ("vector", "gymnasium")
# Registered-id settings that AtariVectorEnv can honour (frameskip is env.atari.frame_skip's in both backends).
VECTOR_SETTINGS = {"game", "repeat_action_probability", "full_action_space", "frameskip", "max_num_frames_per_episode"}
# fire_reset=auto: the games whose screen stands still under NOOP until FIRE is pressed (every ale-py 0.12.1 ROM
# with FIRE, 300 agent steps of NOOP from seed 0 without sticky actions, with and without one FIRE first;
# docs/environments.md). Pong and most others serve or move by themselves.
FIRE_TO_START = frozenset({"breakout", "bowling", "donkey_kong", "human_cannonball", "pitfall2", "space_war"})
FIRE_RESET = ("auto", "true", "false")
FIRE_STEPS = 2  # agent steps of FIRE at each life's start


class AtariEpisodes(gym.vector.VectorWrapper):
    """Stacks `frame_stack` frames of a whole-game, single-frame, SAME_STEP vector env and ends episodes at
    game ends, after `max_episode_steps` agent steps (truncated), and at life losses if
    `life_loss_ends_episode`; episode statistics count whole games. `frame_stack=0` gives single frames."""

    def __init__(
        self,
        env: gym.vector.VectorEnv,
        frame_stack: int,
        life_loss_ends_episode: bool,
        max_episode_steps: int | None = None,
        fire_action: int | None = None,
    ):
        super().__init__(env)
        n = env.num_envs
        frame_shape = (env.single_observation_space.shape or ())[-2:]
        self.frame_stack, self.life_loss_ends_episode = frame_stack, life_loss_ends_episode
        self.max_episode_steps = max_episode_steps
        self.stack = np.zeros((n, max(frame_stack, 1), *frame_shape), dtype=np.uint8)
        obs_shape = self.stack.shape[1:] if frame_stack else frame_shape
        self.single_observation_space = gym.spaces.Box(0, 255, obs_shape, np.uint8)
        self.observation_space = gym.vector.utils.batch_space(self.single_observation_space, n)
        self.lives = np.zeros(n, dtype=np.int64)
        # Whole-game counters (not `episode_returns`: a resumed run starts new games, see docs/environments.md).
        self.game_returns = np.zeros(n, dtype=np.float64)
        self.game_lengths = np.zeros(n, dtype=np.int64)
        # FIRE to start each life (None: never), for FIRE_STEPS agent steps: sticky actions (v5 ids: 0.25 per
        # frame) skip a one-step press about once per 100 lives, and the game then waits for the rest of that
        # life (ale-py's own use_fire_reset presses for one emulator frame, skipped once in 4).
        self.fire_action = fire_action
        self.fire_left = np.zeros(n, dtype=np.int64)  # agent steps each sub-env still plays FIRE

    def _frames(self, obs: ArrayLike) -> np.ndarray:
        return np.asarray(obs).reshape(self.stack.shape[0], *self.stack.shape[2:])

    def _obs(self) -> np.ndarray:
        return self.stack.copy() if self.frame_stack else self.stack[:, 0].copy()

    def reset(self, *, seed: Any = None, options: dict[str, Any] | None = None):  # int, one per env, or None
        obs, infos = self.env.reset(seed=seed, options=options)
        self.stack[:] = self._frames(obs)[:, None]
        self.lives = np.array(infos["lives"], dtype=np.int64)
        self.game_returns[:], self.game_lengths[:] = 0.0, 0
        self.fire_left[:] = FIRE_STEPS if self.fire_action is not None else 0
        return self._obs(), {"lives": self.lives.copy()}

    def step(self, actions):
        if self.fire_left.any():
            actions = np.where(self.fire_left > 0, self.fire_action, actions)
            self.fire_left = np.maximum(self.fire_left - 1, 0)
        obs, rewards, terminated, truncated, inner = self.env.step(actions)
        frames = self._frames(obs).copy()  # each env's newest frame: a new game's first where game_over
        rewards = np.asarray(rewards, dtype=np.float64)
        terminated, truncated = np.array(terminated, dtype=bool), np.array(truncated, dtype=bool)
        game_over = terminated | truncated
        last = frames.copy()  # the frame each step really ended in
        for i in np.flatnonzero(game_over):
            last[i] = np.asarray(inner["final_obs"][i]).reshape(last.shape[1:])
        lives = np.array(inner["lives"], dtype=np.int64)  # a new game's lives where game_over
        life_lost = (lives < self.lives) & ~game_over
        self.game_returns += rewards
        self.game_lengths += 1
        if self.max_episode_steps is not None:
            # Here rather than the emulator's frame cap, which cuts a capped game's last step short.
            cut = (self.game_lengths >= self.max_episode_steps) & ~game_over
            if cut.any():
                truncated, game_over = truncated | cut, game_over | cut
                new_obs, new_infos = self.env.reset(options={"reset_mask": cut})
                frames[cut] = self._frames(new_obs)[cut]
                lives[cut] = np.asarray(new_infos["lives"], dtype=np.int64)[cut]
        self.lives = lives
        if self.fire_action is not None:
            self.fire_left[game_over | life_lost] = FIRE_STEPS
        if self.life_loss_ends_episode:
            terminated = terminated | (life_lost & ~game_over)

        self.stack[:, :-1] = self.stack[:, 1:]
        self.stack[:, -1] = last
        done = game_over | terminated
        infos: dict[str, Any] = {"lives": lives.copy()}
        if done.any():
            infos["final_obs"], infos["_final_obs"] = self._obs(), done
            self.stack[done] = frames[done][:, None]  # the next episode's first observation
        if game_over.any():
            infos["episode"] = {"r": self.game_returns.copy(), "l": self.game_lengths.copy()}
            infos["_episode"] = game_over
            self.game_returns[game_over], self.game_lengths[game_over] = 0.0, 0
        return self._obs(), rewards, terminated, truncated, infos


def ale_settings(env_id: str) -> dict[str, Any]:
    """The registered id's emulator settings (game, sticky actions, action set, frame cap), which the
    vector backend plays with as gymnasium's does; only ALE ids (`ALE/Pong-v5`) are accepted."""
    kwargs = dict(env_spec(env_id).kwargs)
    if "game" not in kwargs:
        raise ConfigError("env.id", env_id, "an ALE game id such as ALE/Pong-v5 with env=atari")
    unsupported = sorted(set(kwargs) - VECTOR_SETTINGS)
    if unsupported:
        raise ConfigError("env.atari.backend", "vector", f"gymnasium for {env_id} (it sets {', '.join(unsupported)})")
    return kwargs


def make_atari_env(
    env_id: str,
    num_envs: int,
    *,
    noop_max: int,
    frame_skip: int,
    screen_size: int,
    terminal_on_life_loss: bool,
    backend: str = "vector",
    threads: int | None = None,
    frame_stack: int = 4,
    max_episode_steps: int | None = None,
    vectorization: str = "sync",
    train: bool = True,
    fire_reset: str | bool = "false",
    repeat_action_probability: float | None = None,
) -> AtariEpisodes:
    """An ALE game as `AtariEpisodes` over the chosen backend. `max_episode_steps` counts agent steps (the
    time limit truncates, and is bootstrapped); null keeps the registered id's frame cap (108,000 frames
    for v5 ids). Evaluation envs (`train=False`) play whole games. `fire_reset`: FIRE at each life's start
    (auto, env.atari.fire_reset's default: for the games in FIRE_TO_START; true: any game whose action set
    has FIRE; false, the default here: never). `repeat_action_probability`: sticky actions' per-frame chance;
    None keeps the registered id's (0.25 for v5 ids), 0.0 turns them off (the Atari 100k benchmark's)."""
    fire = fire_setting(fire_reset)
    sticky = {} if repeat_action_probability is None else {"repeat_action_probability": repeat_action_probability}
    if backend == "vector":
        env, actions = ale_vector_env(env_id, num_envs, noop_max, frame_skip, screen_size, threads, sticky)
    elif backend == "gymnasium":
        env, actions = gymnasium_vector_env(env_id, num_envs, noop_max, frame_skip, screen_size, vectorization, sticky)
    else:
        raise ConfigError("env.atari.backend", backend, "one of " + ", ".join(BACKENDS))
    game = env_spec(env_id).kwargs.get("game")
    on = fire == "true" or (fire == "auto" and game in FIRE_TO_START)
    fire_action = actions.index("FIRE") if on and "FIRE" in actions else None
    return AtariEpisodes(env, frame_stack, train and terminal_on_life_loss, max_episode_steps, fire_action)


def ale_vector_env(
    env_id: str,
    num_envs: int,
    noop_max: int,
    frame_skip: int,
    screen_size: int,
    threads: int | None,
    sticky: dict[str, float],
) -> tuple[gym.vector.VectorEnv, list[str]]:
    """ale-py's own vector env (backend=vector) and its action names."""
    # the atari extra (here and below): only for ALE games
    from ale_py.vector_env import AtariVectorEnv

    ale = ale_settings(env_id)
    emulators = AtariVectorEnv(
        ale["game"],
        num_envs,
        num_threads=threads or emulator_threads(num_envs),
        autoreset_mode=AutoresetMode.SAME_STEP,
        max_num_frames_per_episode=ale.get("max_num_frames_per_episode") or 108_000,
        repeat_action_probability={**ale, **sticky}.get("repeat_action_probability", 0.25),
        full_action_space=ale.get("full_action_space", False),
        img_height=screen_size,
        img_width=screen_size,
        stack_num=1,  # AtariEpisodes stacks, restarting stacks at life losses too
        frameskip=frame_skip,
        maxpool=frame_skip > 1,
        noop_max=noop_max + 1,  # ale-py draws 0..noop_max-1 no-ops; gymnasium's 1..noop_max
        use_fire_reset=False,
        reward_clipping=False,  # env.clip_reward clips for learning, outside the episode statistics
    )
    return SeedList(emulators), [a.name for a in emulators.ale.get_action_set()]


def gymnasium_vector_env(
    env_id: str,
    num_envs: int,
    noop_max: int,
    frame_skip: int,
    screen_size: int,
    vectorization: str,
    sticky: dict[str, float],
) -> tuple[gym.vector.VectorEnv, list[str]]:
    """gymnasium's vector env of AtariPreprocessing-wrapped games (backend=gymnasium) and its action names."""
    import ale_py
    from gymnasium.wrappers import AtariPreprocessing  # Atari's preprocessing: only for ALE games

    gym.register_envs(ale_py)
    wrappers: list = [
        partial(
            AtariPreprocessing,
            noop_max=noop_max,
            frame_skip=frame_skip,
            screen_size=screen_size,
            grayscale_obs=True,
        )
    ]
    env = gym.make_vec(
        env_id,
        num_envs=num_envs,
        vectorization_mode="sync" if vectorization == "auto" else vectorization,
        vector_kwargs={"autoreset_mode": AutoresetMode.SAME_STEP},
        wrappers=wrappers,
        frameskip=1,  # AtariPreprocessing skips (and max-pools) instead
        **sticky,
    )
    return env, list(cast(Any, env).call("get_action_meanings")[0])  # sync and async vector envs have `call`


def fire_setting(value: str | bool) -> str:
    """env.atari.fire_reset as auto, true or false (YAML's booleans arrive in a str key as True/False)."""
    setting = str(value).lower()
    if setting not in FIRE_RESET:
        raise ConfigError("env.atari.fire_reset", value, "auto, true or false")
    return setting


def emulator_threads(num_envs: int) -> int:
    """One emulator thread per CPU this process may run on (ale-py's own default counts every core of the
    machine, and threads that share a core under `taskset` or a container's CPU limit cost time)."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cpus = os.cpu_count() or 1
    return max(1, min(num_envs, cpus))


class SeedList(gym.vector.VectorWrapper):
    """AtariVectorEnv takes an int or an array of seeds; the loop and evaluation pass lists."""

    def reset(self, *, seed: Any = None, options: dict[str, Any] | None = None):
        if seed is not None and not isinstance(seed, int):
            seed = np.asarray(seed, dtype=np.int64)
        return self.env.reset(seed=seed, options=options)
