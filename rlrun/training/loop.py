"""The DQN training loop, for K >= 1 agents, and the state it carries between steps.

The loop reads plain settings (`LoopSettings`) and the parts built from the config (`rlrun.training.build`); it
reads no setting from the config, which it carries only as a plain dict (saved in each checkpoint, and the env
id in an env's error). Every array in it carries the agents side by side: the vector env holds
K x num_envs sub-envs (agent k's in rows k * num_envs ...), the network is one `QNetwork` (K = 1) or a
stacked one (rlrun.nets.stacked), replay is one buffer or a stacked one. A single-seed run is K = 1; the
points where K matters are in `rlrun.training.population`.
"""

from __future__ import annotations

import contextlib
import logging
import signal
import threading
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import torch

from rlrun.algos.acting import GreedyActor
from rlrun.algos.exploration import ExplorationDraws
from rlrun.algos.update import UpdateStep
from rlrun.envs.failure import EnvError
from rlrun.envs.vector import finished_episodes, next_obs_for_storage
from rlrun.errors import NonFiniteError
from rlrun.logs.metrics import MetricWindow
from rlrun.replay import Batch
from rlrun.replay.nstep import NStepAccumulator
from rlrun.replay.prioritized import Prioritized
from rlrun.replay.rollout import Rollout
from rlrun.storage import checkpoint as ckpt, rundir
from rlrun.training import trainer_state
from rlrun.training.evaluation import EvalProgress, evaluate
from rlrun.training.graphs import GraphedActor, GraphedUpdates
from rlrun.training.parts import LoopSettings, Parts, group_lrs, set_group_lrs
from rlrun.training.population import Population

log = logging.getLogger(__name__)


def crossed(step: int, interval: int, num_envs: int) -> bool:
    """Whether the vector step that ended at `step` (num_envs env steps) crossed a multiple of `interval`."""
    return interval > 0 and step // interval > (step - num_envs) // interval


class Preempted(Exception):
    """SIGTERM or SIGINT arrived; a checkpoint has been written."""


