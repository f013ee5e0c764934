"""A trainer's checkpoint state: what `rlrun.training.loop.Trainer` saves and loads (the learner, replay or rollout,
n-step windows, observations, env and RNG states, exploration draws, loggers, the metric window, frames,
stopped agents). The format is versioned by CHECKPOINT_FORMAT."""

from __future__ import annotations

import reprlib
from typing import Any

import numpy as np
import torch

from rlrun.storage import checkpoint as ckpt

CHECKPOINT_FORMAT = 1


def state_dict(self: Any) -> dict[str, Any]:
    """Everything a resumed run needs to continue exactly: the trainer's (rlrun.training.loop.Trainer) whole state."""
    p = self.parts
    return {
        "format": CHECKPOINT_FORMAT,
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


def load_state_dict(self: Any, state: dict[str, Any]) -> None:
    """Put a checkpoint's state back into the trainer; a checkpoint of another config is a CheckpointError."""
    p = self.parts
    if state["format"] != CHECKPOINT_FORMAT:
        raise ckpt.CheckpointError(
            f"checkpoint format {state['format']!r}: this rlrun reads format {CHECKPOINT_FORMAT}"
        )
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
    p.envs.reset(seed=self.population.env_seeds())  # builds the envs' RNGs, then overwrite them
    ckpt.restore_env_state(p.envs, state["envs"])
    for rng_state, rng, generator in zip(state["rng"], self.exploration.rngs, p.generators):
        ckpt.restore_rng(rng_state, rng, generator)
    self.exploration.load_state_dict(state["exploration"])
    for lg, lg_state in zip(self.population.loggers, state["loggers"]):
        lg.load_state_dict(lg_state)
    self.window.load_state_dict(state, p.device)
    if p.frames is not None:
        p.frames.load_state_dict(state["frames"])
    self.population.failed = _failed_agents(state.get("failed_agents", {}), self.population.agents)
    if self.population.failed:
        p.learner.failed = torch.zeros(self.population.agents, dtype=torch.bool, device=p.device)
        p.learner.failed[list(self.population.failed)] = True
    if self.pbt is not None:
        self.pbt.load_state_dict(state["pbt"], self)
    self.pending = _pending(state.get("pending", []), self.pbt is not None)
    self.solved = state.get("solved", False) is True
    if p.eval_envs is None:  # resumed with eval.interval=0: no evaluation is owed, and none ranks PBT's agents
        self.pending = [x for x in self.pending if x != "eval"]
        if self.pbt is not None:
            self.pbt.eval_fitness = None


def _pending(pending: Any, pbt: bool) -> list[str]:
    """The step's owed work (Trainer.pending): [], ["eval"] or ["eval", "pbt"] (with PBT); anything else refused."""
    allowed = [[], ["eval"], ["eval", "pbt"]] if pbt else [[], ["eval"]]
    if not isinstance(pending, list) or not all(isinstance(x, str) for x in pending) or pending not in allowed:
        raise ckpt.CheckpointError(f"the checkpoint's pending work {reprlib.repr(pending)} is not one of {allowed}")
    return list(pending)


def _failed_agents(failed: Any, agents: int) -> dict[int, str]:
    """The stopped agents (Population.failed): agent index (0 to `agents` - 1) -> why; anything else refused."""
    if not isinstance(failed, dict) or not all(
        type(k) is int and 0 <= k < agents and isinstance(v, str) for k, v in failed.items()
    ):
        raise ckpt.CheckpointError(
            f"the checkpoint's stopped agents {reprlib.repr(failed)} are not a dict of agent index "
            f"(0 to {agents - 1}) to reason"
        )
    return dict(failed)
