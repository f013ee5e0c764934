"""`python -m rlrun.train [overrides]`: compose the config, build the parts, run the DQN loop.

`train(cfg, out_dir)` is a plain function (tests and sweeps call it directly); `main` is the thin Hydra
wrapper around it. All config -> object wiring happens in `build()`.
"""

from __future__ import annotations

import json
import random
import sys
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

import gymnasium as gym
import hydra
import numpy as np
import torch
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf

from rlrun import schedules
from rlrun.config import register_configs
from rlrun.device import resolve_device, set_threads
from rlrun.envs import finished_episodes, make_vector_env, next_obs_for_storage
from rlrun.evaluation import evaluate
from rlrun.learner import DQNLearner
from rlrun.nstep import NStepAccumulator
from rlrun.logger import RunLogger
from rlrun.replay import PrioritizedReplayBuffer, ReplayBuffer
from rlrun.validate import ConfigError, validate

register_configs()
OmegaConf.register_new_resolver("rlrun_slug", lambda s: str(s).replace("/", "-"), replace=True)


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def check_env(env_id: str) -> gym.envs.registration.EnvSpec:
    try:
        spec = gym.spec(env_id)
    except gym.error.Error as e:
        raise ConfigError("env.id", env_id, f"a registered gymnasium id ({e})") from None
    return spec


@dataclass
class Parts:
    envs: Any
    eval_envs: Optional[Any]
    learner: DQNLearner
    buffer: ReplayBuffer
    device: torch.device
    reward_threshold: Optional[float]


def build(cfg: DictConfig) -> Parts:
    """Turn the validated config into objects. The only place that reads config groups."""
    spec = check_env(cfg.env.id)
    device = resolve_device(cfg.device.type)
    set_threads(cfg.device.threads)
    seed_everything(cfg.seed)

    e = cfg.env
    envs = make_vector_env(e.id, e.num_envs, e.vectorization, e.max_episode_steps, gamma=cfg.algo.gamma,
                           reward_scale=e.reward_scale, normalize_reward=e.normalize_reward,
                           clip_reward=e.clip_reward)
    if not isinstance(envs.single_action_space, gym.spaces.Discrete):
        envs.close()
        raise ConfigError("env.id", cfg.env.id, "an env with a Discrete action space "
                          f"(this one has {envs.single_action_space})")
    eval_envs = None
    if cfg.eval.interval > 0:
        eval_envs = make_vector_env(cfg.env.id, cfg.eval.episodes, "sync", cfg.env.max_episode_steps)

    obs_shape = envs.single_observation_space.shape
    n_actions = int(envs.single_action_space.n)
    network = instantiate(cfg.network, obs_dim=int(np.prod(obs_shape)), n_actions=n_actions).to(device)
    optimizer = instantiate(cfg.optimizer)(network.parameters())
    a = cfg.algo
    learner = DQNLearner(network, optimizer, double=a.double, loss=a.loss, max_grad_norm=a.max_grad_norm,
                         tau=a.tau, target_update_period=a.target_update_period)
    generator = torch.Generator(device=device)
    generator.manual_seed(cfg.seed)
    buffer = instantiate(cfg.buffer, obs_shape=obs_shape, device=device, generator=generator)
    assert buffer.n_step == cfg.buffer.n_step
    threshold = cfg.env.reward_threshold if cfg.env.reward_threshold is not None else spec.reward_threshold
    return Parts(envs, eval_envs, learner, buffer, device, threshold)


