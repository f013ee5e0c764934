"""A trained agent as a callable: `rlrun.load(path)` returns a `Policy`.

    policy = rlrun.load("outputs/<run>")   # a run directory, its model.pt or a checkpoint.pt
    policy(obs)                            # greedy actions (numpy int64): one observation -> a scalar,
                                           # a batch (B, *obs_shape) -> (B,); numpy or torch observations
    policy.q_values(obs)                   # (B, A) Q-values (numpy float32), whatever the head
    policy.config, policy.device, policy.to("cuda"), policy.network (the torch module)

Loading is rlrun.evaluate's own (it calls `read_saved` and `q_network` below): the same
files are accepted, nothing read chooses which code runs (weights load with `weights_only=True`; the saved
config is checked by `rlrun.config.saved` and rebuilt on rlrun's schemas, so a saved `module:` env id is refused
unless `env_id=` repeats it), and the network is built for the env's spaces as training built it. Greedy
means the network in eval mode: noisy layers use their mean weights; C51, QR-DQN and IQN give the
expectation of their return distribution (IQN at its evenly spaced acting fractions).
"""

from __future__ import annotations

import os
import re
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

import gymnasium as gym
import numpy as np
import numpy.typing as npt
import torch

from rlrun.algos.acting import GreedyActor
from rlrun.config import saved
from rlrun.nets.networks import QNetwork
from rlrun.storage import bounded, checkpoint as ckpt
from rlrun.training import agents
from rlrun.training.build import make_eval_envs, make_network
from rlrun.training.device import resolve_device

if TYPE_CHECKING:
    from omegaconf import DictConfig


class BatchedRunError(ckpt.CheckpointError):
    """A run of several agents (seeds=K, an agents list, a batched sweep's group): each agent is loaded on
    its own, from its directory (`agent_dirs`)."""

    def __init__(self, run_dir: Path, agent_dirs: list[str]):
        self.agent_dirs = agent_dirs
        self.best_agent = pbt_best(Path(run_dir), agent_dirs)  # a PBT run's best agent, where it named one
        best = f"; PBT's best agent: {self.best_agent}" if self.best_agent is not None else ""
        super().__init__(
            f"{run_dir} is a batched run of {len(agent_dirs)} agents{best}; give one agent's directory: "
            + ", ".join(agent_dirs)
        )


PBT_BEST = re.compile(r"PBT best agent (\S+) \(fitness")
LOG_TAIL = 2**20  # the end of train.log where a finished PBT run names its best agent


def pbt_best(run_dir: Path, agent_dirs: list[str]) -> str | None:
    """The directory of the agent a PBT run named best when it ended (the last `PBT best agent <label>` line
    of its train.log: a resumed run names it again), or None (not PBT, not finished, no such agent)."""
    path = run_dir / "train.log"
    try:
        with bounded.open_regular(path, None) as f:
            f.seek(max(0, f.seek(0, os.SEEK_END) - LOG_TAIL))
            tail = f.read(LOG_TAIL).decode("utf-8", errors="replace")
    except (bounded.FileRefused, OSError):
        return None
    found = PBT_BEST.findall(tail)
    if not found:
        return None
    best = os.path.normpath(run_dir / found[-1])
    return next((d for d in agent_dirs if os.path.normpath(d) == best), None)


class Saved(NamedTuple):
    """What a run left to play it: its checked config, its online network's weights and its directory."""

    config: DictConfig
    weights: dict[str, torch.Tensor]
    run_dir: Path
    fallback: tuple[Path, int] | None = None  # the checkpoint used instead of a damaged newest one, its step


def read_saved(path: Path, map_location: str | torch.device = "cpu", env_id: str | None = None) -> Saved:
    """A run's config and weights from a run directory (its checkpoint, else its model.pt), a checkpoint
    file or a model.pt (with its run's `.hydra/config.yaml`). `env_id` is the caller's, which may confirm a
    saved `module:` id. Raises `CheckpointError` (one line) for anything else."""
    path = Path(path)
    if not path.exists():
        raise ckpt.CheckpointError(f"{path} does not exist: give a run directory, its checkpoint.pt or its model.pt")
    if path.is_dir():
        agent_models = sorted(path.glob("seed=*/model.pt"))
        if agent_models:  # a batched run (seeds=K): each agent is loaded on its own, like a single-seed run
            raise BatchedRunError(path, [str(a.parent) for a in agent_models])
        if (path / ckpt.LATEST).exists() or (path / ckpt.PREVIOUS).exists():
            state, used = ckpt.load(path, map_location=map_location)
            fallback = None if used.name == ckpt.LATEST else (used, int(state["step"]))
            cfg = one_agent(saved.from_disk(state["config"], env_id), path)
            return Saved(cfg, state["learner"]["online"], path, fallback)
        if not (path / "model.pt").exists():
            raise ckpt.CheckpointError(f"{path} is neither a checkpoint nor a run directory with weights")
        path = path / "model.pt"
    state = ckpt.read(path, map_location=map_location)  # refuses a FIFO or a device, saying what it is
    if isinstance(state, dict) and "learner" in state:
        state = ckpt.load_file(path, map_location=map_location)
        cfg = one_agent(saved.from_disk(state["config"], env_id), path.parent)
        return Saved(cfg, state["learner"]["online"], path.parent)
    if ckpt.is_weights(state):
        return Saved(saved_config(path.parent, env_id), state, path.parent)  # a model.pt: weights only
    raise ckpt.CheckpointError(f"{path}: neither an rlrun checkpoint nor a model.pt")


