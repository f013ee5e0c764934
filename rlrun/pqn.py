"""PQN (Gallici et al. 2024, "Simplifying Deep Temporal Difference Learning"): Q(lambda) on rollouts.

No replay and no target network: every `num_steps` vector steps the loop hands over the rollout
(rlrun.rollout); `batches` computes its Q(lambda) returns once, with the current network, then yields
`update_epochs` shuffled passes of `num_minibatches` minibatches, and `update` regresses Q(s, a) on
them (MSE by default, gradient clipping, the `optimizer` group's optimizer). LayerNorm in the network
keeps this stable without a target network. As in CleanRL's pqn.py, except that the returns respect
episode ends: a terminated step does not bootstrap, a truncated one bootstraps from its real final
observation, and neither carries the next episode's return back (`lambda_returns`).

A minibatch travels as a replay `Batch` whose rewards are the lambda-returns and whose discounts are 0,
so "target = reward + discount * next value" still holds; with K stacked agents every tensor has a
leading agent axis and each agent shuffles with its own generator, as its single-seed run does.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import torch
from torch import nn

from rlrun.errors import NonFiniteError
from rlrun.learner import LOSSES
from rlrun.replay import Batch
from rlrun.rollout import Rollout
from rlrun.stacked import clip_grad_norm_per_agent


def lambda_returns(
    rewards: torch.Tensor,
    next_values: torch.Tensor,
    terminated: torch.Tensor,
    truncated: torch.Tensor,
    gamma: float,
    q_lambda: float,
) -> torch.Tensor:
    """Peng's Q(lambda) returns of a rollout, backwards in time; every tensor is (T, ...), time first.

    `next_values[t]` = max_a Q(s'_t, a) at the real next observation of step t. Within an episode,
        G_t = r_t + gamma * ((1 - lambda) * next_values[t] + lambda * G_{t+1});
    at the rollout's last step and where an episode ends, the return cannot continue:
        G_t = r_t + gamma * next_values[t]  (truncated, or the rollout ends),   G_t = r_t  (terminated).
    """
    returns = torch.empty_like(rewards)
    later = next_values[-1]  # beyond the rollout: G_T is replaced by the bootstrap value itself
    for t in reversed(range(rewards.shape[0])):
        ended = terminated[t] | truncated[t]
        mixed = torch.where(ended, next_values[t], (1.0 - q_lambda) * next_values[t] + q_lambda * later)
        returns[t] = rewards[t] + gamma * (~terminated[t]) * mixed
        later = returns[t]
    return returns


class PQNLearner:
    def __init__(
        self,
        online: nn.Module,
        optimizer: torch.optim.Optimizer,
        generators: Sequence[torch.Generator],
        *,
        num_envs: int,
        gamma: float = 0.99,
        q_lambda: float = 0.65,
        update_epochs: int = 4,
        num_minibatches: int = 4,
        loss: str = "mse",
        max_grad_norm: float | None = 10.0,
        on_nonfinite: str = "stop",
        amp: str = "none",
    ):
        """Defaults are those of `rlrun.config.PQNAlgoConfig`. `generators`: one per agent, for shuffling;
        `num_envs`: sub-envs per agent (rollout rows k * num_envs ... are agent k's)."""
        self.online: Any = online  # a QNetwork or a stacked network (rlrun.stacked)
        self.optimizer = optimizer
        self.generators = list(generators)
        self.num_envs, self.gamma, self.q_lambda = num_envs, gamma, q_lambda
        self.update_epochs, self.num_minibatches = update_epochs, num_minibatches
        self.loss_fn = LOSSES[loss]
        self.max_grad_norm = math.inf if max_grad_norm is None else float(max_grad_norm)
        self.on_nonfinite = on_nonfinite
        self.agents: int | None = getattr(online, "agents", None)
        self.updates, self.skipped = 0, 0
        self._params = list(online.parameters())
        self.device = self._params[0].device
        self._autocast: Callable[[], contextlib.AbstractContextManager] = contextlib.nullcontext
        if amp == "bf16":
            self._autocast = lambda: torch.autocast(self.device.type, dtype=torch.bfloat16)

    def _per_agent(self, x: torch.Tensor) -> torch.Tensor:
        """(T, K * N, ...) rollout rows -> (T * N, ...) for one agent, (K, T * N, ...) for K: each agent's
        steps in time order, its envs side by side within a step."""
        if self.agents is None:
            return x.reshape(-1, *x.shape[2:])
        t, n = x.shape[0], self.num_envs
        return x.reshape(t, self.agents, n, *x.shape[2:]).transpose(0, 1).reshape(self.agents, t * n, *x.shape[2:])

    @torch.no_grad()
    def rollout_returns(self, data: dict[str, torch.Tensor]) -> torch.Tensor:
        """(T, K * N) lambda-returns of a rollout (rlrun.rollout.Rollout.tensors) under the current network."""
        t_steps, rows = data["rewards"].shape
        next_obs = self._per_agent(data["next_obs"])
        with self._autocast():
            next_q = self.online(next_obs).float()
        next_values = next_q.amax(dim=-1)  # (T * N,) or (K, T * N)
        if self.agents is not None:  # back to rollout rows: (K, T, N) -> (T, K * N)
            next_values = next_values.reshape(self.agents, t_steps, self.num_envs).transpose(0, 1)
        next_values = next_values.reshape(t_steps, rows)
        return lambda_returns(
            data["rewards"], next_values, data["terminated"], data["truncated"], self.gamma, self.q_lambda
        )

    def batches(self, rollout: Rollout) -> Iterator[Batch]:
        """The minibatches of one update phase: returns computed once, then `update_epochs` passes."""
        data = rollout.tensors(self.device)
        returns = self._per_agent(self.rollout_returns(data))
        obs, actions = self._per_agent(data["obs"]), self._per_agent(data["actions"])
        size = returns.shape[-1]  # steps per agent: T * N
        # Transition numbers over the whole run (the metric window counts distinct ones), and their age:
        # transitions stored after each one in its rollout.
        position = torch.arange(size, device=self.device)
        number = rollout.completed * size + position
        age = (size - self.num_envs) - (position // self.num_envs) * self.num_envs
        minibatch = size // self.num_minibatches
        for _ in range(self.update_epochs):
            perms = [torch.randperm(size, generator=g, device=self.device) for g in self.generators]
            for m in range(self.num_minibatches):
                if self.agents is None:
                    idx = perms[0][m * minibatch : (m + 1) * minibatch]
                    mb_obs, mb_actions, mb_returns = obs[idx], actions[idx], returns[idx]
                else:
                    idx = torch.stack([p[m * minibatch : (m + 1) * minibatch] for p in perms])  # (K, B)
                    rows = torch.arange(self.agents, device=self.device).unsqueeze(1)
                    mb_obs, mb_actions, mb_returns = obs[rows, idx], actions[rows, idx], returns[rows, idx]
                yield Batch(
                    obs=mb_obs,
                    actions=mb_actions,
                    rewards=mb_returns,
                    next_obs=mb_obs,  # never read: the discount is 0
                    discounts=torch.zeros_like(mb_returns),
                    indices=number[idx],
                    weights=None,
                    age=age[idx],
                )

    def update(self, batch: Batch) -> dict[str, torch.Tensor] | None:
        """One gradient step towards the batch's lambda-returns. Returns detached tensors (per agent for
        stacked agents), or None when a non-finite update was skipped."""
        with self._autocast():
            q = self.online(batch.obs).gather(-1, batch.actions.unsqueeze(-1)).squeeze(-1).float()
        agent_loss = self.loss_fn(q, batch.rewards, reduction="none").mean(dim=-1)
        loss = agent_loss if self.agents is None else agent_loss.sum()  # each agent's gradient is its own
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if self.agents is None:
            grad_norm = nn.utils.clip_grad_norm_(self._params, self.max_grad_norm)
        else:
            grad_norm = clip_grad_norm_per_agent(self._params, self.max_grad_norm)
        if self.on_nonfinite != "off" and not math.isfinite((agent_loss.detach() + grad_norm).sum().item()):
            if self.on_nonfinite == "skip":
                self.optimizer.zero_grad(set_to_none=True)
                self.skipped += 1
                return None
            raise NonFiniteError("non-finite td_loss or grad_norm")
        self.optimizer.step()
        self.updates += 1
        q_var, q_mean = torch.var_mean(q.detach(), dim=-1, unbiased=False)
        return {"td_loss": agent_loss.detach(), "q_mean": q_mean, "q_var": q_var, "grad_norm": grad_norm}

    def state_dict(self) -> dict:
        return {
            "online": self.online.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "updates": self.updates,
            "skipped": self.skipped,
        }

    def load_state_dict(self, state: dict) -> None:
        self.online.load_state_dict(state["online"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.updates, self.skipped = state["updates"], state["skipped"]
