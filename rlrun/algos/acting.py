"""Greedy actions for the training loop: argmax_a Q(s, a) for a batch of observations.

Acting happens at every env step on a handful of observations, where the cost is per call, not per
FLOP. Measured on this project's CPU, one observation: the default MLP (128-128, LayerNorm) 45 us through
torch, 23 us in numpy; a 120-84 MLP without LayerNorm 32 us vs 8 us (16 observations: 55 vs 40 us and
43 vs 17 us). So on the CPU, MLP networks (single or stacked, with LayerNorm, plain or dueling
heads, scalar or QR-DQN quantiles) are evaluated in numpy on views of the network's own parameter memory;
the views see every in-place change (optimizer steps, target syncs do not touch the online net,
`load_state_dict` copies in place). Anything else (a GPU, pixel encoders, noisy layers, C51, IQN) goes
through the torch module.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch
from torch import nn

from rlrun.nets.networks import QNetwork
from rlrun.nets.stacked import StackedQNetwork
from rlrun.nets.stacked_layers import StackedLayerNorm, StackedLinear


def _relu(x: np.ndarray) -> np.ndarray:
    return np.maximum(x, 0, out=x)


NUMPY_ACTIVATIONS: dict[type, Callable[[np.ndarray], np.ndarray]] = {nn.ReLU: _relu, nn.Tanh: np.tanh}


def _layer_norm(weight: np.ndarray, bias: np.ndarray, eps: float) -> Callable[[np.ndarray], np.ndarray]:
    inv_n = np.float32(1.0 / weight.shape[-1])
    eps32 = np.float32(eps)

    def apply(x: np.ndarray) -> np.ndarray:  # ufuncs in place: np.mean's Python wrapper costs more than the maths
        centred = x - np.add.reduce(x, axis=-1, keepdims=True) * inv_n
        scale = np.add.reduce(centred * centred, axis=-1, keepdims=True)
        scale *= inv_n
        scale += eps32
        np.sqrt(scale, out=scale)
        centred /= scale
        centred *= weight
        centred += bias
        return centred

    return apply


def _view(p: torch.Tensor) -> np.ndarray:
    return p.detach().numpy()


def _numpy_layer(module: nn.Module) -> Callable[[np.ndarray], np.ndarray] | None:
    """The numpy version of one trunk/head layer, or None if there is none."""
    if isinstance(module, nn.Linear):
        w_t, b = _view(module.weight).T, _view(module.bias)
        return lambda x: x @ w_t + b
    if isinstance(module, StackedLinear):  # weight (K, in, out), bias (K, 1, out)
        w, b = _view(module.weight), _view(module.bias)
        return lambda x: np.matmul(x, w) + b
    if isinstance(module, nn.LayerNorm) and module.elementwise_affine and len(module.normalized_shape) == 1:
        return _layer_norm(_view(module.weight), _view(module.bias), module.eps)
    if isinstance(module, StackedLayerNorm):
        return _layer_norm(_view(module.weight), _view(module.bias), module.eps)
    return NUMPY_ACTIVATIONS.get(type(module))


def numpy_forward(net: nn.Module) -> Callable[[np.ndarray], np.ndarray] | None:
    """obs (..., B, obs_dim) -> Q (..., B, A) in numpy, sharing `net`'s parameters; None where the
    network is not a plain CPU MLP (pixels, noisy layers, C51, IQN, unknown layers, another device)."""
    if not isinstance(net, (QNetwork, StackedQNetwork)) or net.noisy:
        return None
    if not net.q_head.numpy_acting:  # C51 and IQN heads act through torch
        return None
    per_action = net.q_head.numpy_q_values  # (..., A * P) head outputs -> (..., A)
    if getattr(net, "pixels", False) or any(
        p.device.type != "cpu" or p.dtype != torch.float32 for p in net.parameters()
    ):
        return None
    maybe_trunk = [_numpy_layer(m) for m in net.trunk]
    maybe_heads = [_numpy_layer(getattr(net, name)) for name in (("value", "advantage") if net.dueling else ("head",))]
    trunk = [f for f in maybe_trunk if f is not None]
    heads = [f for f in maybe_heads if f is not None]
    if len(trunk) < len(maybe_trunk) or len(heads) < len(maybe_heads):
        return None

    def forward(obs: np.ndarray) -> np.ndarray:
        h = np.asarray(obs, dtype=np.float32)
        for layer in trunk:
            h = layer(h)
        if not net.dueling:
            return per_action(heads[0](h))
        value, adv = per_action(heads[0](h)), per_action(heads[1](h))
        return value + adv - np.add.reduce(adv, axis=-1, keepdims=True) / adv.shape[-1]

    return forward


class GreedyActor:
    """`actor(obs)` -> greedy actions: obs (B, *obs_shape) -> (B,) for a `QNetwork`, (K, B, ...) ->
    (K, B) for a stacked network (`agents` = K), as numpy int64. `actor.act(obs)` takes and returns the
    flat form whatever the network: (K * B, *obs_shape) -> (K * B,), agent k's observations in rows
    k * B to (k + 1) * B - 1, as the vector env of a run with K agents lays them out."""

    def __init__(self, net: nn.Module, device: torch.device):
        self.net, self.device = net, device
        self.agents: int | None = getattr(net, "agents", None)
        self._numpy = numpy_forward(net)

    @property
    def uses_numpy(self) -> bool:
        return self._numpy is not None

    def __call__(self, obs: np.ndarray) -> np.ndarray:
        if self._numpy is not None:
            flat = obs.reshape(*obs.shape[: 1 if self.agents is None else 2], -1)
            return self._numpy(flat).argmax(axis=-1)
        with torch.no_grad():
            return self.net(torch.as_tensor(obs, device=self.device)).argmax(dim=-1).cpu().numpy()

    def act(self, obs: np.ndarray) -> np.ndarray:
        if self.agents is None:
            return self(obs)
        return self(obs.reshape(self.agents, -1, *obs.shape[1:])).reshape(-1)
