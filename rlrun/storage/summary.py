"""summary.json, a run's result: its fields, and the one place that writes and reads it.

Three kinds, all of them `Summary`: a run's (also each agent's of a batched run, in its own directory;
`of_run`), a batched run's (`seeds=K` or a chunk of hydra/launcher=batched: `of_agents`, the agents' own
summaries under `agents`), and a failed sweep job's (`of_failure`: only `status` and `error`).

`Summary` is a TypedDict, not a dataclass: the file is a JSON object whose keys depend on its kind (a
failed job's has two; `device_max_memory_allocated_mb` only on CUDA), and a key that is null (no greedy
evaluation) is not one that is absent. A TypedDict is that object as it is, keys in the order written (so
the same bytes as ever), and what reads it (the CLI, logging backends, report, tests) keeps a plain dict.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Final, TypedDict, TypeVar, cast

import numpy as np

from rlrun.storage import bounded, rundir

T = TypeVar("T")

FILE = "summary.json"
EVAL: Final = "final_eval_return"
TRAIN: Final = "final_mean_return_100"
# Fields that readers compute with: a number, or null (`read` refuses anything else).
NUMBERS = (EVAL, TRAIN, "solved_step", "reward_threshold", "wall_time_s")
RETURN_DECIMALS = 2  # returns are written to this many decimals: a 100-episode mean of whole returns is exact


def rounded(value: float | None) -> float | None:
    """A return as summary.json holds it (`RETURN_DECIMALS`): 26.9 over 31 episodes, not 26.903225806451612."""
    return None if value is None else round(float(value), RETURN_DECIMALS)


class _Status(TypedDict):
    status: str  # finished, solved (stop_on_solve) or failed; the report calls a job with no file incomplete


class Summary(_Status, total=False):
    # A run's, in this order (`of_run`); then the loop's extras, then where the logging backends hold it.
    env_steps: int
    episodes: int
    final_mean_return_100: float | None  # the last 100 training episodes (exploration included); the objective
    best_mean_return_100: float | None
    final_eval_return: float | None  # the last greedy evaluation
    reward_threshold: float | None
    solved_step: int | None
    solved_episode: int | None
    wall_time_s: float  # the training loop's, resumed sessions included
    sps: float | None
    gradient_updates: int
    device_max_memory_allocated_mb: float  # on CUDA only
    error: str  # a failed run or job: why
    process_agents: int  # an agent of a batched run: the agents its process trained (its wall_time_s is theirs)
    logged_to: dict[str, Any]
    seeds: list[int]  # from here on: a batched run's (`of_agents`)
    env_steps_per_agent: int
    solved: int  # agents that solved
    failed: int  # agents stopped by a non-finite update
    agents: dict[str, Summary]  # each agent's own summary, by its seed (`seeds=K`) or its label


class DamagedJob(ValueError):
    """A job whose files cannot be read as a run of rlrun (the message says which file and why)."""


def of_run(
    *,
    status: str,
    env_steps: int,
    episodes: int,
    final_mean_return_100: float | None,
    best_mean_return_100: float | None,
    final_eval_return: float | None,
    reward_threshold: float | None,
    solved_step: int | None,
    solved_episode: int | None,
    wall_time_s: float,
    extra: Mapping[str, Any] | None = None,
) -> Summary:
    """A run's summary, its returns `rounded`; `extra` (the loop's `gradient_updates`, ..., or a stopped
    agent's `error`) follows."""
    fields = {
        "status": status,
        "env_steps": env_steps,
        "episodes": episodes,
        "final_mean_return_100": rounded(final_mean_return_100),
        "best_mean_return_100": rounded(best_mean_return_100),
        "final_eval_return": rounded(final_eval_return),
        "reward_threshold": reward_threshold,
        "solved_step": solved_step,
        "solved_episode": solved_episode,
        "wall_time_s": wall_time_s,
        "sps": env_steps / wall_time_s if wall_time_s > 0 else None,
        **(extra or {}),
    }
    return cast(Summary, fields)  # `extra` comes as a plain dict: its keys are among Summary's


