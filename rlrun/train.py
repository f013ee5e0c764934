"""`python -m rlrun.train [overrides]`: build the parts from the config and run the DQN loop.

`train(cfg, out_dir)` is a plain function (tests and sweeps call it directly); the command line around it
(checks before anything is written, the Hydra app, exit codes) is `rlrun.cli`. All config -> object
wiring happens in `build()`.
"""

from __future__ import annotations

if __name__ == "__main__":  # `python -m rlrun.train`: a signal during the imports below gets one line too
    from rlrun import signals

    signals.stop_on_signal()

import logging
import random
import signal
import threading
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

import gymnasium as gym
import numpy as np
import torch
from hydra.utils import get_class, instantiate
from omegaconf import DictConfig, OmegaConf

from rlrun import checkpoint as ckpt
from rlrun import rundir
from rlrun.acting import GreedyActor
from rlrun import schedules
from rlrun.config import register_configs
from rlrun.device import resolve_device, set_threads
from rlrun.envs import check_spaces, env_spec, finished_episodes, make_vector_env, next_obs_for_storage
from rlrun.evaluation import evaluate
from rlrun.exploration import ExplorationDraws
from rlrun.frames import FrameStore
from rlrun.learner import DQNLearner, NonFiniteError
from rlrun.nstep import NStepAccumulator
from rlrun.logger import RunLogger
from rlrun.replay import PrioritizedReplayBuffer, ReplayBuffer
from rlrun.stacked import StackedQNetwork
from rlrun.stacked_replay import StackedPrioritizedReplayBuffer, StackedReplayBuffer
from rlrun.validate import ConfigError, validate

log = logging.getLogger(__name__)
register_configs()


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


STACKED_BUFFERS = {ReplayBuffer: StackedReplayBuffer, PrioritizedReplayBuffer: StackedPrioritizedReplayBuffer}


@dataclass
class Parts:
    envs: Any
    eval_envs: Optional[Any]
    learner: DQNLearner
    buffer: ReplayBuffer
    device: torch.device
    reward_threshold: Optional[float]
    frames: Optional[FrameStore] = None


def build(cfg: DictConfig) -> Parts:
    """Turn the validated config into objects. The only place that reads config groups.

    With `seeds=K > 1` the same parts are built for K agents (rlrun.batched): one vector env of
    K x num_envs sub-envs, K networks each initialised as its single-seed run would be, stacked into one
    `StackedQNetwork`, one optimizer over the stacked parameters, and stacked replay with one sampling
    generator per agent.
    """
    spec = env_spec(cfg.env.id)
    device = resolve_device(cfg.device.type)
    set_threads(cfg.device.threads)
    seed_everything(cfg.seed)
    agents = cfg.seeds
    seeds = [cfg.seed + k for k in range(agents)]

    e = cfg.env
    atari = None if e.atari is None else OmegaConf.to_container(e.atari)
    try:
        envs = make_vector_env(e.id, e.num_envs * agents, e.vectorization, e.max_episode_steps, gamma=cfg.algo.gamma,
                               reward_scale=e.reward_scale, normalize_reward=e.normalize_reward,
                               clip_reward=e.clip_reward, action_bins=e.action_bins, frame_stack=e.frame_stack,
                               atari=atari)
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
    eval_envs = None
    if cfg.eval.interval > 0:
        eval_envs = make_vector_env(e.id, cfg.eval.episodes * agents, "sync", e.max_episode_steps, action_bins=e.action_bins,
                                    frame_stack=e.frame_stack, atari=atari, train=False)

    obs_shape = envs.single_observation_space.shape
    n_actions = int(envs.single_action_space.n)
    nets = []
    for seed in seeds:  # each agent's initialisation is that of its own single-seed run
        seed_everything(seed)
        nets.append(instantiate(cfg.network, obs_dim=int(np.prod(obs_shape)), n_actions=n_actions,
                                obs_shape=list(obs_shape)).to(device))
    network = nets[0] if agents == 1 else StackedQNetwork.from_networks(nets)
    optimizer = instantiate(cfg.optimizer)(network.parameters())
    a = cfg.algo
    d = cfg.device
    compile_, compile_mode = d.compile, d.compile_mode
    if d.cuda_graphs:
        if device.type == "cuda":
            compile_, compile_mode = True, "reduce-overhead"
        else:
            warnings.warn("device.cuda_graphs=true needs a CUDA device; running without CUDA graphs")
    learner = DQNLearner(network, optimizer, double=a.double, loss=a.loss, max_grad_norm=a.max_grad_norm,
                         tau=a.tau, target_update_period=a.target_update_period, on_nonfinite=a.on_nonfinite,
                         amp=d.amp, compile=compile_, compile_mode=compile_mode)
    generators = [torch.Generator(device=device) for _ in seeds]
    for generator, seed in zip(generators, seeds):
        generator.manual_seed(seed)
    generator = generators[0]
    frames = None
    if e.frame_stack:  # replay stores frame-index stacks; the frames themselves live once in `frames`
        capacity = cfg.buffer.capacity
        # Room for every stored transition's frames: one per env step plus one per episode end, with a
        # margin for episodes down to ~16 steps on average (checked at every log, see FrameStore.check).
        frames = FrameStore(capacity + capacity // 16 + 1024 + e.num_envs * e.frame_stack, obs_shape[1:],
                            e.frame_stack, e.num_envs, device)
        buffer = instantiate(cfg.buffer, obs_shape=(e.frame_stack,), obs_dtype=torch.int64, device=device,
                             generator=generator)
    elif agents == 1:
        buffer = instantiate(cfg.buffer, obs_shape=obs_shape, device=device, generator=generator)
    else:
        kwargs = OmegaConf.to_container(cfg.buffer)
        stacked_cls = STACKED_BUFFERS[get_class(kwargs.pop("_target_"))]
        buffer = stacked_cls(agents, obs_shape=obs_shape, device=device, generators=generators, **kwargs)
    threshold = cfg.env.reward_threshold if cfg.env.reward_threshold is not None else spec.reward_threshold
    return Parts(envs, eval_envs, learner, buffer, device, threshold, frames)


