"""Proportional prioritized replay (Schaul et al. 2016), for one agent or K, on `SumTree`s.

P(i) = p_i^alpha / sum_k p_k^alpha with p_i = |td_i| + priority_eps; new transitions enter at the largest
priority seen so far. Importance weights are w_i = (N * P(i))^-beta, divided by the largest weight in the
batch (as Dopamine and most Rainbow implementations do) so that updates only shrink. Sampling is
stratified: the total mass is cut into `batch_size` equal segments, one draw in each.

The maths is written once for both shapes: one agent's (B,) tensors and K agents' (K, B) rows, each row
in its own agent's tree with its own max priority.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from rlrun.replay.base import Beta
from rlrun.replay.sumtree import SumTree


class Prioritized:
    """Mixed in before a ring class (`ReplayBuffer` or `StackedReplayBuffer`), whose storage, sizes and
    random draws (`_uniforms`) it uses and whose checkpoint state it extends."""

    prioritized = True
    device: torch.device
    capacity: int

    def __init__(
        self,
        *args: Any,
        alpha: float = 0.6,
        beta_start: float = 0.4,
        beta_anneal_steps: int | None = None,
        priority_eps: float = 1e-6,
        **kwargs: Any,
    ):
        super().__init__(*args, **kwargs)  # the ring's
        agents = getattr(self, "agents", None)
        self.alpha, self.beta_start, self.beta_anneal_steps = alpha, beta_start, beta_anneal_steps
        self.priority_eps = priority_eps
        self.tree = SumTree(self.capacity, self.device, trees=agents or 1)
        self.max_priority = torch.ones(() if agents is None else (agents,), dtype=torch.float64, device=self.device)
        # New transitions wait here (tree row or None, slots, priority) until the next read: the tree walk
        # is paid once per update phase instead of once per env step.
        self._pending: list[tuple[torch.Tensor | None, torch.Tensor, torch.Tensor]] = []

    def keep_counts_on_device(self) -> None:
        """For recorded steps (rlrun.training.graphs): the trees walked with torch ops only (same float64 sums)."""
        super().keep_counts_on_device()  # type: ignore[misc]
        self.tree.use_numpy = False

    def beta(self, step: int, total_steps: int) -> float | np.ndarray:
        """beta at `step`: a float, or a (K,) array with one per agent where agents have their own beta_start."""
        duration = self.beta_anneal_steps if self.beta_anneal_steps is not None else total_steps
        if isinstance(self.beta_start, (list, tuple)):
            return np.array([min(1.0, b + (1.0 - b) * step / max(1, duration)) for b in self.beta_start])
        return min(1.0, self.beta_start + (1.0 - self.beta_start) * step / max(1, duration))

    def _power(
        self,
        x: torch.Tensor,
        exponent: float | list[float] | np.ndarray | torch.Tensor,
        rows: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """x ** exponent, where `exponent` may hold one value per agent (rlrun.training.agents): each agent's elements
        (`rows`: the agent of each element; None: x is (K, B)) are raised to its own value, as a scalar
        power, exactly as its single run raises them."""
        if isinstance(exponent, (int, float)) or (isinstance(exponent, torch.Tensor) and exponent.dim() == 0):
            return x**exponent
        agent = rows if rows is not None else torch.arange(x.shape[0], device=x.device).unsqueeze(1).expand_as(x)
        # recorded steps (rlrun.training.graphs): one value per agent, no host sync
        if isinstance(exponent, torch.Tensor):
            return x ** exponent.to(x.dtype)[agent]
        out = torch.empty_like(x)
        for value in sorted(set(map(float, exponent))):
            mask = torch.isin(agent, torch.tensor([k for k, e in enumerate(exponent) if e == value], device=x.device))
            out[mask] = x[mask] ** value
        return out

    def _enter(self, slots: torch.Tensor, agent: torch.Tensor | None = None) -> None:
        """New transitions in `slots` (of agents `agent`) enter at their agent's max priority as of now."""
        prio = self.max_priority.expand(slots.shape[0]) if agent is None else self.max_priority[agent]
        self._pending.append((agent, slots, prio))

    def _flush(self) -> None:
        if not self._pending:
            return
        agents, slots, prio = zip(*self._pending)
        self._pending.clear()
        rows = None if agents[0] is None else torch.cat(agents)
        self.tree.update(torch.cat(slots), self._power(torch.cat(prio), self.alpha, rows), rows)

    def _sample_indices(self, batch_size: int, beta: Beta):
        self._flush()
        total = self.tree.total  # (K,)
        stacked = self.max_priority.dim() == 1
        if stacked:
            total = total.unsqueeze(1)
        u = self._uniforms(batch_size)  # type: ignore[attr-defined]  # float64, (B,) or (K, B): the ring's generators
        mass = (torch.arange(batch_size, device=self.device, dtype=torch.float64) + u) * (total / batch_size)
        size = self._size_tensor()  # type: ignore[attr-defined]  # an int, or (K, 1)
        # at most size - 1: round-off at the edge
        idx = torch.minimum(self.tree.find(mass), torch.as_tensor(size - 1, device=self.device))
        weights = self._power(size * (self.tree.leaf_values(idx) / total), -beta)
        return idx, (weights / weights.max(dim=-1, keepdim=True).values).float()

    def priorities(self, idx: torch.Tensor) -> torch.Tensor:
        """p_i^alpha of the given slots ((B,), or (K, B) per agent)."""
        self._flush()
        return self.tree.leaf_values(idx)

    def update_priorities(self, indices: torch.Tensor, td_errors: torch.Tensor) -> None:
        """indices, td_errors: (B,), or (K, B) for K agents."""
        self._flush()
        priorities = td_errors.detach().abs().to(torch.float64) + self.priority_eps
        # In place: a recorded CUDA graph (rlrun.training.graphs) keeps reading and writing this very tensor.
        torch.maximum(self.max_priority, priorities.max(dim=-1).values, out=self.max_priority)
        if indices.dim() == 1:
            self.tree.update(indices, priorities**self.alpha)
        else:
            rows = torch.arange(indices.shape[0], device=self.device).unsqueeze(1).expand_as(indices)
            self.tree.update(indices.flatten(), self._power(priorities, self.alpha).flatten(), rows.flatten())

    def stats(self) -> dict[str, torch.Tensor]:
        """Priority statistics over the stored transitions (p^alpha, as sampled): scalars for one agent,
        (K,) for K."""
        self._flush()
        sizes = torch.as_tensor(self.sizes, device=self.device)  # type: ignore[attr-defined]
        filled = int(sizes.max())
        p = self.tree.leaves_of(filled)
        p = torch.where(torch.arange(filled, device=self.device) < sizes.unsqueeze(1), p, torch.zeros_like(p))
        n = sizes.to(p.dtype)
        total = p.sum(dim=1)
        stats = {
            "priority_max": p.max(dim=1).values,
            "priority_mean": total / n,
            # Kish effective sample size of P, as a fraction of N: 1 = uniform, -> 1/N = one transition.
            "ess_fraction": total * total / (n * (p * p).sum(dim=1)),
        }
        return stats if self.max_priority.dim() == 1 else {k: v[0] for k, v in stats.items()}

    def state_dict(self, include_storage: bool = True) -> dict:
        self._flush()
        state = super().state_dict(include_storage)  # type: ignore[misc]
        if include_storage:
            state["tree"] = self.tree.tree.clone()
            state["max_priority"] = self.max_priority.clone()
        return state

    def load_state_dict(self, state: dict) -> None:
        super().load_state_dict(state)  # type: ignore[misc]
        if "tree" in state:
            self.tree.tree.copy_(state["tree"])  # a single agent's (2 * leaves,) row broadcasts into (1, ...)
            self.max_priority.copy_(state["max_priority"])
