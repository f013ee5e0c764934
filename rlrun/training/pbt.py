"""Population-based training (Jaderberg et al. 2017) of the K agents of one batched process.

Every `interval` env steps the agents are ranked by fitness (the last greedy evaluation, else the
100-episode training mean). Each agent of the bottom `fraction` copies a random agent of the top
`fraction`, inside the stacked tensors: online and target weights (noisy layers' sigmas included), and
its slices of the optimizer state. It then explores: each key of the space is multiplied by a factor of
`perturb`, or drawn afresh from its range with `resample_probability`, and kept in its range. Each agent
keeps its own replay, as in the paper. Exploit is a tensor copy between agent slots and explore a change
of a per-agent value, so a round costs next to nothing beside training.

An agent whose update turns non-finite is frozen (its gradients zeroed, as a batched run does) and ranked
last, so the next round replaces it; the run goes on. `pbt.csv` in the run directory holds one row per
event (the agents' first values at step 0, then each copy), the values per agent go to `pbt/<key>`.
"""

from __future__ import annotations

import csv
import io
import logging
import math
import time
from collections.abc import Callable, Sequence
from itertools import chain
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np
import torch

from rlrun.config.pbt import flat_space
from rlrun.errors import ConfigError, NonFiniteError
from rlrun.storage import rundir
from rlrun.storage.checkpoint import CheckpointError
from rlrun.training.parts import LoopSettings, group_lrs, set_group_lrs

if TYPE_CHECKING:
    from rlrun.algos.update import UpdateStep
    from rlrun.logs.logger import RunLogger
    from rlrun.nets.protocol import QNet

log = logging.getLogger(__name__)
CSV = "pbt.csv"


class Agents(Protocol):
    """The population as PBT ranks and records it (rlrun.training.population.Population): each agent's
    logger (its training returns) and the per-agent log."""

    @property
    def loggers(self) -> Sequence[RunLogger]: ...

    def log(self, step: int, common: dict[str, Any], per_agent: dict[str, Any]) -> None: ...


class Loop(Protocol):
    """The training loop as PBT changes it (rlrun.training.loop.Trainer): the agents' settings (lr, epsilon),
    the learner whose stacked agents it copies, the population, where the run writes and its step."""

    settings: LoopSettings
    out_dir: Path
    step: int

    @property
    def learner(self) -> UpdateStep: ...

    @property
    def population(self) -> Agents: ...


