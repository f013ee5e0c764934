"""The K >= 1 agents of a run: their seeds, where each writes, and how results leave the loop per agent.

Agent k has seed `seed + k` and is, step for step, the agent that `python -m rlrun.train seed=<seed + k>`
would train (its network initialised after seeding torch with its seed, its sub-envs seeded
`seed + k + i`, its epsilon-greedy draws and replay sampling from its own generators). With K = 1 the
agent writes into the run directory; with K > 1 each agent writes what a single-seed run writes
(TensorBoard events, episodes.csv, summary.json, returns.png, model.pt and a `.hydra/` with its own
config) into `<run dir>/seed=<seed + k>/`, so TensorBoard, `rlrun.report` and `rlrun.evaluate` treat the
agents as K single-seed runs. The checkpoint (all agents together) stays in the run directory.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
import yaml
from omegaconf import DictConfig, OmegaConf

from rlrun import rundir
from rlrun.logger import RunLogger


def agent_dir(out_dir: Path, seed: int) -> Path:
    return Path(out_dir) / f"seed={seed}"


def agent_config(cfg: DictConfig, seed: int) -> DictConfig:
    """The config of the single-seed run that agent `seed` of a batched run is."""
    agent = OmegaConf.create(OmegaConf.to_container(cfg, resolve=True))
    assert isinstance(agent, DictConfig)
    agent.seed, agent.seeds = seed, 1
    return agent


def write_agent_hydra_dir(out_dir: Path, cfg: DictConfig, seed: int) -> None:
    """`.hydra/config.yaml` and `overrides.yaml` of agent `seed`, as its single-seed job would have them
    (the job's overrides with `seed`/`seeds` replaced by `seed=<this agent's seed>`)."""
    hydra_dir = agent_dir(out_dir, seed) / ".hydra"
    hydra_dir.mkdir(parents=True, exist_ok=True)
    (hydra_dir / "config.yaml").write_text(OmegaConf.to_yaml(agent_config(cfg, seed)))
    job_overrides = Path(out_dir) / ".hydra" / "overrides.yaml"
    overrides = yaml.safe_load(job_overrides.read_text()) if job_overrides.exists() else []
    kept = [o for o in overrides or [] if o.lstrip("+~").split("=", 1)[0] not in ("seed", "seeds")]
    (hydra_dir / "overrides.yaml").write_text(yaml.safe_dump(kept + [f"seed={seed}"]))


class Population:
    """`seeds` (one per agent), `num_envs` sub-envs per agent, and one `RunLogger` per agent."""

    def __init__(self, out_dir: Path, seeds: Sequence[int], num_envs: int, loggers: Sequence[RunLogger]):
        self.out_dir, self.seeds, self.num_envs = Path(out_dir), list(seeds), num_envs
        self.agents = len(self.seeds)
        self.loggers = list(loggers)
        self.agent_of_env = np.arange(self.agents * num_envs) // num_envs  # vector env index -> agent

    def dir(self, k: int) -> Path:
        return self.out_dir if self.agents == 1 else agent_dir(self.out_dir, self.seeds[k])

    def env_seeds(self, offset: int = 0) -> list[int]:
        """Seeds of all sub-envs: agent k's i-th env gets seed_k + offset + i."""
        return [s + offset + i for s in self.seeds for i in range(self.num_envs)]

    def store(self, buffer: Any, transitions: tuple, env_index: np.ndarray) -> None:
        """Add the transitions that vector envs `env_index` completed to their agents' replay."""
        if self.agents == 1:
            buffer.add(*transitions)
        else:
            buffer.add(self.agent_of_env[env_index], *transitions)

    def episodes_end(self, step: int, episodes: list[tuple[int, float, int]]) -> None:
        """(vector env index, return, length) of the episodes that ended in the vector step ending at env
        step `step`, each logged by its agent at its own env step (sub-env i makes env step
        step - num_envs + i + 1 of that vector step)."""
        ended: dict[int, list[tuple[int, float, int]]] = {}
        e = self.num_envs
        for i, ret, length in episodes:
            ended.setdefault(int(self.agent_of_env[i]), []).append((step - e + i % e + 1, ret, length))
        for agent, agent_episodes in ended.items():
            self.loggers[agent].episodes_end(step, agent_episodes)

    @property
    def all_solved(self) -> bool:
        return all(lg.solved is not None for lg in self.loggers)

    def log(self, step: int, common: dict[str, float], per_agent: dict[str, Any]) -> None:
        """`common` values for every agent; `per_agent` values are a list with one per agent (or a float
        for a single agent)."""
        for k, lg in enumerate(self.loggers):
            values = dict(common)
            values.update({tag: v[k] if isinstance(v, list) else v for tag, v in per_agent.items()})
            lg.scalars(step, values)

    def finish(
        self, step: int, status: str, online: Any, extra: dict[str, Any], plot_title: str | None
    ) -> dict[str, Any]:
        """Each agent's model.pt, summary.json and returns.png; the run's summary (with K > 1 also written
        to the run directory: the agents' summaries and their mean final return, which sweepers optimise)."""
        summaries = {}
        for k, (seed, lg) in enumerate(zip(self.seeds, self.loggers)):
            state = online.state_dict() if self.agents == 1 else online.agent_state_dict(k)
            with rundir.open_atomic(self.dir(k) / "model.pt") as f:
                torch.save(state, f)
            summaries[seed] = lg.close(step, status, extra)
            if plot_title is not None:
                lg.plot(f"{plot_title} seed={seed}")
        if self.agents == 1:
            return summaries[self.seeds[0]]
        finals = [s["final_mean_return_100"] for s in summaries.values() if s["final_mean_return_100"] is not None]
        summary = {
            "status": status,
            "seeds": self.seeds,
            "env_steps_per_agent": step,
            "final_mean_return_100": float(np.mean(finals)) if finals else None,
            "solved": sum(s["solved_step"] is not None for s in summaries.values()),
            "agents": {str(seed): s for seed, s in summaries.items()},
        }
        rundir.write_text(self.out_dir / "summary.json", json.dumps(summary, indent=2) + "\n")
        return summary