def saved_config(run_dir: Path, env_id: str | None = None) -> DictConfig:
    """A run's `.hydra/config.yaml`, checked and rebuilt on rlrun's schemas like a checkpoint's config."""
    path = run_dir / ".hydra" / "config.yaml"
    if not path.exists():
        raise ckpt.CheckpointError(f"{path} is missing: model.pt needs its run's config next to it")
    try:
        return saved.from_disk(bounded.load_yaml(path), env_id)
    except bounded.FileRefused as e:
        raise ckpt.CheckpointError(str(e)) from None


def one_agent(cfg: DictConfig, run_dir: Path) -> DictConfig:
    """`cfg` if it trains one agent; a run of several is refused, naming the agents' directories."""
    agents.check(cfg)  # an `agents` list is checked before its entries are read
    names = agents.agent_names(cfg)
    if len(names) > 1:
        raise BatchedRunError(run_dir, [os.path.normpath(run_dir / name) for name in names])
    return cfg


def q_network(cfg: DictConfig, envs: Any, weights: dict[str, torch.Tensor], device: torch.device) -> QNetwork:
    """The run's Q-network for `envs`' spaces, built as training built it (`rlrun.training.build.make_network`), with
    `weights`, in eval mode. A `RuntimeError` if the weights do not fit the config's network."""
    q_net = make_network(cfg, envs.single_observation_space.shape, int(envs.single_action_space.n), device)
    q_net.load_state_dict(weights)
    return q_net.eval()


# One observation or a batch: numpy, torch, or nested lists.
Observations = npt.ArrayLike | torch.Tensor


class Policy:
    """A trained Q-network's greedy policy. `policy(obs)` -> actions, `policy.q_values(obs)` -> Q-values;
    `obs` is one observation (of `observation_space.shape`) or a batch of them, numpy, torch or a list."""

    def __init__(
        self,
        network: QNetwork,
        config: DictConfig,
        observation_space: gym.spaces.Box,
        action_space: gym.spaces.Discrete,
        run_dir: Path,
    ):
        self.network, self.config, self.run_dir = network.eval(), config, run_dir
        self.observation_space, self.action_space = observation_space, action_space
        self._actor = GreedyActor(network, self.device)

    def __repr__(self) -> str:
        kind = self.network.q_head.name + (", dueling" if self.network.dueling else "")
        kind += ", noisy" if self.network.noisy else ""
        return (
            f"Policy({str(self.config.env.id)}, {kind}, {self.action_space.n} actions, {self.device}: {self.run_dir})"
        )

    @property
    def device(self) -> torch.device:
        return self.network.support.device

    def to(self, device: str | torch.device) -> Policy:
        """Move the network to `device` (`cpu`, `cuda`, `cuda:1`, a torch.device); returns the policy."""
        self.network.to(torch.device(device))
        self._actor = GreedyActor(self.network, self.device)
        return self

    def _batch(self, obs: Observations) -> tuple[np.ndarray | torch.Tensor, bool]:
        """(a batch of observations, whether `obs` was a single one)."""
        if not isinstance(obs, torch.Tensor):
            obs = np.asarray(obs)
        shape, got = tuple(self.observation_space.shape), tuple(obs.shape)
        if got == shape:
            return obs[None], True
        if got[1:] != shape:
            raise ValueError(f"observations of shape {shape} or a batch (B, {', '.join(map(str, shape))}), got {got}")
        return obs, False

    def __call__(self, obs: Observations) -> np.ndarray | np.int64:
        """Greedy actions, numpy int64: a scalar for one observation, (B,) for a batch."""
        batch, single = self._batch(obs)
        if isinstance(batch, torch.Tensor):
            batch = batch.detach()
        actions = np.asarray(self._actor(batch), dtype=np.int64)
        return actions[0] if single else actions

    @torch.no_grad()
    def q_values(self, obs: Observations) -> np.ndarray:
        """Q-values, numpy float32: (A,) for one observation, (B, A) for a batch."""
        batch, single = self._batch(obs)
        q = self.network(torch.as_tensor(batch, device=self.device)).float().cpu().numpy()
        return q[0] if single else q


def load(path: str | os.PathLike, device: str | torch.device = "auto", env_id: str | None = None) -> Policy:
    """The greedy policy of a trained run: `path` is a run directory, its checkpoint.pt (or
    checkpoint.prev.pt) or its model.pt. A batched run (seeds=K, agents=[...]) is refused with a
    `BatchedRunError` naming its agents' directories (`.agent_dirs`): load one of those. `device`: `auto`
    (CUDA for pixel networks when there is a GPU, else the CPU), `cpu`, `cuda` or a torch.device. `env_id`
    confirms a saved `module:` env id (making the env imports that module); a saved id is never changed.
    Raises `CheckpointError` or `ConfigError` with a one-line reason."""
    found = read_saved(Path(path), "cpu", env_id)
    if found.fallback is not None:
        used, step = found.fallback
        warnings.warn(f"{used.parent / ckpt.LATEST} is damaged; loading {used.name} (step {step})", stacklevel=2)
    cfg = saved.playing_config(found.config)
    envs = make_eval_envs(cfg, 1)  # the spaces the network was built for (action bins, frame stacks included)
    try:
        net = q_network(cfg, envs, found.weights, torch.device("cpu"))
        spaces = envs.single_observation_space, envs.single_action_space
    except RuntimeError as e:
        raise ckpt.CheckpointError(f"the weights in {path} do not fit their config: {str(e).splitlines()[0]}") from None
    finally:
        envs.close()
    if not isinstance(device, torch.device):
        device = resolve_device(device, pixels=net.pixels)  # `cuda` without a GPU: a ConfigError
    return Policy(net, found.config, *spaces, found.run_dir).to(device)
