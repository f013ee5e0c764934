"""CUDA graphs for the two things the loop repeats: an update phase and the acting forward.

A DQN gradient step on a small network is a few hundred tiny kernels; launched one by one from Python
they cost more than they compute (on an H200 the default CartPole step was 2.9 ms eager against 0.8 ms
on one CPU core). `GraphedUpdates` records an update phase once: `count` x (replay sample, frame decode,
TD target, loss, backward, gradient clipping, optimizer step, target sync, PER priority update) and
replays it with one launch. `GraphedActor` does the same for the greedy forward of a vector step, so a
vector step costs one copy of the observations to the device and one of the actions back.

Recording needs steps that never read a value back to the host and tensors that keep their addresses;
the parts provide that when asked: the learner (`graph_mode`) checks for non-finite values into a
device flag that `check()` reads at log time, and leaves counting updates to this module; the replay
buffer (`keep_counts_on_device`) samples with sizes held in device tensors, refreshed before each
replay, and updates priorities in place; the optimizer is built `capturable` (rlrun.training.build). Random
draws (replay sampling, noisy nets) come from the agents' registered generators, so each replay draws
new numbers.

CPU runs never come here: on the CPU the eager path is faster and is the reference for repeatability.
"""

from __future__ import annotations

import numpy as np
import torch

from rlrun.algos.acting import GreedyActor
from rlrun.algos.update import UpdateStep
from rlrun.errors import NonFiniteError
from rlrun.replay import Replay
from rlrun.replay.frames import FrameStore
from rlrun.replay.prioritized import Prioritized

METRICS = ("td_loss", "q_mean", "q_var", "grad_norm")


class GraphedUpdates:
    """`run(beta)` performs `count` gradient steps and returns one metrics dict per step (device
    tensors: td_loss, q_mean, q_var, grad_norm, sample_age, indices)."""

    WARMUP = 2  # eager phases (real updates) on a side stream before recording: cuBLAS and allocator warm-up

    def __init__(
        self,
        learner: UpdateStep,
        buffer: Replay,
        frames: FrameStore | None,
        batch_size: int,
        count: int,
        generators: list[torch.Generator],
    ):
        self.learner, self.buffer, self.frames = learner, buffer, frames
        self.batch_size, self.count, self.generators = batch_size, count, generators
        self.device = learner._online_params[0].device
        learner.enter_graph_mode()
        buffer.keep_counts_on_device()
        # PER's beta: a scalar, or one per agent where agents have their own beta_start (rlrun.training.agents)
        beta = buffer.beta(0, 1) if isinstance(buffer, Prioritized) else 1.0
        self.beta = torch.ones(torch.as_tensor(beta).shape, dtype=torch.float64, device=self.device)
        self.graph: torch.cuda.CUDAGraph | None = None
        self.outputs: list[dict[str, torch.Tensor]] = []
        self.phases = 0
        self.stream: torch.cuda.Stream | None = None  # made at the first run (CUDA only)

    def _steps(self) -> list[dict[str, torch.Tensor]]:
        learner, buffer, frames = self.learner, self.buffer, self.frames
        outputs = []
        for _ in range(self.count):
            batch = buffer.sample(self.batch_size, self.beta)
            if frames is not None:
                batch = frames.decode(batch)
            metrics = learner.update(batch)
            assert metrics is not None  # graph mode never skips an update (on_nonfinite=skip is refused)
            if buffer.prioritized:
                buffer.update_priorities(batch.indices, metrics["priority"])
            step = {k: metrics[k] for k in METRICS}
            step["sample_age"] = batch.age.mean(dim=-1, dtype=torch.float32)
            step["indices"] = batch.indices
            outputs.append(step)
        return outputs

    def _after(self) -> None:
        """Count the phase's updates; with a target period > 1, sync the target once if the phase
        crossed a period boundary (the period is then counted in whole phases)."""
        learner = self.learner
        before = learner.updates
        learner.updates += self.count
        period = learner.target_update_period
        if period > 1 and learner.updates // period > before // period:
            learner.sync_target()

    def run(self, beta: float | np.ndarray) -> list[dict[str, torch.Tensor]]:
        self.buffer.prepare_graph_replay()  # pending priorities into the trees, sizes to the device
        self.beta.copy_(torch.as_tensor(beta, dtype=torch.float64))
        if self.graph is None and self.phases < self.WARMUP:
            self.phases += 1
            if self.stream is None:
                self.stream = torch.cuda.Stream(self.device)
            self.stream.wait_stream(torch.cuda.current_stream(self.device))
            with torch.cuda.stream(self.stream):
                outputs = self._steps()
            torch.cuda.current_stream(self.device).wait_stream(self.stream)
            self._after()
            return outputs
        if self.graph is None:
            self.graph = torch.cuda.CUDAGraph()
            for generator in self.generators:
                self.graph.register_generator_state(generator)
            self.learner.optimizer.zero_grad(set_to_none=True)
            with torch.cuda.graph(self.graph):  # records only: the first replay below runs it
                self.outputs = self._steps()
        self.graph.replay()
        self._after()
        return [{k: v.clone() for k, v in step.items()} for step in self.outputs]

    def check(self) -> None:
        """Raise NonFiniteError if any update since the last check saw a non-finite loss or gradient norm
        (one host sync: call it where the loop reads metrics anyway)."""
        flag = self.learner.nonfinite_flag
        if flag is not None and bool(flag.any()):
            flag.zero_()
            raise NonFiniteError("non-finite td_loss or grad_norm (in an update since the previous log)")


class GraphedActor:
    """The greedy forward of an actor (rlrun.algos.acting.GreedyActor) recorded as a CUDA graph for a fixed
    observation batch shape; any other shape goes through the actor itself."""

    def __init__(self, actor: GreedyActor, obs_shape: tuple[int, ...], obs_dtype: np.dtype, device: torch.device):
        self.actor, self.device = actor, device
        torch_dtype = torch.from_numpy(np.zeros(0, dtype=obs_dtype)).dtype
        self.static_obs = torch.zeros(obs_shape, dtype=torch_dtype, device=device)
        self.graph: torch.cuda.CUDAGraph | None = None
        self.static_actions: torch.Tensor | None = None
        self.calls = 0

    def _forward(self) -> torch.Tensor:
        net, agents = self.actor.net, self.actor.agents
        obs = self.static_obs if agents is None else self.static_obs.reshape(agents, -1, *self.static_obs.shape[1:])
        return net(obs).argmax(dim=-1).reshape(-1)

    @torch.no_grad()
    def act(self, obs: np.ndarray) -> np.ndarray:
        if tuple(obs.shape) != tuple(self.static_obs.shape):
            return self.actor.act(obs)
        self.static_obs.copy_(torch.from_numpy(np.ascontiguousarray(obs)))
        if self.graph is None:
            self.calls += 1
            if self.calls <= GraphedUpdates.WARMUP:
                return self._forward().cpu().numpy()
            self.graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(self.graph):
                self.static_actions = self._forward()
        self.graph.replay()
        assert self.static_actions is not None
        return self.static_actions.cpu().numpy()