def of_agents(status: str, seeds: list[int], steps: int, agents: dict[str, Summary], failed: int) -> Summary:
    """A batched run's summary: its agents' summaries and their mean final return (what sweepers optimise)."""
    finals = [final for s in agents.values() if (final := s.get(TRAIN)) is not None]
    return {
        "status": status,
        "seeds": seeds,
        "env_steps_per_agent": steps,
        "final_mean_return_100": rounded(float(np.mean(finals))) if finals else None,
        "solved": sum(s.get("solved_step") is not None for s in agents.values()),
        "failed": failed,
        "agents": agents,
    }


def of_failure(error: str) -> Summary:
    """A sweep job that failed: the sweep goes on, and the report lists it with `error`."""
    return {"status": "failed", "error": error}


def objective(summary: Mapping[str, Any] | None, kind: str = TRAIN) -> float | None:
    """What a job returns to sweepers (Optuna), as the config's `objective` says (`OBJECTIVES`): its final
    100-episode mean training return (a batched run's: its agents' mean), or `robust_score`. A failed job
    returns None (Optuna counts the trial failed), but under `robust` 0.0: none of its seeds solved and held
    it, which is that score's own worst, so a diverging trial steers the search away and never leaves it
    without a completed trial."""
    if summary is None or summary.get("status") == "failed":
        return 0.0 if kind == "robust" else None
    return robust_score(summary) if kind == "robust" else summary.get(TRAIN)


def robust_score(summary: Mapping[str, Any]) -> float | None:
    """A score for tuning a preset on many seeds at once (`seeds=K objective=robust`), rewarding the worst
    seeds rather than the lucky ones: the fraction of agents that solved and held it (the 100-episode mean
    reached the threshold, and the final 100-episode mean and the last greedy evaluation, where there is
    one, are still at it), plus a tie-break worth less than one agent: (1 - q80 / budget) / (K + 1), q80
    being the 80th percentile of the agents' steps to the threshold (an agent that never reached it counts
    the whole budget). In [0, 1 + 1/(K+1)); None without a threshold."""
    agents = list(summary.get("agents", {}).values()) or [summary]
    budget = summary.get("env_steps_per_agent") or summary.get("env_steps")
    threshold = agents[0].get("reward_threshold")
    if threshold is None or not budget:
        return None

    def held(a: Mapping[str, Any]) -> bool:
        final, last_eval = a.get(TRAIN), a.get(EVAL)
        return (
            a.get("solved_step") is not None
            and final is not None
            and final >= threshold
            and (last_eval is None or last_eval >= threshold)
        )

    steps = [a["solved_step"] if a.get("solved_step") is not None else budget for a in agents]
    q80 = float(np.percentile(steps, 80))
    return sum(map(held, agents)) / len(agents) + (1.0 - q80 / budget) / (len(agents) + 1)


OBJECTIVES = (TRAIN, "robust")  # the config's `objective`


def write(run_dir: Path, summary: Summary) -> None:
    """`<run_dir>/summary.json`, written whole or not at all (rlrun.storage.rundir)."""
    rundir.write_text(Path(run_dir) / FILE, json.dumps(summary, indent=2) + "\n")


def read(run_dir: Path) -> Summary:
    """`<run_dir>/summary.json`; a `DamagedJob` saying what is wrong if it is not a JSON object, or if a field
    of `NUMBERS` is neither a number nor null."""
    summary = read_file(Path(run_dir) / FILE, bounded.load_json, dict)
    for key in NUMBERS:
        value = summary.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))):
            raise DamagedJob(f"{FILE}: {key} is {value!r}, not a number")
    if not isinstance(summary.get("status"), (str, type(None))):
        raise DamagedJob(f"{FILE}: status is {summary['status']!r}, not a word")
    return cast(Summary, summary)  # its fields that readers compute with are checked above


def read_file(path: Path, load: Callable[[Path], object], kind: type[T]) -> T:
    """`path` read by `load` (rlrun.storage.bounded's `load_json` or `load_yaml`: within bounds), or a
    `DamagedJob` naming it (unreadable, beyond the bounds, or not a `kind`; jobtable's YAML too)."""
    try:
        value = load(path)
    except bounded.FileRefused as e:
        raise DamagedJob(f"{path.name} {e.reason}") from None
    if not isinstance(value, kind):
        raise DamagedJob(f"{path.name} holds a {type(value).__name__}, not a {kind.__name__}")
    return value
