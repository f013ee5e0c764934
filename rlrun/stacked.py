"""K independent Q-networks held as one module with an agent axis (many seeds in one process).

`StackedQNetwork.from_networks(nets)` stacks K `QNetwork`s that were built (and initialised) exactly as
K single-seed runs would build them; every parameter gets a leading agent axis, and each layer is one
batched matmul (`torch.baddbmm`) over that axis, so the K agents cost one kernel per layer instead of K.
Inputs are (K, B, ...) and outputs (K, B, A): agent k only ever sees its own parameters and its own rows.

Elementwise optimisers (Adam, RMSprop, SGD) updating the stacked tensors do exactly what K separate
optimisers would; gradient clipping must be per agent (`clip_grad_norm_per_agent`), not one global norm.
"""

from __future__ import annotations

import math
from typing import Sequence

import torch
from torch import nn
from torch.nn import functional as F

from rlrun.networks import ACTIVATIONS, FUNCTIONAL, QNetwork, apply_layer, apply_layers


class StackedLinear(nn.Module):
    """K linear layers: weight (K, in, out) (each agent's W transposed), bias (K, 1, out)."""

    def __init__(self, layers: Sequence[nn.Linear]):
        super().__init__()
        self.weight = nn.Parameter(torch.stack([l.weight.detach().t() for l in layers]).contiguous())
        self.bias = nn.Parameter(torch.stack([l.bias.detach() for l in layers]).unsqueeze(1).contiguous())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.baddbmm(self.bias, x, self.weight)

    def agent_state(self, k: int, prefix: str) -> dict[str, torch.Tensor]:
        return {f"{prefix}weight": self.weight[k].t(), f"{prefix}bias": self.bias[k, 0]}


class StackedLayerNorm(nn.Module):
    """K LayerNorms over the last axis, each with its own affine weight and bias (K, 1, size)."""

    def __init__(self, layers: Sequence[nn.LayerNorm]):
        super().__init__()
        self.shape, self.eps = layers[0].normalized_shape, layers[0].eps
        self.weight = nn.Parameter(torch.stack([l.weight.detach() for l in layers]).unsqueeze(1).contiguous())
        self.bias = nn.Parameter(torch.stack([l.bias.detach() for l in layers]).unsqueeze(1).contiguous())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.addcmul(self.bias, F.layer_norm(x, self.shape, eps=self.eps), self.weight)

    def agent_state(self, k: int, prefix: str) -> dict[str, torch.Tensor]:
        return {f"{prefix}weight": self.weight[k, 0], f"{prefix}bias": self.bias[k, 0]}


STACKABLE = {nn.Linear: StackedLinear, nn.LayerNorm: StackedLayerNorm}
FUNCTIONAL[StackedLinear] = lambda m, x: torch.baddbmm(m.bias, x, m.weight)
FUNCTIONAL[StackedLayerNorm] = lambda m, x: torch.addcmul(m.bias, F.layer_norm(x, m.shape, eps=m.eps), m.weight)


def unsupported(net: QNetwork) -> list[tuple[str, object, str]]:
    """(config key, value, allowed) for every option of `net` that cannot be stacked yet."""
    problems = []
    if net.pixels:
        problems.append(("network.encoder", "nature_cnn", "mlp when seeds > 1"))
    if net.noisy:
        problems.append(("network.noisy", True, "false when seeds > 1"))
    if net.num_atoms > 1:
        problems.append(("network.num_atoms", net.num_atoms, "1 when seeds > 1 (C51 is not batched yet)"))
    return problems


class StackedQNetwork(nn.Module):
    """The same maps as `QNetwork` (MLP trunk, optional LayerNorm, plain or dueling head), for K agents."""

    def __init__(self, nets: Sequence[QNetwork]):
        super().__init__()
        first = nets[0]
        if unsupported(first):
            raise ValueError(f"cannot stack this network: {unsupported(first)}")
        self.agents, self.n_actions, self.dueling = len(nets), first.n_actions, first.dueling
        self.num_atoms = 1
        self.noisy = False
        layers = []
        for i, module in enumerate(first.trunk):
            kind = type(module)
            if kind in STACKABLE:
                layers.append(STACKABLE[kind]([n.trunk[i] for n in nets]))
            else:  # activations: stateless, shared
                layers.append(ACTIVATIONS[_activation_name(module)]())
        self.trunk = nn.Sequential(*layers)
        heads = ("value", "advantage") if self.dueling else ("head",)
        for name in heads:
            setattr(self, name, StackedLinear([getattr(n, name) for n in nets]))
        self._heads = heads
        self.register_buffer("support", first.support.clone())

    @classmethod
    def from_networks(cls, nets: Sequence[QNetwork]) -> "StackedQNetwork":
        return cls(nets).to(next(nets[0].parameters()).device)

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        """(K, B, *obs_shape) -> (K, B, A) Q-values."""
        h = apply_layers(self.trunk, obs.flatten(2).float())
        if not self.dueling:
            return apply_layer(self.head, h)
        adv = apply_layer(self.advantage, h)
        return apply_layer(self.value, h) + adv - adv.mean(dim=2, keepdim=True)

    def agent_state_dict(self, k: int) -> dict[str, torch.Tensor]:
        """Agent k's parameters in `QNetwork.state_dict()` layout (loads into a single-seed QNetwork)."""
        state: dict[str, torch.Tensor] = {}
        for i, module in enumerate(self.trunk):
            if hasattr(module, "agent_state"):
                state.update(module.agent_state(k, f"trunk.{i}."))
        for name in self._heads:
            state.update(getattr(self, name).agent_state(k, f"{name}."))
        state["support"] = self.support
        return {key: v.detach().clone().contiguous() for key, v in state.items()}


def _activation_name(module: nn.Module) -> str:
    for name, cls in ACTIVATIONS.items():
        if isinstance(module, cls):
            return name
    raise ValueError(f"cannot stack a {type(module).__name__} layer")


def clip_grad_norm_per_agent(params: Sequence[torch.Tensor], max_norm: float) -> torch.Tensor:
    """`clip_grad_norm_` for each agent separately: the norm over agent k's slices of all gradients,
    and agent k's gradients scaled by min(1, max_norm / (norm_k + 1e-6)). Returns the (K,) norms."""
    grads = [p.grad for p in params if p.grad is not None]
    norms = torch.stack([torch.linalg.vector_norm(g.flatten(1), dim=1) for g in grads]).norm(dim=0)
    if math.isfinite(max_norm):
        coef = (max_norm / (norms + 1e-6)).clamp(max=1.0)
        for g in grads:
            g.mul_(coef.view(-1, *([1] * (g.dim() - 1))))
    return norms
