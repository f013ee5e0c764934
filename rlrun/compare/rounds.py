"""Rounds of seeds: each arm's round is one batched run (`seeds=K`, rlrun.training.population) kept as an
ordinary run directory, `<comparison>/<arm>/seeds<a>-<b>`. A round already finished is read again, one
stopped with a checkpoint is continued with `python -m rlrun.resume`, so rerunning the comparison's command
goes on where it stopped.

The plan (both arms' overrides, the shared ones, the metric, seeds per round, the budget, alpha, the first
seed) is kept in `<comparison>/plan.json`: a rerun with another plan is refused, since the looks' levels
and the rounds' seeds depend on it.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from types import FrameType

from rlrun.config.preflight import hydra_quote
from rlrun.errors import Exit
from rlrun.storage import bounded, rundir, runstate, summary as run_summary

PLAN = "plan.json"
ARMS = ("A", "B")


@dataclass(frozen=True)
class Plan:
    a: list[str]
    b: list[str]
    common: list[str]
    metric: str
    seeds: int  # per round
    max_seeds: int
    alpha: float
    first_seed: int
    version: int = 1

    def arm(self, name: str) -> list[str]:
        return self.a if name == "A" else self.b

    def rounds(self) -> list[tuple[int, int]]:
        """(first seed, seeds) of each round."""
        return [
            (self.first_seed + start, min(self.seeds, self.max_seeds - start))
            for start in range(0, self.max_seeds, self.seeds)
        ]

    def round_dir(self, root: Path, arm: str, first: int, n: int) -> Path:
        return root / arm / f"seeds{first}-{first + n - 1}"

    def overrides(self, arm: str, first: int, n: int) -> list[str]:
        """The round's training overrides, as its .hydra/overrides.yaml records them."""
        return [*self.arm(arm), *self.common, f"seed={first}", f"seeds={n}"]

    def train_command(self, root: Path, arm: str, first: int, n: int) -> list[str]:
        out = str(self.round_dir(root, arm, first, n))
        plain = re.fullmatch(r"[\w./-]+", out)  # else quoted for Hydra's override grammar ('=', spaces, ...)
        return [
            "-m",
            "rlrun.train",
            *self.overrides(arm, first, n),
            f"hydra.run.dir={out if plain else hydra_quote(out)}",
        ]


class RoundError(Exception):
    """A round that cannot be run or read (the message says which and what to do); `code` is the exit code."""

    def __init__(self, message: str, code: int = Exit.FAILED):
        super().__init__(message)
        self.code = code


def saved_plan(root: Path) -> Plan | None:
    path = root / PLAN
    if not path.exists():
        return None
    try:
        return Plan(**bounded.load_json(path))
    except (ValueError, TypeError) as e:  # bounded.FileRefused is a ValueError
        raise RoundError(f"{path} is not a comparison's plan ({e}); choose another name=", Exit.BAD_INPUT) from None


def check_plan(root: Path, plan: Plan) -> None:
    """Refuse a folder that holds another comparison (RoundError, exit 2), files not of a comparison, or a link
    where a round would be written (an arm's folder or a round's run linked elsewhere: rlrun never writes
    through a link)."""
    rounds = [plan.round_dir(root, arm, first, n) for first, n in plan.rounds() for arm in ARMS]
    try:
        rundir.check_unlinked(rounds, root)
    except rundir.RunDirError as e:
        raise RoundError(str(e), Exit.BAD_INPUT) from None
    saved = saved_plan(root)
    if saved is not None and saved != plan:
        changed = [k for k, v in asdict(plan).items() if asdict(saved).get(k) != v]
        raise RoundError(
            f"{root} holds a comparison with other settings ({', '.join(changed)} differ: "
            f"{', '.join(f'{k}={asdict(saved)[k]}' for k in changed)}); rerun it as it was, or choose another name=",
            Exit.BAD_INPUT,
        )
    if saved is None and root.exists() and any(root.iterdir()):
        raise RoundError(f"{root} is not empty and holds no comparison; choose another name=", Exit.BAD_INPUT)


def write_plan(root: Path, plan: Plan) -> None:
    if saved_plan(root) is None:
        root.mkdir(parents=True, exist_ok=True)
        rundir.write_text(root / PLAN, json.dumps(asdict(plan), indent=2) + "\n")


