"""What a Q-network's outputs mean, defined once per kind of head: its Q-values, its TD target and its loss.

A network's head gives `outputs_per_action` numbers per action, (..., A, P) with any leading axes (a batch,
or agents and a batch): a scalar Q (P = 1), C51's logits over a fixed support (Bellemare et al. 2017),
QR-DQN's quantiles at fixed fractions (Dabney et al. 2017) or IQN's at sampled ones (Dabney et al. 2018).
`QNetwork` and the stacked networks (fused and vmapped) ask the head for Q-values, and combine a dueling
network's streams with `dueling`; the DQN family's loss (rlrun.algos.dqn) asks the head for the target and
the per-sample loss. `head_for` is the one place that tells the kinds apart.

A loss reads its nets and settings from `td`, the loss module (rlrun.nets.protocol.TD: online and target
nets, double, the scalar loss function, kappa, IQN's fraction counts and its `sample_taus`).
"""

from __future__ import annotations

import torch

from rlrun.nets.protocol import TD
from rlrun.nets.quantile import quantile_huber_loss, quantile_midpoints
from rlrun.replay import Batch

# (per-sample loss, Q(s, a) it was computed for, per-sample PER priority or None)
LossTerms = tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]


def dueling(value: torch.Tensor, advantage: torch.Tensor, action_dim: int) -> torch.Tensor:
    """A dueling network's outputs (Wang et al. 2016): value + advantage - the mean advantage over the
    actions, `action_dim` the actions' axis of `advantage` (value has 1 there, or lacks it and broadcasts).
    Per output: Q-values, C51's logits or quantiles."""
    return value + advantage - advantage.mean(dim=action_dim, keepdim=True)


