"""One update step for every algorithm: the loss module's per-sample loss, weighted and averaged per agent,
then AMP (autocast, and fp16's GradScaler), gradient clipping (global, or per agent for stacked agents),
the non-finite policy (stop, skip or off; a stacked agent that turns non-finite stops alone), the
optimizer step and the target-network sync. `graph_mode` makes it recordable as a CUDA graph
(rlrun.training.graphs).

An algorithm (rlrun.algos) supplies the loss module: `loss(batch)` -> (per-sample loss, Q(s, a), per-sample
PER priority or None), reading the online net and, where the algorithm has one, the target net.
"""

from __future__ import annotations

import contextlib
import logging
import math
import warnings
from collections.abc import Callable, Iterable
from typing import Any, cast

import torch
from torch import nn

from rlrun.errors import NonFiniteError
from rlrun.nets.heads import LossTerms
from rlrun.nets.protocol import Generators, QNet, StackedQNet
from rlrun.nets.stacked_layers import clip_grad_norm_per_agent
from rlrun.replay import Batch
from rlrun.replay.rollout import Rollout

# A compiled optimizer step drops the step's profiler annotation, and torch says so on stderr once per run
# ("Profiler record function ... will be ignored"): nothing a user can act on. That line alone is dropped.
logging.getLogger("torch._dynamo.variables.ctx_manager").addFilter(
    lambda record: not str(record.msg).startswith("Profiler record function")
)


def clip_threshold(max_grad_norm: float | list[float | None] | None) -> float | torch.Tensor:
    """`algo.max_grad_norm` as the clipping reads it: inf for None (no clipping), or a (K,) tensor of
    per-agent thresholds for stacked agents with values of their own."""
    if isinstance(max_grad_norm, (list, tuple)):
        return torch.tensor([math.inf if m is None else float(m) for m in max_grad_norm])
    return math.inf if max_grad_norm is None else float(max_grad_norm)


class Compiled:
    """`fn` through torch.compile (compiled on first use). Where compiling or running it fails (no compiler
    toolchain, an unsupported op, ...): one warning, `failed` naming the error, and `fn` itself from then on."""

    def __init__(self, fn: Callable, failed: str, **options: Any):
        self.fn, self.failed = fn, failed
        self.compiled: Callable | None = torch.compile(fn, **options)

    def __call__(self, *args: Any) -> Any:
        if self.compiled is not None:
            try:
                return self.compiled(*args)
            except Exception as e:
                warnings.warn(self.failed.format(f"{type(e).__name__}: {str(e).splitlines()[0][:200]}"), stacklevel=2)
                self.compiled = None
        return self.fn(*args)


def buffer_pairs(target: QNet, online: QNet) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """The (target, online) buffers that a target sync copies: the persistent ones (noise, which each net
    samples for itself, is not)."""
    persistent = online.state_dict().keys()
    return [(t, o) for (name, t), (_, o) in zip(target.named_buffers(), online.named_buffers()) if name in persistent]


