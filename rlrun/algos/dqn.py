"""DQN and its family on replay (Mnih et al. 2015, with Double DQN, dueling, n-step, PER, noisy nets, and
the C51, QR-DQN and IQN heads): its config schema, its rules, its loss module and its learner.

The loss is TorchRL-style: a module that holds the online and target nets and maps a replay batch to
per-sample losses; the head of the network (rlrun.nets.heads) defines the target and the loss of each kind.
The update step around it (AMP, clipping, the non-finite policy, the target sync) is rlrun.algos.update's,
shared with every algorithm.

Like every algorithm module, this one imports torch and the learning modules inside the functions that
build and run the learner, never at the top: `--help`, config checks and refusals read its schema and
rules without importing torch (tests/integration/test_cli.py checks it).
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from omegaconf import DictConfig

from rlrun.algos.base import COMMON_BATCHABLE, Algorithm, PerAgent, Schedule
from rlrun.config.checks import cfg_get, check, in_range, positive
from rlrun.errors import ConfigError

if TYPE_CHECKING:
    import torch

    from rlrun.algos.update import UpdateStep
    from rlrun.nets.heads import Head, LossTerms
    from rlrun.nets.protocol import Generators, QNet
    from rlrun.replay import Batch

# Scalar losses by name (torch.nn.functional's); cross_entropy (C51) and quantile_huber (QR-DQN, IQN) are
# their heads' own.
LOSSES = {"huber": "smooth_l1_loss", "mse": "mse_loss"}


def scalar_loss(name: str) -> Callable[..., torch.Tensor]:
    """The per-sample scalar loss `name` (huber or mse) as torch's function."""
    from torch.nn import functional

    return getattr(functional, LOSSES[name])


@dataclass
class AlgoConfig:
    gamma: float = 0.99  # discount factor
    batch_size: int = 128  # transitions per gradient step
    learning_starts: int = 1_000  # env steps of random play before the first update
    # gradient_steps updates per train_freq env steps (summed over vector envs); with num_envs > train_freq,
    # a phase after every vector step with gradient_steps * round(num_envs / train_freq) updates.
    train_freq: int = 4
    gradient_steps: int = 1  # updates per train_freq env steps
    target_update_period: int = 1  # gradient steps between target updates
    tau: float = 0.05  # 1.0 = hard copy; < 1 = Polyak averaging
    double: bool = True  # Double DQN: the online net picks the target's action
    loss: str = "mse"  # huber | mse (scalar nets) | cross_entropy (C51) | quantile_huber (QR-DQN, IQN)
    max_grad_norm: float | None = 10.0  # null: no clipping (the norm is still logged)
    on_nonfinite: str = "stop"  # stop | skip | off: what a NaN/inf loss, gradient or Q-value does
    lr_end_factor: float = 0.1  # linear lr decay to lr * lr_end_factor over the run; 1.0 = constant
    # algo.loss=quantile_huber (network=qrdqn, network=iqn):
    kappa: float = 1.0  # quantile Huber loss threshold; 0: the plain quantile (pinball) loss
    iqn_taus: int = 8  # IQN's N: sampled fractions for the online quantiles of each transition
    iqn_target_taus: int = 8  # IQN's N': sampled fractions for the target quantiles