def train(cfg: DictConfig, out_dir: Path) -> dict[str, Any]:
    """Train one DQN agent as `cfg` says, writing everything under `out_dir`. Returns the run summary."""
    validate(cfg)
    parts = build(cfg)
    envs, learner, buffer, device = parts.envs, parts.learner, parts.buffer, parts.device
    logger = RunLogger(out_dir, cfg, cfg.total_steps, parts.reward_threshold, cfg.log.progress_bar)

    # Hot-loop constants as plain locals.
    a, x = cfg.algo, cfg.exploration
    num_envs, total_steps, gamma = cfg.env.num_envs, cfg.total_steps, a.gamma
    batch_size, learning_starts, gradient_steps = a.batch_size, a.learning_starts, a.gradient_steps
    update_every = max(1, a.train_freq // num_envs)  # iterations between update phases
    epsilon_at = schedules.SCHEDULES[x.schedule]
    eps_start, eps_end, eps_duration = x.start, x.end, x.duration
    if cfg.network.noisy:  # noisy nets explore through their weights: epsilon-greedy is off
        eps_start = eps_end = 0.0
    log_interval, eval_interval = cfg.log.interval, cfg.eval.interval
    prioritized = isinstance(buffer, PrioritizedReplayBuffer)
    lr0, lr_end_factor = cfg.optimizer.lr, a.lr_end_factor
    n_actions = envs.single_action_space.n
    rng = np.random.default_rng(cfg.seed)
    nstep = NStepAccumulator(num_envs, cfg.buffer.n_step, gamma, envs.single_observation_space.shape,
                             envs.single_observation_space.dtype)

    window: dict[str, list[torch.Tensor]] = {}
    sampled: list[torch.Tensor] = []
    step, iteration, beta = 0, 0, 1.0
    last_log_time, last_log_step = time.perf_counter(), 0
    obs, _ = envs.reset(seed=cfg.seed)
    status = "finished"
    while step < total_steps:
        epsilon = epsilon_at(eps_start, eps_end, eps_duration, step)
        explore = rng.random(num_envs) < epsilon
        actions = rng.integers(n_actions, size=num_envs)
        if not explore.all():
            with torch.no_grad():
                greedy = learner.online(torch.as_tensor(obs, device=device)).argmax(dim=1).cpu().numpy()
            actions = np.where(explore, actions, greedy)

        next_obs, rewards, terminated, truncated, infos = envs.step(actions)
        ready = nstep.step(obs, actions, rewards, next_obs_for_storage(next_obs, infos), terminated, truncated)
        if ready is not None:
            buffer.add(*map(torch.from_numpy, ready))
        obs = next_obs
        step += num_envs
        iteration += 1

        solved = False
        for _, ret, length in finished_episodes(infos):
            solved |= logger.episode_end(step, ret, length)

        if step >= learning_starts and iteration % update_every == 0:
            if lr_end_factor != 1.0:
                for group in learner.optimizer.param_groups:
                    group["lr"] = lr0 * schedules.linear(1.0, lr_end_factor, total_steps, step)
            if prioritized:
                beta = buffer.beta(step, total_steps)
            for _ in range(gradient_steps):
                batch = buffer.sample(batch_size, beta)
                metrics = learner.update(batch)
                if prioritized:
                    buffer.update_priorities(batch.indices, metrics["priority"])
                for k in ("td_loss", "q_mean", "q_var", "grad_norm"):
                    window.setdefault(k, []).append(metrics[k])
                window.setdefault("sample_age", []).append(batch.age.float().mean())
                sampled.append(batch.indices)

        if step // log_interval > (step - num_envs) // log_interval or step >= total_steps:
            now = time.perf_counter()
            sps = (step - last_log_step) / max(now - last_log_time, 1e-9)
            last_log_time, last_log_step = now, step
            epsilon = epsilon_at(eps_start, eps_end, eps_duration, step)  # the value at the logged step
            values = {"charts/epsilon": epsilon, "charts/SPS": sps,
                      "charts/learning_rate": learner.optimizer.param_groups[0]["lr"],
                      "replay/size": len(buffer)}
            if window:  # the one host-device sync of the window
                names = {"td_loss": "losses/td_loss", "q_mean": "losses/q_mean", "q_var": "losses/q_var",
                         "grad_norm": "losses/grad_norm", "sample_age": "replay/sample_age"}
                for k, vals in window.items():
                    values[names[k]] = torch.stack(vals).mean().item()
                idx = torch.cat(sampled)
                values["replay/unique_fraction"] = idx.unique().numel() / idx.numel()
                values["charts/updates"] = learner.updates
                if prioritized:
                    values["per/beta"] = beta
                    values.update({f"per/{k}": v.item() for k, v in buffer.stats().items()})
                window, sampled = {}, []
            logger.scalars(step, values)
            logger.progress(step, sps, epsilon)

        if eval_interval and (step // eval_interval > (step - num_envs) // eval_interval or step >= total_steps):
            returns = evaluate(learner.online, parts.eval_envs, cfg.seed + 1_000_000 + step, device)
            logger.scalars(step, {"eval/mean_return": float(returns.mean()), "eval/std_return": float(returns.std())})

        if solved and cfg.stop_on_solve:
            status = "solved"
            break

    torch.save(learner.online.state_dict(), out_dir / "model.pt")
    envs.close()
    if parts.eval_envs is not None:
        parts.eval_envs.close()
    summary = logger.close(step, status)
    if cfg.log.plot:
        logger.plot(f"{cfg.env.id} {cfg.exp_name} seed={cfg.seed}")
    return summary


def record_failure(out_dir: Path, error: BaseException) -> None:
    """Mark a sweep job as failed in its own directory, so the sweep goes on and the report lists it."""
    detail = "".join(traceback.format_exception(error)) if not isinstance(error, ConfigError) else str(error)
    (out_dir / "summary.json").write_text(json.dumps({"status": "failed", "error": str(error)}, indent=2) + "\n")
    (out_dir / "error.txt").write_text(detail)


@hydra.main(version_base="1.3", config_path="pkg://rlrun.conf", config_name="config")
def main(cfg: DictConfig) -> Optional[float]:
    """Returns the objective that sweepers (Optuna) optimise: the final 100-episode mean training return."""
    hydra_cfg = HydraConfig.get()
    out_dir = Path(hydra_cfg.runtime.output_dir)
    multirun = hydra_cfg.mode == RunMode.MULTIRUN
    try:
        summary = train(cfg, out_dir)
    except ConfigError as e:
        if not multirun:
            print(f"rlrun: {e}", file=sys.stderr)
            sys.exit(2)
        print(f"rlrun: job {hydra_cfg.job.num} failed: {e}", file=sys.stderr)
        record_failure(out_dir, e)
        return None
    except Exception as e:
        if not multirun:
            raise
        print(f"rlrun: job {hydra_cfg.job.num} failed: {e!r} (details in {out_dir / 'error.txt'})", file=sys.stderr)
        record_failure(out_dir, e)
        return None
    return summary["final_mean_return_100"]


if __name__ == "__main__":
    main()
