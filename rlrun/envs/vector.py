"""Vector envs and the one place that turns a gymnasium step into stored transitions."""

from __future__ import annotations

from functools import partial

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode
from gymnasium.wrappers import FlattenObservation, FrameStackObservation
from gymnasium.wrappers.vector import ClipReward, NormalizeReward, RecordEpisodeStatistics, TransformReward

from rlrun.envs.cartpole import CartPoleVectorEnv
from rlrun.envs.spec import env_spec
from rlrun.envs.wrappers import DiscretizeAction
from rlrun.errors import ConfigError


def check_spaces(envs: gym.vector.VectorEnv, env_id: str) -> None:
    """DQN needs a Discrete action space and a Box observation space (Discrete observations arrive one-hot)."""
    action_space, obs_space = envs.single_action_space, envs.single_observation_space
    if not isinstance(action_space, gym.spaces.Discrete):
        raise ConfigError(
            "env.id",
            env_id,
            f"an env with a Discrete action space (this one has {action_space}; "
            "set env.action_bins=N to discretise a continuous one)",
        )
    if not isinstance(obs_space, gym.spaces.Box):
        raise ConfigError(
            "env.id", env_id, f"an env with a Box or Discrete observation space (this one has {obs_space})"
        )


def one_hot_discrete(env: gym.Env) -> gym.Env:
    """Discrete observations (FrozenLake, Taxi) as one-hot float vectors, as Stable-Baselines3 does."""
    return FlattenObservation(env) if isinstance(env.observation_space, gym.spaces.Discrete) else env


# From this many CartPole sub-envs the numpy vector env steps faster than the sync vector env of CartPoleEnvs
# (one step: 112 against 47 us with 1 sub-env, 115 against 113 with 4; 2-core Intel Xeon, 2026-12-05); both
# give the same numbers, so the choice changes only the time.
NUMPY_CARTPOLE_FROM = 4


def checkpointed_vectorization(vectorization: str, env_state: object) -> str:
    """The vectorization to resume a checkpoint's envs with: `auto` stays `auto` unless the checkpoint holds
    the numpy CartPole env (its per-sub-env streams), which `auto` picked for fewer sub-envs before
    NUMPY_CARTPOLE_FROM: its state only fits that env."""
    if vectorization != "auto" or not isinstance(env_state, dict) or not isinstance(env_state.get("vector"), list):
        return vectorization
    streams = [w["generators"] for w in env_state["vector"] if isinstance(w, dict) and "generators" in w]
    numpy_cartpole = bool(streams) and isinstance(streams[0], list)
    return "vector" if numpy_cartpole and len(streams[0]) < NUMPY_CARTPOLE_FROM else vectorization


def make_vector_env(
    env_id: str,
    num_envs: int,
    vectorization: str = "sync",
    max_episode_steps: int | None = None,
    gamma: float = 0.99,
    reward_scale: float | list[float] = 1.0,
    normalize_reward: bool = False,
    clip_reward: float | None = None,
    action_bins: int | None = None,
    frame_stack: int = 0,
    atari: dict | None = None,
    train: bool = True,
) -> gym.vector.VectorEnv:
    """A vector env in SAME_STEP autoreset mode with episode statistics.

    Episode statistics wrap the raw env, so logged returns are the env's own; the reward transforms
    (scale, gymnasium's running return normalisation, clipping) sit outside them and only change what
    the agent learns from.

    SAME_STEP: the step that ends an episode already returns the next episode's first observation, and
    the real last observation arrives in `infos["final_obs"]`. So every env step is one real transition
    and none links two episodes (see `next_obs_for_storage`). ALE games (`atari`) come from rlrun.envs.atari,
    which presents the same interface with whole games in the episode statistics.
    """
    if atari is not None:  # ALE games: rlrun.envs.atari, which records whole games in its episode statistics
        # ale-py (the atari extra) only for ALE games
        from rlrun.envs.atari import make_atari_env

        envs: gym.vector.VectorEnv = make_atari_env(
            env_id,
            num_envs,
            **atari,
            frame_stack=frame_stack,
            max_episode_steps=max_episode_steps,
            vectorization=vectorization,
            train=train,
        )
    else:
        envs = RecordEpisodeStatistics(
            gym_vector_env(env_id, num_envs, vectorization, max_episode_steps, action_bins, frame_stack)
        )
    if isinstance(reward_scale, (list, tuple)):  # one factor per sub-env (agents with their own, rlrun.training.agents)
        scales = np.asarray(reward_scale, dtype=np.float64)
        envs = TransformReward(envs, lambda r: r * scales)
    elif reward_scale != 1.0:
        envs = TransformReward(envs, lambda r: r * reward_scale)
    if normalize_reward:
        envs = NormalizeReward(envs, gamma=gamma)
    if clip_reward is not None:
        envs = ClipReward(envs, -clip_reward, clip_reward)
    return envs


def gym_vector_env(
    env_id: str,
    num_envs: int,
    vectorization: str,
    max_episode_steps: int | None,
    action_bins: int | None,
    frame_stack: int,
) -> gym.vector.VectorEnv:
    """Any gymnasium id in gymnasium's sync or async vector env, or CartPole-v1 as one numpy vector env
    (`vector`, rlrun.envs.cartpole: the same numbers as sync), SAME_STEP autoreset. `auto` is `vector` where
    that exists and pays (NUMPY_CARTPOLE_FROM sub-envs), sync otherwise."""
    env_spec(env_id)  # registers rlrun's own ids (MinAtar) and refuses unknown ones with the key named
    numpy_env = env_id == "CartPole-v1" and action_bins is None and not frame_stack
    if vectorization == "auto":
        vectorization = "vector" if numpy_env and num_envs >= NUMPY_CARTPOLE_FROM else "sync"
    if vectorization == "vector":
        if not numpy_env:
            raise ConfigError(
                "env.vectorization",
                "vector",
                f"auto, sync or async for {env_id} (vector: CartPole-v1 without action_bins or frame_stack)",
            )

        return CartPoleVectorEnv(num_envs, max_episode_steps or env_spec(env_id).max_episode_steps or 500)
    kwargs = {} if max_episode_steps is None else {"max_episode_steps": max_episode_steps}
    wrappers = [one_hot_discrete] + ([] if action_bins is None else [partial(DiscretizeAction, bins=action_bins)])
    if frame_stack:
        wrappers.append(partial(FrameStackObservation, stack_size=frame_stack))
    return gym.make_vec(
        env_id,
        num_envs=num_envs,
        vectorization_mode=vectorization,
        vector_kwargs={"autoreset_mode": AutoresetMode.SAME_STEP},
        # gymnasium types each wrapper as returning a Wrapper; make_vec only applies `env = w(env)`, and
        # one_hot_discrete returns the env itself when its observations need nothing.
        wrappers=wrappers,  # type: ignore[arg-type]
        **kwargs,
    )


def next_obs_for_storage(next_obs: np.ndarray, infos: dict) -> np.ndarray:
    """The observation each transition really ended in: the final one for envs that just reset."""
    mask = infos.get("_final_obs")
    if mask is None or not mask.any():
        return next_obs
    real = next_obs.copy()
    for i in np.flatnonzero(mask):
        real[i] = infos["final_obs"][i]
    return real


def finished_episodes(infos: dict) -> list[tuple[int, float, int]]:
    """(env index, return, length) of every episode that ended on this step."""
    mask = infos.get("_episode")
    if mask is None or not mask.any():
        return []
    ep = infos["episode"]
    return [(int(i), float(ep["r"][i]), int(ep["l"][i])) for i in np.flatnonzero(mask)]
