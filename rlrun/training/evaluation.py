"""Greedy (or epsilon-greedy) evaluation: `episodes` envs per agent run side by side, one batched forward pass
per step."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import torch

from rlrun.algos.acting import GreedyActor
from rlrun.envs.vector import finished_episodes
from rlrun.nets.protocol import QNet


@torch.no_grad()
def evaluate(
    q_net: QNet,
    envs,
    seeds: Sequence[int],
    device: torch.device,
    stopped: Callable[[], bool] = lambda: False,
    epsilon: float = 0.0,
) -> np.ndarray | None:
    """Returns (K, E) of the first episode of each sub-env under the greedy policy. `envs` holds K x E
    sub-envs for the K = len(seeds) agents of `q_net` (K = 1 for a single `QNetwork`); agent k's envs
    are seeded seeds[k], seeds[k] + 1, ... None once `stopped()` turns true (checked at every step: an
    evaluation of long episodes can take minutes, longer than a scheduler's grace after SIGTERM). With
    `epsilon` > 0 each action is uniform random with that chance, drawn from a generator seeded by `seeds`."""
    agents = len(seeds)
    per_agent = envs.num_envs // agents
    returns = np.full(envs.num_envs, np.nan)
    was_training = q_net.training
    q_net.eval()  # noisy layers use their mean weights
    actor = GreedyActor(q_net, device)
    rng = np.random.default_rng(list(seeds))
    obs, _ = envs.reset(seed=[s + j for s in seeds for j in range(per_agent)])
    try:
        while np.isnan(returns).any():
            if stopped():
                return None
            actions = actor.act(obs)
            if epsilon > 0:
                explore = rng.random(len(actions)) < epsilon
                actions = np.where(explore, rng.integers(envs.single_action_space.n, size=len(actions)), actions)
            obs, _, _, _, infos = envs.step(actions)
            for i, ret, _ in finished_episodes(infos):
                if np.isnan(returns[i]):
                    returns[i] = ret
    finally:
        q_net.train(was_training)
    return returns.reshape(agents, per_agent)
