"""What the training loop (rlrun.training.loop.Trainer) logs at each log interval: the schedules' values, the
update metrics gathered since the last log, replay's fill, per-agent lrs, device memory; then the progress line."""

from __future__ import annotations

from typing import Any

import torch

from rlrun.training.agents import group_agents


def log_step(trainer: Any, step: int, sps: float) -> None:
    """`sps`: env steps per second per agent since the last log."""
    s, p = trainer.settings, trainer.parts
    learner, buffer, device, window = p.learner, p.buffer, p.device, trainer.window
    common = {
        "charts/epsilon": s.epsilon(step),
        "charts/SPS": sps,
        "charts/learning_rate": float(learner.optimizer.param_groups[0]["lr"]),
        "charts/updates": learner.updates,
        "charts/skipped_updates": learner.skipped,
    }
    if window and buffer.prioritized:
        common["per/beta"] = buffer.beta(step, s.total_steps)  # the schedule at this step
    if device.type == "cuda":
        common["device/memory_allocated_mb"] = torch.cuda.memory_allocated(device) / 2**20
        common["device/max_memory_allocated_mb"] = torch.cuda.max_memory_allocated(device) / 2**20
    if trainer.graphed is not None:  # the device-side non-finite flag, read with the metrics
        trainer.check_graphed(step)
    per_agent = window.read(buffer.stats() if window and buffer.prioritized else None)
    if not s.rollout:  # PQN's rollout is full at every update: its fill says nothing
        per_agent["replay/size"] = buffer.sizes.tolist()
    groups = learner.optimizer.param_groups
    if "agents" in groups[0]:  # an lr per agent (rlrun.training.agents.agent_param_groups)
        per_agent["charts/learning_rate"] = [
            float(g["lr"]) for g in groups for _ in group_agents(g, trainer.population.agents)
        ]
    if p.frames is not None:
        p.frames.check(buffer)
    trainer.population.log(step, common, per_agent)
    trainer.population.progress(step, sps)  # the bar, or a plain line; episodes.csv flushed
