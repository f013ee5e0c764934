"""Greedy evaluation: `episodes` envs run side by side, one batched forward pass per step."""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from rlrun.acting import GreedyActor
from rlrun.envs import finished_episodes


@torch.no_grad()
def evaluate(q_net: nn.Module, envs, seed: int, device: torch.device) -> np.ndarray:
    """Returns of the first episode of each sub-env of `envs` under the greedy policy."""
    n = envs.num_envs
    returns = np.full(n, np.nan)
    was_training = q_net.training
    q_net.eval()  # noisy layers use their mean weights
    act = GreedyActor(q_net, device)
    obs, _ = envs.reset(seed=seed)
    while np.isnan(returns).any():
        actions = act(obs)
        obs, _, _, _, infos = envs.step(actions)
        for i, ret, _ in finished_episodes(infos):
            if np.isnan(returns[i]):
                returns[i] = ret
    q_net.train(was_training)
    return returns


@torch.no_grad()
def evaluate_stacked(q_net: nn.Module, envs, seeds: list[int], device: torch.device) -> np.ndarray:
    """`evaluate` for K stacked agents: `envs` holds K x E sub-envs, agent k's E envs seeded from
    seeds[k] exactly as `evaluate` seeds a single agent's. Returns (K, E) returns."""
    agents = len(seeds)
    per_agent = envs.num_envs // agents
    returns = np.full(envs.num_envs, np.nan)
    was_training = q_net.training
    q_net.eval()
    act = GreedyActor(q_net, device)
    obs, _ = envs.reset(seed=[s + j for s in seeds for j in range(per_agent)])
    while np.isnan(returns).any():
        actions = act(obs.reshape(agents, per_agent, *obs.shape[1:])).reshape(-1)
        obs, _, _, _, infos = envs.step(actions)
        for i, ret, _ in finished_episodes(infos):
            if np.isnan(returns[i]):
                returns[i] = ret
    q_net.train(was_training)
    return returns.reshape(agents, per_agent)
