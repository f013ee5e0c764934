"""Greedy (or epsilon-greedy) evaluation: each agent's envs run side by side, one batched forward pass per step.

With one env per episode (the default) an evaluation lasts as long as its longest episode, every env stepped
until then. With fewer envs (`eval.num_envs`) each env plays a fixed share of the episodes one after another,
so a single long game (Breakout waiting for FIRE until the episode cap) no longer keeps all the others
stepping. Which episodes count is fixed before any is played (env j plays episodes j, j + S, j + 2S, ...),
so short episodes are not favoured."""

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
    episodes: int | None = None,
) -> np.ndarray | None:
    """Returns (K, N) returns of N = `episodes` episodes per agent (default: one per env). `envs` holds K x S
    sub-envs for the K = len(seeds) agents of `q_net` (K = 1 for a single `QNetwork`); agent k's envs are
    seeded seeds[k], seeds[k] + 1, ... and env j's r-th episode is column j + r * S. None once `stopped()`
    turns true (checked at every step: an evaluation of long episodes can take minutes, longer than a
    scheduler's grace after SIGTERM). With `epsilon` > 0 each action is uniform random with that chance,
    drawn from a generator seeded by `seeds`."""
    agents = len(seeds)
    per_agent = envs.num_envs // agents
    episodes = per_agent if episodes is None else episodes
    returns = np.full((agents, episodes), np.nan)
    played = np.zeros((agents, per_agent), dtype=np.int64)  # episodes each env has finished
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
                k, j = divmod(i, per_agent)
                column = j + played[k, j] * per_agent
                if column < episodes:
                    returns[k, column] = ret
                played[k, j] += 1
    finally:
        q_net.train(was_training)
    return returns
