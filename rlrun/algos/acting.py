"""Greedy actions for the training loop: argmax_a Q(s, a) for a batch of observations.

Acting happens at every env step on a handful of observations, where the cost is per call, not per
FLOP. Measured on this project's CPU, one observation: the default MLP (128-128, LayerNorm) 45 us through
torch, 23 us in numpy; a 120-84 MLP without LayerNorm 32 us vs 8 us (16 observations: 55 vs 40 us and
43 vs 17 us). So on the CPU, MLP networks (single or stacked, with LayerNorm, plain or dueling
heads, scalar or QR-DQN quantiles) are evaluated in numpy on views of the network's own parameter memory;
the views see every in-place change (optimizer steps, target syncs do not touch the online net,
`load_state_dict` copies in place, noise is redrawn in place). So are networks on MinAtar's conv encoder,
with their noisy layers and C51 heads too: Rainbow's, 3 agents, acted in about 0.6 of torch's time.
Anything else (a GPU, the Nature CNN, IQN, an MLP with noisy layers or C51) goes through the torch module.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import cast

import numpy as np
import torch
from numpy.lib.stride_tricks import sliding_window_view
from torch import nn

from rlrun.nets.networks import NoisyLinear, QNetwork
from rlrun.nets.stacked import StackedQNetwork
from rlrun.nets.stacked_layers import StackedConvEncoder, StackedLayerNorm, StackedLinear, StackedNoisyLinear


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


def _noisy(
    mu_t: np.ndarray,
    sigma_t: np.ndarray,
    b_mu: np.ndarray,
    b_sigma: np.ndarray,
    eps_in: np.ndarray,
    eps_out: np.ndarray,
    module: nn.Module,
) -> Callable[[np.ndarray], np.ndarray]:
    """A noisy layer as `NoisyLinear.forward` computes it (its noise while training, mu alone in eval mode)."""

    def apply(x: np.ndarray) -> np.ndarray:
        if not module.training:
            return x @ mu_t + b_mu
        return (x @ mu_t + (b_mu + b_sigma * eps_out)) + ((x * eps_in) @ sigma_t) * eps_out

    return apply


def _conv(weight: np.ndarray, bias: np.ndarray) -> Callable[[np.ndarray], np.ndarray]:
    """A 3x3 convolution (stride 1, no padding) + ReLU + flatten over (..., C, H, W), as patches times the
    weight (out, C, kh, kw), or (K, 1, out, C, kh, kw) for stacked agents; the features in torch's order."""
    out, kh, kw = weight.shape[-4], weight.shape[-2], weight.shape[-1]
    w_t = weight.reshape(*weight.shape[:-3], -1).swapaxes(-1, -2)  # (..., C * kh * kw, out): a view
    b = bias[..., None, :]

    def apply(x: np.ndarray) -> np.ndarray:
        patches = sliding_window_view(x, (kh, kw), axis=(-2, -1))  # (..., C, H', W', kh, kw)
        lead, h, w = patches.shape[:-5], patches.shape[-4], patches.shape[-3]
        cols = np.moveaxis(patches, -5, -3).reshape(*lead, h * w, -1)  # (..., H' W', C kh kw)
        y = cols @ w_t + b  # (..., H' W', out)
        np.maximum(y, 0, out=y)
        return y.swapaxes(-1, -2).reshape(*lead, out * h * w)

    return apply


def _minatar_encoder(module: nn.Module) -> Callable[[np.ndarray], np.ndarray] | None:
    if isinstance(module, StackedConvEncoder):
        if len(module.conv_args) != 1 or module.conv_args[0] != (1, 0):
            return None
        return _conv(_view(module.weights[0])[:, None], _view(module.biases[0])[:, None])
    if not isinstance(module, nn.Sequential) or [type(m) for m in module] != [nn.Conv2d, nn.ReLU, nn.Flatten]:
        return None
    conv = cast(nn.Conv2d, module[0])
    if conv.stride != (1, 1) or conv.padding != (0, 0) or conv.bias is None or conv.groups != 1:
        return None
    return _conv(_view(conv.weight), _view(conv.bias))


