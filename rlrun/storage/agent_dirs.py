"""Where the agents of a run write: each agent's directory, checked before anything is written there.

Nothing read from disk chooses where rlrun writes, and no run writes over another, through an agent's
directory either (rlrun.training.agents: its entry's `dir`, or its label). An agent's directory lies inside the
run's root: the run directory, or, for a group of the batched launcher (`<sweep dir>/.batched/<group>`),
the sweep directory that holds its jobs. A `dir` is relative to the run directory (the launcher stores
`../../optimizer.lr=0.001/seed=0`, so a copied sweep resumes into its own job directories); an absolute
one must lie inside the root too (a checkpoint from before relative dirs, or a path typed on the command
line). A directory on the way from the root that is a symlink is refused.

A new run's agent directory must be new or empty (`rundir.check_new`), or a job directory that the batched
launcher prepared for this very agent (nothing but `.hydra/`, holding the agent's config). A resumed run's
must hold this agent's run: its `.hydra/config.yaml` is the agent's config (`same_run`). Each agent
directory is then owned by this process (`rundir.claim`), as the run directory is.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rlrun.config.saved import RESUME_SAFE, rebuilt
from rlrun.errors import ConfigError
from rlrun.storage import bounded, rundir

GROUPS = ".batched"  # the batched launcher's group run directories: <sweep dir>/.batched/<group>
PREPARED = {"config.yaml", "hydra.yaml", "overrides.yaml"}  # the `.hydra/` the launcher writes into a job dir
# Keys that a resumed run may change (rlrun.config.saved.RESUME_SAFE) and how many agents share a process: an
# agent directory holds this agent's run when its config and the agent's agree on all others.
NOT_IDENTITY = (*RESUME_SAFE, "seeds", "agents")


def root(out_dir: Path) -> Path:
    """The directory the run's agent directories must stay in."""
    out_dir = Path(os.path.abspath(out_dir))
    return out_dir.parent.parent if out_dir.parent.name == GROUPS else out_dir


def check(
    names: list[str], expected_config: Callable[[int], dict], listed: bool, out_dir: Path, new: bool
) -> list[Path]:
    """Each agent's directory (absolute, normalised) once it passes the checks above; ConfigError (naming
    `agents[k].dir`, or `resume` for a run of `seeds=K`) for the first that does not. `names`: the agents'
    directories relative to the run (rlrun.training.agents.agent_names); `expected_config(k)`: agent k's
    config as a plain dict; `listed`: whether the run has an `agents` list (else `seeds=K`)."""
    if len(names) < 2:
        return []
    top, run = root(out_dir), Path(os.path.abspath(out_dir))
    dirs = []
    for k, name in enumerate(names):
        where = Path(os.path.normpath(run / name))
        key = f"agents[{k}].dir" if listed else "resume"
        shown = name if listed else str(run)
        if not where.is_relative_to(top) or where in (top, run):
            inside = f"{top} (the sweep of group {run.name})" if top != run else str(run)
            raise ConfigError(key, shown, f"a directory below {inside}; {where} is not")
        link = rundir.linked_part(where, top)
        if link is not None:
            raise ConfigError(
                key, shown, f"a directory, not a symlink ({link} is one); rlrun never writes through links"
            )
        expected = expected_config(k) if where.exists() else None
        if new and (expected is None or not prepared(where, expected)):
            try:
                rundir.check_new(where)
            except rundir.RunDirError as e:
                raise ConfigError(key, shown, f"a new or empty directory for agent {k} ({e})") from None
        if not new and (expected is None or not same_run(where, expected)):
            raise ConfigError(
                key, shown, f"the directory of this run's agent {k}; {where} does not hold it (its .hydra/config.yaml)"
            )
        dirs.append(where)
    return dirs


def prepared(where: Path, expected: dict) -> bool:
    """A job directory that the batched launcher made for this agent: only its `.hydra/`, with its config."""
    if not where.is_dir() or where.is_symlink():
        return False
    found = {p.name for p in where.iterdir()} - {rundir.LOCK_NAME}
    hydra = where / ".hydra"
    if found != {".hydra"} or hydra.is_symlink() or not hydra.is_dir():
        return False
    return {p.name for p in hydra.iterdir()} <= PREPARED and same_run(where, expected)


def same_run(where: Path, expected: dict) -> bool:
    """Whether `where/.hydra/config.yaml` is the config of the agent whose config is `expected`, on every key
    but those a resume may change (`NOT_IDENTITY`)."""
    saved_file = where / ".hydra" / "config.yaml"
    if where.is_symlink() or not saved_file.is_file() or saved_file.is_symlink():
        return False
    try:
        saved = bounded.load_yaml(saved_file)
    except bounded.FileRefused:
        return False
    if not isinstance(saved, dict):
        return False
    if _identity(saved) == _identity(expected):
        return True
    try:  # a run made by an older rlrun: its config lacks keys the schema has gained since
        return _identity(rebuilt(saved)) == _identity(rebuilt(expected))
    except ConfigError:
        return False


def _identity(plain: object) -> dict[str, Any]:
    return {k: v for k, v in plain.items() if k not in NOT_IDENTITY} if isinstance(plain, dict) else {}


def batched_group(job_dir: Path) -> Path | None:
    """The `<sweep>/.batched/jobs<a>-<b>` whose checkpoint holds this job of a batched sweep (the job's
    number, from its `.hydra/hydra.yaml`, is in a..b), or None."""
    sweep = next((p for p in job_dir.absolute().parents if (p / ".batched").is_dir()), None)
    try:
        num = int(bounded.load_yaml(job_dir / ".hydra" / "hydra.yaml")["hydra"]["job"]["num"])
    except (bounded.FileRefused, KeyError, TypeError, ValueError):
        return None
    for group in sorted((sweep / ".batched").glob("jobs*")) if sweep is not None else []:
        first, _, last = group.name.removeprefix("jobs").partition("-")
        if first.isdigit() and (last or first).isdigit() and int(first) <= num <= int(last or first):
            return group
    return None
