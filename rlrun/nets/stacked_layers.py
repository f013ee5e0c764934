"""The layers of K agents' networks with a leading agent axis, and gradient clipping per agent.

Each layer holds K layers' parameters stacked (`StackedLinear`: weight (K, in, out), each agent's W
transposed, for one `torch.baddbmm` over the agent axis) and gives agent k's slice back in the single
layer's state_dict layout (`agent_state`). rlrun.nets.stacked assembles them into K-agent Q-networks.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import cast

import torch
from torch import nn
from torch.nn import functional as F

from rlrun.nets.networks import FUNCTIONAL, NoisyLinear


def stack_parameter(layers: Sequence[nn.Module], name: str) -> nn.Parameter:
    """The layers' parameter `name` on a leading agent axis: a weight matrix transposed, (K, in, out) for
    `torch.baddbmm`; a vector as (K, 1, size) rows, which broadcast over the batch."""
    values = [getattr(layer, name).detach() for layer in layers]
    if values[0].dim() == 2:
        return nn.Parameter(torch.stack([v.t() for v in values]).contiguous())
    return nn.Parameter(torch.stack(values).unsqueeze(1).contiguous())


class StackedLinear(nn.Module):
    """K linear layers: weight (K, in, out) (each agent's W transposed), bias (K, 1, out)."""

    def __init__(self, layers: Sequence[nn.Linear]):
        super().__init__()
        self.weight, self.bias = stack_parameter(layers, "weight"), stack_parameter(layers, "bias")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.baddbmm(self.bias, x, self.weight)

    def agent_state(self, k: int, prefix: str) -> dict[str, torch.Tensor]:
        return {f"{prefix}weight": self.weight[k].t(), f"{prefix}bias": self.bias[k, 0]}


class StackedLayerNorm(nn.Module):
    """K LayerNorms over the last axis, each with its own affine weight and bias (K, 1, size).

    The normalisation runs with a unit weight and zero bias (torch's CPU kernel is faster with an affine
    transform than without: 150 against 240 us for a (10, 128, 128) input; the same bits), then each
    agent's own affine transform; without autograd, in place.
    """

    unit_weight: torch.Tensor
    zero_bias: torch.Tensor

    def __init__(self, layers: Sequence[nn.LayerNorm]):
        super().__init__()
        self.shape, self.eps = layers[0].normalized_shape, layers[0].eps
        self.weight, self.bias = stack_parameter(layers, "weight"), stack_parameter(layers, "bias")
        self.register_buffer("unit_weight", torch.ones(self.shape), persistent=False)
        self.register_buffer("zero_bias", torch.zeros(self.shape), persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        normed = F.layer_norm(x, self.shape, self.unit_weight, self.zero_bias, self.eps)
        if torch.is_grad_enabled():
            return torch.addcmul(self.bias, normed, self.weight)
        return torch.addcmul(self.bias, normed, self.weight, out=normed)

    def agent_state(self, k: int, prefix: str) -> dict[str, torch.Tensor]:
        return {f"{prefix}weight": self.weight[k, 0], f"{prefix}bias": self.bias[k, 0]}


class StackedNoisyLinear(nn.Module):
    """K `NoisyLinear` layers (transposed like `StackedLinear`), each agent with its own noise."""

    eps_in: torch.Tensor
    eps_out: torch.Tensor
    weight_mu: nn.Parameter
    weight_sigma: nn.Parameter
    bias_mu: nn.Parameter
    bias_sigma: nn.Parameter

    def __init__(self, layers: Sequence[NoisyLinear]):
        super().__init__()
        for name in ("weight_mu", "weight_sigma", "bias_mu", "bias_sigma"):
            setattr(self, name, stack_parameter(layers, name))
        self.register_buffer("eps_in", torch.stack([layer.eps_in for layer in layers]), persistent=False)  # (K, in)
        self.register_buffer("eps_out", torch.stack([layer.eps_out for layer in layers]), persistent=False)  # (K, out)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.training:
            return torch.baddbmm(self.bias_mu, x, self.weight_mu)
        eps_out = self.eps_out.unsqueeze(1)  # as NoisyLinear.forward: no weight-sized temporaries
        mean = torch.baddbmm(self.bias_mu + self.bias_sigma * eps_out, x, self.weight_mu)
        return torch.addcmul(mean, torch.bmm(x * self.eps_in.unsqueeze(1), self.weight_sigma), eps_out)

    @torch.no_grad()
    def draw_agent_noise(self, k: int, generator: torch.Generator | None) -> None:
        """Agent k's standard normal draws, in the order its single `NoisyLinear.reset_noise` draws them;
        `shape_noise` then applies f to every agent's at once."""
        torch.randn(self.eps_in.shape[1], generator=generator, out=self.eps_in[k])
        torch.randn(self.eps_out.shape[1], generator=generator, out=self.eps_out[k])

    @torch.no_grad()
    def shape_noise(self) -> None:
        """`NoisyLinear._f` (sign(eps) sqrt(|eps|)) over all agents' draws in one go."""
        for eps in (self.eps_in, self.eps_out):
            eps.copy_(NoisyLinear._f(eps))

    def agent_state(self, k: int, prefix: str) -> dict[str, torch.Tensor]:
        return {
            f"{prefix}weight_mu": self.weight_mu[k].t(),
            f"{prefix}weight_sigma": self.weight_sigma[k].t(),
            f"{prefix}bias_mu": self.bias_mu[k, 0],
            f"{prefix}bias_sigma": self.bias_sigma[k, 0],
        }


class StackedConvEncoder(nn.Module):
    """K conv encoders (an `nn.Sequential` of Conv2d, ReLU and a final Flatten, as `QNetwork` builds them)
    as one: (K, B, C, H, W) -> (K, B, features). Conv weights (K, out, in, kh, kw) and biases (K, out); on a
    GPU one `conv2d(groups=K)` per layer over the agents' channels side by side, on a CPU K plain ones."""

    def __init__(self, encoders: Sequence[nn.Sequential]):
        super().__init__()
        self.steps: list[tuple[str, int]] = []  # ("conv", index into convs) | ("relu", 0) | ("flatten", 0)
        self.weights, self.biases = nn.ParameterList(), nn.ParameterList()
        self.conv_args: list[tuple[int, int]] = []  # (stride, padding) of each conv
        self.names: list[str] = []  # each conv's position in the single encoder (its state_dict prefix)
        for i, module in enumerate(encoders[0]):
            if isinstance(module, nn.Conv2d):
                layers = [cast(nn.Conv2d, e[i]) for e in encoders]
                self.weights.append(nn.Parameter(torch.stack([m.weight.detach() for m in layers]).contiguous()))
                biases = [m.bias if m.bias is not None else torch.zeros(m.out_channels) for m in layers]
                self.biases.append(nn.Parameter(torch.stack([b.detach() for b in biases]).contiguous()))
                stride, padding = module.stride[0], module.padding[0]
                if not isinstance(padding, int) or module.stride[0] != module.stride[1] or module.groups != 1:
                    raise ValueError(f"cannot stack {module}")
                self.conv_args.append((stride, padding))
                self.steps.append(("conv", len(self.conv_args) - 1))
                self.names.append(str(i))
            elif isinstance(module, nn.ReLU):
                self.steps.append(("relu", 0))
            elif isinstance(module, nn.Flatten):
                self.steps.append(("flatten", 0))
            else:
                raise ValueError(f"cannot stack a {type(module).__name__} layer in a conv encoder")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self._per_agent(x) if x.device.type == "cpu" else self._grouped(x)

    def _grouped(self, x: torch.Tensor) -> torch.Tensor:
        k, b = x.shape[0], x.shape[1]
        h = x.transpose(0, 1).reshape(b, k * x.shape[2], *x.shape[3:])  # (B, K * C, H, W): agents side by side
        for kind, i in self.steps:
            if kind == "conv":
                weight, bias = self.weights[i], self.biases[i]
                stride, padding = self.conv_args[i]
                h = F.conv2d(h, weight.flatten(0, 1), bias.flatten(), stride, padding, groups=k)
            elif kind == "relu":
                h = F.relu(h, inplace=True)
            else:  # agent k's channels, flattened in the single network's (C, H, W) order
                h = h.view(b, k, -1).transpose(0, 1).contiguous()
        return h

    def _per_agent(self, x: torch.Tensor) -> torch.Tensor:
        """On a CPU, K plain convolutions: oneDNN's grouped one ran 1.2-4x slower there (forward, 3 agents,
        batches of 32, MinAtar's 4-10 input channels; docs/results/minatar.md); each agent's is its single run's."""
        h = x
        for kind, i in self.steps:
            if kind == "conv":
                stride, padding = self.conv_args[i]
                weight, bias = self.weights[i], self.biases[i]
                h = torch.stack([F.conv2d(h[a], weight[a], bias[a], stride, padding) for a in range(len(h))])
            elif kind == "relu":
                h = F.relu(h, inplace=True)
            else:
                h = h.flatten(2)
        return h

    def agent_state(self, k: int, prefix: str) -> dict[str, torch.Tensor]:
        state = {}
        for name, weight, bias in zip(self.names, self.weights, self.biases, strict=True):
            state[f"{prefix}{name}.weight"], state[f"{prefix}{name}.bias"] = weight[k], bias[k]
        return state


STACKABLE: dict[type, type] = {
    nn.Linear: StackedLinear,
    nn.LayerNorm: StackedLayerNorm,
    NoisyLinear: StackedNoisyLinear,
}
STACKED_LAYERS = (StackedLinear, StackedLayerNorm, StackedNoisyLinear, StackedConvEncoder)
FUNCTIONAL[StackedLinear] = lambda m, x: torch.baddbmm(m.bias, x, m.weight)
FUNCTIONAL[StackedLayerNorm] = StackedLayerNorm.forward


def clip_grad_norm_per_agent(
    params: Sequence[torch.Tensor], max_norm: float | torch.Tensor, skip_unclipped: bool = False
) -> torch.Tensor:
    """`clip_grad_norm_` for each agent separately: the norm over agent k's slices of all gradients,
    and agent k's gradients scaled by min(1, max_norm / (norm_k + 1e-6)). Returns the (K,) norms.
    `max_norm`: one threshold, or a (K,) tensor of one per agent (inf: no clipping for that agent).
    `skip_unclipped`: read the factors on the host and skip the scaling when every one is 1 (a multiply
    by 1 changes nothing; on a CPU the read is free and the multiplies are not)."""
    grads = [p.grad for p in params if p.grad is not None]
    norms = torch.stack([torch.linalg.vector_norm(g.flatten(1), dim=1) for g in grads]).norm(dim=0)
    if isinstance(max_norm, torch.Tensor) or math.isfinite(max_norm):
        limit = max_norm.to(norms.device) if isinstance(max_norm, torch.Tensor) else max_norm
        coef = (limit / (norms + 1e-6)).clamp(max=1.0)
        if skip_unclipped and bool((coef == 1.0).all()):
            return norms
        for g in grads:
            g.mul_(coef.view(-1, *([1] * (g.dim() - 1))))
    return norms
