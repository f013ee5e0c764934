"""The metric window: what the update phases between two log points measured, kept on the device.

Reading the learner's metrics after every gradient step would cost one host-device sync per update; the
window keeps them as tensors and `read` turns them into numbers with one sync per log interval.
"""

from __future__ import annotations

from typing import Any

import torch

from rlrun.replay import Batch

# Learner metric -> TensorBoard tag.
TAGS = {
    "td_loss": "losses/td_loss",
    "q_mean": "losses/q_mean",
    "q_var": "losses/q_var",
    "grad_norm": "losses/grad_norm",
    "sample_age": "replay/sample_age",
    "lambda_return": "rollout/lambda_return",
}


class MetricWindow:
    """`rollout`: the batches are minibatches of PQN's rollouts, not replay samples: their replay metrics
    (sample age, distinct fraction) mean nothing; the mean lambda-return they regress to is kept instead."""

    def __init__(self, rollout: bool = False) -> None:
        self.rollout = rollout
        self.values: dict[str, list[torch.Tensor]] = {}
        self.sampled: list[torch.Tensor] = []  # replay indices of every sampled batch

    def __bool__(self) -> bool:
        return bool(self.values)

    def add(self, metrics: dict[str, torch.Tensor], batch: Batch) -> None:
        for k in ("td_loss", "q_mean", "q_var", "grad_norm"):
            self.values.setdefault(k, []).append(metrics[k])
        if self.rollout:  # a rollout minibatch's rewards are its lambda-returns (rlrun.algos.pqn)
            self.values.setdefault("lambda_return", []).append(batch.rewards.mean(dim=-1, dtype=torch.float32))
            return
        self.values.setdefault("sample_age", []).append(batch.age.mean(dim=-1, dtype=torch.float32))
        self.sampled.append(batch.indices)

    def add_measured(self, measured: dict[str, torch.Tensor]) -> None:
        """One recorded update's metrics (rlrun.training.graphs), sample_age and the sampled indices included."""
        for k in ("td_loss", "q_mean", "q_var", "grad_norm", "sample_age"):
            self.values.setdefault(k, []).append(measured[k])
        self.sampled.append(measured["indices"])

    def read(self, replay_stats: dict[str, torch.Tensor] | None = None) -> dict[str, Any]:
        """Means over the window's gradient steps, the fraction of distinct transitions sampled, and
        `replay_stats` (PER's priority statistics) under `per/`, read with one host-device sync; then
        the window is empty. Floats for one agent, per-agent lists for stacked agents."""
        if not self.values:
            return {}
        on_device = {TAGS[k]: torch.stack(vals).float().mean(dim=0) for k, vals in self.values.items()}
        if self.sampled:
            idx = torch.cat(self.sampled, dim=-1).sort(dim=-1).values
            distinct = (idx[..., 1:] != idx[..., :-1]).sum(dim=-1) + 1  # a tensor: no sync, unlike unique().numel()
            on_device["replay/unique_fraction"] = distinct.float() / idx.shape[-1]
        for k, v in (replay_stats or {}).items():
            on_device[f"per/{k}"] = v.float()
        self.values, self.sampled = {}, []
        return dict(zip(on_device, torch.stack(list(on_device.values())).tolist()))  # the one sync

    def state_dict(self) -> dict[str, Any]:
        return {
            "window": {k: [v.cpu() for v in vals] for k, vals in self.values.items()},
            "sampled": [v.cpu() for v in self.sampled],
        }

    def load_state_dict(self, state: dict[str, Any], device: torch.device) -> None:
        self.values = {k: [v.to(device) for v in vals] for k, vals in state["window"].items()}
        self.sampled = [v.to(device) for v in state["sampled"]]
