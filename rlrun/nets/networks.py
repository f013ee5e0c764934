"""Q-networks. Sizes of the observation and action spaces come from the env, never from YAML.

One class covers the family: plain or dueling heads, scalar Q-values, a categorical distribution over
`num_atoms` support points (C51) or quantiles of the return (QR-DQN, IQN), ordinary or factorised-Gaussian
noisy linear layers. `forward` always returns Q-values (B, A), so acting, evaluation and logging treat every
variant the same way.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

import torch
from torch import nn
from torch.nn import functional as F

from rlrun.nets.heads import dueling, head_for
from rlrun.nets.quantile import cosine_features, quantile_midpoints

ACTIVATIONS = {"relu": nn.ReLU, "tanh": nn.Tanh, "elu": nn.ELU, "gelu": nn.GELU}


class NoisyLinear(nn.Module):
    """Factorised Gaussian noisy linear layer (Fortunato et al. 2018).

    w = mu_w + sigma_w * (f(eps_out) f(eps_in)^T), f(x) = sign(x) sqrt|x|, with the paper's initialisation
    mu ~ U[-1/sqrt(p), 1/sqrt(p)] and sigma = sigma0 / sqrt(p) (p = fan-in). In `eval()` mode the layer
    uses the mean weights only, so greedy evaluation is deterministic.
    """

    eps_in: torch.Tensor
    eps_out: torch.Tensor

    def __init__(self, in_features: int, out_features: int, sigma0: float = 0.5):
        super().__init__()
        self.in_features, self.out_features = in_features, out_features
        bound = 1.0 / math.sqrt(in_features)
        self.weight_mu = nn.Parameter(torch.empty(out_features, in_features).uniform_(-bound, bound))
        self.weight_sigma = nn.Parameter(torch.full((out_features, in_features), sigma0 * bound))
        self.bias_mu = nn.Parameter(torch.empty(out_features).uniform_(-bound, bound))
        self.bias_sigma = nn.Parameter(torch.full((out_features,), sigma0 * bound))
        # Not persistent: noise is not state to checkpoint or to copy into the target network.
        self.register_buffer("eps_in", torch.zeros(in_features), persistent=False)
        self.register_buffer("eps_out", torch.zeros(out_features), persistent=False)
        self.reset_noise()

    @staticmethod
    def _f(x: torch.Tensor) -> torch.Tensor:
        return x.sign() * x.abs().sqrt()

    @torch.no_grad()
    def reset_noise(self, generator: torch.Generator | None = None) -> None:
        """New noise, from `generator` (the agent's own stream) or torch's global one."""
        self.eps_in.copy_(self.noise(self.in_features, generator, self.eps_in.device))
        self.eps_out.copy_(self.noise(self.out_features, generator, self.eps_out.device))

    @classmethod
    def noise(cls, size: int, generator: torch.Generator | None, device: torch.device) -> torch.Tensor:
        """f(eps) for `size` standard normal draws: the order of draws every noisy network shares."""
        return cls._f(torch.randn(size, generator=generator, device=device))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.training:
            return F.linear(x, self.weight_mu, self.bias_mu)
        # (mu + sigma * outer(eps_out, eps_in)) x = mu x + eps_out * (sigma (eps_in * x)): two products and no
        # weight-sized temporaries; acting through MinAtar's 1600-wide layer in a fifth of the time
        noisy = F.linear(x * self.eps_in, self.weight_sigma)
        return torch.addcmul(
            F.linear(x, self.weight_mu, self.bias_mu + self.bias_sigma * self.eps_out), noisy, self.eps_out
        )


# Calling a submodule costs its __call__ machinery (hooks, dispatch): ~4 us per layer on a CPU, a fifth
# of a small layer's whole cost. `apply_layer` calls the functional form of the common layers directly
# (forward hooks on these submodules are therefore not run) and falls back to the module otherwise.
FUNCTIONAL = {
    nn.Linear: lambda m, x: F.linear(x, m.weight, m.bias),
    nn.LayerNorm: lambda m, x: F.layer_norm(x, m.normalized_shape, m.weight, m.bias, m.eps),
    # In place: every layer before a ReLU (linear, LayerNorm, conv, their stacked forms) keeps its input,
    # not its output, for the backward pass, so the ReLU may overwrite that output (one tensor fewer).
    nn.ReLU: lambda m, x: F.relu(x, inplace=True),
}


def apply_layer(module: nn.Module, x: torch.Tensor) -> torch.Tensor:
    fn = FUNCTIONAL.get(type(module))
    return module(x) if fn is None else fn(module, x)


def apply_layers(layers: Iterable[nn.Module], x: torch.Tensor) -> torch.Tensor:
    for module in layers:
        fn = FUNCTIONAL.get(type(module))
        x = module(x) if fn is None else fn(module, x)
    return x


def _init_layers(net: nn.Module, weight_init, hidden_gain: float) -> None:
    """Re-initialise every convolution and plain linear layer (noisy layers keep the paper's scheme), biases
    to zero: hidden layers with gain `hidden_gain`, the output layers (head, value, advantage) with gain 1."""
    heads = {m for name, m in net.named_children() if name in ("head", "value", "advantage")}
    for m in net.modules():
        if isinstance(m, (nn.Linear, nn.Conv2d)):
            weight_init(m.weight, gain=1.0 if m in heads else hidden_gain)
            if m.bias is not None:
                nn.init.zeros_(m.bias)


def nature_cnn(channels: int) -> nn.Sequential:
    """Nature DQN's (Mnih et al. 2015) three conv layers for stacked 84x84 frames."""
    return nn.Sequential(
        nn.Conv2d(channels, 32, 8, stride=4),
        nn.ReLU(),
        nn.Conv2d(32, 64, 4, stride=2),
        nn.ReLU(),
        nn.Conv2d(64, 64, 3, stride=1),
        nn.ReLU(),
        nn.Flatten(),
    )


def der_cnn(channels: int) -> nn.Sequential:
    """Data-Efficient Rainbow's (van Hasselt et al. 2019) two conv layers for stacked 84x84 frames: 32 and 64
    filters of 5x5 at stride 5 (84 -> 16 -> 3: 576 features), a tenth of the Nature CNN's cost per update."""
    return nn.Sequential(
        nn.Conv2d(channels, 32, 5, stride=5),
        nn.ReLU(),
        nn.Conv2d(32, 64, 5, stride=5),
        nn.ReLU(),
        nn.Flatten(),
    )


def minatar_cnn(channels: int) -> nn.Sequential:
    """MinAtar's (Young & Tian 2019): one conv layer of 16 3x3 filters, stride 1, over the 10x10 grid."""
    return nn.Sequential(nn.Conv2d(channels, 16, 3, stride=1), nn.ReLU(), nn.Flatten())


def network_input(obs: torch.Tensor, pixels: bool, divisor: float | None, batch_dims: int) -> torch.Tensor:
    """Observations as the trunk reads them: flat float vectors after the `batch_dims` leading axes, or
    (..., C, H, W) floats for a conv encoder, divided by `divisor` where set (the Nature CNN's 0-255 frames)."""
    if not pixels:
        return obs.flatten(batch_dims).float()
    return obs.float() / divisor if divisor is not None else obs.float()


# network.encoder -> the conv stack for (C, H, W) observations; `mlp` flattens instead.
ENCODERS = {"nature_cnn": nature_cnn, "der_cnn": der_cnn, "minatar_cnn": minatar_cnn}
# The encoders for stacked 0-255 frames (env.frame_stack > 0), which read them divided by 255.
FRAME_ENCODERS = ("nature_cnn", "der_cnn")

INITS = {
    "default": lambda net: None,  # torch's Kaiming-uniform defaults
    # Dopamine's (its DQN, DER and DrQ(eps) networks): Glorot uniform, no gain, on every layer
    "xavier": lambda net: _init_layers(net, nn.init.xavier_uniform_, hidden_gain=1.0),
    # orthogonal, gain sqrt(2) before a ReLU as CleanRL's layer_init and SB3's ortho_init; gain 1 on the outputs
    "orthogonal": lambda net: _init_layers(net, nn.init.orthogonal_, hidden_gain=math.sqrt(2)),
}


def pixel_encoder(encoder: str, obs_shape: Sequence[int] | None, layer_norm: bool = False) -> tuple[nn.Module, int]:
    """The convolutional encoder `encoder` over (C, H, W) observations, and the width of its output. With
    `layer_norm`, a LayerNorm over each convolution's (C, H, W) output before its activation, as CleanRL's
    pqn_atari normalises the Nature CNN's."""
    assert obs_shape is not None and len(obs_shape) == 3, f"{encoder} needs (C, H, W) observations"
    x = torch.zeros(1, *obs_shape)
    layers: list[nn.Module] = []
    with torch.no_grad():
        for module in ENCODERS[encoder](obs_shape[0]):
            x = module(x)
            layers.append(module)
            if layer_norm and isinstance(module, nn.Conv2d):
                layers.append(nn.LayerNorm(list(x.shape[1:])))
    return nn.Sequential(*layers), x.shape[1]


class QNetwork(nn.Module):
    """Maps a batch of flat observations to one Q-value per action.

    - `dueling`: Q(s,a) = V(s) + A(s,a) - mean_a A(s,a) (Wang et al. 2016); with atoms, per atom logit.
    - `num_atoms > 1`: C51 (Bellemare et al. 2017); `dist_logits` gives (B, A, atoms) logits over the
      fixed support linspace(v_min, v_max, num_atoms), and Q is the expectation over that support.
    - `num_quantiles > 0`: QR-DQN (Dabney et al. 2017); `quantile_values` gives (B, A, N) quantiles at the
      fixed fractions `quantile_midpoints(N)`, and Q is their mean.
    - `tau_embedding_dim > 0`: IQN (Dabney et al. 2018); `quantile_values(obs, taus)` gives (B, A, N)
      quantiles at any fractions taus (B, N): the input of the last hidden layer (the CNN's features, as
      in the paper, or the previous hidden layer's) times ReLU(Linear(cos(pi i tau))), i <
      tau_embedding_dim, then the last hidden layer and the head(s). Q is the mean over `iqn_acting_taus`
      evenly spaced fractions, so acting and greedy evaluation are deterministic.
    - `noisy`: every linear layer is a `NoisyLinear` (IQN's tau embedding stays plain); call
      `reset_noise()` to resample.
    - `conv_layer_norm`: a LayerNorm over each convolution's (C, H, W) output, before its activation.
    - `init`: `default` (torch's), `xavier` (Dopamine's) or `orthogonal` (CleanRL's) for the convolutions and
      plain linear layers.
    """

    support: torch.Tensor  # (atoms,) C51's support; a placeholder zero for scalar networks
    head: nn.Module
    value: nn.Module
    advantage: nn.Module
    tau_embedding: nn.Linear

    def __init__(
        self,
        obs_dim: int,
        n_actions: int,
        hidden_sizes: Sequence[int] = (128, 128),
        dueling: bool = False,
        layer_norm: bool = True,
        conv_layer_norm: bool = False,
        activation: str = "relu",
        num_atoms: int = 1,
        v_min: float = -10.0,
        v_max: float = 10.0,
        noisy: bool = False,
        noisy_sigma0: float = 0.5,
        init: str = "default",
        encoder: str = "mlp",
        obs_shape: Sequence[int] | None = None,
        num_quantiles: int = 0,
        tau_embedding_dim: int = 0,
        iqn_acting_taus: int = 32,
    ):
        super().__init__()
        self.n_actions, self.num_atoms, self.dueling, self.noisy = n_actions, num_atoms, dueling, noisy
        self.num_quantiles, self.tau_embedding_dim = num_quantiles, tau_embedding_dim
        self.iqn_acting_taus = iqn_acting_taus
        # Head outputs per action: C51's atoms, QR-DQN's quantiles, or 1 (a scalar Q, or IQN's one tau).
        self.outputs_per_action = num_atoms if num_atoms > 1 else max(num_quantiles, 1)
        linear = (lambda i, o: NoisyLinear(i, o, noisy_sigma0)) if noisy else nn.Linear
        layers: list[nn.Module] = []
        in_dim = obs_dim
        self.encoder = encoder
        self.pixels = encoder != "mlp"  # a convolutional encoder over (C, H, W) observations
        # nature_cnn reads uint8 frames (0-255), divided into [0, 1] on the training device; minatar_cnn 0/1 grids.
        self.input_divisor = 255.0 if encoder in FRAME_ENCODERS else None
        if self.pixels:
            conv, in_dim = pixel_encoder(encoder, obs_shape, conv_layer_norm)
            layers.append(conv)
        for size in hidden_sizes:
            self.embed_at, embed_dim = len(layers), in_dim  # IQN: where the last hidden block starts
            layers.append(linear(in_dim, size))
            if layer_norm:
                layers.append(nn.LayerNorm(size))
            layers.append(ACTIVATIONS[activation]())
            in_dim = size
        self.trunk = nn.Sequential(*layers)
        if tau_embedding_dim > 0:
            self.tau_embedding = nn.Linear(tau_embedding_dim, embed_dim)
        per_action = self.outputs_per_action
        if dueling:
            self.value = linear(in_dim, per_action)
            self.advantage = linear(in_dim, n_actions * per_action)
        else:
            self.head = linear(in_dim, n_actions * per_action)
        self.register_buffer("support", torch.linspace(v_min, v_max, num_atoms) if num_atoms > 1 else torch.zeros(1))
        self.q_head = head_for(num_atoms, num_quantiles, tau_embedding_dim)  # what the outputs mean (rlrun.nets.heads)
        INITS[init](self)

    def _input(self, obs: torch.Tensor) -> torch.Tensor:
        return network_input(obs, self.pixels, self.input_divisor, batch_dims=1)

    def _features(self, obs: torch.Tensor) -> torch.Tensor:
        return apply_layers(self.trunk, self._input(obs))

    def _heads(self, h: torch.Tensor) -> torch.Tensor:
        """(M, features) -> (M, A, outputs_per_action)."""
        per_action = self.outputs_per_action
        if not self.dueling:
            return apply_layer(self.head, h).view(-1, self.n_actions, per_action)
        adv = apply_layer(self.advantage, h).view(-1, self.n_actions, per_action)
        return dueling(apply_layer(self.value, h).view(-1, 1, per_action), adv, action_dim=1)

    def dist_logits(self, obs: torch.Tensor) -> torch.Tensor:
        """(B, A, outputs_per_action) action values, logits or quantiles."""
        return self._heads(self._features(obs))

    def quantile_values(self, obs: torch.Tensor, taus: torch.Tensor | None = None) -> torch.Tensor:
        """(B, A, N) return quantiles: QR-DQN's at its fixed fractions (taus unused), IQN's at taus (B, N)."""
        if self.tau_embedding_dim == 0:
            return self.dist_logits(obs)
        assert taus is not None, "IQN needs the fractions taus (B, N)"
        layers = list(self.trunk)
        h = apply_layers(layers[: self.embed_at], self._input(obs))  # (B, D): the last hidden layer's input
        phi = F.relu(apply_layer(self.tau_embedding, cosine_features(taus, self.tau_embedding_dim)))  # (B, N, D)
        batch, n = taus.shape
        h = apply_layers(layers[self.embed_at :], (h.unsqueeze(1) * phi).reshape(batch * n, -1))
        return self._heads(h).view(batch, n, self.n_actions).transpose(1, 2)  # (B * N, A, 1) -> (B, A, N)

    def acting_taus(self, batch: int, device: torch.device) -> torch.Tensor:
        """IQN's (batch, K) evenly spaced fractions at which Q is estimated for acting and for a*."""
        return quantile_midpoints(self.iqn_acting_taus, device).expand(batch, -1)

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        if self.tau_embedding_dim > 0:
            out = self.quantile_values(obs, self.acting_taus(obs.shape[0], obs.device))
        else:
            out = self.dist_logits(obs)
        return self.q_head.q_values(out, self.support)

    def reset_noise(self, generator: torch.Generator | None = None) -> None:
        for m in self.modules():
            if isinstance(m, NoisyLinear):
                m.reset_noise(generator)
