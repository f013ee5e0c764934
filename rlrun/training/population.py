"""The K >= 1 agents of a run: their seeds, where each writes, and how results leave the loop per agent.

Agent k is, step for step, the single run of its own config (rlrun.training.agents: seed `seed + k` with
`seeds=K`, or the values of its `agents` entry): its network initialised after seeding torch with its
seed, its sub-envs seeded `seed_k + i`, its epsilon-greedy draws and replay sampling from its own
generators. With K = 1 the agent writes into the run directory; with K > 1 each agent writes what a
single run writes (TensorBoard events, episodes.csv, summary.json, returns.png, model.pt and a `.hydra/`
with its own config) into its own directory (`<run dir>/seed=<S>/`, or its entry's values as path parts,
or the entry's `dir`), so TensorBoard, `rlrun.report` and `rlrun.evaluate` treat the agents as K single
runs. The checkpoint (all agents together) stays in the run directory. An agent whose update turns
non-finite stops alone (`Population.stop_agent`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import numpy as np
import torch
import yaml

from rlrun.config.overrides import override_key
from rlrun.logs.logger import RunLogger
from rlrun.storage import bounded, rundir, summary as run_summary
from rlrun.storage.summary import Summary

if TYPE_CHECKING:
    from rlrun.nets.protocol import QNet, StackedQNet
    from rlrun.replay import Replay
    from rlrun.training.pbt import PBT

log = logging.getLogger(__name__)


def run_overrides(out_dir: Path) -> list[str]:
    """The run's own command-line overrides (`.hydra/overrides.yaml`), read once for all its agents."""
    job_overrides = Path(out_dir) / ".hydra" / "overrides.yaml"
    return (bounded.load_yaml(job_overrides) if job_overrides.exists() else None) or []


def write_agent_hydra_dir(agent_dir: Path, config_yaml: str, values: dict[str, Any], overrides: list[str]) -> None:
    """`.hydra/config.yaml` and `overrides.yaml` of an agent (its config and own `values`), as its single job
    would have them (the run's `overrides` with `seed`/`seeds`/`agents` replaced by the agent's own values).
    An agent directory that already has them (a job directory that hydra/launcher=batched prepared for this
    agent: rlrun.storage.agent_dirs) keeps its own."""
    hydra_dir = Path(agent_dir) / ".hydra"
    if (hydra_dir / "config.yaml").exists():
        return
    hydra_dir.mkdir(parents=True, exist_ok=True)
    rundir.write_text(hydra_dir / "config.yaml", config_yaml)
    own = ("seed", "seeds", "agents", *values)
    kept = [o for o in overrides if override_key(o) not in own]
    rundir.write_text(hydra_dir / "overrides.yaml", yaml.safe_dump(kept + [f"{key}={v}" for key, v in values.items()]))


def _spread(values: list[float]) -> str:
    """One figure for the agents: the value of one, or the mean of several with their lowest..highest."""
    if len(values) <= 1:
        return f"{values[0]:.1f}" if values else "-"
    return f"{np.mean(values):.1f} ({min(values):.1f}..{max(values):.1f})"


