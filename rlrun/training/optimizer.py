"""An optimizer over a network: one param group, or one per run of agents that share an lr schedule
(rlrun.training.agents), its lr held in a tensor where the step is recorded or compiled."""

from __future__ import annotations

from typing import Any

import torch

import rlrun.training.agents

OPTIMIZERS = {
    "torch.optim.Adam": torch.optim.Adam,
    "torch.optim.RMSprop": torch.optim.RMSprop,
    "torch.optim.SGD": torch.optim.SGD,
}


def make_optimizer(
    target: str,
    kwargs: dict[str, Any],
    network: torch.nn.Module,
    lrs: float | list[float],
    end_factors: float | list[float],
    agents: int,
    split: bool = False,
    capturable: bool = False,
    tensor_lr: bool = False,
) -> torch.optim.Optimizer:
    """`target`'s optimizer with `kwargs`. `lrs`, `end_factors`: one, or one per agent (a group per run of agents
    sharing them; `split`: a group per agent, whose lr changes on its own, as PBT's). `capturable`: steps
    recordable in a CUDA graph (rlrun.training.graphs): step counts held on the device. `tensor_lr`: each group's
    lr in a tensor, which the schedule fills in place (rlrun.training.parts.set_group_lrs): a recorded or
    compiled step reads it from there, where a float would be baked into the step."""
    cls, kwargs = OPTIMIZERS[target], dict(kwargs)
    if capturable and cls is not torch.optim.SGD:  # SGD keeps no step count and needs no flag
        kwargs["capturable"] = True
    if isinstance(lrs, list) or isinstance(end_factors, list):
        params = list(network.parameters())
        kwargs.pop("lr")
        per_agent_lrs = lrs if isinstance(lrs, list) else [lrs] * agents
        per_agent_ends = end_factors if isinstance(end_factors, list) else [end_factors] * agents
        groups = rlrun.training.agents.agent_param_groups(params, per_agent_lrs, per_agent_ends, split)
        optimizer = cls(groups, **kwargs)
        rlrun.training.agents.link_view_grads(optimizer, params)
    else:
        optimizer = cls(network.parameters(), **kwargs)
    if tensor_lr:
        device = next(network.parameters()).device
        for group in optimizer.param_groups:
            group["lr"] = torch.tensor(float(group["lr"]), device=device)
    return optimizer