class TDLoss:
    """The DQN family's loss module: `loss(batch)` -> (per-sample loss, Q(s, a), PER priority or None), as
    the online net's head defines it. `noise_generator`: where IQN draws its fractions (a torch.Generator,
    or one per agent for stacked agents; None: torch's global one)."""

    def __init__(
        self,
        online: QNet,
        target: QNet,
        *,
        double: bool = True,
        loss: str = "mse",
        kappa: float = 1.0,
        iqn_taus: int = 8,
        iqn_target_taus: int = 8,
        noise_generator: Generators = None,
    ):
        from rlrun.nets.heads import ScalarHead

        # QNetwork and the stacked networks declare their head; any other module maps obs to scalar Q-values.
        self.online, self.target = online, target
        self.head: Head = getattr(online, "q_head", ScalarHead())
        if loss not in self.head.losses:
            raise ValueError(f"loss={loss!r} does not fit a {self.head.name} head: use {' or '.join(self.head.losses)}")
        self.double, self.loss_fn = double, scalar_loss(loss) if loss in LOSSES else None
        self.kappa, self.iqn_taus, self.iqn_target_taus = kappa, iqn_taus, iqn_target_taus
        self.noise_generator = noise_generator
        self.agents = getattr(online, "agents", None)
        self.device = next(online.parameters()).device

    def __call__(self, batch: Batch) -> LossTerms:
        return self.head.loss(self, batch)

    def td_target(self, batch: Batch) -> torch.Tensor:
        """The TD target of the batch (the head's: scalar, C51's projected distribution, quantiles)."""
        return self.head.target(self, batch)

    def sample_taus(self, batch_shape: torch.Size, n: int) -> torch.Tensor:
        """IQN: (..., B, n) fractions ~ U(0, 1), each agent's from its own generator (as its single run draws
        them, so a stacked agent equals its single-seed run)."""
        import torch

        generators = self.noise_generator
        if self.agents is not None and isinstance(generators, (list, tuple)):
            return torch.stack([torch.rand(batch_shape[-1], n, generator=g, device=self.device) for g in generators])
        assert not isinstance(generators, (list, tuple)), "one generator per agent: a stacked network's"
        return torch.rand(*batch_shape, n, generator=generators, device=self.device)


TD_KEYS = ("double", "loss", "kappa", "iqn_taus", "iqn_target_taus")  # TDLoss's settings, AlgoConfig's keys


def dqn_learner(
    online: QNet, optimizer: torch.optim.Optimizer, *, noise_generator: Generators = None, **settings: Any
) -> UpdateStep:
    """A DQN learner from plain values: a target net copied from `online`, the TD loss module (`settings`
    named in TD_KEYS: TDLoss's keywords, defaults AlgoConfig's), and the shared update step (the other
    `settings`: rlrun.algos.update.UpdateStep's keywords)."""
    from rlrun.algos.update import UpdateStep

    target = copy.deepcopy(online).requires_grad_(False)
    td_settings = {k: settings.pop(k) for k in TD_KEYS if k in settings}
    if target_is_online(online, settings):
        td_settings["double"] = False  # the online net's argmax is the target's: one forward pass fewer
    td = TDLoss(online, target, noise_generator=noise_generator, **td_settings)
    return UpdateStep(online, optimizer, td, target=target, noise_generator=noise_generator, **settings)


def target_is_online(online: QNet, settings: dict[str, Any]) -> bool:
    """A target copied from the online net after every update (algo.target_update_period 1, algo.tau 1) holds
    the online net's parameters whenever a TD target is computed; without noisy layers (whose online and
    target draws differ) the two nets give the same Q-values, so Double DQN's online argmax is the target's
    own (DrQ(eps)'s setting)."""
    return (
        settings.get("target_update_period") == 1
        and settings.get("tau") == 1
        and getattr(online, "noisy", True) is False
    )


def update_settings(
    cfg: DictConfig, generators: list[torch.Generator], per_agent: PerAgent, target: bool = True
) -> dict[str, Any]:
    """The shared update step's keywords (rlrun.algos.update) from the `algo` and `device` groups; `target`: the
    algorithm has a target net (its sync settings are read)."""
    a, d = cfg.algo, cfg.device
    sync = {"tau": per_agent("algo.tau"), "target_update_period": a.target_update_period} if target else {}
    return {
        "max_grad_norm": per_agent("algo.max_grad_norm"),
        **sync,
        "on_nonfinite": a.on_nonfinite,
        "amp": d.amp,
        "compile": d.compile,
        "compile_mode": d.compile_mode,
        "compile_optimizer": d.compile_optimizer,
        "noise_generator": generators[0] if len(generators) == 1 else generators,
    }


def make_learner(
    cfg: DictConfig,
    online: QNet,
    optimizer: torch.optim.Optimizer,
    generators: list[torch.Generator],
    per_agent: PerAgent,
) -> UpdateStep:
    td = {k: cfg.algo[k] for k in TD_KEYS}
    return dqn_learner(online, optimizer, **td, **update_settings(cfg, generators, per_agent))


