"""From the validated config to the objects a run is made of: the only module that reads config groups.

`build(cfg)` makes the parts (envs, network, learner, replay), `loop_settings(cfg)` the plain values the
loop runs on, `population(cfg, ...)` the agents' loggers and directories. Everything below hands plain
values to constructors; where a YAML key ends up is found by searching this file for it.

With `seeds=K > 1` the same parts are built for K agents: one vector env of K x num_envs sub-envs, K
networks each initialised as its single-seed run would be, stacked into one module (rlrun.stacked), one
optimizer over the stacked parameters, and stacked replay with one sampling generator per agent.
"""

from __future__ import annotations

import random
import warnings
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from omegaconf import DictConfig, ListConfig, OmegaConf

from rlrun.device import resolve_device, set_threads
from rlrun.envs import check_spaces, env_spec, make_vector_env
from rlrun.frames import FrameStore
from rlrun.learner import DQNLearner
from rlrun.logger import RunLogger
from rlrun.loop import LoopSettings, Parts
from rlrun.networks import QNetwork
from rlrun.population import Population, agent_config, agent_dir, write_agent_hydra_dir
from rlrun.replay import PrioritizedReplayBuffer, ReplayBuffer, StackedPrioritizedReplayBuffer, StackedReplayBuffer
from rlrun.stacked import stack_networks
from rlrun.validate import ConfigError

OPTIMIZERS = {
    "torch.optim.Adam": torch.optim.Adam,
    "torch.optim.RMSprop": torch.optim.RMSprop,
    "torch.optim.SGD": torch.optim.SGD,
}


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def agent_seeds(cfg: DictConfig) -> list[int]:
    return [cfg.seed + k for k in range(cfg.seeds)]


def plain(node: Any) -> Any:
    """A config node as plain Python (dicts, lists, values): what factories take."""
    return OmegaConf.to_container(node, resolve=True) if isinstance(node, (DictConfig, ListConfig)) else node


def options(node: DictConfig, *drop: str) -> dict[str, Any]:
    """A config group's keys as plain keyword arguments, without Hydra's `_target_`/`_partial_` and `drop`."""
    kwargs: dict[str, Any] = plain(node)
    for key in ("_target_", "_partial_", *drop):
        kwargs.pop(key, None)
    return kwargs


def make_envs(cfg: DictConfig, agents: int):
    """The training vector env (K x env.num_envs sub-envs) and the evaluation one (or None)."""
    e = cfg.env
    atari = plain(e.atari)
    try:
        envs = make_vector_env(
            e.id,
            e.num_envs * agents,
            e.vectorization,
            e.max_episode_steps,
            gamma=cfg.algo.gamma,
            reward_scale=e.reward_scale,
            normalize_reward=e.normalize_reward,
            clip_reward=e.clip_reward,
            action_bins=e.action_bins,
            frame_stack=e.frame_stack,
            atari=atari,
        )
    except (TypeError, ValueError) as err:
        if e.action_bins is None:
            raise
        raise ConfigError("env.action_bins", e.action_bins, f"null for {e.id} ({err})") from None
    except (gym.error.DependencyNotInstalled, ImportError) as err:
        raise ConfigError("env.id", e.id, f"an env whose dependencies are installed ({err})") from None
    try:
        check_spaces(envs, e.id)
    except ConfigError:
        envs.close()
        raise
    eval_envs = make_eval_envs(cfg, cfg.eval.episodes * agents) if cfg.eval.interval > 0 else None
    return envs, eval_envs


def make_eval_envs(cfg: DictConfig, num_envs: int):
    """`num_envs` sub-envs as evaluation plays them: raw rewards, whole games (no life-loss ends)."""
    e = cfg.env
    return make_vector_env(
        e.id,
        num_envs,
        "sync",
        e.max_episode_steps,
        action_bins=e.action_bins,
        frame_stack=e.frame_stack,
        atari=plain(e.atari),
        train=False,
    )


def make_network(cfg: DictConfig, obs_shape, n_actions: int, device) -> QNetwork:
    return QNetwork(
        obs_dim=int(np.prod(obs_shape)), n_actions=n_actions, obs_shape=list(obs_shape), **options(cfg.network)
    ).to(device)


def make_replay(cfg: DictConfig, seeds: list[int], obs_shape, obs_dtype: torch.dtype, generators, device):
    """Uniform or prioritized replay (buffer._target_), for one agent or stacked for K."""
    prioritized = cfg.buffer._target_.endswith("PrioritizedReplayBuffer")
    kwargs = options(cfg.buffer, "n_step")  # n_step is the n-step accumulator's (loop_settings)
    if len(seeds) == 1:
        cls = PrioritizedReplayBuffer if prioritized else ReplayBuffer
        return cls(obs_shape=obs_shape, obs_dtype=obs_dtype, device=device, generator=generators[0], **kwargs)
    stacked_cls = StackedPrioritizedReplayBuffer if prioritized else StackedReplayBuffer
    return stacked_cls(
        len(seeds), obs_shape=obs_shape, obs_dtype=obs_dtype, device=device, generators=generators, **kwargs
    )


