"""The DQN update: TD target, loss, gradient clipping, target-network sync."""

from __future__ import annotations

import copy
import math
from typing import Optional

import torch
from torch import nn
from torch.nn import functional as F

from rlrun.replay import Batch

LOSSES = {"huber": F.smooth_l1_loss, "mse": F.mse_loss}


class DQNLearner:
    def __init__(
        self,
        online: nn.Module,
        optimizer: torch.optim.Optimizer,
        *,
        double: bool = True,
        loss: str = "huber",
        max_grad_norm: Optional[float] = 10.0,
        tau: float = 1.0,
        target_update_period: int = 1,
    ):
        self.online = online
        self.target = copy.deepcopy(online).requires_grad_(False)
        self.optimizer = optimizer
        self.double = double
        self.loss_fn = LOSSES[loss]
        self.max_grad_norm = math.inf if max_grad_norm is None else float(max_grad_norm)
        self.tau = tau
        self.target_update_period = target_update_period
        self.updates = 0
        self._online_params = list(online.parameters())
        self._target_params = list(self.target.parameters())

    @torch.no_grad()
    def td_target(self, batch: Batch) -> torch.Tensor:
        """r + discount * Q_target(s', a*), a* = argmax of the online net (Double) or of the target net."""
        next_q = self.target(batch.next_obs)
        if self.double:
            best = self.online(batch.next_obs).argmax(dim=1, keepdim=True)
            next_v = next_q.gather(1, best).squeeze(1)
        else:
            next_v = next_q.max(dim=1).values
        return batch.rewards + batch.discounts * next_v

    def update(self, batch: Batch) -> dict[str, torch.Tensor]:
        """One gradient step. Returns detached tensors only: reading them is the caller's sync point."""
        q = self.online(batch.obs).gather(1, batch.actions.unsqueeze(1)).squeeze(1)
        target = self.td_target(batch)
        elementwise = self.loss_fn(q, target, reduction="none")
        loss = (elementwise * batch.weights).mean() if batch.weights is not None else elementwise.mean()

        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        grad_norm = nn.utils.clip_grad_norm_(self._online_params, self.max_grad_norm)
        self.optimizer.step()

        self.updates += 1
        if self.updates % self.target_update_period == 0:
            self.sync_target()
        q = q.detach()
        return {
            "td_loss": loss.detach(),
            "q_mean": q.mean(),
            "q_var": q.var(unbiased=False),
            "grad_norm": grad_norm,
            "td_error": (target - q),
        }

    @torch.no_grad()
    def sync_target(self) -> None:
        if self.tau >= 1.0:
            torch._foreach_copy_(self._target_params, self._online_params)
        else:
            torch._foreach_lerp_(self._target_params, self._online_params, self.tau)
        for t, o in zip(self.target.buffers(), self.online.buffers()):
            t.copy_(o)
