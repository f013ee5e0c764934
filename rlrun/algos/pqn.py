"""PQN (Gallici et al. 2024, "Simplifying Deep Temporal Difference Learning"): Q(lambda) on rollouts.

No replay and no target network: every `num_steps` vector steps the loop hands over the rollout
(rlrun.replay.rollout); `batches` computes its Q(lambda) returns once, with the current network, then yields
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

from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from omegaconf import DictConfig

from rlrun.algos.base import COMMON_BATCHABLE, Algorithm, PerAgent, Schedule
from rlrun.algos.dqn import AlgoConfig, require_scalar_head, scalar_loss, update_settings
from rlrun.config.checks import check, in_range, positive

if TYPE_CHECKING:  # imported where used: the schema and rules are read without torch (rlrun.algos.dqn)
    import torch

    from rlrun.algos.update import UpdateStep
    from rlrun.nets.heads import LossTerms
    from rlrun.nets.protocol import QNet
    from rlrun.replay import Batch
    from rlrun.replay.rollout import Rollout


@dataclass
class PQNAlgoConfig(AlgoConfig):
    """PQN (Gallici et al. 2024; algo=pqn): Q(lambda) regression on rollouts of all vector envs, without
    replay or a target network (rlrun.algos.pqn). It extends AlgoConfig so that env options, which tune DQN's
    keys, compose with it; of those it reads gamma, learning_starts, loss, max_grad_norm, on_nonfinite and
    lr_end_factor, and ignores the replay ones (batch_size, train_freq, gradient_steps,
    target_update_period, tau, double) and the buffer group."""

    kind: str = "pqn"  # the algorithm: set by choosing algo=pqn
    learning_starts: int = 0
    lr_end_factor: float = 0.0  # CleanRL anneals the lr to 0
    num_steps: int = 128  # vector steps per rollout: an update phase every num_steps x env.num_envs env steps
    q_lambda: float = 0.65  # lambda of the Q(lambda) returns
    update_epochs: int = 4  # passes over each rollout
    num_minibatches: int = 4  # minibatches per pass (each of num_steps x env.num_envs / num_minibatches)


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
    # torch (here and below) only when a learner is built: the registry is read by --help, which stays torch-free
    import torch

    returns = torch.empty_like(rewards)
    later = next_values[-1]  # beyond the rollout: G_T is replaced by the bootstrap value itself
    for t in reversed(range(rewards.shape[0])):
        ended = terminated[t] | truncated[t]
        mixed = torch.where(ended, next_values[t], (1.0 - q_lambda) * next_values[t] + q_lambda * later)
        returns[t] = rewards[t] + gamma * (~terminated[t]) * mixed
        later = returns[t]
    return returns


class PQNLoss:
    """Regression of Q(s, a) on the minibatch's lambda-returns (carried as its rewards): no target net."""

    def __init__(self, online: QNet, loss: str = "mse"):
        self.online, self.loss_fn = online, scalar_loss(loss)

    def __call__(self, batch: Batch) -> LossTerms:
        q = self.online(batch.obs).gather(-1, batch.actions.unsqueeze(-1)).squeeze(-1).float()
        return self.loss_fn(q, batch.rewards, reduction="none"), q, None


class QLambdaBatches:
    """`batches(rollout)`: the minibatches of one update phase, Q(lambda) returns computed once under the
    current network, then `update_epochs` shuffled passes of `num_minibatches`. `learner`: the update step
    (its online net, autocast and stacked agents); `generators`: one per agent, for shuffling; `num_envs`:
    sub-envs per agent (rollout rows k * num_envs ... are agent k's)."""

    def __init__(
        self,
        learner: UpdateStep,
        generators: list[torch.Generator],
        *,
        num_envs: int,
        gamma: float,
        q_lambda: float,
        update_epochs: int,
        num_minibatches: int,
    ):
        self.learner, self.generators, self.agents = learner, list(generators), learner.agents
        self.num_envs, self.gamma, self.q_lambda = num_envs, gamma, q_lambda
        self.update_epochs, self.num_minibatches = update_epochs, num_minibatches
        self.device = next(learner.online.parameters()).device

    def _per_agent(self, x: torch.Tensor) -> torch.Tensor:
        """(T, K * N, ...) rollout rows -> (T * N, ...) for one agent, (K, T * N, ...) for K: each agent's
        steps in time order, its envs side by side within a step."""
        if self.agents is None:
            return x.reshape(-1, *x.shape[2:])
        t, n = x.shape[0], self.num_envs
        return x.reshape(t, self.agents, n, *x.shape[2:]).transpose(0, 1).reshape(self.agents, t * n, *x.shape[2:])

    def rollout_returns(self, data: dict[str, torch.Tensor]) -> torch.Tensor:
        """(T, K * N) lambda-returns of a rollout (rlrun.replay.rollout.Rollout.tensors) under the current network."""
        import torch

        t_steps, rows = data["rewards"].shape
        next_obs = self._per_agent(data["next_obs"])
        with torch.no_grad(), self.learner.autocast():
            next_q = self.learner.online(next_obs).float()
        next_values = next_q.amax(dim=-1)  # (T * N,) or (K, T * N)
        if self.agents is not None:  # back to rollout rows: (K, T, N) -> (T, K * N)
            next_values = next_values.reshape(self.agents, t_steps, self.num_envs).transpose(0, 1)
        next_values = next_values.reshape(t_steps, rows)
        return lambda_returns(
            data["rewards"], next_values, data["terminated"], data["truncated"], self.gamma, self.q_lambda
        )

    def __call__(self, rollout: Rollout) -> Iterator[Batch]:
        """The minibatches of one update phase: returns computed once, then `update_epochs` passes."""
        import torch

        from rlrun.replay import Batch

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
                # index_select, not obs[idx]: the same rows, 9x faster for uint8 frames on a CPU (1.3 against
                # 11 ms for 256 of 1,024 stacks of 4 84x84 frames, one Xeon core)
                if self.agents is None:
                    idx = perms[0][m * minibatch : (m + 1) * minibatch]
                    mb_obs, mb_actions, mb_returns = (t.index_select(0, idx) for t in (obs, actions, returns))
                else:
                    idx = torch.stack([p[m * minibatch : (m + 1) * minibatch] for p in perms])  # (K, B)
                    mb_obs, mb_actions, mb_returns = (
                        torch.stack([t[k].index_select(0, idx[k]) for k in range(self.agents)])
                        for t in (obs, actions, returns)
                    )
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