class PBT:
    """The population's exploit/explore rounds. `settings`: the `pbt` node as plain values; `initial`: each
    explored key's value per agent (from the config); `labels`: the agents' names (seed=S)."""

    def __init__(
        self,
        settings: dict[str, Any],
        seed: int,
        initial: dict[str, list[float]],
        labels: list[str],
        rule: Callable[[str, list[float]], None] | None = None,
    ):
        self.rule = rule  # a key's own rule (rlrun.config.validate.check_explored): values read from a checkpoint
        self.interval, self.fraction = int(settings["interval"]), float(settings["fraction"])
        self.fitness_kind, self.initial = settings["fitness"], settings["initial"]
        self.perturb, self.resample_probability = list(settings["perturb"]), float(settings["resample_probability"])
        self.space = flat_space(settings["space"])
        self.labels, self.agents = list(labels), len(labels)
        self.values = {key: [float(v) for v in initial[key]] for key in self.space}
        self.rng = np.random.default_rng([seed, 0x5B7])  # PBT's own stream: the agents' streams stay theirs
        self.events: list[list[Any]] = []  # pbt.csv's rows
        self.diverged: set[int] = set()
        self.eval_fitness: list[float] | None = None  # the last greedy evaluation's mean return per agent
        # Training fitness counts only episodes an agent finished since it last copied (its logger's
        # `episode` then); before its first such episode it has the fitness of the agent it copied.
        self.copied_at_episode = [0] * self.agents
        self.inherited: list[float | None] = [None] * self.agents
        self.seconds = 0.0  # wall time of the rounds (ranking, copies, perturbations, pbt.csv)

    # --- values ------------------------------------------------------------------------------------------
    def sample(self, key: str) -> float:
        b = self.space[key]
        if b["log"]:
            return float(math.exp(self.rng.uniform(math.log(b["low"]), math.log(b["high"]))))
        return float(self.rng.uniform(b["low"], b["high"]))

    def explore(self, key: str, value: float) -> float:
        """A perturbed (or, with resample_probability, fresh) value within the key's range."""
        b = self.space[key]
        if self.rng.random() < self.resample_probability:
            return self.sample(key)
        factor = self.perturb[int(self.rng.integers(len(self.perturb)))]
        return float(min(max(value * factor, b["low"]), b["high"]))

    def apply(self, loop: Loop, agents: list[int]) -> None:
        """Put the agents' current values into the loop's settings, the optimizer and the learner."""
        s, learner = loop.settings, loop.learner
        for key, values in self.values.items():
            for k in agents:
                if key == "optimizer.lr":
                    per_agent(s.lr)[k] = values[k]
                elif key == "algo.tau":
                    learner.set_tau(k, values[k])
                elif key == "exploration.end":
                    per_agent(s.epsilon_end)[k] = values[k]
        if "optimizer.lr" in self.values:
            # one group per agent (rlrun.training.agents.values)
            set_group_lrs(learner.optimizer, group_lrs(s.lr, s.lr_end_factor, s.total_steps, loop.step))

    # --- rounds ------------------------------------------------------------------------------------------
    def fitness(self, population: Agents) -> list[float]:
        if self.eval_fitness is not None and self.fitness_kind in ("eval", "auto"):
            found: list[float | None] = list(self.eval_fitness)
        else:
            found = [self.training_fitness(k, lg) for k, lg in enumerate(population.loggers)]
        return [-math.inf if k in self.diverged or f is None else float(f) for k, f in enumerate(found)]

    def training_fitness(self, k: int, logger: RunLogger) -> float | None:
        """The mean return of agent k's last 100 training episodes, counting only those since it last copied."""
        since = min(logger.episode - self.copied_at_episode[k], len(logger.window))
        return float(np.mean(list(logger.window)[-since:])) if since > 0 else self.inherited[k]

    def start(self, loop: Loop) -> None:
        """A new run: each agent's first values (drawn from the space, or the config's), rows at step 0."""
        if self.initial == "sample":
            self.values = {key: [self.sample(key) for _ in range(self.agents)] for key in self.space}
        self.apply(loop, list(range(self.agents)))
        for k in range(self.agents):
            self.record(0, k, k)
        self.write(loop.out_dir)
        self.log_values(loop.population, 0, None)

    def round(self, loop: Loop, step: int) -> None:
        """Rank, then the bottom agents copy top ones and explore."""
        began = time.perf_counter()
        fit = self.fitness(loop.population)
        if all(f == -math.inf for f in fit):
            return  # nobody has a fitness yet (no episode ended)
        order = sorted(range(self.agents), key=lambda k: (-fit[k], k))
        n = max(1, int(self.agents * self.fraction))
        top = order[:n]
        bottom = sorted(set(order[-n:]) | (self.diverged - set(top)))
        copied = []
        for dst in bottom:
            src = top[int(self.rng.integers(n))]
            self.copy(loop.learner, src, dst)
            self.copied_at_episode[dst], self.inherited[dst] = loop.population.loggers[dst].episode, fit[src]
            if self.eval_fitness is not None:  # until its next evaluation, its source's
                self.eval_fitness[dst] = self.eval_fitness[src]
            for key in self.space:
                self.values[key][dst] = self.explore(key, self.values[key][src])
            self.record(step, dst, src, fit[dst], fit[src])
            copied.append(f"{self.labels[dst]}<-{self.labels[src]}")
        self.apply(loop, bottom)
        self.write(loop.out_dir)
        self.seconds += time.perf_counter() - began
        self.log_values(loop.population, step, fit)
        log.info(f"rlrun: PBT at env step {step:,}: {', '.join(copied)}")

    def copy(self, learner: UpdateStep, src: int, dst: int) -> None:
        """Agent dst becomes agent src: online and target weights, optimizer state (its explored values are
        src's explored: `round`)."""
        for net in (learner.online, learner.target):
            if net is not None:
                copy_agent(net, src, dst, self.agents)
        copy_optimizer_state(learner.optimizer, src, dst, self.agents)
        if learner.failed is not None:
            learner.failed[dst] = False  # a frozen (non-finite) agent trains again as its copy
        self.diverged.discard(dst)

    def take_failures(self, learner: UpdateStep, step: int) -> None:
        """Agents whose update turned non-finite (the learner's `failures`): frozen by the learner, ranked last
        until the next round replaces them. A NonFiniteError once every agent has."""
        for k, reason, _ in learner.failures:
            self.diverged.add(k)
            log.warning(f"rlrun: {self.labels[k]}: {reason} at env step {step:,}; PBT replaces it at its next round")
        learner.failures.clear()
        if len(self.diverged) == self.agents:
            raise NonFiniteError(f"every agent turned non-finite (the last at env step {step})")

    # --- records -----------------------------------------------------------------------------------------
    def record(self, step: int, dst: int, src: int, fit: float | str = "", src_fit: float | str = "") -> None:
        """A row of pbt.csv: agent dst's values from `step` on, copied from src (at step 0 its own first ones)."""
        values = [self.values[key][dst] for key in self.space]
        self.events.append([step, self.labels[dst], self.labels[src], fit, src_fit, *values])

    def write(self, out_dir: Path) -> None:
        text = io.StringIO()
        writer = csv.writer(text, lineterminator="\n")
        writer.writerow(["env_step", "agent", "copied_from", "fitness", "source_fitness", *self.space])
        writer.writerows(self.events)
        rundir.write_text(Path(out_dir) / CSV, text.getvalue())

    def log_values(self, population: Agents, step: int, fit: list[float] | None) -> None:
        per_agent: dict[str, Any] = {f"pbt/{key}": list(values) for key, values in self.values.items()}
        if fit is not None:
            per_agent["pbt/fitness"] = [f if math.isfinite(f) else float("nan") for f in fit]
        population.log(step, {}, per_agent)

    def lineage(self, k: int) -> list[tuple[int, str, dict[str, float]]]:
        """Agent k's schedule: (env step, the slot it came from, its values from then on), oldest first,
        following each copy back to the agent it copied."""
        label, found = self.labels[k], []
        for step, agent, source, _, _, *values in reversed(self.events):
            if agent == label:
                found.append((int(step), source, dict(zip(self.space, map(float, values)))))
                label = source
                if int(step) == 0:
                    break
        return found[::-1]

    def best_line(self, population: Agents) -> str:
        fit = self.fitness(population)
        best = max(range(self.agents), key=lambda k: (fit[k], -k))
        parts = [
            f"{step:,}: " + ", ".join(f"{key} {value:.3g}" for key, value in values.items())
            for step, _, values in self.lineage(best)
        ]
        return f"rlrun: PBT best agent {self.labels[best]} (fitness {fit[best]:.1f}); its schedule: " + "; ".join(parts)

    def state_dict(self) -> dict[str, Any]:
        return {
            "values": {k: list(v) for k, v in self.values.items()},
            "rng": self.rng.bit_generator.state,
            "events": [list(e) for e in self.events],
            "diverged": sorted(self.diverged),
            "eval_fitness": self.eval_fitness,
            "seconds": self.seconds,
            "copied_at_episode": list(self.copied_at_episode),
            "inherited": list(self.inherited),
        }

    # --- a checkpoint's state, checked before it is loaded ---------------------------------------------------
    def check_state(self, state: object) -> None:
        """A CheckpointError naming what in a checkpoint's PBT state does not fit this run: each field of the
        right shape for it (its explored keys, agents and their labels), each explored value one its key's own
        rule allows. A crafted or damaged state would otherwise end in a traceback, fail only at the end of
        training, or train with a value the key refuses (an lr of -1: gradient ascent)."""
        problem = self.problem(state)
        if problem is not None:
            raise CheckpointError(f"the checkpoint's PBT state does not fit this run: {problem}")

    def problem(self, state: object) -> str | None:
        """What in a checkpoint's PBT state does not fit this run, or None."""
        if not isinstance(state, dict):
            return f"it is {type(state).__name__}, not the state of a run with +pbt"
        missing = [key for key in self.state_dict() if key not in state]
        if missing:
            return "no " + ", ".join(missing)
        values = self._values_problem(state["values"])
        if values is not None:
            return values
        try:
            np.random.default_rng().bit_generator.state = state["rng"]
        except (TypeError, ValueError, KeyError):
            return f"rng is {_shown(state['rng'])}, not the state of PBT's random stream"
        return self._records_problem(state)

    def _values_problem(self, values: object) -> str | None:
        """The explored values: one finite number per agent for each explored key, each one its rule allows."""
        if not isinstance(values, dict) or sorted(values) != sorted(self.space):
            return f"values are for {_shown(values)}, not for the keys explored ({', '.join(self.space)})"
        for key, found in values.items():
            if not _numbers(found, self.agents):
                return f"values[{key}] is {_shown(found)}, not {self.agents} finite numbers (one per agent)"
            try:
                if self.rule is not None:
                    self.rule(key, found)
            except ConfigError as e:
                return f"values[{key}] holds {e.value}, which {e.key}'s own rule refuses (allowed {e.allowed})"
        return None

    def _records_problem(self, state: dict[str, Any]) -> str | None:
        """The events (pbt.csv's rows), the frozen agents, the fitnesses and the wall time."""
        k, width = self.agents, 5 + len(self.space)
        events = state["events"]
        if not isinstance(events, list) or not all(self._event_fits(e, width) for e in events):
            return f"events hold {_shown(events)}, not rows of {width} fields (step, agent, source, fitnesses, values)"
        diverged = state["diverged"]
        if not isinstance(diverged, list) or not all(_integer(a) and 0 <= a < k for a in diverged):
            return f"diverged is {_shown(diverged)}, not agent numbers below {k}"
        if state["eval_fitness"] is not None and not _numbers(state["eval_fitness"], k, finite=False):
            return f"eval_fitness is {_shown(state['eval_fitness'])}, not None or {k} numbers"
        if not _numbers([state["seconds"]], 1) or state["seconds"] < 0:
            return f"seconds is {_shown(state['seconds'])}, not a number >= 0"
        copied = state["copied_at_episode"]
        if not isinstance(copied, list) or len(copied) != k or not all(_integer(e) and e >= 0 for e in copied):
            return f"copied_at_episode is {_shown(copied)}, not {k} episode counts"
        inherited = state["inherited"]
        known = [f for f in inherited if f is not None] if isinstance(inherited, list) else None
        if not isinstance(inherited, list) or len(inherited) != k or not _numbers(known, None, finite=False):
            return f"inherited is {_shown(inherited)}, not {k} fitnesses (or None)"
        return None

    def _event_fits(self, row: object, width: int) -> bool:
        """A pbt.csv row: env step, agent and source labels, fitnesses ("" at step 0), the explored values."""
        if not isinstance(row, list) or len(row) != width or not _integer(row[0]) or row[0] < 0:
            return False
        fitness = [f for f in row[3:5] if f != ""]
        labelled = row[1] in self.labels and row[2] in self.labels
        return labelled and _numbers(fitness, None, finite=False) and _numbers(row[5:], None)

    def load_state_dict(self, state: dict[str, Any], loop: Loop) -> None:
        self.values = {k: list(v) for k, v in state["values"].items()}
        self.rng.bit_generator.state = state["rng"]
        self.events = [list(e) for e in state["events"]]
        self.diverged = set(state["diverged"])
        self.eval_fitness = state["eval_fitness"]
        self.seconds = state["seconds"]
        self.copied_at_episode, self.inherited = list(state["copied_at_episode"]), list(state["inherited"])
        self.apply(loop, list(range(self.agents)))
        self.write(loop.out_dir)  # without the rows an interrupted session wrote after its checkpoint


