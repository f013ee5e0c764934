"""What an algorithm is to the rest of rlrun: a name, its config schema, its rules, its learner and how the
loop feeds it. build, validate, agents and the loop ask the registry (rlrun.algos) for these instead of
switching on the algorithm's name."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the hooks' argument: the run's config (their room reads its own node)
    import torch
    from omegaconf import DictConfig

    from rlrun.algos.update import UpdateStep
    from rlrun.nets.protocol import QNet

# Keys whose value may differ between the agents of one process for every algorithm (rlrun.training.agents): each
# changes numbers inside the batched computation, never its shapes.
COMMON_BATCHABLE = (
    "seed",  # every random stream is already per agent
    "optimizer.lr",  # optimizer param groups per run of agents with one lr (rlrun.training.agents.agent_param_groups)
    "algo.lr_end_factor",  # the lr schedule per param group
    "exploration.start",  # epsilon per agent (rlrun.algos.exploration)
    "exploration.end",
    "exploration.duration",
    "env.reward_scale",  # a reward factor per sub-env
)


# `per_agent(key)`: the key's value for the run's agents, one value when they share it, else a list with one
# per agent (rlrun.training.agents.values): how a factory reads a batchable key.
PerAgent = Callable[[str], Any]


@dataclass(frozen=True)
class Schedule:
    """How the loop feeds a learner: n-step returns, minibatch size, an update phase every `update_every`
    vector steps with `phase_updates` gradient steps in it."""

    n_step: int
    batch_size: int
    update_every: int
    phase_updates: int


@dataclass(frozen=True)
class Algorithm:
    name: str  # algo=<name> chooses it; its config's `kind` (DQN's config has none: it is the default)
    schema: type  # its `algo` config dataclass, registered as schema_algo_<name>
    # "replay": the loop stores n-step transitions in replay and samples minibatches; "rollout": it fills
    # an rlrun.replay.rollout.Rollout of algo.num_steps vector steps and hands it to `learner.batches`.
    collector: str
    batchable: tuple[str, ...]  # keys that may differ between the agents of one process
    check: Callable[[DictConfig], None]  # its own rules, after the common ones (rlrun.config.validate)
    # (cfg, network, optimizer, generators, per_agent) -> its learner
    make_learner: Callable[[DictConfig, QNet, torch.optim.Optimizer, list[torch.Generator], PerAgent], UpdateStep]
    schedule: Callable[[DictConfig], Schedule]