class Trainer:
    def __init__(
        self, settings: LoopSettings, parts: Parts, population: Population, out_dir: Path, resume: dict | None = None
    ):
        self.settings, self.parts, self.population, self.out_dir = settings, parts, population, Path(out_dir)
        self.pbt = pbt = population.pbt  # population-based training's rounds (rlrun.training.pbt), or None
        envs = parts.envs
        self.exploration = ExplorationDraws(population.seeds, settings.num_envs, int(envs.single_action_space.n))
        stored_shape, stored_dtype = envs.single_observation_space.shape, envs.single_observation_space.dtype
        if parts.frames is not None:  # replay and n-step windows hold frame-index stacks
            stored_shape, stored_dtype = (parts.frames.stack,), np.int64
        self.nstep = NStepAccumulator(envs.num_envs, settings.n_step, settings.gamma, stored_shape, stored_dtype)
        self.actor: GreedyActor | GraphedActor = GreedyActor(parts.learner.online, parts.device)
        self.graphed: GraphedUpdates | None = None
        if parts.cuda_graphs:
            assert not isinstance(parts.buffer, Rollout)  # PQN's update is not recorded (rlrun.algos.pqn refuses it)
            self.graphed = GraphedUpdates(
                parts.learner, parts.buffer, parts.frames, settings.batch_size, settings.phase_updates, parts.generators
            )
            obs_space = envs.single_observation_space
            self.actor = GraphedActor(self.actor, (envs.num_envs, *obs_space.shape), obs_space.dtype, parts.device)
        self.window = MetricWindow(rollout=settings.rollout)
        self.step, self.iteration = 0, 0
        self.signal: int | None = None
        # What the step `self.step` still owes after a signal cut its evaluation short ("eval", then "pbt"
        # if a PBT round needed it): checkpointed, and done first on resume, so no evaluation is lost.
        self.pending: list[str] = []
        self.solved = False  # stop_on_solve stopped the run (a resume with stop_on_solve=false trains on)
        if resume is None:
            self.obs, _ = envs.reset(seed=population.env_seeds())
            if parts.frames is not None:
                parts.frames.start(self.obs)
            if pbt is not None:
                pbt.start(self)
        else:
            self.load_state_dict(resume)

    @property
    def learner(self) -> UpdateStep:
        return self.parts.learner

    # --- checkpoint state (its format and checks: rlrun.training.trainer_state) ------------------------------
    def state_dict(self) -> dict[str, Any]:
        """Everything a resumed run needs to continue exactly: the learner, replay or rollout, n-step windows,
        observations, env and RNG states, exploration draws, loggers, the metric window, frames, stopped
        agents, PBT's state and the work a signal left owed."""
        p = self.parts
        return {
            "format": trainer_state.CHECKPOINT_FORMAT,
            "config": self.settings.config,
            "step": self.step,
            "iteration": self.iteration,
            "learner": p.learner.state_dict(),
            "buffer": p.buffer.state_dict(include_storage=self.settings.checkpoint_replay),
            "nstep": ckpt.to_safe(self.nstep.state_dict()),
            "obs": ckpt.to_safe(np.asarray(self.obs)),
            "envs": ckpt.env_state(p.envs),
            "rng": [ckpt.rng_state(r, g) for r, g in zip(self.exploration.rngs, p.generators)],
            "exploration": self.exploration.state_dict(),
            "loggers": [lg.state_dict() for lg in self.population.loggers],
            **self.window.state_dict(),
            "frames": None if p.frames is None else p.frames.state_dict(),
            "failed_agents": dict(self.population.failed),
            "pbt": None if self.pbt is None else self.pbt.state_dict(),
            "pending": list(self.pending),
            "solved": self.solved,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Put a checkpoint's state back; a checkpoint of another config is a CheckpointError."""
        p, population = self.parts, self.population
        trainer_state.check_format(state)
        if self.pbt is not None:  # before anything is loaded: None here would resume without PBT, losing its lineage
            self.pbt.check_state(state.get("pbt"))
        try:
            p.learner.load_state_dict(state["learner"])
            p.buffer.load_state_dict(state["buffer"])
        except (RuntimeError, KeyError, ValueError) as e:
            raise ckpt.CheckpointError(f"the checkpoint does not fit this config: {str(e).splitlines()[0]}") from None
        self.step, self.iteration = state["step"], state["iteration"]
        self.nstep.load_state_dict(ckpt.from_safe(state["nstep"]))
        self.obs = ckpt.from_safe(state["obs"])
        p.envs.reset(seed=population.env_seeds())  # builds the envs' RNGs, then overwrite them
        ckpt.restore_env_state(p.envs, state["envs"])
        for rng_state, rng, generator in zip(state["rng"], self.exploration.rngs, p.generators):
            ckpt.restore_rng(rng_state, rng, generator)
        self.exploration.load_state_dict(state["exploration"])
        for lg, lg_state in zip(population.loggers, state["loggers"]):
            lg.load_state_dict(lg_state)
        self.window.load_state_dict(state, p.device)
        if p.frames is not None:
            p.frames.load_state_dict(state["frames"])
        population.failed = trainer_state._failed_agents(state.get("failed_agents", {}), population.agents)
        if population.failed:
            p.learner.failed = torch.zeros(population.agents, dtype=torch.bool, device=p.device)
            p.learner.failed[list(population.failed)] = True
        if self.pbt is not None:
            self.pbt.load_state_dict(state["pbt"], self)
        self.pending = trainer_state._pending(state.get("pending", []), self.pbt is not None)
        self.solved = state.get("solved", False) is True
        if p.eval_envs is None:  # resumed with eval.interval=0: no evaluation is owed, and none ranks PBT's agents
            self.pending = [x for x in self.pending if x != "eval"]
            if self.pbt is not None:
                self.pbt.eval_fitness = None

    def save_checkpoint(self) -> Path:
        for k, lg in enumerate(self.population.loggers):
            if k not in self.population.failed:  # a stopped agent's files are closed
                lg.flush()
        return ckpt.save(self.out_dir, self.state_dict())

    def log_step(self, step: int, sps: float) -> None:
        """What a log interval logs: the schedules' values, the update metrics gathered since the last log,
        replay's fill, per-agent lrs, device memory; then the progress line. `sps`: env steps per second per
        agent since the last log."""
        s, p, window = self.settings, self.parts, self.window
        learner, buffer, device = p.learner, p.buffer, p.device
        common = {
            "charts/epsilon": s.epsilon(step),
            "charts/SPS": sps,
            "charts/learning_rate": float(learner.optimizer.param_groups[0]["lr"]),
            "charts/updates": learner.updates,
            "charts/skipped_updates": learner.skipped,
        }
        if window and isinstance(buffer, Prioritized):
            common["per/beta"] = buffer.beta(step, s.total_steps)  # the schedule at this step
        if device.type == "cuda":
            common["device/memory_allocated_mb"] = torch.cuda.memory_allocated(device) / 2**20
            common["device/max_memory_allocated_mb"] = torch.cuda.max_memory_allocated(device) / 2**20
        if self.graphed is not None:  # the device-side non-finite flag, read with the metrics
            self.check_graphed(step)
        per_agent = window.read(buffer.stats() if window and isinstance(buffer, Prioritized) else None)
        if not s.rollout:  # PQN's rollout is full at every update: its fill says nothing
            per_agent["replay/size"] = buffer.sizes.tolist()
        groups = learner.optimizer.param_groups
        if "agents" in groups[0]:  # an lr per agent (rlrun.training.agents.agent_param_groups)
            per_agent["charts/learning_rate"] = [float(g["lr"]) for g in groups for _ in range(*g["agents"])]
        if p.frames is not None:
            p.frames.check(buffer)
        self.population.log(step, common, per_agent)
        self.population.progress(step, sps)  # the bar, or a plain line; episodes.csv flushed

    # --- the loop ---------------------------------------------------------------------------
    def update_phase(self, step: int, iteration: int, obs: np.ndarray, count: int) -> None:
        """`count` gradient steps (with the lr schedule and PER's beta at `step`); their metrics stay on the
        device in the window."""
        s, p = self.settings, self.parts
        learner, buffer, frames = p.learner, p.buffer, p.frames
        if s.lr_end_factor != 1.0:  # one value, or one per agent (param groups: runs of agents, rlrun.training.agents)
            set_group_lrs(learner.optimizer, group_lrs(s.lr, s.lr_end_factor, s.total_steps, step))
        beta = buffer.beta(step, s.total_steps) if isinstance(buffer, Prioritized) else 1.0
        if self.graphed is not None:
            for measured in self.graphed.run(beta):
                self.window.add_measured(measured)
            return
        batches: Iterable[Batch]
        if isinstance(buffer, Rollout):  # the rollout's minibatches, with its lambda-returns
            assert learner.batches is not None
            batches = learner.batches(buffer)
        else:
            batches = (buffer.sample(s.batch_size, beta) for _ in range(count))
        for batch in batches:
            if frames is not None:
                batch = frames.decode(batch)
            try:
                metrics = learner.update(batch)
            except NonFiniteError as e:
                self.step, self.iteration, self.obs = step, iteration, obs
                with rundir.open_atomic(self.out_dir / "nonfinite.pt") as f:
                    torch.save(self.state_dict(), f)
                raise NonFiniteError(
                    f"{e} at env step {step} (update {learner.updates + 1}); "
                    f"the state before this update is in {self.out_dir / 'nonfinite.pt'}"
                ) from None
            if learner.failures:  # stacked agents that turned non-finite stop alone
                self._stop_agents(step)
            if metrics is None:  # a non-finite update skipped (algo.on_nonfinite=skip)
                continue
            if isinstance(buffer, Prioritized):
                buffer.update_priorities(batch.indices, metrics["priority"])
            self.window.add(metrics, batch)

    def _stop_agents(self, step: int) -> None:
        learner, population = self.parts.learner, self.population
        if self.pbt is not None:  # frozen and ranked last: the next PBT round replaces it
            return self.pbt.take_failures(learner, step)
        for k, reason, state in learner.failures:
            population.stop_agent(k, step, f"{reason} (update {learner.updates + 1})", state)
        learner.failures.clear()
        if len(population.failed) == population.agents:
            raise NonFiniteError(f"every agent turned non-finite (the last at env step {step})")

    def check_graphed(self, step: int) -> None:
        """Raise NonFiniteError (saving the state) if a CUDA-graphed update turned non-finite since the last check."""
        assert self.graphed is not None
        try:
            self.graphed.check()
        except NonFiniteError as e:
            with rundir.open_atomic(self.out_dir / "nonfinite.pt") as f:
                torch.save(self.state_dict(), f)
            raise NonFiniteError(
                f"{e}, by env step {step}; the state after it is in {self.out_dir / 'nonfinite.pt'} "
                "(with CUDA graphs the check runs at each log, not before each update)"
            ) from None

    def evaluate(self, step: int) -> bool:
        """The greedy evaluation at `step`, logged; False (nothing logged) when a signal stopped it."""
        returns = evaluate(
            self.parts.learner.online,
            self.parts.eval_envs,
            [seed + 1_000_000 + step for seed in self.population.seeds],
            self.parts.device,
            stopped=lambda: self.signal is not None,
            epsilon=self.settings.eval_epsilon,
            episodes=self.settings.eval_episodes,
            progress=EvalProgress(f"rlrun: evaluation at step {step:,}"),
        )
        if returns is None:
            return False
        means = returns.mean(axis=1).tolist()
        if self.pbt is not None:
            self.pbt.eval_fitness = list(means)
        self.population.log(step, {}, {"eval/mean_return": means, "eval/std_return": returns.std(axis=1).tolist()})
        return True

    def finish_pending(self, step: int) -> None:
        """A resumed step's evaluation and PBT round that a signal cut short, in their order."""
        if "eval" in self.pending and not self.evaluate(step):
            return  # stopped again: still owed
        if "pbt" in self.pending and self.pbt is not None:
            self.pbt.round(self, step)
        self.pending = []

    def stop_if_signalled(self) -> None:
        if self.signal is not None:
            self.save_checkpoint()
            raise Preempted(signal.Signals(self.signal).name)

    def _on_signal(self, signum, frame) -> None:
        self.signal = signum  # acted on between two env steps, where the state is consistent

    @contextlib.contextmanager
    def _signals_caught(self) -> Iterator[None]:
        """SIGTERM and SIGINT set `self.signal` while the loop runs (acted on between two env steps); the
        handlers before are restored after. Only the main thread can install handlers (not, e.g., threaded
        sweep trials)."""
        main_thread = threading.current_thread() is threading.main_thread()
        previous = (
            {sig: signal.signal(sig, self._on_signal) for sig in (signal.SIGTERM, signal.SIGINT)} if main_thread else {}
        )
        try:
            yield
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)

    def run(self) -> dict[str, Any]:
        """Train to total_steps, or until every agent solved (stop_on_solve); the run's summary."""
        with self._signals_caught():
            status, step = self._train()
        self.solved = status == "solved"
        self.save_checkpoint()
        extra: dict[str, Any] = {"gradient_updates": self.parts.learner.updates}
        if self.parts.device.type == "cuda":
            extra["device_max_memory_allocated_mb"] = torch.cuda.max_memory_allocated(self.parts.device) / 2**20
        if self.pbt is not None:
            log.info(self.pbt.best_line(self.population))
            extra["pbt_seconds"] = self.pbt.seconds
        return self.population.finish(step, status, self.parts.learner.online, extra, self.settings.plot_title)

    def _train(self) -> tuple[str, int]:
        """The env steps, each agent's updates and what falls due (rlrun.training.loop.Trainer._milestones);
        ("finished" or "solved", the last step). Raises Preempted when a signal stops it."""
        s, parts, population = self.settings, self.parts, self.population
        envs, buffer, exploration, actor = parts.envs, parts.buffer, self.exploration, self.actor
        # Hot-loop constants as plain locals.
        num_envs, total_steps, learning_starts = s.num_envs, s.total_steps, s.learning_starts
        update_every, phase_updates, batch_size = s.update_every, s.phase_updates, s.batch_size
        ckpt_every, epsilon_at = s.checkpoint_every, s.epsilon
        step, iteration, obs = self.step, self.iteration, self.obs
        self._last_log = (time.perf_counter(), step)
        if self.pending:
            self.finish_pending(step)
            self.stop_if_signalled()
        if s.stop_on_solve and population.all_solved:  # resumed with stop_on_solve=true, already solved
            return "solved", step
        while step < total_steps:
            explore, actions = exploration.next(epsilon_at(step))  # (K, num_envs): each agent's own stream
            explore, actions = explore.reshape(-1), actions.reshape(-1)
            if not explore.all():
                actions = np.where(explore, actions, actor.act(obs))
            try:
                next_obs, rewards, terminated, truncated, infos = envs.step(actions)
            except Exception as e:  # the env's own code failed: one line, the last checkpoint kept
                raise EnvError(s.config["env"]["id"], "step", e) from e
            self._store(obs, actions, rewards, next_obs, terminated, truncated, infos)
            obs = next_obs
            step += num_envs
            iteration += 1
            episodes = finished_episodes(infos)
            if episodes:
                population.episodes_end(step, episodes)
            if step >= learning_starts and iteration % update_every == 0 and len(buffer) >= batch_size:
                self.update_phase(step, iteration, obs, phase_updates)
            self._milestones(step)
            self.step, self.iteration, self.obs = step, iteration, obs
            if crossed(step, ckpt_every, num_envs):
                self.save_checkpoint()
            if s.stop_on_solve and population.all_solved:  # with K > 1: once every agent has solved
                return "solved", step  # before a signal's stop: the run is done, its resume would train on
            if self.signal is not None:  # inline: the check runs at every env step
                self.stop_if_signalled()
        return "finished", step

    def _store(
        self,
        obs: np.ndarray,
        actions: np.ndarray,
        rewards: np.ndarray,
        next_obs: np.ndarray,
        terminated: np.ndarray,
        truncated: np.ndarray,
        infos: dict,
    ) -> None:
        """One env step's transitions: into PQN's rollout, or through the n-step windows into replay."""
        real_next_obs = next_obs_for_storage(next_obs, infos)
        buffer, frames, nstep = self.parts.buffer, self.parts.frames, self.nstep
        if isinstance(buffer, Rollout):  # PQN
            buffer.add(obs, actions, rewards, real_next_obs, terminated, truncated)
            return
        if frames is None:
            ready = nstep.step(obs, actions, rewards, real_next_obs, terminated, truncated)
        else:  # store frame-index stacks instead of pixels
            obs_idx = frames.current.copy()
            next_idx = frames.advance(next_obs, real_next_obs, terminated | truncated)
            ready = nstep.step(obs_idx, actions, rewards, next_idx, terminated, truncated)
        if ready is not None:
            self.population.store(buffer, ready, nstep.last_envs)

    def _milestones(self, step: int) -> None:
        """What falls due at `step`, in order: the evaluation (before the log: its line shows it), the log
        (or a progress line between logs) and the PBT round."""
        s, population, pbt = self.settings, self.population, self.pbt
        total_steps, num_envs = s.total_steps, s.num_envs
        evaluates = crossed(step, s.eval_interval, num_envs) or (s.eval_interval and step >= total_steps)
        if evaluates and not self.evaluate(step):
            self.pending.append("eval")
        if crossed(step, s.log_interval, num_envs) or step >= total_steps:
            now, (last_time, last_step) = time.perf_counter(), self._last_log
            sps = (step - last_step) / max(now - last_time, 1e-9)  # env steps per agent
            self._last_log = (now, step)
            self.log_step(step, sps)
        elif population.lines is not None and population.lines.due():  # a long log.interval: the lines still come
            population.progress_line(step)
        if pbt is not None and crossed(step, pbt.interval, num_envs) and step < total_steps:
            if self.pending:  # ranks by the evaluation still owed
                self.pending.append("pbt")
            else:
                pbt.round(self, step)

    def close(self) -> None:
        self.parts.envs.close()
        if self.parts.eval_envs is not None:
            self.parts.eval_envs.close()