class UpdateStep:
    def __init__(
        self,
        online: QNet,
        optimizer: torch.optim.Optimizer,
        loss: Callable[[Batch], LossTerms],
        *,
        target: QNet | None = None,
        max_grad_norm: float | list[float | None] | None = 10.0,
        tau: float | list[float] = 0.05,
        target_update_period: int = 1,
        on_nonfinite: str = "stop",
        amp: str = "none",
        compile: bool = False,
        compile_mode: str = "default",
        compile_optimizer: bool = False,
        noise_generator: Generators = None,
    ):
        """`online`: a QNetwork or a stacked network (rlrun.nets.stacked: the same interface, `agents` = K).
        `target`: the target net that `sync_target` moves towards `online` (None: the algorithm has none).
        `max_grad_norm`, `tau`: one value, or one per stacked agent. `noise_generator`: where noisy nets draw
        their noise before each update (a torch.Generator, or one per agent; None: torch's global one)."""
        self.online = online
        self.target = target
        self.optimizer = optimizer
        self.loss = loss
        # A rollout algorithm's `batches(rollout)`: the minibatches of a full rollout (rlrun.algos.pqn).
        self.batches: Callable[[Rollout], Iterable[Batch]] | None = None
        self.noisy = getattr(online, "noisy", False)
        self.noise_generator = noise_generator
        self.max_grad_norm = clip_threshold(max_grad_norm)
        self.tau = tau  # a float, or one per stacked agent (rlrun.training.agents)
        self._tau_weights: list[torch.Tensor] | None = None  # one tau per agent: its lerp weights, made at a sync
        self.target_update_period = target_update_period
        self.updates = 0
        self.skipped = 0
        # Stacked agents stopped for a non-finite update (the others train on): their gradients are zeroed
        # from then on; `failures` holds (agent, reason, state before the update) until the loop takes them.
        self.failed: torch.Tensor | None = None
        self.failures: list[tuple[int, str, dict[str, dict[str, torch.Tensor]]]] = []
        self.on_nonfinite = on_nonfinite  # stop | skip | off (off: no check, no per-update sync)
        self.graph_mode = False  # set by rlrun.training.graphs: no host reads inside update(), counting left to it
        self.nonfinite_flag: torch.Tensor | None = None  # graph mode: set on the device, read at log time
        # K stacked agents (rlrun.nets.stacked): losses, gradient norms and metrics are per agent, shape (K,).
        self.agents = getattr(online, "agents", None)
        if self.agents is not None and on_nonfinite == "skip":
            raise ValueError("on_nonfinite='skip' would skip the update of every stacked agent: use stop or off")
        self._online_params: list[torch.Tensor] = list(online.parameters())
        self._cpu = self._online_params[0].device.type == "cpu"
        self._target_params: list[torch.Tensor] = [] if target is None else list(target.parameters())
        self._setup_acceleration(amp, compile, compile_mode)
        # The optimizer's step compiled (torch.compile, on first use): torch's RMSprop and SGD have no fused
        # kernel, and their per-tensor loops cost a CPU update of the MinAtar net as much as its backward pass.
        failed = "torch.compile of the optimizer step failed ({}); continuing without it"
        self._optimizer_step = Compiled(optimizer.step, failed) if compile_optimizer else None
        self._buffer_pairs = [] if target is None else buffer_pairs(target, online)

    def _setup_acceleration(self, amp: str, compile: bool, compile_mode: str) -> None:
        """AMP autocast (+ GradScaler for fp16) and torch.compile of the loss computation. Each falls back
        to the plain path with a warning where this torch or device cannot do it."""
        device_type = next(self.online.parameters()).device.type
        self.amp = amp
        self.autocast: Callable[[], contextlib.AbstractContextManager] = contextlib.nullcontext
        self._scaler = None
        if amp != "none":
            dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}[amp]
            try:
                with torch.autocast(device_type, dtype=dtype):
                    pass
                self.autocast = lambda: torch.autocast(device_type, dtype=dtype)
                if amp == "fp16":
                    self._scaler = torch.amp.GradScaler(device_type)
            except (RuntimeError, ValueError) as e:
                warnings.warn(
                    f"device.amp={amp} is not supported on {device_type} ({e}); training in fp32", stacklevel=2
                )
                self.amp = "none"
        self._compute_loss = self.loss
        if compile:
            mode = None if compile_mode == "default" else compile_mode
            failed = "torch.compile failed ({}); continuing without compilation"
            self._compute_loss = Compiled(self.loss, failed, mode=mode, dynamic=False)

    def update(self, batch: Batch) -> dict[str, torch.Tensor] | None:
        """One gradient step. Returns detached tensors only: reading them is the caller's sync point.
        Returns None when a non-finite update was skipped."""
        agent_loss, loss, q, priority = self._forward(batch)
        grad_norm, host_total = self._backward(loss, agent_loss)
        if self.on_nonfinite != "off" and self.graph_mode:  # no sync: rlrun.training.graphs reads the flag at log time
            total = (agent_loss.detach() if self._scaler else agent_loss.detach() + grad_norm).sum()
            assert self.nonfinite_flag is not None
            self.nonfinite_flag.logical_or_(~torch.isfinite(total))
        elif self.on_nonfinite != "off":  # checked before the step, so the parameters are still good
            if self._check_finite(agent_loss, q, grad_norm, host_total):
                return None
            if self.failed is not None:
                priority = self._freeze_failed(priority)
        self._step()
        q_var, q_mean = torch.var_mean(q.detach(), dim=-1, unbiased=False)
        return {
            "td_loss": agent_loss.detach(),
            "q_mean": q_mean,
            "q_var": q_var,
            "grad_norm": grad_norm,
            "priority": priority,
        }

    def _forward(self, batch: Batch) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, Any]:
        """Each agent's mean (weighted) loss, the loss to differentiate, Q(s, a) and the PER priorities (or None)."""
        if self.noisy:  # fresh, independent noise for the online and target nets at every update
            self.online.reset_noise(self.noise_generator)
            if self.target is not None:
                self.target.reset_noise(self.noise_generator)
        with self.autocast():
            elementwise, q, priority = self._compute_loss(batch)
            if self.amp != "none":
                elementwise, q = elementwise.float(), q.float()
                priority = None if priority is None else priority.float()
            weighted = elementwise * batch.weights if batch.weights is not None else elementwise
            # With stacked agents (K, B): each agent's mean loss, summed, so agent k's gradient is exactly
            # that of its own mean loss. A single agent's (B,) gives the plain mean.
            agent_loss = weighted.mean(dim=-1)
            loss = agent_loss if self.agents is None else agent_loss.sum()
        return agent_loss, loss, q, priority

    def _backward(self, loss: torch.Tensor, agent_loss: torch.Tensor) -> tuple[torch.Tensor, float | None]:
        """The gradients, clipped: their norm (one, or (K,) per agent), and on the CPU the loss + gradient
        norm read as a float (reading is free there; None elsewhere)."""
        self.optimizer.zero_grad(set_to_none=True)
        scaler = self._scaler
        if scaler is not None:  # fp16: scale the loss; unscale before clipping so the norm is the real one
            scaler.scale(loss).backward()
            scaler.unscale_(self.optimizer)
        else:
            loss.backward()
        if self.agents is not None:
            return clip_grad_norm_per_agent(
                self._online_params, self.max_grad_norm, skip_unclipped=self._cpu and not self.graph_mode
            ), None
        host_total = None
        grads = [p.grad for p in self._online_params if p.grad is not None]
        grad_norm = nn.utils.get_total_norm(grads)
        # clip_grad_norm_'s scaling, min(1, max_norm / (norm + 1e-6)), is a no-op below the threshold:
        # on the CPU it is skipped then; on a GPU it always runs, sync-free.
        max_norm = self.max_grad_norm
        assert isinstance(max_norm, float)  # one agent's threshold (a tensor holds stacked agents' own)
        clip = True
        if self._cpu and not self.graph_mode:
            norm = grad_norm.item()
            host_total = agent_loss.item() + (0.0 if scaler else norm)
            clip = norm + 1e-6 > max_norm
        if clip:
            nn.utils.clip_grads_with_norm_(self._online_params, max_norm, grad_norm)
        return grad_norm, host_total

    def _check_finite(
        self, agent_loss: torch.Tensor, q: torch.Tensor, grad_norm: torch.Tensor, host_total: float | None
    ) -> bool:
        """The non-finite policy: raise (stop), stop the stacked agents concerned, or skip the update (True)."""
        scaler = self._scaler
        # One sum covers all three: the losses and norms are >= 0, and a non-finite Q-value makes its
        # loss non-finite. With fp16, an overflowing gradient is the GradScaler's business.
        if host_total is None:  # a host-device sync per update; algo.on_nonfinite=off removes it
            host_total = (agent_loss.detach() if scaler else agent_loss.detach() + grad_norm).sum().item()
        if math.isfinite(host_total):
            return False
        values = torch.stack([agent_loss.detach(), q.detach().mean(dim=-1)] + ([] if scaler else [grad_norm]))
        finite = torch.isfinite(values).reshape(len(values), -1).all(dim=1)
        bad = [n for n, ok in zip(("td_loss", "q_mean", "grad_norm"), finite.tolist()) if not ok]
        if self.on_nonfinite == "skip":
            self.optimizer.zero_grad(set_to_none=True)
            self.skipped += 1
            return True
        if self.agents is None:
            raise NonFiniteError(f"non-finite {', '.join(bad)}")
        self._stop_agents(torch.isfinite(values).all(dim=0), bad)
        return False

    def _freeze_failed(self, priority: torch.Tensor | None) -> torch.Tensor | None:
        """Stopped agents get zero gradients (their optimizer's momentum may still move them, unused: their
        files were written when they stopped) and finite priorities."""
        assert self.failed is not None
        for g in self._online_params:
            if g.grad is not None:
                g.grad.masked_fill_(self.failed.view(-1, *([1] * (g.dim() - 1))), 0.0)
        return None if priority is None else priority.masked_fill(self.failed.unsqueeze(1), 1.0)

    def _step(self) -> None:
        """The optimizer step, then the target sync when one is due."""
        if self._scaler is not None:
            self._scaler.step(self.optimizer)
            self._scaler.update()
        elif self._optimizer_step is not None and not self.graph_mode:  # a CUDA graph records the eager step
            self._optimizer_step()
        else:
            self.optimizer.step()
        if self.graph_mode:  # rlrun.training.graphs counts updates; syncs here only when every update syncs
            if self.target_update_period == 1:
                self.sync_target()
        else:
            self.updates += 1
            if self.updates % self.target_update_period == 0:
                self.sync_target()

    def enter_graph_mode(self) -> None:
        """Make `update` recordable as a CUDA graph (rlrun.training.graphs): no host sync inside it, the
        non-finite check into `nonfinite_flag`, the update count and periodic target syncs left to the
        caller. `on_nonfinite=skip` needs a host decision per update, so it cannot be recorded."""
        if self.on_nonfinite == "skip" or self._scaler is not None:
            raise ValueError("CUDA graphs need algo.on_nonfinite=stop or off and device.amp=none or bf16")
        self.graph_mode = True
        self.nonfinite_flag = torch.zeros((), dtype=torch.bool, device=self._online_params[0].device)

    @torch.no_grad()
    def sync_target(self) -> None:
        if self.target is None:
            return
        if not isinstance(self.tau, (int, float)):  # one tau per stacked agent: a (K, 1, ...) lerp weight each
            if self._tau_weights is None:
                tau = torch.tensor(self.tau, dtype=self._online_params[0].dtype, device=self._online_params[0].device)
                self._tau_weights = [tau.view(-1, *([1] * (p.dim() - 1))).expand_as(p) for p in self._online_params]
            torch._foreach_lerp_(self._target_params, self._online_params, self._tau_weights)
        elif self.tau >= 1.0:
            torch._foreach_copy_(self._target_params, self._online_params)
        else:
            torch._foreach_lerp_(self._target_params, self._online_params, self.tau)
        for t, o in self._buffer_pairs:
            t.copy_(o)

    def set_tau(self, k: int, tau: float) -> None:
        """Stacked agent k's own target-update rate (PBT explores algo.tau per agent)."""
        assert isinstance(self.tau, list), "PBT explores algo.tau where each agent has its own value"
        self.tau[k] = tau
        self._tau_weights = None  # rebuilt from the list at the next sync

    def _stop_agents(self, finite: torch.Tensor, bad: list[str]) -> None:
        """Stacked agents whose loss, Q-values or gradient norm are non-finite (`finite` (K,) is False) stop
        alone: recorded in `failures` with their state before this update, and frozen from now on."""
        failed = ~finite if self.failed is None else ~finite | self.failed
        new = (failed if self.failed is None else failed & ~self.failed).nonzero().flatten().tolist()
        self.failed = failed
        online, target = cast(StackedQNet, self.online), cast("StackedQNet | None", self.target)
        for k in new:
            state = {"online": online.agent_state_dict(k)}
            if target is not None:
                state["target"] = target.agent_state_dict(k)
            self.failures.append((k, f"non-finite {', '.join(bad)}", state))

    def state_dict(self) -> dict:
        state = {"online": self.online.state_dict()}
        if self.target is not None:
            state["target"] = self.target.state_dict()
        return {**state, "optimizer": self.optimizer.state_dict(), "updates": self.updates, "skipped": self.skipped}

    def load_state_dict(self, state: dict) -> None:
        self.online.load_state_dict(state["online"])
        if self.target is not None:
            self.target.load_state_dict(state["target"])
        built = [g["lr"] for g in self.optimizer.param_groups]
        self.optimizer.load_state_dict(state["optimizer"])  # sets each group's lr as saved: float or tensor
        for group, lr in zip(self.optimizer.param_groups, built):  # a recorded or compiled step keeps its lr tensor
            group["lr"] = lr.fill_(float(group["lr"])) if isinstance(lr, torch.Tensor) else float(group["lr"])
        self.updates, self.skipped = state["updates"], state["skipped"]