def build(cfg: DictConfig) -> Parts:
    spec = env_spec(cfg.env.id)
    device = resolve_device(cfg.device.type)
    set_threads(cfg.device.threads)
    seed_everything(cfg.seed)
    seeds = agent_seeds(cfg)
    envs, eval_envs = make_envs(cfg, len(seeds))

    obs_shape = envs.single_observation_space.shape
    n_actions = int(envs.single_action_space.n)
    nets = []
    for seed in seeds:  # each agent's initialisation is that of its own single-seed run
        seed_everything(seed)
        nets.append(make_network(cfg, obs_shape, n_actions, device))
    network = nets[0] if len(seeds) == 1 else stack_networks(nets)
    optimizer = OPTIMIZERS[cfg.optimizer._target_](network.parameters(), **options(cfg.optimizer))
    generators = [torch.Generator(device=device).manual_seed(seed) for seed in seeds]

    a, d = cfg.algo, cfg.device
    compile_, compile_mode = d.compile, d.compile_mode
    if d.cuda_graphs:
        if device.type == "cuda":
            compile_, compile_mode = True, "reduce-overhead"
        else:
            warnings.warn("device.cuda_graphs=true needs a CUDA device; running without CUDA graphs", stacklevel=2)
    learner = DQNLearner(
        network,
        optimizer,
        double=a.double,
        loss=a.loss,
        max_grad_norm=a.max_grad_norm,
        tau=a.tau,
        target_update_period=a.target_update_period,
        on_nonfinite=a.on_nonfinite,
        amp=d.amp,
        compile=compile_,
        compile_mode=compile_mode,
        noise_generator=generators[0] if len(seeds) == 1 else generators,
    )

    e, capacity = cfg.env, cfg.buffer.capacity
    frames = None
    if e.frame_stack:  # replay stores frame-index stacks; the frames themselves live once in `frames`
        # Room for every stored transition's frames: one per env step plus one per episode end, with a
        # margin for episodes down to ~16 steps on average (checked at every log, see FrameStore.check).
        per_agent = capacity + capacity // 16 + 1024 + e.num_envs * e.frame_stack
        frames = FrameStore(per_agent * len(seeds), obs_shape[1:], e.frame_stack, e.num_envs * len(seeds), device)
        buffer = make_replay(cfg, seeds, (e.frame_stack,), torch.int64, generators, device)
    else:
        buffer = make_replay(cfg, seeds, obs_shape, torch.float32, generators, device)
    threshold = e.reward_threshold if e.reward_threshold is not None else spec.reward_threshold
    return Parts(envs, eval_envs, learner, buffer, generators, device, threshold, frames)


def loop_settings(cfg: DictConfig) -> LoopSettings:
    a, x, num_envs = cfg.algo, cfg.exploration, cfg.env.num_envs
    noisy = cfg.network.noisy  # noisy nets explore through their weights: epsilon-greedy is off
    return LoopSettings(
        total_steps=cfg.total_steps,
        num_envs=num_envs,
        gamma=a.gamma,
        n_step=cfg.buffer.n_step,
        learning_starts=a.learning_starts,
        batch_size=a.batch_size,
        # Keep the ratio of train_freq env steps per gradient_steps updates with many vector envs: an
        # update phase every `update_every` vector steps, `phase_updates` gradient steps in each.
        update_every=max(1, a.train_freq // num_envs),
        phase_updates=a.gradient_steps * max(1, round(num_envs / a.train_freq)),
        lr=cfg.optimizer.lr,
        lr_end_factor=a.lr_end_factor,
        epsilon_schedule=x.schedule,
        epsilon_start=0.0 if noisy else x.start,
        epsilon_end=0.0 if noisy else x.end,
        epsilon_duration=x.duration,
        log_interval=cfg.log.interval,
        eval_interval=cfg.eval.interval,
        checkpoint_every=cfg.checkpoint.every,
        checkpoint_replay=cfg.checkpoint.replay,
        stop_on_solve=cfg.stop_on_solve,
        config=plain(cfg),
        plot_title=f"{cfg.env.id} {cfg.exp_name}" if cfg.log.plot else None,
    )


def population(cfg: DictConfig, out_dir: Path, reward_threshold: float | None, resume_step: int | None) -> Population:
    """One logger per agent: into the run directory (K = 1) or into each agent's `seed=<S>/`."""
    seeds = agent_seeds(cfg)
    if len(seeds) == 1:
        loggers = [
            RunLogger(out_dir, cfg, cfg.total_steps, reward_threshold, cfg.log.progress_bar, resume_step=resume_step)
        ]
    else:
        loggers = []
        for k, seed in enumerate(seeds):
            if resume_step is None:
                write_agent_hydra_dir(out_dir, cfg, seed)
            show_bar = cfg.log.progress_bar if k == 0 else False  # one bar for the batch
            loggers.append(
                RunLogger(
                    agent_dir(out_dir, seed),
                    agent_config(cfg, seed),
                    cfg.total_steps,
                    reward_threshold,
                    show_bar,
                    resume_step=resume_step,
                    label=f"seed={seed}: ",
                )
            )
    return Population(out_dir, seeds, cfg.env.num_envs, loggers)
