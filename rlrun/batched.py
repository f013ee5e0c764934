"""Many seeds in one process: `python -m rlrun.train seeds=K` trains K independent agents as one batched
computation.

Agent k has seed `seed + k` and is, step for step, the agent that `python -m rlrun.train seed=<seed + k>`
would train: its network is initialised after seeding torch with its seed, its sub-envs are seeded
`seed + k + i` (i < env.num_envs), its epsilon-greedy draws come from `np.random.default_rng(seed + k)`,
its replay samples from a torch generator seeded `seed + k`, and evaluation seeds its envs as the
single-seed run does. What is shared is only the arithmetic: one forward pass of the stacked networks
for all agents' observations, one stacked gradient step (each agent's loss is its own mean, summed, and
gradient norms are clipped per agent), one gather from stacked replay. tests/test_batched.py checks the
equality against single-seed runs.

Each agent writes what a single-seed run writes (TensorBoard events, episodes.csv, summary.json,
returns.png, model.pt, and a `.hydra/` with its own config) into `<run dir>/seed=<seed + k>/`, so
TensorBoard, `rlrun.report` and `rlrun.evaluate` treat the agents exactly as K single-seed runs. The
checkpoint (all agents together) stays in the run dir; `resume=<run dir>` continues all of them.
"""

from __future__ import annotations

import json
import signal
import threading
import time
from pathlib import Path
from typing import Any, Optional

import numpy as np
import torch
import yaml
from omegaconf import DictConfig, OmegaConf

from rlrun import rundir, schedules
from rlrun.envs import finished_episodes, next_obs_for_storage
from rlrun.evaluation import evaluate_stacked
from rlrun.exploration import ExplorationDraws
from rlrun.logger import RunLogger
from rlrun.nstep import NStepAccumulator
from rlrun.train import Preempted, Trainer


def agent_seeds(cfg: DictConfig) -> list[int]:
    return [cfg.seed + k for k in range(cfg.seeds)]


def agent_dir(out_dir: Path, seed: int) -> Path:
    return Path(out_dir) / f"seed={seed}"


def agent_config(cfg: DictConfig, seed: int) -> DictConfig:
    """The config of the single-seed run that this agent is."""
    agent = OmegaConf.create(OmegaConf.to_container(cfg, resolve=True))
    agent.seed, agent.seeds = seed, 1
    return agent


def write_agent_hydra_dir(out_dir: Path, cfg: DictConfig, seed: int) -> None:
    """`.hydra/config.yaml` and `overrides.yaml` of agent `seed`, as its single-seed job would have them
    (the job's overrides with `seed`/`seeds` replaced by `seed=<this agent's seed>`)."""
    hydra_dir = agent_dir(out_dir, seed) / ".hydra"
    hydra_dir.mkdir(parents=True, exist_ok=True)
    (hydra_dir / "config.yaml").write_text(OmegaConf.to_yaml(agent_config(cfg, seed)))
    job_overrides = Path(out_dir) / ".hydra" / "overrides.yaml"
    overrides = yaml.safe_load(job_overrides.read_text()) if job_overrides.exists() else []
    kept = [o for o in overrides or [] if o.lstrip("+~").split("=", 1)[0] not in ("seed", "seeds")]
    (hydra_dir / "overrides.yaml").write_text(yaml.safe_dump(kept + [f"seed={seed}"]))


