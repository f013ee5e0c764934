"""K independent Q-networks held as one module with an agent axis (many seeds in one process).

`stack_networks(nets)` picks one of two forms with the same interface (forward (K, B, ...) -> (K, B, A),
`agents`, `agent_state_dict(k)`): `StackedQNetwork`, hand-fused for MLP networks and MinAtar's conv
encoder (plain or dueling heads, C51, QR-DQN, IQN, noisy layers: fast on a CPU), or `VmapQNetwork` for the
Nature CNN, through `torch.func.vmap`.

`StackedQNetwork(nets)` stacks K `QNetwork`s that were built (and initialised) exactly as
K single-seed runs would build them; every parameter gets a leading agent axis, and each layer is one
batched matmul (`torch.baddbmm`) over that axis, so the K agents cost one kernel per layer instead of K.
Inputs are (K, B, ...) and outputs (K, B, A): agent k only ever sees its own parameters and its own rows.

Elementwise optimisers (Adam, RMSprop, SGD) updating the stacked tensors do exactly what K separate
optimisers would; gradient clipping must be per agent (`clip_grad_norm_per_agent`), not one global norm.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import cast

import torch
from torch import nn
from torch.nn import functional as F

from rlrun.nets.heads import ScalarHead, dueling
from rlrun.nets.networks import ACTIVATIONS, NoisyLinear, QNetwork, apply_layer, apply_layers, network_input
from rlrun.nets.quantile import cosine_features, quantile_midpoints
from rlrun.nets.stacked_layers import (
    STACKABLE,
    STACKED_LAYERS,
    StackedConvEncoder,
    StackedLinear,
    StackedNoisyLinear,
)

# Conv encoders that StackedQNetwork fuses as grouped convolutions (the Nature CNN's stay vmapped: a GPU's).
STACKED_ENCODERS = ("mlp", "minatar_cnn")


def unsupported(net: QNetwork) -> list[str]:
    """The options of `net` that `StackedQNetwork` does not fuse (`VmapQNetwork` takes those)."""
    if net.encoder not in STACKED_ENCODERS:
        return [f"encoder {net.encoder}"]
    if net.pixels and any(isinstance(m, nn.LayerNorm) for m in net.trunk[0].modules()):
        return [f"encoder {net.encoder} with conv_layer_norm"]
    return []


class StackedQNetwork(nn.Module):
    """The same maps as an MLP `QNetwork` (optional LayerNorm, plain or dueling heads, C51 atoms, QR-DQN or
    IQN quantiles, noisy layers), for K agents."""

    support: torch.Tensor
    head: nn.Module
    value: nn.Module
    advantage: nn.Module
    tau_embedding: StackedLinear

    def __init__(self, nets: Sequence[QNetwork]):
        super().__init__()
        first = nets[0]
        if unsupported(first):
            raise ValueError(f"cannot stack this network: {unsupported(first)}")
        self.agents, self.n_actions, self.dueling, self.noisy = len(nets), first.n_actions, first.dueling, first.noisy
        self.tau_embedding_dim, self.iqn_acting_taus = first.tau_embedding_dim, first.iqn_acting_taus
        self.outputs_per_action, self.embed_at, self.q_head = first.outputs_per_action, first.embed_at, first.q_head
        self.pixels, self.input_divisor, self.encoder = first.pixels, first.input_divisor, first.encoder
        layers: list[nn.Module] = []
        for i, module in enumerate(first.trunk):
            kind = type(module)
            if isinstance(module, nn.Sequential):  # the conv encoder
                layers.append(StackedConvEncoder([cast(nn.Sequential, n.trunk[i]) for n in nets]))
            elif kind in STACKABLE:
                layers.append(STACKABLE[kind]([n.trunk[i] for n in nets]))
            else:  # activations: stateless, shared
                layers.append(ACTIVATIONS[_activation_name(module)]())
        self.trunk = nn.Sequential(*layers)
        heads = ("value", "advantage") if self.dueling else ("head",)
        for name in heads:
            setattr(self, name, STACKABLE[type(getattr(first, name))]([getattr(n, name) for n in nets]))
        self._head_names = heads
        if self.tau_embedding_dim > 0:
            self.tau_embedding = StackedLinear([n.tau_embedding for n in nets])
        self.register_buffer("support", first.support.clone())

    def _input(self, obs: torch.Tensor) -> torch.Tensor:
        """(K, B, *obs_shape) as the trunk reads it: flat vectors, or (K, B, C, H, W) grids for the conv encoder."""
        return network_input(obs, self.pixels, self.input_divisor, batch_dims=2)

    def _heads(self, h: torch.Tensor) -> torch.Tensor:
        """(K, M, features) -> (K, M, A, outputs_per_action)."""
        k, m, per_action = h.shape[0], h.shape[1], self.outputs_per_action
        if not self.dueling:
            return apply_layer(self.head, h).view(k, m, self.n_actions, per_action)
        adv = apply_layer(self.advantage, h).view(k, m, self.n_actions, per_action)
        return dueling(apply_layer(self.value, h).view(k, m, 1, per_action), adv, action_dim=2)

    def dist_logits(self, obs: torch.Tensor) -> torch.Tensor:
        """(K, B, *obs_shape) -> (K, B, A, outputs_per_action) action values, logits or quantiles."""
        return self._heads(apply_layers(self.trunk, self._input(obs)))

    def quantile_values(self, obs: torch.Tensor, taus: torch.Tensor | None = None) -> torch.Tensor:
        """(K, B, *obs_shape) -> (K, B, A, N) quantiles; IQN's at taus (K, B, N), as `QNetwork`'s."""
        if self.tau_embedding_dim == 0:
            return self.dist_logits(obs)
        assert taus is not None, "IQN needs the fractions taus (K, B, N)"
        layers = list(self.trunk)
        h = apply_layers(layers[: self.embed_at], self._input(obs))  # (K, B, D)
        k, b, n = taus.shape
        cosines = cosine_features(taus, self.tau_embedding_dim).view(k, b * n, -1)
        phi = F.relu(apply_layer(self.tau_embedding, cosines)).view(k, b, n, -1)
        h = apply_layers(layers[self.embed_at :], (h.unsqueeze(2) * phi).view(k, b * n, -1))
        return self._heads(h).view(k, b, n, self.n_actions).transpose(2, 3)  # (K, B * N, A, 1) -> (K, B, A, N)

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        """(K, B, *obs_shape) -> (K, B, A) Q-values."""
        if self.tau_embedding_dim > 0:
            taus = quantile_midpoints(self.iqn_acting_taus, obs.device).expand(*obs.shape[:2], -1)
            return self.q_head.q_values(self.quantile_values(obs, taus), self.support)
        if not isinstance(self.q_head, ScalarHead):
            return self.q_head.q_values(self.dist_logits(obs), self.support)
        # A scalar head's outputs are its Q-values: (K, B, A) straight from the head layers.
        h = apply_layers(self.trunk, self._input(obs))
        if not self.dueling:
            return apply_layer(self.head, h)
        adv = apply_layer(self.advantage, h)
        return dueling(apply_layer(self.value, h), adv, action_dim=2)

    @torch.no_grad()
    def reset_noise(self, generators: Sequence[torch.Generator] | None = None) -> None:
        """Each agent's new noise from its own generator, its layers in the order of its single network."""
        noisy = [m for m in self.modules() if isinstance(m, StackedNoisyLinear)]
        for k, generator in enumerate(generators or [None] * self.agents):
            for layer in noisy:
                layer.draw_agent_noise(k, generator)
        for layer in noisy:  # the same floats as per agent, in a few ops per layer instead of a few per agent
            layer.shape_noise()

    def agent_state_dict(self, k: int) -> dict[str, torch.Tensor]:
        """Agent k's parameters in `QNetwork.state_dict()` layout (loads into a single-seed QNetwork)."""
        state: dict[str, torch.Tensor] = {}
        for i, module in enumerate(self.trunk):
            if isinstance(module, STACKED_LAYERS):
                state.update(module.agent_state(k, f"trunk.{i}."))
        for name in self._head_names:
            state.update(getattr(self, name).agent_state(k, f"{name}."))
        if self.tau_embedding_dim > 0:
            state.update(self.tau_embedding.agent_state(k, "tau_embedding."))
        state["support"] = self.support
        return {key: v.detach().clone().contiguous() for key, v in state.items()}