def at_actions(out: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
    """(..., B, A, P) outputs -> (..., B, P): each transition's at its action (`actions`: (..., B, 1))."""
    return out.gather(-2, actions.unsqueeze(-1).expand(*actions.shape, out.shape[-1])).squeeze(-2)


def next_actions(td: TD, next_obs: torch.Tensor, next_q_target: torch.Tensor) -> torch.Tensor:
    """a* = argmax of the online net (Double DQN) or of the target net, as a (..., B, 1) index."""
    q = td.online(next_obs) if td.double else next_q_target
    return q.argmax(dim=-1, keepdim=True)


class ScalarHead:
    """One Q-value per action."""

    name, losses = "scalar", ("huber", "mse")

    def q_values(self, out: torch.Tensor, support: torch.Tensor) -> torch.Tensor:
        return out.squeeze(-1)

    @torch.no_grad()
    def target(self, td: TD, batch: Batch) -> torch.Tensor:
        """r + discount * Q_target(s', a*)."""
        next_q = td.target(batch.next_obs)
        if td.double:
            next_v = next_q.gather(-1, next_actions(td, batch.next_obs, next_q)).squeeze(-1)
        else:  # the target net's own argmax: its max, in one op
            next_v = next_q.amax(dim=-1)
        return batch.rewards + batch.discounts * next_v

    def loss(self, td: TD, batch: Batch) -> LossTerms:
        q = td.online(batch.obs).gather(-1, batch.actions.unsqueeze(-1)).squeeze(-1)
        target = self.target(td, batch)
        priority = (target - q.detach()).abs() if batch.weights is not None else None  # PER batches only
        assert td.loss_fn is not None  # a scalar head's loss is huber or mse (TDLoss refuses another)
        return td.loss_fn(q, target, reduction="none"), q, priority


class CategoricalHead:
    """C51: logits over the network's `support`; Q is the expectation over the support."""

    name, losses = "categorical", ("cross_entropy",)

    def q_values(self, out: torch.Tensor, support: torch.Tensor) -> torch.Tensor:
        return (out.softmax(dim=-1) * support).sum(dim=-1)

    @torch.no_grad()
    def target(self, td: TD, batch: Batch) -> torch.Tensor:
        """The target distribution r + discount * z under p_target(s', a*), projected onto the support.

        Each shifted atom Tz_j (clipped to [v_min, v_max]) splits its probability between the two
        neighbouring support points in proportion to closeness; one that lands exactly on a support point
        gives it all its mass. Returns (..., B, atoms) probabilities that sum to 1 (any leading agent axis).
        """
        support = td.target.support
        n = support.numel()
        v_min, v_max = support[0], support[-1]
        dz = (v_max - v_min) / (n - 1)
        next_probs = td.target.dist_logits(batch.next_obs).softmax(dim=-1)  # (..., B, A, atoms)
        a_star = next_actions(td, batch.next_obs, (next_probs * support).sum(dim=-1))  # (..., B, 1)
        p = at_actions(next_probs, a_star)  # (..., B, atoms)
        tz = (batch.rewards.unsqueeze(-1) + batch.discounts.unsqueeze(-1) * support).clamp(v_min, v_max)
        b = (tz - v_min) / dz
        lower, upper = b.floor().long().clamp(0, n - 1), b.ceil().long().clamp(0, n - 1)
        w_lower = (upper.float() - b) + (lower == upper).float()  # exact hit: all mass to that atom
        w_upper = b - lower.float()
        m = torch.zeros_like(p)
        m.scatter_add_(-1, lower, p * w_lower)
        m.scatter_add_(-1, upper, p * w_upper)
        return m

    def loss(self, td: TD, batch: Batch) -> LossTerms:
        logits = td.online.dist_logits(batch.obs)  # (..., B, A, atoms)
        log_p = at_actions(logits, batch.actions.unsqueeze(-1)).log_softmax(dim=-1)
        elementwise = -(self.target(td, batch) * log_p).sum(dim=-1)  # cross-entropy
        q = (log_p.detach().exp() * td.online.support).sum(dim=-1)
        return elementwise, q, elementwise.detach()


class QuantileHead:
    """QR-DQN: N quantiles of the return at the fixed fractions `quantile_midpoints(N)`; Q is their mean."""

    name, losses = "quantile", ("quantile_huber",)
    implicit = False

    def q_values(self, out: torch.Tensor, support: torch.Tensor) -> torch.Tensor:
        return out.mean(dim=-1)

    @torch.no_grad()
    def target(self, td: TD, batch: Batch) -> torch.Tensor:
        """r + discount * theta_j(s', a*) for the target net's quantiles theta_j (QR-DQN's fixed N, or
        IQN's at N' sampled fractions): (..., B, N'). a* = argmax of the online net's mean quantile
        (Double) or of the target net's."""
        taus = td.sample_taus(batch.rewards.shape, td.iqn_target_taus) if self.implicit else None
        next_quantiles = td.target.quantile_values(batch.next_obs, taus)  # (..., B, A, N')
        if td.double:
            next_q = td.online(batch.next_obs)
        else:  # IQN's Q is estimated at its evenly spaced acting fractions, not at the sampled ones
            next_q = td.target(batch.next_obs) if self.implicit else next_quantiles.mean(dim=-1)
        a_star = next_q.argmax(dim=-1, keepdim=True)  # (..., B, 1)
        theta = at_actions(next_quantiles, a_star)  # (..., B, N')
        return batch.rewards.unsqueeze(-1) + batch.discounts.unsqueeze(-1) * theta

    def loss(self, td: TD, batch: Batch) -> LossTerms:
        """The quantile Huber loss of Q(s, a)'s quantiles against `target`."""
        if self.implicit:
            taus = td.sample_taus(batch.rewards.shape, td.iqn_taus)  # (..., B, N)
            quantiles = td.online.quantile_values(batch.obs, taus)
        else:
            quantiles = td.online.quantile_values(batch.obs)
            taus = quantile_midpoints(quantiles.shape[-1], quantiles.device)  # (N,)
        chosen = at_actions(quantiles, batch.actions.unsqueeze(-1))  # (..., B, N)
        elementwise = quantile_huber_loss(chosen, self.target(td, batch), taus, td.kappa)
        return elementwise, chosen.detach().mean(dim=-1), elementwise.detach()


class ImplicitQuantileHead(QuantileHead):
    """IQN: quantiles at any fractions tau; Q is the mean over evenly spaced acting fractions."""

    name = "implicit_quantile"
    implicit = True


Head = ScalarHead | CategoricalHead | QuantileHead


def head_for(num_atoms: int, num_quantiles: int, tau_embedding_dim: int) -> Head:
    """The head a network's settings make (network.num_atoms, num_quantiles, tau_embedding_dim)."""
    if tau_embedding_dim > 0:
        return ImplicitQuantileHead()
    if num_quantiles > 0:
        return QuantileHead()
    if num_atoms > 1:
        return CategoricalHead()
    return ScalarHead()