class Preempted(Exception):
    """SIGTERM or SIGINT arrived; a checkpoint has been written."""


class Trainer:
    """The DQN loop and the state it carries between steps, which a checkpoint captures whole."""

    def __init__(self, cfg: DictConfig, out_dir: Path, parts: Parts, resume: Optional[dict] = None):
        self.cfg, self.out_dir, self.parts = cfg, Path(out_dir), parts
        envs = parts.envs
        self.exploration = ExplorationDraws([cfg.seed], cfg.env.num_envs, int(envs.single_action_space.n))
        stored_shape, stored_dtype = envs.single_observation_space.shape, envs.single_observation_space.dtype
        if parts.frames is not None:
            stored_shape, stored_dtype = (cfg.env.frame_stack,), np.int64
        self.nstep = NStepAccumulator(cfg.env.num_envs, cfg.buffer.n_step, cfg.algo.gamma, stored_shape, stored_dtype)
        self.step, self.iteration = 0, 0
        self.window: dict[str, list[torch.Tensor]] = {}
        self.sampled: list[torch.Tensor] = []
        self.signal: Optional[int] = None
        resume_step = None if resume is None else resume["step"]
        self.logger = RunLogger(out_dir, cfg, cfg.total_steps, parts.reward_threshold, cfg.log.progress_bar,
                                resume_step=resume_step)
        self.loggers = [self.logger]
        self._setup_shared(parts)
        if resume is None:
            self.obs, _ = envs.reset(seed=self.env_reset_seed())
            if parts.frames is not None:
                parts.frames.start(self.obs)
        else:
            self.load_state_dict(resume)

    def _setup_shared(self, parts: Parts) -> None:
        """What the single-seed and the batched loop (rlrun.batched) both keep."""
        self.generators = getattr(parts.buffer, "generators", None) or [parts.buffer.generator]
        self.prioritized = isinstance(parts.buffer, (PrioritizedReplayBuffer, StackedPrioritizedReplayBuffer))
        self.actor = GreedyActor(parts.learner.online, parts.device)
        # Read once: config look-ups are slow next to the update phase they feed.
        cfg = self.cfg
        self._phase = (cfg.algo.batch_size, cfg.optimizer.lr, cfg.algo.lr_end_factor, cfg.total_steps)

    def env_reset_seed(self) -> Any:
        return self.cfg.seed  # sub-env i gets seed + i

    # --- checkpoint state -------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        p = self.parts
        return {
            "format": 1,
            "config": OmegaConf.to_container(self.cfg, resolve=True),
            "step": self.step,
            "iteration": self.iteration,
            "learner": p.learner.state_dict(),
            "buffer": p.buffer.state_dict(include_storage=self.cfg.checkpoint.replay),
            "nstep": ckpt.to_safe(self.nstep.state_dict()),
            "obs": ckpt.to_safe(np.asarray(self.obs)),
            "envs": ckpt.env_state(p.envs),
            "rng": [ckpt.rng_state(r, g) for r, g in zip(self.exploration.rngs, self.generators)],
            "exploration": self.exploration.state_dict(),
            "loggers": [lg.state_dict() for lg in self.loggers],
            "window": {k: [v.cpu() for v in vals] for k, vals in self.window.items()},
            "sampled": [v.cpu() for v in self.sampled],
            "frames": None if p.frames is None else p.frames.state_dict(),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        p = self.parts
        try:
            p.learner.load_state_dict(state["learner"])
            p.buffer.load_state_dict(state["buffer"])
        except (RuntimeError, KeyError, ValueError) as e:
            raise ckpt.CheckpointError(f"the checkpoint does not fit this config: {str(e).splitlines()[0]}") from None
        self.step, self.iteration = state["step"], state["iteration"]
        self.nstep.load_state_dict(ckpt.from_safe(state["nstep"]))
        self.obs = ckpt.from_safe(state["obs"])
        p.envs.reset(seed=self.env_reset_seed())  # builds the envs' RNGs, then overwrite them with the saved state
        ckpt.restore_env_state(p.envs, state["envs"])
        rng_states = state["rng"] if isinstance(state["rng"], list) else [state["rng"]]  # one dict before seeds=K
        for rng_state, rng, generator in zip(rng_states, self.exploration.rngs, self.generators):
            ckpt.restore_rng(rng_state, rng, generator)
        self.exploration.load_state_dict(state.get("exploration"))
        for lg, lg_state in zip(self.loggers, state.get("loggers") or [state.get("logger")]):
            lg.load_state_dict(lg_state)
        dev = p.device
        self.window = {k: [v.to(dev) for v in vals] for k, vals in state["window"].items()}
        self.sampled = [v.to(dev) for v in state["sampled"]]
        if p.frames is not None:
            p.frames.load_state_dict(state["frames"])

    def save_checkpoint(self) -> Path:
        for lg in self.loggers:
            lg.flush()
        return ckpt.save(self.out_dir, self.state_dict())

    # --- pieces of the loop shared with rlrun.batched ----------------------------------------
    def update_phase(self, step: int, iteration: int, obs: Any, count: int) -> None:
        """`count` gradient steps (with the lr schedule and PER's beta at `step`); their metrics stay on the
        device in `self.window`."""
        p = self.parts
        learner, buffer, frames = p.learner, p.buffer, p.frames
        batch_size, lr0, lr_end_factor, total_steps = self._phase
        if lr_end_factor != 1.0:
            for group in learner.optimizer.param_groups:
                group["lr"] = lr0 * schedules.linear(1.0, lr_end_factor, total_steps, step)
        beta = buffer.beta(step, total_steps) if self.prioritized else 1.0
        for _ in range(count):
            batch = buffer.sample(batch_size, beta)
            if frames is not None:
                batch = frames.decode(batch)
            try:
                metrics = learner.update(batch)
            except NonFiniteError as e:
                self.step, self.iteration, self.obs = step, iteration, obs
                with rundir.open_atomic(self.out_dir / "nonfinite.pt") as f:
                    torch.save(self.state_dict(), f)
                raise NonFiniteError(f"{e} at env step {step} (update {learner.updates + 1}); "
                                     f"the state before this update is in {self.out_dir / 'nonfinite.pt'}") from None
            if metrics is None:  # a non-finite update skipped (algo.on_nonfinite=skip)
                continue
            if self.prioritized:
                buffer.update_priorities(batch.indices, metrics["priority"])
            for k in ("td_loss", "q_mean", "q_var", "grad_norm"):
                self.window.setdefault(k, []).append(metrics[k])
            self.window.setdefault("sample_age", []).append(batch.age.mean(dim=-1, dtype=torch.float32))
            self.sampled.append(batch.indices)

    METRIC_TAGS = {"td_loss": "losses/td_loss", "q_mean": "losses/q_mean", "q_var": "losses/q_var",
                   "grad_norm": "losses/grad_norm", "sample_age": "replay/sample_age"}

    def read_window(self) -> dict[str, Any]:
        """The window's metrics (means over its gradient steps, replay diversity, PER statistics), read with
        one host-device sync and reset. Floats, or per-agent lists for stacked agents."""
        if not self.window:
            return {}
        on_device = {self.METRIC_TAGS[k]: torch.stack(vals).float().mean(dim=0) for k, vals in self.window.items()}
        idx = torch.cat(self.sampled, dim=-1).sort(dim=-1).values
        distinct = (idx[..., 1:] != idx[..., :-1]).sum(dim=-1) + 1  # a tensor: no sync, unlike unique().numel()
        on_device["replay/unique_fraction"] = distinct.float() / idx.shape[-1]
        if self.prioritized:
            on_device.update({f"per/{k}": v.float() for k, v in self.parts.buffer.stats().items()})
        self.window, self.sampled = {}, []
        return dict(zip(on_device, torch.stack(list(on_device.values())).tolist()))  # the one sync

    # --- the loop ---------------------------------------------------------------------------
    def _on_signal(self, signum, frame) -> None:
        self.signal = signum  # acted on between two env steps, where the state is consistent

    def run(self) -> dict[str, Any]:
        cfg, parts = self.cfg, self.parts
        envs, learner, buffer, device = parts.envs, parts.learner, parts.buffer, parts.device
        logger, nstep, exploration, frames = self.logger, self.nstep, self.exploration, parts.frames
        actor = self.actor

        # Hot-loop constants as plain locals.
        a, x = cfg.algo, cfg.exploration
        num_envs, total_steps = cfg.env.num_envs, cfg.total_steps
        learning_starts, gradient_steps, batch_size = a.learning_starts, a.gradient_steps, a.batch_size
        # Keep the update ratio of train_freq env steps per gradient_steps updates with many vector envs:
        # an update phase every `update_every` iterations, `phase_updates` gradient steps in each.
        update_every = max(1, a.train_freq // num_envs)
        phase_updates = gradient_steps * max(1, round(num_envs / a.train_freq))
        epsilon_at = schedules.SCHEDULES[x.schedule]
        eps_start, eps_end, eps_duration = x.start, x.end, x.duration
        if cfg.network.noisy:  # noisy nets explore through their weights: epsilon-greedy is off
            eps_start = eps_end = 0.0
        log_interval, eval_interval, ckpt_every = cfg.log.interval, cfg.eval.interval, cfg.checkpoint.every
        stop_on_solve = cfg.stop_on_solve

        def crossed(interval: int) -> bool:
            return interval > 0 and step // interval > (step - num_envs) // interval

        step, iteration, obs = self.step, self.iteration, self.obs
        last_log_time, last_log_step = time.perf_counter(), step
        status = "finished"
        # Signal handlers can only be installed from the main thread (not, e.g., in threaded sweep trials).
        main_thread = threading.current_thread() is threading.main_thread()
        previous = {s: signal.signal(s, self._on_signal) for s in (signal.SIGTERM, signal.SIGINT)} if main_thread else {}
        try:
            while step < total_steps:
                # Uniform-random play until learning starts (noisy nets included), then the schedule.
                epsilon = 1.0 if step < learning_starts else epsilon_at(eps_start, eps_end, eps_duration, step)
                explore, actions = (a[0] for a in exploration.next(epsilon))
                if not explore.all():
                    actions = np.where(explore, actions, actor(obs))

                next_obs, rewards, terminated, truncated, infos = envs.step(actions)
                real_next_obs = next_obs_for_storage(next_obs, infos)
                if frames is None:
                    ready = nstep.step(obs, actions, rewards, real_next_obs, terminated, truncated)
                else:  # store frame-index stacks instead of pixels
                    obs_idx = frames.current.copy()
                    next_idx = frames.advance(next_obs, real_next_obs, terminated | truncated)
                    ready = nstep.step(obs_idx, actions, rewards, next_idx, terminated, truncated)
                if ready is not None:
                    buffer.add(*ready)
                obs = next_obs
                step += num_envs
                iteration += 1

                solved = logger.episodes_end(step, [(step - num_envs + i + 1, ret, length)
                                                    for i, ret, length in finished_episodes(infos)])

                if step >= learning_starts and iteration % update_every == 0 and len(buffer) >= batch_size:
                    self.update_phase(step, iteration, obs, phase_updates)

                if crossed(log_interval) or step >= total_steps:
                    now = time.perf_counter()
                    sps = (step - last_log_step) / max(now - last_log_time, 1e-9)
                    last_log_time, last_log_step = now, step
                    epsilon = 1.0 if step < learning_starts else epsilon_at(eps_start, eps_end, eps_duration, step)
                    values = {"charts/epsilon": epsilon, "charts/SPS": sps,
                              "charts/learning_rate": learner.optimizer.param_groups[0]["lr"],
                              "replay/size": len(buffer), "charts/updates": learner.updates,
                              "charts/skipped_updates": learner.skipped}
                    if self.window and self.prioritized:
                        values["per/beta"] = buffer.beta(step, total_steps)  # the schedule at this step
                    values.update(self.read_window())
                    if frames is not None:
                        frames.check(buffer)
                    if device.type == "cuda":
                        values["device/memory_allocated_mb"] = torch.cuda.memory_allocated(device) / 2**20
                        values["device/max_memory_allocated_mb"] = torch.cuda.max_memory_allocated(device) / 2**20
                    logger.scalars(step, values)
                    logger.progress(step, sps, epsilon)

                if crossed(eval_interval) or (eval_interval and step >= total_steps):
                    returns = evaluate(learner.online, parts.eval_envs, cfg.seed + 1_000_000 + step, device)
                    logger.scalars(step, {"eval/mean_return": float(returns.mean()),
                                          "eval/std_return": float(returns.std())})

                self.step, self.iteration, self.obs = step, iteration, obs
                if crossed(ckpt_every):
                    self.save_checkpoint()
                if self.signal is not None:
                    self.save_checkpoint()
                    raise Preempted(signal.Signals(self.signal).name)
                if solved and stop_on_solve:
                    status = "solved"
                    break
        finally:
            for s, handler in previous.items():
                signal.signal(s, handler)

        self.save_checkpoint()
        with rundir.open_atomic(self.out_dir / "model.pt") as f:
            torch.save(learner.online.state_dict(), f)
        summary = logger.close(step, status, self.summary_extra())
        if cfg.log.plot:
            logger.plot(f"{cfg.env.id} {cfg.exp_name} seed={cfg.seed}")
        return summary

    def summary_extra(self) -> dict[str, Any]:
        """Run-level figures for summary.json besides the logger's own."""
        extra: dict[str, Any] = {"gradient_updates": self.parts.learner.updates}
        if self.parts.device.type == "cuda":
            extra["device_max_memory_allocated_mb"] = torch.cuda.max_memory_allocated(self.parts.device) / 2**20
        return extra

    def close(self) -> None:
        self.parts.envs.close()
        if self.parts.eval_envs is not None:
            self.parts.eval_envs.close()


def train(cfg: DictConfig, out_dir: Path, resume: Optional[dict] = None) -> dict[str, Any]:
    """Train one DQN agent as `cfg` says, writing everything under `out_dir`, which this process owns for
    the run (`rlrun.rundir`); with `resume` (a loaded checkpoint), continue that run. Returns the run
    summary."""
    validate(cfg)
    with rundir.owned(out_dir):
        if cfg.seeds > 1:
            from rlrun.batched import BatchedTrainer

            trainer: Any = BatchedTrainer(cfg, out_dir, build(cfg), resume)
        else:
            trainer = Trainer(cfg, out_dir, build(cfg), resume)
        try:
            return trainer.run()
        finally:
            trainer.close()


if __name__ == "__main__":
    from rlrun.cli import main

    main()