def _numpy_layer(module: nn.Module) -> Callable[[np.ndarray], np.ndarray] | None:
    """The numpy version of one trunk/head layer, or None if there is none."""
    if isinstance(module, NoisyLinear):
        mu_t, sigma_t = _view(module.weight_mu).T, _view(module.weight_sigma).T
        b_mu, b_sigma = _view(module.bias_mu), _view(module.bias_sigma)
        return _noisy(mu_t, sigma_t, b_mu, b_sigma, _view(module.eps_in), _view(module.eps_out), module)
    if isinstance(module, StackedNoisyLinear):  # weights (K, in, out), biases (K, 1, out), noise (K, n)
        mu, sigma, b_mu, b_sigma = (
            _view(getattr(module, n)) for n in ("weight_mu", "weight_sigma", "bias_mu", "bias_sigma")
        )
        return _noisy(mu, sigma, b_mu, b_sigma, _view(module.eps_in)[:, None], _view(module.eps_out)[:, None], module)
    if isinstance(module, (nn.Sequential, StackedConvEncoder)):
        return _minatar_encoder(module)
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
    """obs (..., B, obs_dim), or (..., B, C, H, W) for MinAtar's encoder, -> Q (..., B, A) in numpy, sharing
    `net`'s parameters; None where the network is not a CPU MLP or MinAtar network that numpy covers."""
    if not isinstance(net, (QNetwork, StackedQNetwork)):
        return None
    minatar = net.encoder == "minatar_cnn"
    categorical = net.num_atoms > 1 and minatar
    if net.noisy and not minatar:
        return None
    if not (net.q_head.numpy_acting or categorical):  # IQN's heads (and C51 on an MLP) act through torch
        return None
    if (net.pixels and not minatar) or any(
        p.device.type != "cpu" or p.dtype != torch.float32 for p in net.parameters()
    ):
        return None
    maybe_trunk = [_numpy_layer(m) for m in net.trunk]
    maybe_heads = [_numpy_layer(getattr(net, name)) for name in (("value", "advantage") if net.dueling else ("head",))]
    trunk = [f for f in maybe_trunk if f is not None]
    heads = [f for f in maybe_heads if f is not None]
    if len(trunk) < len(maybe_trunk) or len(heads) < len(maybe_heads):
        return None
    if categorical:
        return _categorical(net, trunk, heads)
    per_action = net.q_head.numpy_q_values  # (..., A * P) head outputs -> (..., A)

    def forward(obs: np.ndarray) -> np.ndarray:
        h = np.asarray(obs, dtype=np.float32)
        for layer in trunk:
            h = layer(h)
        if not net.dueling:
            return per_action(heads[0](h))
        value, adv = per_action(heads[0](h)), per_action(heads[1](h))
        return value + adv - np.add.reduce(adv, axis=-1, keepdims=True) / adv.shape[-1]

    return forward


Layer = Callable[[np.ndarray], np.ndarray]


def _categorical(net: QNetwork | StackedQNetwork, trunk: list[Layer], streams: list[Layer]) -> Layer:
    """C51 on MinAtar's network: the dueling streams (value, advantage) combine as logits, Q is the
    expectation of the support under their softmax (`CategoricalHead.q_values`)."""
    support, actions, atoms = _view(net.support), net.n_actions, net.num_atoms

    def forward(obs: np.ndarray) -> np.ndarray:
        h = np.asarray(obs, dtype=np.float32)
        for layer in trunk:
            h = layer(h)
        logits = streams[-1](h).reshape(*h.shape[:-1], actions, atoms)
        if net.dueling:
            logits = streams[0](h)[..., None, :] + logits - logits.mean(axis=-2, keepdims=True)
        p = np.exp(logits - logits.max(axis=-1, keepdims=True))
        return (p @ support) / np.add.reduce(p, axis=-1)

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
        self._flatten = not getattr(net, "pixels", False)  # numpy MLPs read flat observations, conv nets grids

    @property
    def uses_numpy(self) -> bool:
        return self._numpy is not None

    def __call__(self, obs: np.ndarray) -> np.ndarray:
        if self._numpy is not None:
            if self._flatten:
                obs = obs.reshape(*obs.shape[: 1 if self.agents is None else 2], -1)
            return self._numpy(obs).argmax(axis=-1)
        with torch.no_grad():
            return self.net(torch.as_tensor(obs, device=self.device)).argmax(dim=-1).cpu().numpy()

    def act(self, obs: np.ndarray) -> np.ndarray:
        if self.agents is None:
            return self(obs)
        return self(obs.reshape(self.agents, -1, *obs.shape[1:])).reshape(-1)