class BatchedTrainer(Trainer):
    """The DQN loop of `rlrun.train.Trainer` for K stacked agents (see the module docstring)."""

    def __init__(self, cfg: DictConfig, out_dir: Path, parts: Any, resume: Optional[dict] = None):
        self.cfg, self.out_dir, self.parts = cfg, Path(out_dir), parts
        self.seeds = agent_seeds(cfg)
        self.agents, num_envs = len(self.seeds), cfg.env.num_envs
        envs = parts.envs
        self.exploration = ExplorationDraws(self.seeds, num_envs, int(envs.single_action_space.n))
        self.nstep = NStepAccumulator(self.agents * num_envs, cfg.buffer.n_step, cfg.algo.gamma,
                                      envs.single_observation_space.shape, envs.single_observation_space.dtype)
        self.step, self.iteration = 0, 0
        self.window: dict[str, list[torch.Tensor]] = {}
        self.sampled: list[torch.Tensor] = []
        self.signal: Optional[int] = None
        resume_step = None if resume is None else resume["step"]
        self.loggers: list[RunLogger] = []
        for k, seed in enumerate(self.seeds):
            if resume is None:
                write_agent_hydra_dir(out_dir, cfg, seed)
            show_bar = cfg.log.progress_bar if k == 0 else False  # one bar for the batch
            self.loggers.append(RunLogger(agent_dir(out_dir, seed), agent_config(cfg, seed), cfg.total_steps,
                                          parts.reward_threshold, show_bar, resume_step=resume_step,
                                          label=f"seed={seed}: "))
        self.logger = self.loggers[0]
        self._setup_shared(parts)
        if resume is None:
            self.obs, _ = envs.reset(seed=self.env_reset_seed())
        else:
            self.load_state_dict(resume)

    def env_reset_seed(self) -> list[int]:
        return [s + i for s in self.seeds for i in range(self.cfg.env.num_envs)]

    # --- the loop ---------------------------------------------------------------------------
    def _log_window(self, step: int, common: dict[str, float]) -> None:
        """Per-agent window metrics, read with one host-device sync for all agents."""
        if self.window and self.prioritized:  # the schedule at this step
            common = {**common, "per/beta": self.parts.buffer.beta(step, self.cfg.total_steps)}
        per_agent = self.read_window()
        sizes = self.parts.buffer.sizes
        for k, lg in enumerate(self.loggers):
            values = {**common, "replay/size": int(sizes[k])}
            values.update({tag: v[k] for tag, v in per_agent.items()})
            lg.scalars(step, values)

    def run(self) -> dict[str, Any]:
        cfg, parts = self.cfg, self.parts
        envs, learner, buffer, device = parts.envs, parts.learner, parts.buffer, parts.device
        loggers, nstep, exploration = self.loggers, self.nstep, self.exploration
        agents = self.agents

        a, x = cfg.algo, cfg.exploration
        num_envs, total_steps = cfg.env.num_envs, cfg.total_steps
        learning_starts, gradient_steps, batch_size = a.learning_starts, a.gradient_steps, a.batch_size
        # Keep the update ratio of train_freq env steps per gradient_steps updates with many vector envs:
        # an update phase every `update_every` iterations, `phase_updates` gradient steps in each.
        update_every = max(1, a.train_freq // num_envs)
        phase_updates = gradient_steps * max(1, round(num_envs / a.train_freq))
        epsilon_at = schedules.SCHEDULES[x.schedule]
        eps_start, eps_end, eps_duration = x.start, x.end, x.duration
        log_interval, eval_interval, ckpt_every = cfg.log.interval, cfg.eval.interval, cfg.checkpoint.every
        stop_on_solve = cfg.stop_on_solve
        obs_shape = envs.single_observation_space.shape
        agent_of_env = np.arange(agents * num_envs) // num_envs

        def crossed(interval: int) -> bool:
            return interval > 0 and step // interval > (step - num_envs) // interval

        step, iteration, obs = self.step, self.iteration, self.obs
        last_log_time, last_log_step = time.perf_counter(), step
        status = "finished"
        main_thread = threading.current_thread() is threading.main_thread()
        previous = {s: signal.signal(s, self._on_signal) for s in (signal.SIGTERM, signal.SIGINT)} if main_thread else {}
        try:
            while step < total_steps:
                epsilon = 1.0 if step < learning_starts else epsilon_at(eps_start, eps_end, eps_duration, step)
                explore, random_actions = exploration.next(epsilon)  # each agent's own stream
                actions = random_actions
                if not explore.all():
                    greedy = self.actor(obs.reshape(agents, num_envs, *obs_shape))
                    actions = np.where(explore, random_actions, greedy)
                actions = actions.reshape(-1)

                next_obs, rewards, terminated, truncated, infos = envs.step(actions)
                real_next_obs = next_obs_for_storage(next_obs, infos)
                ready = nstep.step(obs, actions, rewards, real_next_obs, terminated, truncated)
                if ready is not None:
                    buffer.add(agent_of_env[nstep.last_envs], *ready)
                obs = next_obs
                step += num_envs
                iteration += 1

                ended = {}  # agent -> its episodes that ended at this step, at its own env steps
                for i, ret, length in finished_episodes(infos):
                    ended.setdefault(agent_of_env[i], []).append((step - num_envs + i % num_envs + 1, ret, length))
                for agent, episodes in ended.items():
                    loggers[agent].episodes_end(step, episodes)

                if step >= learning_starts and iteration % update_every == 0 and len(buffer) >= batch_size:
                    self.update_phase(step, iteration, obs, phase_updates)

                if crossed(log_interval) or step >= total_steps:
                    now = time.perf_counter()
                    sps = (step - last_log_step) / max(now - last_log_time, 1e-9)  # per agent
                    last_log_time, last_log_step = now, step
                    epsilon = 1.0 if step < learning_starts else epsilon_at(eps_start, eps_end, eps_duration, step)
                    common = {"charts/epsilon": epsilon, "charts/SPS": sps,
                              "charts/learning_rate": learner.optimizer.param_groups[0]["lr"],
                              "charts/updates": learner.updates, "charts/skipped_updates": learner.skipped}
                    if device.type == "cuda":
                        common["device/memory_allocated_mb"] = torch.cuda.memory_allocated(device) / 2**20
                        common["device/max_memory_allocated_mb"] = torch.cuda.max_memory_allocated(device) / 2**20
                    self._log_window(step, common)
                    loggers[0].progress(step, sps, epsilon)

                if crossed(eval_interval) or (eval_interval and step >= total_steps):
                    returns = evaluate_stacked(learner.online, parts.eval_envs,
                                               [s + 1_000_000 + step for s in self.seeds], device)
                    for lg, r in zip(loggers, returns):
                        lg.scalars(step, {"eval/mean_return": float(r.mean()), "eval/std_return": float(r.std())})

                self.step, self.iteration, self.obs = step, iteration, obs
                if crossed(ckpt_every):
                    self.save_checkpoint()
                if self.signal is not None:
                    self.save_checkpoint()
                    raise Preempted(signal.Signals(self.signal).name)
                # With seeds > 1, stop_on_solve stops once every agent has solved (each one's solve step is
                # recorded when it happens, exactly as its single run records it).
                if stop_on_solve and all(lg.solved is not None for lg in loggers):
                    status = "solved"
                    break
        finally:
            for s, handler in previous.items():
                signal.signal(s, handler)

        self.save_checkpoint()
        summaries = {}
        for k, (seed, lg) in enumerate(zip(self.seeds, loggers)):
            with rundir.open_atomic(agent_dir(self.out_dir, seed) / "model.pt") as f:
                torch.save(learner.online.agent_state_dict(k), f)
            summaries[seed] = lg.close(step, status, self.summary_extra())
            if cfg.log.plot:
                lg.plot(f"{cfg.env.id} {cfg.exp_name} seed={seed}")
        return self._write_summary(summaries, status)

    def _write_summary(self, summaries: dict[int, dict], status: str) -> dict[str, Any]:
        """The run dir's summary.json: the agents' summaries and their mean final return (what sweepers
        optimise). Each agent's own summary.json is in its seed= dir."""
        finals = [s["final_mean_return_100"] for s in summaries.values() if s["final_mean_return_100"] is not None]
        summary = {"status": status, "seeds": self.seeds, "env_steps_per_agent": self.step,
                   "final_mean_return_100": float(np.mean(finals)) if finals else None,
                   "solved": sum(s["solved_step"] is not None for s in summaries.values()),
                   "agents": {str(seed): s for seed, s in summaries.items()}}
        rundir.write_text(self.out_dir / "summary.json", json.dumps(summary, indent=2) + "\n")
        return summary