def state(out: Path, overrides: list[str]) -> str:
    """'new', 'done' (finished: read it), or 'stopped' (a checkpoint: resume it) (`rlrun.storage.runstate`).
    RoundError for a directory holding another run, a failed one, or no run this comparison can use."""
    if not out.exists():
        return runstate.NEW
    if runstate.in_use(out):
        raise RoundError(
            f"{out} is in use by another rlrun process (this comparison run twice?); it was left unchanged"
        )
    recorded = out / ".hydra" / "overrides.yaml"
    try:
        saved = bounded.load_yaml(recorded) if recorded.exists() else None
    except bounded.FileRefused as e:  # which arm and seeds the round trained is unknown: never reused
        raise RoundError(f"{e}; remove {out} to train the round again", Exit.BAD_INPUT) from None
    if saved is not None and saved != overrides:
        raise RoundError(f"{out} holds a run of other overrides ({saved}); it was left unchanged", Exit.BAD_INPUT)
    try:
        now = runstate.state(out)
    except run_summary.DamagedJob as e:
        raise RoundError(f"{out}: {e}; remove that directory to train the round again", Exit.BAD_INPUT) from None
    if now == runstate.FAILED:
        error = run_summary.read(out).get("error")
        raise RoundError(f"{out}: the run failed ({error}); see {out / 'train.log'}")
    if now == runstate.UNSTARTED:
        raise RoundError(
            f"{out} holds no finished run and no checkpoint (a round stopped before its first checkpoint); remove "
            "that directory and rerun the comparison to train the round again",
            Exit.BAD_INPUT,
        )
    return now


class Runner:
    """Runs one round's process at a time. SIGINT and SIGTERM are passed on to it (it checkpoints and stops),
    then the comparison stops with the line that says how to continue."""

    def __init__(self, command_line: str):
        self.child: subprocess.Popen | None = None
        self.command_line = command_line
        self.stopped_by: int | None = None

    def install(self) -> None:
        for s in (signal.SIGINT, signal.SIGTERM):
            signal.signal(s, self._forward)

    def _forward(self, signum: int, frame: FrameType | None) -> None:
        self.stopped_by = signum
        if self.child is not None and self.child.poll() is None:
            self.child.send_signal(signum)
        else:
            self._stop()

    def _stop(self) -> None:
        name = signal.Signals(self.stopped_by or signal.SIGTERM).name
        print(
            f"rlrun.compare: stopped by {name}; rerun the same command to continue (it resumes the round's run "
            f"itself): {self.command_line}",
            file=sys.stderr,
            flush=True,
        )
        os._exit(Exit.STOPPED)

    def run(self, args: list[str], what: str) -> None:
        """`python <args>` in its own session (a Ctrl-C reaches it once, through `_forward`); its output goes to
        stderr, so that the comparison's stdout is its verdict alone."""
        self.child = subprocess.Popen([sys.executable, *args], start_new_session=True, stdout=sys.stderr)
        code = self.child.wait()
        self.child = None
        if self.stopped_by is not None:
            self._stop()
        if code != 0:
            raise RoundError(f"{what} failed (exit {code}); its lines above say why", code)


def run_round(runner: Runner, root: Path, plan: Plan, arm: str, first: int, n: int) -> None:
    """Make sure the arm's round is trained: read again where finished, resumed where stopped, else trained."""
    out = plan.round_dir(root, arm, first, n)
    now = state(out, plan.overrides(arm, first, n))
    what = f"arm {arm}, seeds {first}-{first + n - 1}"
    if now == runstate.DONE:
        print(f"rlrun.compare: {what}: finished in {out}", file=sys.stderr, flush=True)
    elif now == runstate.STOPPED:
        print(f"rlrun.compare: {what}: {rundir.resume_command(out)}", file=sys.stderr, flush=True)
        runner.run(["-m", "rlrun.resume", str(out)], what)
    else:
        command = plan.train_command(root, arm, first, n)
        print(f"rlrun.compare: {what}: python {' '.join(command)}", file=sys.stderr, flush=True)
        runner.run(command, what)
