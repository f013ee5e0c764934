"""Q-networks. Sizes of the observation and action spaces come from the env, never from YAML."""

from __future__ import annotations

from typing import Sequence

import torch
from torch import nn

ACTIVATIONS = {"relu": nn.ReLU, "tanh": nn.Tanh, "elu": nn.ELU, "gelu": nn.GELU}


def mlp(in_dim: int, hidden_sizes: Sequence[int], activation: str, layer_norm: bool) -> nn.Sequential:
    layers: list[nn.Module] = []
    for size in hidden_sizes:
        layers.append(nn.Linear(in_dim, size))
        if layer_norm:
            layers.append(nn.LayerNorm(size))
        layers.append(ACTIVATIONS[activation]())
        in_dim = size
    return nn.Sequential(*layers)


class QNetwork(nn.Module):
    """Maps a batch of flat observations to one Q-value per action.

    With `dueling=True` the last hidden layer feeds two heads, Q(s,a) = V(s) + A(s,a) - mean_a A(s,a)
    (Wang et al. 2016); the mean-centring keeps V and A identifiable.
    """

    def __init__(
        self,
        obs_dim: int,
        n_actions: int,
        hidden_sizes: Sequence[int] = (128, 128),
        dueling: bool = False,
        layer_norm: bool = False,
        activation: str = "relu",
    ):
        super().__init__()
        hidden_sizes = list(hidden_sizes)
        self.trunk = mlp(obs_dim, hidden_sizes, activation, layer_norm)
        feat = hidden_sizes[-1] if hidden_sizes else obs_dim
        self.dueling = dueling
        if dueling:
            self.value = nn.Linear(feat, 1)
            self.advantage = nn.Linear(feat, n_actions)
        else:
            self.head = nn.Linear(feat, n_actions)

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        h = self.trunk(obs.flatten(1).float())
        if not self.dueling:
            return self.head(h)
        adv = self.advantage(h)
        return self.value(h) + adv - adv.mean(dim=1, keepdim=True)