def pqn_learner(
    online: QNet,
    optimizer: torch.optim.Optimizer,
    generators: list[torch.Generator],
    *,
    num_envs: int,
    gamma: float = 0.99,
    q_lambda: float = 0.65,
    update_epochs: int = 4,
    num_minibatches: int = 4,
    loss: str = "mse",
    **update: Any,
) -> UpdateStep:
    """A PQN learner from plain values (defaults: PQNAlgoConfig's; `update`: rlrun.algos.update.UpdateStep's
    keywords): the shared update step with PQN's loss, fed by `learner.batches(rollout)`. `generators`: one
    per agent, for shuffling."""
    from rlrun.algos.update import UpdateStep

    learner = UpdateStep(online, optimizer, PQNLoss(online, loss), **update)
    learner.batches = QLambdaBatches(
        learner,
        generators,
        num_envs=num_envs,
        gamma=gamma,
        q_lambda=q_lambda,
        update_epochs=update_epochs,
        num_minibatches=num_minibatches,
    )
    return learner


def make_learner(
    cfg: DictConfig,
    online: QNet,
    optimizer: torch.optim.Optimizer,
    generators: list[torch.Generator],
    per_agent: PerAgent,
) -> UpdateStep:
    a = cfg.algo
    return pqn_learner(
        online,
        optimizer,
        generators,
        num_envs=cfg.env.num_envs,
        gamma=a.gamma,
        q_lambda=a.q_lambda,
        update_epochs=a.update_epochs,
        num_minibatches=a.num_minibatches,
        loss=a.loss,
        **update_settings(cfg, generators, per_agent, target=False),
    )


def check_pqn(cfg: DictConfig) -> None:
    """PQN (algo=pqn): rollouts that split into whole minibatches, and the parts it has no use for."""
    for key in ("algo.num_steps", "algo.update_epochs", "algo.num_minibatches"):
        positive(cfg, key)
    in_range(cfg, "algo.q_lambda", 0.0, 1.0)
    a, rollout = cfg.algo, cfg.algo.num_steps * cfg.env.num_envs
    check(
        rollout % a.num_minibatches == 0,
        "algo.num_minibatches",
        a.num_minibatches,
        f"a divisor of algo.num_steps x env.num_envs = {rollout} with algo=pqn",
    )
    require_scalar_head(cfg, "pqn", noisy=False)
    # Recording an update phase (rlrun.training.graphs) samples replay inside the graph; a rollout's minibatches
    # are cut on the host.
    cuda_graphs = cfg.device.cuda_graphs
    check(not cuda_graphs, "device.cuda_graphs", cuda_graphs, "false with algo=pqn (its update is not recorded)")
    check(
        cfg.buffer._target_ == "rlrun.replay.ReplayBuffer",
        "buffer",
        "per",
        "uniform (the default, unused) with algo=pqn: PQN learns from its rollouts, without replay",
    )


def rollout_schedule(cfg: DictConfig) -> Schedule:
    """An update phase on each full rollout: update_epochs passes of num_minibatches minibatches."""
    a = cfg.algo
    return Schedule(
        1, a.num_steps * cfg.env.num_envs // a.num_minibatches, a.num_steps, a.update_epochs * a.num_minibatches
    )


# PQN has no target net and computes its returns in its learner: only the common keys differ per agent.
ALGORITHM = Algorithm(
    name="pqn",
    schema=PQNAlgoConfig,
    collector="rollout",
    batchable=COMMON_BATCHABLE,
    check=check_pqn,
    make_learner=make_learner,
    schedule=rollout_schedule,
)
