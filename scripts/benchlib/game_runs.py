"""One run directory per (row, game, seed) under a bench's root, as the Atari benches keep them: named
`<row>__<game>__seed<seed>`, started, resumed or kept by `learn_each`, found again by `runs_under`."""

from __future__ import annotations

import re
import sys
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path

from rlrun.storage import runstate

from .common import run_learning, train_cmd

# a run set aside by `learn_each` (<name>.stopped-N) does not match
RUN_NAME = re.compile(r"(?P<row>.+)__(?P<game>[A-Za-z]+)__seed(?P<seed>\d+)")


def label_of(row: str, named: Mapping[str, Sequence[str]]) -> str:
    """A row's folder label: its name where `named` has it, else its overrides with no '=' (Hydra's override
    grammar refuses it in hydra.run.dir) and no '__'."""
    return row if row in named else re.sub(r"_+", "_", re.sub(r"[^A-Za-z0-9_.-]+", "_", row))


def run_dir(root: Path, label: str, game: str, seed: int) -> Path:
    return root / f"{label}__{game}__seed{seed}"


def learn_each(root: Path, jobs: Iterable[tuple[str, str, int, list[str]]]) -> None:
    """Each job (label, game, seed, the overrides of `rlrun.train`) one run by `learn_one`, one after another."""
    root.mkdir(parents=True, exist_ok=True)
    for label, game, seed, overrides in jobs:
        learn_one(run_dir(root, label, game, seed), overrides)


def learn_one(run: Path, overrides: list[str]) -> None:
    """The run in `run`: kept where finished, skipped where another process is training it (the other core's
    `learn`), resumed from its checkpoint where stopped, set aside and started anew with `overrides` where it
    stopped before its first checkpoint, else started."""
    now = runstate.state(run)
    if now in (runstate.DONE, runstate.FAILED):
        print(f"{run}: finished, kept", file=sys.stderr)
        return
    if runstate.in_use(run):
        print(f"{run}: in use by another process, skipped", file=sys.stderr)
        return
    if now == runstate.STOPPED:
        cmd = [sys.executable, "-m", "rlrun.resume", str(run)]
    else:
        set_aside_unfinished(run)
        cmd = train_cmd(overrides, str(run))
    run_learning(cmd, run)


def set_aside_unfinished(run_dir: Path) -> None:
    """A run that stopped before its first checkpoint cannot resume and a new run never reuses its folder:
    rename it (nothing is deleted) so the game starts anew under the same name."""
    if not run_dir.exists():
        return
    n = 1
    while (aside := run_dir.with_name(f"{run_dir.name}.stopped-{n}")).exists():
        n += 1
    run_dir.rename(aside)
    print(f"{run_dir}: stopped before its first checkpoint; set aside as {aside.name}, starting anew", file=sys.stderr)


def runs_under(root: Path) -> Iterator[tuple[str, str, int, Path]]:
    """(row label, game, seed, run directory) of every run `learn_each` named under `root`, sorted by name;
    none where `root` is no folder."""
    if not root.is_dir():
        return
    for run in sorted(p for p in root.iterdir() if p.is_dir()):
        match = RUN_NAME.fullmatch(run.name)
        if match is not None:
            yield match["row"], match["game"], int(match["seed"]), run
