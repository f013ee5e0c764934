"""Greedy actions for the training loop, evaluation and `rlrun.policy`: argmax_a Q(s, a) for a batch of
observations, through the network's own torch forward (every kind of network and head, any device).

The loop acted in numpy on views of the parameters until 2026-12-07 (MLPs, and MinAtar's conv encoder with
noisy layers and C51); measured whole runs gained under 10% from it, so the one forward definition per
layer is the network's (docs/devices-and-benchmarks.md, "Where the time goes").
"""

from __future__ import annotations

import numpy as np
import torch

from rlrun.nets.protocol import QNet


class GreedyActor:
    """`actor(obs)` -> greedy actions: obs (B, *obs_shape) -> (B,) for a `QNetwork`, (K, B, ...) ->
    (K, B) for a stacked network (`agents` = K), as numpy int64. `actor.act(obs)` takes and returns the
    flat form whatever the network: (K * B, *obs_shape) -> (K * B,), agent k's observations in rows
    k * B to (k + 1) * B - 1, as the vector env of a run with K agents lays them out. `obs` is a numpy
    array or a tensor."""

    def __init__(self, net: QNet, device: torch.device):
        self.net, self.device = net, device
        self.agents: int | None = getattr(net, "agents", None)

    def __call__(self, obs: np.ndarray | torch.Tensor) -> np.ndarray:
        with torch.no_grad():
            return self.net(torch.as_tensor(obs, device=self.device)).argmax(dim=-1).cpu().numpy()

    def act(self, obs: np.ndarray) -> np.ndarray:
        if self.agents is None:
            return self(obs)
        return self(obs.reshape(self.agents, -1, *obs.shape[1:])).reshape(-1)
