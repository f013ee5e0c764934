"""What rlrun calls on a Q-network, whatever its kind: `QNet` is what `QNetwork` (one agent) and the stacked
networks (rlrun.nets.stacked: the same calls on (K, B, ...) inputs) share; `StackedQNet` adds what is per agent.
A type checker then finds a method missing on one of the look-alikes before a user does. `TD` is what a
network's head (rlrun.nets.heads) reads of the loss module that holds the nets."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Protocol, Self

import torch
from torch import nn

# Where noisy layers draw their noise (and IQN its fractions): one torch.Generator, one per stacked agent, or
# None (torch's global one).
Generators = torch.Generator | list[torch.Generator] | None


class QNet(Protocol):
    n_actions: int
    noisy: bool  # noisy linear layers: `reset_noise` draws new noise
    support: torch.Tensor  # C51's support (a placeholder zero for other heads)
    training: bool

    def __call__(self, obs: torch.Tensor) -> torch.Tensor:
        """Q-values (..., B, A)."""
        ...

    def dist_logits(self, obs: torch.Tensor) -> torch.Tensor: ...

    def quantile_values(self, obs: torch.Tensor, taus: torch.Tensor | None = None) -> torch.Tensor: ...

    @property
    def reset_noise(self) -> Callable[..., None]:
        """New noise from one torch.Generator (or None: torch's global one) for a QNetwork, one per agent
        for a stacked network."""
        ...

    def parameters(self, recurse: bool = True) -> Iterator[nn.Parameter]: ...

    def named_parameters(self) -> Iterator[tuple[str, nn.Parameter]]: ...

    def named_buffers(self) -> Iterator[tuple[str, torch.Tensor]]: ...

    def state_dict(self) -> dict[str, torch.Tensor]: ...

    def load_state_dict(self, state_dict: Mapping[str, torch.Tensor], strict: bool = True) -> object: ...

    def train(self, mode: bool = True) -> object: ...

    def eval(self) -> object: ...

    def requires_grad_(self, requires_grad: bool = True) -> Self: ...


class StackedQNet(QNet, Protocol):
    agents: int  # K

    def agent_state_dict(self, k: int) -> dict[str, torch.Tensor]:
        """Agent k's parameters in `QNetwork.state_dict()` layout."""
        ...


class TD(Protocol):
    """What a head reads of the loss module (rlrun.algos.dqn.TDLoss)."""

    online: QNet
    target: QNet
    double: bool
    loss_fn: Callable[..., torch.Tensor] | None  # the scalar loss (torch.nn.functional's); None for other heads
    kappa: float
    iqn_taus: int
    iqn_target_taus: int

    def sample_taus(self, batch_shape: torch.Size, n: int) -> torch.Tensor: ...