class ProgressLines:
    """The plain progress lines of a run whose bar does not show (stderr not a terminal: nohup, Slurm,
    `docker logs`, CI; or log.progress_bar=false): one line for all agents every `interval` seconds of wall
    time, on their own clock whatever `log.interval` is (`due`, asked at each vector step; 0: one at every
    log instead), and at the last step. The total is the steps the run takes: `total_steps` rounded up to
    whole steps of the `vector` envs each agent steps at once (5,008 for 5,000 with 16 envs), so the last
    line reads `5,008/5,008 (100%)`, never past its total."""

    def __init__(self, total_steps: int, start_step: int, interval: float, vector: int = 1):
        self.total, self.interval = -(-total_steps // vector) * vector, interval
        self.last_time, self.last_step = time.perf_counter(), start_step

    def due(self) -> bool:
        """Whether a line is due between logs: `interval` seconds have passed since the last one."""
        return self.interval > 0 and time.perf_counter() - self.last_time >= self.interval

    def line(self, step: int, loggers: Sequence[RunLogger]) -> str | None:
        now = time.perf_counter()
        if now - self.last_time < self.interval and step < self.total:
            return None
        rate = (step - self.last_step) / max(now - self.last_time, 1e-9)  # env steps per agent per second
        self.last_time, self.last_step = now, step
        eta = int(max(self.total - step, 0) / rate) if rate > 0 else None
        means = [m for m in (lg.mean_return for lg in loggers) if m is not None]
        evals = [e for e in (lg.last_eval for lg in loggers) if e is not None]
        agents = f" ({len(loggers)} agents)" if len(loggers) > 1 else ""
        return (
            f"rlrun: step {step:,}/{self.total:,} ({min(step / self.total, 1):.0%}), "
            f"{sum(lg.episode for lg in loggers):,} episodes{agents}, ret100 {_spread(means)}, "
            f"eval {_spread(evals)}, {rate:,.0f} step/s, "
            f"ETA {'-' if eta is None else f'{eta // 3600}:{eta // 60 % 60:02d}:{eta % 60:02d}'}"
        )


class Population:
    """`seeds` (one per agent), `num_envs` sub-envs per agent, one `RunLogger` per agent (writing into the
    agent's directory) and, with K > 1, each agent's name (`labels`; default `seed=<S>`).

    An agent whose update turned non-finite is stopped alone (`stop_agent`): its files are closed with
    status `failed` and a `nonfinite.pt`, it logs nothing more, and the others train on."""

    def __init__(
        self,
        out_dir: Path,
        seeds: Sequence[int],
        num_envs: int,
        loggers: Sequence[RunLogger],
        labels: Sequence[str] | None = None,
        pbt: PBT | None = None,
    ):
        self.out_dir, self.seeds, self.num_envs = Path(out_dir), list(seeds), num_envs
        self.agents = len(self.seeds)
        self.loggers = list(loggers)
        start = min((lg.start_time for lg in self.loggers), default=0.0)
        for lg in self.loggers:  # the agents share the process: one start, one end (finish), one wall time
            lg.start_time = start
        self.agent_of_env = np.arange(self.agents * num_envs) // num_envs  # vector env index -> agent
        self.labels = list(labels) if labels is not None else [f"seed={s}" for s in self.seeds]
        self.failed: dict[int, str] = {}  # agent -> why it stopped
        self.failed_summaries: dict[int, Summary] = {}
        self.lines: ProgressLines | None = None  # set by `watch`
        self.pbt = pbt  # population-based training of the agents (rlrun.training.pbt), or None

    def watch(self, total_steps: int, start_step: int, interval: float) -> None:
        """Print plain progress lines (`ProgressLines`, through logging: the console and train.log) where
        the progress bar does not show."""
        if self.loggers[0].bar.disable:
            self.lines = ProgressLines(total_steps, start_step, interval, self.num_envs)

    def env_seeds(self) -> list[int]:
        """Seeds of all sub-envs: agent k's i-th env gets seed_k + i."""
        return [s + i for s in self.seeds for i in range(self.num_envs)]

    def store(self, buffer: Replay, transitions: tuple, env_index: np.ndarray) -> None:
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
            if agent not in self.failed:
                self.loggers[agent].episodes_end(step, agent_episodes)

    @property
    def all_solved(self) -> bool:
        return all(lg.solved is not None for k, lg in enumerate(self.loggers) if k not in self.failed)

    def log(self, step: int, common: dict[str, Any], per_agent: dict[str, Any]) -> None:
        """`common` values for every agent; `per_agent` values are a list with one per agent (or a float
        for a single agent). A value of `common` that differs per agent (a per-agent epsilon) is an array."""
        for k, lg in enumerate(self.loggers):
            if k in self.failed:
                continue
            values = {tag: float(np.ravel(v)[k]) if isinstance(v, np.ndarray) else v for tag, v in common.items()}
            values.update({tag: v[k] if isinstance(v, list) else v for tag, v in per_agent.items()})
            lg.scalars(step, values)

    def progress(self, step: int, sps: float) -> None:
        """At every log: each agent's speed and flushed episodes.csv, agent 0's bar, a progress line when due."""
        for k, lg in enumerate(self.loggers):
            if k not in self.failed:
                lg.progress(step, sps)
        self.progress_line(step)

    def progress_line(self, step: int) -> None:
        """A progress line where one is due (`ProgressLines.line`): at a log, or between logs (`ProgressLines.due`)."""
        live = [lg for k, lg in enumerate(self.loggers) if k not in self.failed]
        line = self.lines.line(step, live) if self.lines is not None and live else None
        if line is not None:
            log.info(line)

    def stop_agent(self, k: int, step: int, reason: str, state: dict[str, dict[str, torch.Tensor]]) -> None:
        """Agent k's update turned non-finite: its state before that update goes to its own `nonfinite.pt`,
        its model.pt and summary.json (status `failed`, with `error`) are written, and it stops logging."""
        lg = self.loggers[k]
        where = lg.out_dir / "nonfinite.pt"
        with rundir.open_atomic(where) as f:
            torch.save(state, f)
        message = f"{reason} at env step {step}; the state before this update is in {where}"
        self.failed[k] = message
        with rundir.open_atomic(lg.out_dir / "model.pt") as f:
            torch.save(state["online"], f)
        self.failed_summaries[k] = lg.close(step, "failed", {"error": message, **self.shared()})

    def shared(self) -> dict[str, int]:
        """In each agent's summary of a batched run: how many agents shared the process (and its wall time)."""
        return {"process_agents": self.agents} if self.agents > 1 else {}

    def finish(
        self, step: int, status: str, online: QNet, extra: dict[str, Any], plot_title: str | None
    ) -> dict[str, Any]:
        """Each agent's model.pt, summary.json and returns.png; the run's summary (with K > 1 also written
        to the run directory: the agents' summaries and their mean final return, which sweepers optimise)."""
        summaries: dict[int, Summary] = {}
        now = time.perf_counter()  # before any agent's files are written: every agent's wall time ends here
        for k, lg in enumerate(self.loggers):
            if k in self.failed:  # stopped in this session, or in an earlier one of a resumed run
                summaries[k] = self.failed_summaries.get(k) or run_summary.read(lg.out_dir)
                continue
            state = online.state_dict() if self.agents == 1 else cast("StackedQNet", online).agent_state_dict(k)
            with rundir.open_atomic(lg.out_dir / "model.pt") as f:
                torch.save(state, f)
            summaries[k] = lg.close(step, status, {**extra, **self.shared()}, now=now)
            if plot_title is not None:
                lg.plot(f"{plot_title} {self.labels[k]}")
        if self.agents == 1:
            return dict(summaries[0])
        agents = {self.key(k): s for k, s in summaries.items()}
        summary = run_summary.of_agents(status, self.seeds, step, agents, len(self.failed))
        run_summary.write(self.out_dir, summary)
        return dict(summary)

    def key(self, k: int) -> str:
        """Agent k's key in the run summary: its seed (`seeds=K`), else its label."""
        return str(self.seeds[k]) if self.labels[k] == f"seed={self.seeds[k]}" else self.labels[k]
