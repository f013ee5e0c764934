"""From the validated config to the objects a run is made of: the one place the config becomes objects.

`build(cfg)` makes the parts (envs, network, learner, replay), `loop_settings(cfg)` the plain values the
loop runs on, `population(cfg, ...)` the agents' loggers and directories. Everything below hands plain
values to constructors; where a YAML key ends up is found by searching this file for it, or an algorithm's
own keys its module (rlrun/algos). The other modules that read the config, each for its reason, are listed
in tests/unit/test_architecture.py (CONFIG_HANDLERS).

With `seeds=K > 1` the same parts are built for K agents: one vector env of K x num_envs sub-envs, K
networks each initialised as its single-seed run would be, stacked into one module (rlrun.nets.stacked), one
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

import rlrun.storage.agent_dirs
import rlrun.storage.rundir
import rlrun.training.agents
from rlrun.algos import algorithm
from rlrun.config.replay_memory import frame_store_frames, stored_obs_itemsize
from rlrun.config.schemas import experiment_name
from rlrun.config.validate import check_explored
from rlrun.envs.vector import check_spaces, env_spec, make_vector_env
from rlrun.errors import ConfigError
from rlrun.logs.logger import ConfigRecord, RunLogger, flat_hparams
from rlrun.nets.networks import FRAME_ENCODERS, QNetwork
from rlrun.nets.stacked import StackedQNetwork, VmapQNetwork, stack_networks
from rlrun.replay import PrioritizedReplayBuffer, ReplayBuffer, StackedPrioritizedReplayBuffer, StackedReplayBuffer
from rlrun.replay.frames import FrameStore
from rlrun.replay.rollout import Rollout
from rlrun.training import optimizer as optimizers
from rlrun.training.device import (
    flush_denormals,
    keep_freed_memory,
    memory_format,
    resolve_device,
    set_threads,
    warn_emulated_bf16,
)
from rlrun.training.parts import LoopSettings, Parts
from rlrun.training.population import Population, run_overrides, write_agent_hydra_dir


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def agent_seeds(cfg: DictConfig) -> list[int]:
    return [values["seed"] for values in rlrun.training.agents.entries(cfg)]


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
    try:
        envs = make_vector_env(
            e.id,
            e.num_envs * agents,
            e.vectorization,
            e.max_episode_steps,
            gamma=cfg.algo.gamma,
            # per sub-env where agents differ
            reward_scale=rlrun.training.agents.sub_env_values(cfg, "env.reward_scale"),
            normalize_reward=e.normalize_reward,
            clip_reward=e.clip_reward,
            action_bins=e.action_bins,
            frame_stack=e.frame_stack,
            atari=plain(e.atari),
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
    eval_envs = make_eval_envs(cfg, eval_num_envs(cfg) * agents) if cfg.eval.interval > 0 else None
    return envs, eval_envs


def eval_num_envs(cfg: DictConfig) -> int:
    """Envs per agent that play an evaluation's episodes: eval.num_envs, at most one per episode (null: one each)."""
    return min(cfg.eval.num_envs or cfg.eval.episodes, cfg.eval.episodes)


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
        obs_dim=int(np.prod(obs_shape)),
        n_actions=n_actions,
        obs_shape=list(obs_shape),
        **options(cfg.network),
    ).to(device)


def make_optimizer(cfg: DictConfig, network: torch.nn.Module, capturable: bool = False) -> torch.optim.Optimizer:
    """The `optimizer` group's optimizer (rlrun.training.optimizer): an lr schedule per agent where agents have
    their own; the lr in a tensor for a recorded (`capturable`) or compiled step (`device.compile_optimizer`)."""
    agents = rlrun.training.agents
    lrs, ends = agents.values(cfg, "optimizer.lr"), agents.values(cfg, "algo.lr_end_factor")
    split = agents.explored(cfg, "optimizer.lr")  # PBT changes each agent's lr on its own
    tensor_lr = capturable or cfg.device.compile_optimizer
    return optimizers.make_optimizer(
        cfg.optimizer._target_,
        options(cfg.optimizer),
        network,
        lrs,
        ends,
        len(agent_seeds(cfg)),
        split,
        capturable,
        tensor_lr,
    )