class _DistLogits(nn.Module):
    """`net.dist_logits` (or `net.quantile_values` for IQN) as a module's forward, for `functional_call`."""

    def __init__(self, net: QNetwork):
        super().__init__()
        self.net = net

    def forward(self, obs: torch.Tensor, taus: torch.Tensor | None = None) -> torch.Tensor:
        return self.net.dist_logits(obs) if taus is None else self.net.quantile_values(obs, taus)


class VmapQNetwork(nn.Module):
    """K `QNetwork`s of any kind (a pixel encoder included) as one module: their parameters and
    buffers stacked on a leading agent axis, evaluated with `torch.func.vmap` over `functional_call`.

    Noise comes from each agent's own generator, drawn in the order its single network draws it, so agent k
    sees the noise that the single-seed run with its seed sees.
    """

    support: torch.Tensor
    _template: _DistLogits

    def __init__(self, nets: Sequence[QNetwork]):
        super().__init__()
        first = nets[0]
        self.agents, self.n_actions, self.dueling, self.noisy = len(nets), first.n_actions, first.dueling, first.noisy
        self.tau_embedding_dim, self.iqn_acting_taus = first.tau_embedding_dim, first.iqn_acting_taus
        self.outputs_per_action, self.pixels, self.q_head = first.outputs_per_action, first.pixels, first.q_head
        # The template runs the maths with the stacked tensors swapped in; it is not a submodule, so
        # `parameters()` holds only the stacked ones.
        self.__dict__["_template"] = _DistLogits(copy.deepcopy(first))
        params, buffers = torch.func.stack_module_state(list(nets))
        self._names = {name: "stacked__" + name.replace(".", "__") for name in [*params, *buffers]}
        for name, value in params.items():
            self.register_parameter(self._names[name], nn.Parameter(value.detach().clone()))
        persistent = first.state_dict().keys()
        for name, value in buffers.items():
            self.register_buffer(self._names[name], value.clone(), persistent=name in persistent)
        self.register_buffer("support", first.support.clone(), persistent=False)  # shared by all agents
        self._noisy_layers = [name for name, m in first.named_modules() if isinstance(m, NoisyLinear)]

    def _vmapped(self, *inputs: torch.Tensor) -> torch.Tensor:
        """The template's forward for each agent: its own stacked tensors, its own rows of each input."""

        def one(state, *x):
            return torch.func.functional_call(self._template, state, x)

        state = {f"net.{name}": getattr(self, flat) for name, flat in self._names.items()}
        return torch.func.vmap(one)(state, *inputs)

    def dist_logits(self, obs: torch.Tensor) -> torch.Tensor:
        """(K, B, *obs_shape) -> (K, B, A, outputs_per_action)."""
        return self._vmapped(obs)

    def quantile_values(self, obs: torch.Tensor, taus: torch.Tensor | None = None) -> torch.Tensor:
        """(K, B, *obs_shape) -> (K, B, A, N) quantiles; IQN's at taus (K, B, N)."""
        if self.tau_embedding_dim == 0:
            return self.dist_logits(obs)
        assert taus is not None, "IQN needs the fractions taus (K, B, N)"
        return self._vmapped(obs, taus)

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        """(K, B, *obs_shape) -> (K, B, A) Q-values."""
        if self.tau_embedding_dim > 0:
            taus = quantile_midpoints(self.iqn_acting_taus, obs.device).expand(*obs.shape[:2], -1)
            return self.q_head.q_values(self.quantile_values(obs, taus), self.support)
        return self.q_head.q_values(self.dist_logits(obs), self.support)

    def train(self, mode: bool = True) -> VmapQNetwork:
        self._template.train(mode)  # noisy layers read their own `training` flag
        return super().train(mode)

    @torch.no_grad()
    def reset_noise(self, generators: Sequence[torch.Generator] | None = None) -> None:
        for k, generator in enumerate(generators or [None] * self.agents):
            for layer in self._noisy_layers:
                for which in ("eps_in", "eps_out"):
                    eps = getattr(self, self._names[f"{layer}.{which}"])
                    eps[k] = NoisyLinear.noise(eps.shape[1], generator, eps.device)

    def agent_state_dict(self, k: int) -> dict[str, torch.Tensor]:
        """Agent k's parameters in `QNetwork.state_dict()` layout."""
        persistent = dict(self.named_parameters()) | dict(self.named_buffers())
        return {
            name: persistent[flat][k].detach().clone()
            for name, flat in self._names.items()
            if flat in self.state_dict()
        }


def stack_networks(nets: Sequence[QNetwork]) -> StackedQNetwork | VmapQNetwork:
    """K networks as one module with an agent axis: fused for plain MLPs, vmapped otherwise."""
    stacked = StackedQNetwork if not unsupported(nets[0]) else VmapQNetwork
    return stacked(nets).to(next(nets[0].parameters()).device)


def _activation_name(module: nn.Module) -> str:
    for name, cls in ACTIVATIONS.items():
        if isinstance(module, cls):
            return name
    raise ValueError(f"cannot stack a {type(module).__name__} layer")