def head_keys(cfg: DictConfig) -> list[str]:
    """The network keys set to a head other than the scalar one (C51, QR-DQN, IQN), in this order."""
    n = cfg.network
    heads = {
        "network.num_atoms": n.num_atoms > 1,
        "network.num_quantiles": n.num_quantiles > 0,
        "network.tau_embedding_dim": n.tau_embedding_dim > 0,
    }
    return [key for key, on in heads.items() if on]


def require_scalar_head(cfg: DictConfig, algo: str, noisy: bool = True) -> None:
    """For an algorithm that needs one Q-value per action: refuse the C51, QR-DQN and IQN heads (and noisy
    layers unless `noisy`), naming the key."""
    nets = "mlp, dueling, noisy, cnn" if noisy else "mlp, dueling, cnn"
    refused = head_keys(cfg) + ([] if noisy or not cfg.network.noisy else ["network.noisy"])
    if refused:
        key = refused[0]
        raise ConfigError(key, cfg_get(cfg, key), f"its default with algo={algo} (a scalar Q-net: {nets})")


def check_head(cfg: DictConfig) -> None:
    """The network's head and the loss it trains with (rlrun.nets.heads): one head kind, its own settings."""
    n, chosen = cfg.network, head_keys(cfg)
    if len(chosen) > 1:
        alternatives = f"its off value with {chosen[0]} set (C51, QR-DQN and IQN are alternative heads)"
        raise ConfigError(chosen[1], cfg_get(cfg, chosen[1]), alternatives)
    if n.num_quantiles > 0 or n.tau_embedding_dim > 0:
        in_range(cfg, "algo.kappa", 0.0, math.inf, hi_open=True)
        for key in ("algo.iqn_taus", "algo.iqn_target_taus", "network.iqn_acting_taus"):
            positive(cfg, key)
        check(
            cfg.algo.loss == "quantile_huber",
            "algo.loss",
            cfg.algo.loss,
            "quantile_huber with a quantile network (network.num_quantiles or network.tau_embedding_dim > 0)",
        )
    elif n.num_atoms > 1:
        check(n.num_atoms >= 2 and n.v_min < n.v_max, "network.v_min", n.v_min, f"< network.v_max={n.v_max}")
        check(
            cfg.algo.loss == "cross_entropy",
            "algo.loss",
            cfg.algo.loss,
            "cross_entropy with a distributional network (network.num_atoms > 1): C51 minimises the "
            "cross-entropy to the projected target distribution",
        )
    else:
        check(
            cfg.algo.loss in ("huber", "mse"),
            "algo.loss",
            cfg.algo.loss,
            "one of huber, mse with a scalar network (cross_entropy is C51's, quantile_huber QR-DQN's and IQN's)",
        )


def replay_schedule(cfg: DictConfig) -> Schedule:
    """Keep the ratio of train_freq env steps per gradient_steps updates with many vector envs: an update
    phase every `update_every` vector steps, `phase_updates` gradient steps in each."""
    a, num_envs = cfg.algo, cfg.env.num_envs
    update_every = max(1, a.train_freq // num_envs)
    phase_updates = a.gradient_steps * max(1, round(num_envs / a.train_freq))
    return Schedule(cfg.buffer.n_step, a.batch_size, update_every, phase_updates)


# What may differ per agent on replay, and why each can (the maths is exact; the common keys: rlrun.algos.base).
REPLAY_BATCHABLE = (
    *COMMON_BATCHABLE[:3],
    "algo.gamma",  # the n-step discount per sub-env (rlrun.replay.nstep); the learner reads stored discounts
    "algo.tau",  # a per-agent lerp weight in the target sync
    "algo.max_grad_norm",  # gradient clipping is per agent anyway
    *COMMON_BATCHABLE[3:6],
    "buffer.alpha",  # PER: each agent has its own sum tree
    "buffer.beta_start",
    *COMMON_BATCHABLE[6:],
)

ALGORITHM = Algorithm(
    name="dqn",
    schema=AlgoConfig,
    collector="replay",
    batchable=REPLAY_BATCHABLE,
    check=check_head,
    make_learner=make_learner,
    schedule=replay_schedule,
)
