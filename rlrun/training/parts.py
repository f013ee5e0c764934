"""What the training loop runs on: the parts built from the config (`Parts`) and the plain settings
(`LoopSettings`), both made by rlrun.training.build; the loop (rlrun.training.loop) reads its settings from
these, and holds the resolved config only as a plain dict (`LoopSettings.config`, for its checkpoints)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, cast

import numpy as np
import torch

from rlrun.algos import schedules
from rlrun.algos.exploration import agent_epsilons
from rlrun.algos.update import UpdateStep
from rlrun.replay import Replay
from rlrun.replay.frames import FrameStore
from rlrun.replay.prioritized import Prioritized
from rlrun.replay.rollout import Rollout


@dataclass
class Parts:
    """What `rlrun.training.build.build` makes from the config."""

    # gymnasium vector envs (rlrun.envs.vector.make_vector_env). Not typed `gym.vector.VectorEnv`: its `reset`
    # declares one int seed, and the loop seeds every sub-env with a list (as the sync and async envs take).
    envs: Any  # K x num_envs sub-envs
    eval_envs: Any | None  # K x eval.episodes sub-envs, or None
    learner: UpdateStep  # the algorithm's (rlrun.algos)
    buffer: Replay | Rollout  # replay, or PQN's rollout (rlrun.algos.base.Algorithm.collector)
    generators: list[torch.Generator]  # per agent: replay sampling (and noisy nets' noise)
    device: torch.device
    reward_threshold: float | None
    frames: FrameStore | None = None
    cuda_graphs: bool = False  # record update phases and the acting forward as CUDA graphs (rlrun.training.graphs)


@dataclass
class LoopSettings:
    """Plain values the loop runs on (rlrun.training.build.loop_settings reads them from the config)."""

    total_steps: int  # env steps per agent
    num_envs: int  # per agent
    gamma: float | list[float]  # a list: one per sub-env (agents with their own, rlrun.training.agents)
    n_step: int
    learning_starts: int
    batch_size: int
    update_every: int  # vector steps between update phases
    phase_updates: int  # gradient steps per update phase
    lr: float | list[float]  # lr and the epsilon values: a list holds one per agent (rlrun.training.agents)
    lr_end_factor: float | list[float]  # linear decay of the lr to lr * lr_end_factor over the run
    epsilon_schedule: str
    epsilon_start: float | list[float]
    epsilon_end: float | list[float]
    epsilon_duration: int | list[int]
    log_interval: int
    progress_interval: float  # seconds between the plain progress lines (rlrun.training.population.ProgressLines)
    eval_interval: int  # 0: no evaluation
    eval_epsilon: float  # the chance of a random action at each evaluation step (0: greedy)
    eval_episodes: int  # per agent, played by the eval envs (parts.eval_envs) in fixed shares
    checkpoint_every: int  # 0: only at the end and on a signal
    checkpoint_replay: bool
    stop_on_solve: bool
    config: dict  # the resolved run config, saved in every checkpoint
    plot_title: str | None  # None: no returns.png
    # PQN (algo=pqn): every step goes to the rollout (parts.buffer) instead of n-step and replay; an update
    # phase every update_every = num_steps vector steps, when the rollout is full, takes its minibatches.
    rollout: bool = False

    def epsilon(self, step: int) -> float | np.ndarray:
        """Uniform-random play until learning starts (noisy nets included), then the schedule: a float, or
        a (K, 1) array where agents have schedules of their own."""
        if step < self.learning_starts:
            return 1.0
        start, end, duration = self.epsilon_start, self.epsilon_end, self.epsilon_duration
        if isinstance(start, list) or isinstance(end, list) or isinstance(duration, list):
            agents = next(len(v) for v in (start, end, duration) if isinstance(v, list))
            return agent_epsilons(self.epsilon_schedule, start, end, duration, agents, step)
        return schedules.SCHEDULES[self.epsilon_schedule](start, end, duration, step)

    @property
    def last_step(self) -> int:
        """Where the run ends: total_steps rounded up to whole vector steps (num_envs env steps each)."""
        return -(-self.total_steps // self.num_envs) * self.num_envs

    def budget_notes(self, buffer: Replay | Rollout) -> tuple[list[str], list[str]]:
        """What a run says at its start about its budget (info lines), and the schedules that do not end
        within it (warnings: `exploration.duration` or PER's `buffer.beta_anneal_steps` longer than the run)."""
        info, warnings = [], []
        if self.last_step != self.total_steps:
            info.append(
                f"rlrun: total_steps={self.total_steps:,} is rounded up to whole vector steps of "
                f"{self.num_envs} env steps: the run ends at {self.last_step:,}"
            )
        durations = self.epsilon_duration if isinstance(self.epsilon_duration, list) else [self.epsilon_duration]
        constant = np.array_equal(np.ravel(self.epsilon_start), np.ravel(self.epsilon_end))  # noisy nets: 0 -> 0
        if max(durations) > self.total_steps and not constant:
            final = ", ".join(f"{e:.3g}" for e in np.ravel(self.epsilon(self.total_steps)))
            warnings.append(
                f"rlrun: warning: exploration.duration={max(durations):,} is longer than the run "
                f"(total_steps={self.total_steps:,}): epsilon ends at {final}, not exploration.end"
            )
        per = cast(Prioritized, buffer) if buffer.prioritized else None  # PER's buffers (rlrun.replay.prioritized)
        if per is not None and np.min(per.beta(self.total_steps, self.total_steps)) < 1.0:
            warnings.append(
                f"rlrun: warning: buffer.beta_anneal_steps={per.beta_anneal_steps:,} is longer than the run "
                f"(total_steps={self.total_steps:,}): PER's beta ends below 1"
            )
        return info, warnings


def group_lrs(lr: float | list[float], end_factor: float | list[float], total_steps: int, step: int) -> list[float]:
    """The scheduled learning rate at `step` of each optimizer param group: one, or one per agent."""
    lrs, ends = (v if isinstance(v, list) else [v] for v in (lr, end_factor))
    n = max(len(lrs), len(ends))
    lrs, ends = (v * n if len(v) == 1 else v for v in (lrs, ends))
    return [lr * schedules.linear(1.0, end, total_steps, step) for lr, end in zip(lrs, ends)]


def set_group_lrs(optimizer: torch.optim.Optimizer, lrs: list[float]) -> None:
    """Each param group's lr from `lrs` (one, or one per agent: a group's first agent's). An lr held as a tensor
    (a CUDA-graphed or compiled step reads that tensor) is filled in place: a new value would not reach it."""
    for group in optimizer.param_groups:
        lr = lrs[group["agents"][0]] if "agents" in group else lrs[0]
        if isinstance(group["lr"], torch.Tensor):
            group["lr"].fill_(lr)
        else:
            group["lr"] = lr
