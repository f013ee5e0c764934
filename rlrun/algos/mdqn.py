"""Munchausen-DQN (Vieillard, Pietquin and Geist 2020, "Munchausen Reinforcement Learning"): DQN on replay
whose target adds the scaled log-policy of the action taken and bootstraps from a soft (entropy-regularised)
value instead of a max. Its config schema, its rules, its loss module and its learner.

With the target net's softmax policy pi(.|s) = softmax(Q_target(s, .) / temperature), per transition:

    bonus   = munchausen_alpha * clip(temperature * log pi(a|s), l0, 0)
    v(s')   = sum_a' pi(a'|s') * (Q_target(s', a') - temperature * log pi(a'|s'))
    target  = r + bonus + discount * v(s')

Replay batches are n-step: `r` is the discounted n-step reward sum and `discount` is gamma^n, or 0 where the
episode terminated; the bonus is the first action's only, as in Stoix. The soft value replaces Double
DQN's argmax, so algo.double must be false. Everything reduces over the last axis, so stacked agents
((K, B, ...) tensors) need nothing of their own. The update step around the loss (AMP, clipping, the
non-finite policy, noise resets, the target sync) is rlrun.algos.update's.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from omegaconf import DictConfig

from rlrun.algos import dqn
from rlrun.algos.base import Algorithm, PerAgent
from rlrun.config.checks import check, in_range, one_of

if TYPE_CHECKING:  # imported where used: the schema and rules are read without torch (rlrun.algos.dqn)
    import torch

    from rlrun.algos.update import UpdateStep
    from rlrun.nets.heads import LossTerms
    from rlrun.nets.protocol import QNet
    from rlrun.replay import Batch


@dataclass
class MDQNAlgoConfig(dqn.AlgoConfig):
    """Munchausen-DQN (algo=mdqn): DQN's replay keys (batch_size, train_freq, tau, ...), the scalar losses
    (huber, mse), and its own three below at the paper's values. algo.tau stays the target sync's Polyak
    rate; the entropy temperature is `temperature`."""

    kind: str = "mdqn"  # the algorithm: set by choosing algo=mdqn
    double: bool = False  # must stay false: the soft value v(s') has no argmax for Double DQN to choose
    munchausen_alpha: float = 0.9  # scale of the log-policy bonus; 0: soft (entropy-regularised) DQN
    temperature: float = 0.03  # entropy temperature of the softmax policy pi = softmax(Q / temperature)
    l0: float = -1.0  # lower clip of temperature * log pi(a|s) in the bonus (log pi -> -inf for unlikely a)


def munchausen_target(
    q: torch.Tensor,
    actions: torch.Tensor,
    rewards: torch.Tensor,
    discounts: torch.Tensor,
    next_q: torch.Tensor,
    *,
    munchausen_alpha: float = 0.9,
    temperature: float = 0.03,
    l0: float = -1.0,
) -> torch.Tensor:
    """The Munchausen target of a batch from the target net's Q-values: `q` = Q_target(s, .) and `next_q` =
    Q_target(s', .), (..., B, A); `actions`, `rewards`, `discounts`: (..., B). Any leading (agent) axes."""
    # torch (here and below) only when a learner is built: the registry is read by --help, which stays torch-free
    import torch

    with torch.no_grad():
        log_pi = torch.log_softmax(q / temperature, dim=-1).gather(-1, actions.unsqueeze(-1)).squeeze(-1)
        bonus = munchausen_alpha * (temperature * log_pi).clamp(min=l0, max=0.0)
        next_log_pi = torch.log_softmax(next_q / temperature, dim=-1)
        next_v = (next_log_pi.exp() * (next_q - temperature * next_log_pi)).sum(dim=-1)
        return rewards + bonus + discounts * next_v


class MunchausenLoss:
    """M-DQN's loss module: `loss(batch)` -> (per-sample loss of Q_online(s, a) against the Munchausen target,
    Q(s, a), PER priority |target - Q(s, a)| for PER batches, else None). A scalar Q-network only."""

    def __init__(
        self,
        online: QNet,
        target: QNet,
        *,
        loss: str = "huber",
        munchausen_alpha: float = 0.9,
        temperature: float = 0.03,
        l0: float = -1.0,
    ):
        from rlrun.nets.heads import ScalarHead

        head = getattr(online, "q_head", ScalarHead())
        if head.name != "scalar" or loss not in dqn.LOSSES:
            raise ValueError(f"M-DQN needs a scalar Q-network and loss huber or mse, not a {head.name} head, {loss!r}")
        self.online, self.target, self.loss_fn = online, target, dqn.scalar_loss(loss)
        self.munchausen_alpha, self.temperature, self.l0 = munchausen_alpha, temperature, l0

    def td_target(self, batch: Batch) -> torch.Tensor:
        import torch

        with torch.no_grad():
            q, next_q = self.target(batch.obs), self.target(batch.next_obs)
        return munchausen_target(
            q,
            batch.actions,
            batch.rewards,
            batch.discounts,
            next_q,
            munchausen_alpha=self.munchausen_alpha,
            temperature=self.temperature,
            l0=self.l0,
        )

    def __call__(self, batch: Batch) -> LossTerms:
        q = self.online(batch.obs).gather(-1, batch.actions.unsqueeze(-1)).squeeze(-1)
        target = self.td_target(batch)
        priority = (target - q.detach()).abs() if batch.weights is not None else None  # PER batches only
        return self.loss_fn(q, target, reduction="none"), q, priority


M_KEYS = ("loss", "munchausen_alpha", "temperature", "l0")  # MunchausenLoss's settings, MDQNAlgoConfig's keys


def mdqn_learner(online: QNet, optimizer: torch.optim.Optimizer, **settings: Any) -> UpdateStep:
    """An M-DQN learner from plain values: a target net copied from `online`, the Munchausen loss module
    (`settings` named in M_KEYS: MunchausenLoss's keywords), and the shared update step (the other
    `settings`: rlrun.algos.update.UpdateStep's keywords)."""
    from rlrun.algos.update import UpdateStep

    target = copy.deepcopy(online).requires_grad_(False)
    mloss = MunchausenLoss(online, target, **{k: settings.pop(k) for k in M_KEYS if k in settings})
    return UpdateStep(online, optimizer, mloss, target=target, **settings)


def make_learner(
    cfg: DictConfig,
    online: QNet,
    optimizer: torch.optim.Optimizer,
    generators: list[torch.Generator],
    per_agent: PerAgent,
) -> UpdateStep:
    loss = {k: cfg.algo[k] for k in M_KEYS}
    return mdqn_learner(online, optimizer, **loss, **dqn.update_settings(cfg, generators, per_agent))


def check_mdqn(cfg: DictConfig) -> None:
    """M-DQN (algo=mdqn): a scalar Q-network (mlp, dueling, noisy, cnn), a scalar loss, its keys in range."""
    dqn.require_scalar_head(cfg, "mdqn")
    one_of(cfg, "algo.loss", ["huber", "mse"])
    check(not cfg.algo.double, "algo.double", cfg.algo.double, "false with algo=mdqn (the soft value has no argmax)")
    in_range(cfg, "algo.munchausen_alpha", 0.0, 1.0)
    in_range(cfg, "algo.temperature", 0.0, math.inf, lo_open=True, hi_open=True)
    l0 = cfg.algo.l0
    check(l0 is not None and math.isfinite(l0) and l0 <= 0, "algo.l0", l0, "a number <= 0")


ALGORITHM = Algorithm(
    name="mdqn",
    schema=MDQNAlgoConfig,
    collector="replay",
    batchable=dqn.REPLAY_BATCHABLE,
    check=check_mdqn,
    make_learner=make_learner,
    schedule=dqn.replay_schedule,
)