def make_replay(
    cfg: DictConfig, seeds: list[int], obs_shape, obs_dtype: torch.dtype, generators, device
) -> ReplayBuffer | StackedReplayBuffer:
    """Uniform or prioritized replay (buffer._target_), for one agent or stacked for K."""
    prioritized = cfg.buffer._target_.endswith("PrioritizedReplayBuffer")
    kwargs = options(cfg.buffer, "n_step")  # n_step is the n-step accumulator's (loop_settings)
    if len(seeds) == 1:
        cls = PrioritizedReplayBuffer if prioritized else ReplayBuffer
        return cls(obs_shape=obs_shape, obs_dtype=obs_dtype, device=device, generator=generators[0], **kwargs)
    stacked_cls = StackedPrioritizedReplayBuffer if prioritized else StackedReplayBuffer
    if prioritized:  # PER's exponents may differ per agent: a list, one per agent
        kwargs.update({key: rlrun.training.agents.values(cfg, f"buffer.{key}") for key in ("alpha", "beta_start")})
    return stacked_cls(
        len(seeds), obs_shape=obs_shape, obs_dtype=obs_dtype, device=device, generators=generators, **kwargs
    )


def build(cfg: DictConfig) -> Parts:
    spec = env_spec(cfg.env.id)
    device = resolve_device(cfg.device.type, pixels=cfg.network.encoder != "mlp")
    set_threads(cfg.device.threads)
    flush_denormals()
    keep_freed_memory()
    seed_everything(cfg.seed)
    seeds = agent_seeds(cfg)
    envs, eval_envs = make_envs(cfg, len(seeds))

    obs_shape = envs.single_observation_space.shape
    n_actions = int(envs.single_action_space.n)
    nets = []
    for seed in seeds:  # each agent's initialisation is that of its own single-seed run
        seed_everything(seed)
        nets.append(make_network(cfg, obs_shape, n_actions, device))
    network: QNetwork | StackedQNetwork | VmapQNetwork = nets[0] if len(seeds) == 1 else stack_networks(nets)
    d = cfg.device
    layout = memory_format(d.channels_last, device, cfg.network.encoder)
    # One agent's frame network (84x84 frames; MinAtar's 10x10 grids are too small to gain). Stacked agents'
    # weights have a leading agent axis, which has no channels-last layout.
    if cfg.network.encoder in FRAME_ENCODERS and len(seeds) == 1:
        # Module.to(memory_format=...) is documented; torch's type stubs omit the keyword
        network = network.to(memory_format=layout)  # type: ignore[call-overload]
    warn_emulated_bf16(d.amp, device)
    cuda_graphs = d.cuda_graphs and device.type == "cuda"
    if d.cuda_graphs and not cuda_graphs:
        warnings.warn("device.cuda_graphs=true needs a CUDA device; running without CUDA graphs", stacklevel=2)
    optimizer = make_optimizer(cfg, network, capturable=cuda_graphs)
    generators = [torch.Generator(device=device).manual_seed(seed) for seed in seeds]
    algo = algorithm(cfg.algo)
    learner = algo.make_learner(cfg, network, optimizer, generators, lambda key: rlrun.training.agents.values(cfg, key))
    threshold = cfg.env.reward_threshold if cfg.env.reward_threshold is not None else spec.reward_threshold
    if algo.collector == "rollout":  # a rollout of algo.num_steps vector steps where DQN has replay
        space = envs.single_observation_space
        rollout = Rollout(cfg.algo.num_steps, len(generators), cfg.env.num_envs, space.shape, space.dtype)
        return Parts(envs, eval_envs, learner, rollout, generators, device, threshold)

    e, capacity = cfg.env, cfg.buffer.capacity
    frames = None
    if e.frame_stack:  # replay stores frame-index stacks; the frames themselves live once in `frames`
        per_agent = frame_store_frames(capacity, e.num_envs, e.frame_stack)  # checked at every log: FrameStore.check
        frames = FrameStore(per_agent * len(seeds), obs_shape[1:], e.frame_stack, e.num_envs * len(seeds), device)
        buffer = make_replay(cfg, seeds, (e.frame_stack,), torch.int64, generators, device)
        frames.augment, buffer.augment = buffer.augment, None  # buffer.augment shifts pixels, not frame indices
    else:
        # uint8 observations (MinAtar's grids) stored as they come: a quarter of float32's memory
        obs_dtype = torch.uint8 if stored_obs_itemsize(envs.single_observation_space.dtype) == 1 else torch.float32
        buffer = make_replay(cfg, seeds, obs_shape, obs_dtype, generators, device)
    return Parts(envs, eval_envs, learner, buffer, generators, device, threshold, frames, cuda_graphs)