def per_agent(value: float | list[float]) -> list[float]:
    """A setting PBT explores: one value per agent (rlrun.training.agents gives it a list)."""
    assert isinstance(value, list), "PBT explores a setting only where each agent has its own value"
    return value


def _integer(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _numbers(values: object, length: int | None, finite: bool = True) -> bool:
    """A list of real numbers (not bools or strings) of `length` (any for None), finite unless not asked."""
    if not isinstance(values, list) or (length is not None and len(values) != length):
        return False
    real = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values)
    return real and (not finite or all(math.isfinite(v) for v in values))


def _shown(value: object) -> str:
    """A value read from a checkpoint as a message shows it: its repr, cut short."""
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


@torch.no_grad()
def copy_agent(net: QNet, src: int, dst: int, agents: int) -> None:
    """Agent dst's slice of every stacked parameter and buffer (a leading agent axis) := agent src's."""
    for name, t in chain(net.named_parameters(), net.named_buffers()):
        if name != "support" and t.dim() > 0 and t.shape[0] == agents:
            t[dst] = t[src]


@torch.no_grad()
def copy_optimizer_state(optimizer: torch.optim.Optimizer, src: int, dst: int, agents: int) -> None:
    """Agent dst's optimizer state := agent src's: in per-agent param groups (rlrun.training.agents.agent_param_groups:
    views of the stacked tensors) the state of dst's views, in one group over the stacked tensors their slices."""
    views: dict[tuple[int, int], tuple[torch.Tensor, int]] = {}  # (stacked tensor, agent) -> (view, row in it)
    for group in optimizer.param_groups:
        if "parts" not in group:
            for p in group["params"]:
                for v in optimizer.state.get(p, {}).values():
                    if isinstance(v, torch.Tensor) and v.dim() > 0 and v.shape[0] == agents:
                        v[dst] = v[src]
            continue
        for view, (i, first, end) in zip(group["params"], group["parts"]):
            for k in range(first, end):
                views[(i, k)] = (view, k - first)
    for (i, k), (view, row) in views.items():
        if k != dst:
            continue
        source, source_row = views[(i, src)]
        to, frm = optimizer.state.get(view), optimizer.state.get(source)
        if not to or not frm:
            continue
        for key, value in to.items():
            if isinstance(value, torch.Tensor) and value.dim() > 0:
                value[row] = frm[key][source_row]
            elif isinstance(value, torch.Tensor):
                value.copy_(frm[key])
