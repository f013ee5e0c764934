"""Greedy (or epsilon-greedy) evaluation: each agent's envs run side by side, one batched forward pass per step.

With one env per episode (the default) an evaluation lasts as long as its longest episode, every env stepped
until then. With fewer envs (`eval.num_envs`) each env plays a fixed share of the episodes one after another,
so a single long game (Breakout waiting for FIRE until the episode cap) no longer keeps all the others
stepping. Which episodes count is fixed before any is played (env j plays episodes j, j + S, j + 2S, ...),
so short episodes are not favoured."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence

import numpy as np
import torch

from rlrun.algos.acting import GreedyActor
from rlrun.envs.vector import finished_episodes
from rlrun.nets.protocol import QNet

log = logging.getLogger(__name__)


class EvalProgress:
    """Called at every step of an evaluation with (episodes counted, episodes owed): a line through `write`
    once every `interval` seconds, so a long evaluation (100 Breakout games at epsilon 0.001, half an hour
    after the last training step) shows it is playing; one shorter than `interval` writes nothing."""

    interval = 60.0  # seconds

    def __init__(self, label: str, write: Callable[[str], None] = log.info):
        self.label, self.write = label, write
        self.start = self.last = time.perf_counter()

    def __call__(self, counted: int, owed: int) -> None:
        now = time.perf_counter()
        if now - self.last < self.interval:
            return
        self.last, elapsed = now, int(now - self.start)
        self.write(f"{self.label}: {counted:,}/{owed:,} episodes played in {elapsed // 60}:{elapsed % 60:02d}")


@torch.no_grad()
def evaluate(
    q_net: QNet,
    envs,
    seeds: Sequence[int],
    device: torch.device,
    stopped: Callable[[], bool] = lambda: False,
    epsilon: float = 0.0,
    episodes: int | None = None,
    progress: Callable[[int, int], None] = lambda counted, owed: None,
) -> np.ndarray | None:
    """Returns (K, N) returns of N = `episodes` episodes per agent (default: one per env). `envs` holds K x S
    sub-envs for the K = len(seeds) agents of `q_net` (K = 1 for a single `QNetwork`); agent k's envs are
    seeded seeds[k], seeds[k] + 1, ... and env j's r-th episode is column j + r * S. None once `stopped()`
    turns true (checked at every step: an evaluation of long episodes can take minutes, longer than a
    scheduler's grace after SIGTERM). With `epsilon` > 0 each action is uniform random with that chance,
    drawn from a generator seeded by `seeds`. `progress` (an `EvalProgress`) is called at every step with
    the episodes counted so far and the K x N owed."""
    agents = len(seeds)
    per_agent = envs.num_envs // agents
    episodes = per_agent if episodes is None else episodes
    returns = np.full((agents, episodes), np.nan)
    played = np.zeros((agents, per_agent), dtype=np.int64)  # episodes each env has finished
    counted = 0  # columns of `returns` filled
    was_training = q_net.training
    q_net.eval()  # noisy layers use their mean weights
    actor = GreedyActor(q_net, device)
    rng = np.random.default_rng(list(seeds))
    obs, _ = envs.reset(seed=[s + j for s in seeds for j in range(per_agent)])
    try:
        while counted < returns.size:
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
                    counted += 1
                played[k, j] += 1
            progress(counted, returns.size)
    finally:
        q_net.train(was_training)
    return returns