def loop_settings(cfg: DictConfig) -> LoopSettings:
    a, x, num_envs = cfg.algo, cfg.exploration, cfg.env.num_envs
    noisy = cfg.network.noisy  # noisy nets explore through their weights: epsilon-greedy is off
    algo = algorithm(a)
    schedule = algo.schedule(cfg)  # how the loop feeds the algorithm's learner
    return LoopSettings(
        total_steps=cfg.total_steps,
        num_envs=num_envs,
        gamma=rlrun.training.agents.sub_env_values(cfg, "algo.gamma"),  # a list (one per sub-env) where agents differ
        n_step=schedule.n_step,
        learning_starts=a.learning_starts,
        batch_size=schedule.batch_size,
        update_every=schedule.update_every,
        phase_updates=schedule.phase_updates,
        lr=rlrun.training.agents.values(cfg, "optimizer.lr"),  # these: a list (one per agent) where agents differ
        lr_end_factor=rlrun.training.agents.values(cfg, "algo.lr_end_factor"),
        epsilon_schedule=x.schedule,
        epsilon_start=0.0 if noisy else rlrun.training.agents.values(cfg, "exploration.start"),
        epsilon_end=0.0 if noisy else rlrun.training.agents.values(cfg, "exploration.end"),
        epsilon_duration=rlrun.training.agents.values(cfg, "exploration.duration"),
        log_interval=cfg.log.interval,
        progress_interval=cfg.log.progress_interval,
        eval_interval=cfg.eval.interval,
        eval_epsilon=cfg.eval.epsilon,
        eval_episodes=cfg.eval.episodes,
        checkpoint_every=cfg.checkpoint.every,
        checkpoint_replay=cfg.checkpoint.replay,
        stop_on_solve=cfg.stop_on_solve,
        config=plain(cfg),
        plot_title=f"{cfg.env.id} {experiment_name(cfg.exp_name, algo.name)}" if cfg.log.plot else None,
        rollout=algo.collector == "rollout",
    )


def config_record(cfg: DictConfig) -> ConfigRecord:
    """The config as the logging backends record it when a run starts."""
    return ConfigRecord(flat_hparams(OmegaConf.to_container(cfg, resolve=True)), OmegaConf.to_yaml(cfg))


def population(cfg: DictConfig, out_dir: Path, reward_threshold: float | None, resume_step: int | None) -> Population:
    """One logger per agent, with the chosen logging backends: into the run directory (K = 1) or into each
    agent's `seed=<S>/`, logged as a run of its own."""
    # each backend's client only when its logger is chosen
    from rlrun.logs.sinks import SinkRun, make_sinks, run_name

    seeds, labels = agent_seeds(cfg), rlrun.training.agents.agent_labels(cfg)
    backends, name = plain(cfg.logger), run_name(out_dir)
    exp_name = experiment_name(cfg.exp_name, algorithm(cfg.algo).name)
    if len(seeds) == 1:
        run = SinkRun(out_dir, out_dir, name, exp_name, resume_step)
        logger = RunLogger(
            out_dir,
            config_record(cfg),
            cfg.total_steps,
            reward_threshold,
            cfg.log.progress_bar,
            resume_step=resume_step,
            sinks=make_sinks(backends, run),
        )
        return Population(out_dir, seeds, cfg.env.num_envs, [logger], labels=labels)
    # Checked and owned before anything is written: inside the run, never through a link, never another run's.
    dirs = rlrun.storage.agent_dirs.check(*rlrun.training.agents.dir_plan(cfg), out_dir, new=resume_step is None)
    for agent_dir in dirs:  # owned for the rest of the process, as the run directory is
        rlrun.storage.rundir.claim(agent_dir)
    configs, entries = rlrun.training.agents.agent_configs(cfg), rlrun.training.agents.entries(cfg)
    overrides = run_overrides(out_dir) if resume_step is None else []
    loggers = []
    for k, label in enumerate(labels):
        if resume_step is None:
            write_agent_hydra_dir(dirs[k], OmegaConf.to_yaml(configs[k]), entries[k], overrides)
        show_bar = cfg.log.progress_bar if k == 0 else False  # one bar for the batch
        run = SinkRun(dirs[k], out_dir, f"{name}/{label}", exp_name, resume_step, name)
        loggers.append(
            RunLogger(
                dirs[k],
                config_record(configs[k]),
                cfg.total_steps,
                reward_threshold,
                show_bar,
                resume_step=resume_step,
                label=f"{label}: ",
                sinks=make_sinks(backends, run),
            )
        )
    pbt = rlrun.training.agents.make_pbt(cfg, lambda key, found: check_explored(cfg, key, found))
    return Population(out_dir, seeds, cfg.env.num_envs, loggers, labels, pbt)
