"""What every benchmark shares: running and timing processes, alternating contestants, the report."""

from __future__ import annotations

import csv
import datetime
import io
import math
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rlrun.machine import hardware

ROOT = Path(__file__).resolve().parents[2]  # the checkout these scripts belong to: `compare`'s current tree
COMMAND = "python " + shlex.join(sys.argv)
QUIET = ["eval.interval=0", "log.plot=false", "checkpoint.every=0"]  # the training loop alone


# --- shared: running, timing, alternating, reporting ------------------------------------------------------


@dataclass
class Run:
    wall: float  # seconds until the last process exited, start-up included
    rss_mib: float  # the largest peak resident memory among the processes
    summary: dict = field(default_factory=dict)  # the run's summary.json, where there is one
    cpu: float = 0.0  # CPU seconds (user + system) of the processes: on a shared core, wall time is not theirs


def run_processes(cmds: Sequence[Sequence[str]], cwd: Path | None = None, env: dict[str, str] | None = None) -> Run:
    """Start the commands side by side and wait for all of them; stops the benchmark if one fails."""
    env = {**os.environ, "PYTHONWARNINGS": "ignore", **(env or {})}
    # Files, not pipes: a chatty stderr cannot block the run. Closed below, after the runs.
    errs = [tempfile.TemporaryFile() for _ in cmds]  # noqa: SIM115
    start = time.perf_counter()
    procs = [subprocess.Popen(c, stdout=subprocess.DEVNULL, stderr=e, cwd=cwd, env=env) for c, e in zip(cmds, errs)]
    rss = cpu = 0.0
    for p in procs:
        _, status, usage = os.wait4(p.pid, 0)
        p.returncode = os.waitstatus_to_exitcode(status)
        rss = max(rss, usage.ru_maxrss / 1024)
        cpu += usage.ru_utime + usage.ru_stime
    wall = time.perf_counter() - start
    try:
        for cmd, p, e in zip(cmds, procs, errs):
            if p.returncode != 0:
                e.seek(0)
                tail = e.read().decode(errors="replace")[-3000:]
                raise SystemExit(
                    f"run failed (exit {p.returncode}) in {cwd or os.getcwd()}:\n{shlex.join(cmd)}\n{tail}"
                )
    finally:
        for e in errs:
            e.close()
    return Run(wall, rss, cpu=cpu)


class Refused(ValueError):
    """A run file that a benchmark does not read (crafted or damaged): the message names it and says why."""


def read_summary(run_dir: Path, agents: bool = False) -> dict:
    """`run_dir`/summary.json read within bounds (rlrun.storage.bounded, as rlrun reads it): a JSON object,
    with `agents` an object of objects where asked (a batched run's); else Refused or FileRefused."""
    from rlrun.storage import bounded

    path = Path(run_dir) / "summary.json"
    summary = bounded.load_json(path)
    if not isinstance(summary, dict):
        raise Refused(f"{path} holds a {type(summary).__name__}, not a JSON object")
    if agents and not (
        isinstance(summary.get("agents"), dict) and all(isinstance(a, dict) for a in summary["agents"].values())
    ):
        raise Refused(f"{path} has no agents (an object of each agent's summary): not a batched run's summary")
    return summary


def refusing(main: Callable[[], None]) -> None:
    """A script's `main`, where a run file it refuses (Refused, bounded.FileRefused: a FIFO, a file beyond the
    bounds, a config linked to /dev/zero, a value that is no number) ends it in one line naming the file, exit 2."""
    from rlrun.storage import bounded

    try:
        main()
    except (Refused, bounded.FileRefused) as e:
        print(f"{Path(sys.argv[0]).name}: {e}", file=sys.stderr)
        raise SystemExit(2) from None


def run_learning(cmd: Sequence[str], run: Path) -> None:
    """One learning run of a bench's `learn` (`rlrun.train` or `rlrun.resume`). A stop (exit 75: SIGTERM or
    SIGINT, what it owes checkpointed) or a failure ends the script in one line with the run's exit code,
    the runs after it not started."""
    from rlrun.errors import Exit, fail

    print("running: " + " ".join(cmd), file=sys.stderr, flush=True)
    code = subprocess.run(cmd).returncode
    if code != 0:
        why = "stopped; the same command resumes it" if code == Exit.STOPPED else f"exit {code} (see its train.log)"
        fail(f"{run}: {why}; the runs after it did not start", code, command=Path(sys.argv[0]).stem)


def merged(defaults: Sequence[str], overrides: Sequence[str]) -> list[str]:
    """`defaults` with `overrides` in place of those that set the same key, then the other `overrides`: the
    command line names each key once (Hydra would let the later one win)."""
    from rlrun.config.overrides import override_key

    given = {override_key(o): o for o in overrides}
    return [given.pop(override_key(d), d) for d in defaults] + list(given.values())


def train_cmd(overrides: Sequence[str], run_dir: str) -> list[str]:
    return [sys.executable, "-m", "rlrun.train", *overrides, f"hydra.run.dir={run_dir}"]


def train_run(
    overrides: Sequence[str], prefix: Sequence[str] = (), cwd: Path | None = None, env: dict[str, str] | None = None
) -> Run:
    """One `python -m rlrun.train` process into a temporary run dir, with the summary.json it wrote."""
    with tempfile.TemporaryDirectory() as out:
        run = run_processes([[*prefix, *train_cmd(overrides, out)]], cwd=cwd, env=env)
        if Path(out, "summary.json").exists():
            run.summary = read_summary(Path(out))
    return run


def same_config(saved: dict, composed: dict) -> bool:
    """Whether a kept run's saved config (its .hydra/config.yaml) is the config composed today. The saved one
    is first read onto today's schemas (rlrun.config.saved.from_saved), so that a key added since, at its
    default, is not a change; any value that differs is."""
    from omegaconf import OmegaConf

    import rlrun.train  # noqa: F401  registers the schemas
    from rlrun.config.saved import from_saved

    return OmegaConf.to_container(from_saved(saved), resolve=True) == composed


def alternate(contestants: dict[str, Callable[[], Any]], rounds: int) -> dict[str, list[Any]]:
    """Each contestant (a Run or a number) once per round, the order reversed every other round; progress
    goes to stderr."""
    results: dict[str, list[Any]] = {name: [] for name in contestants}
    for r in range(rounds):
        for name in list(contestants) if r % 2 == 0 else list(reversed(contestants)):
            results[name].append(contestants[name]())
        shown = {k: [round(v.wall if isinstance(v, Run) else v, 1) for v in vs] for k, vs in results.items()}
        print(f"round {r + 1}/{rounds}: {shown}", file=sys.stderr, flush=True)
    return results


def pinning(parallel: bool = False) -> str:
    cpus = sorted(os.sched_getaffinity(0))
    if parallel:
        return f"may use CPUs {cpus}: run it with those cores otherwise idle"
    if len(cpus) == 1:
        return f"pinned to CPU {cpus[0]}"
    return "not pinned: for steadier figures, `taskset -c 0 python scripts/bench.py ...` with core 0 otherwise idle"


def report(
    title: str, headers: Sequence[str], rows: Sequence[Sequence[Any]], notes: Sequence[str] = (), pin: str | None = None
) -> None:
    """The result as a Markdown table under the date, the hardware and the command that produced it."""
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    cells = [[str(c) for c in headers]] + [[str(c) for c in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    line = lambda row: "| " + " | ".join(c.ljust(w) for c, w in zip(row, widths)) + " |"  # noqa: E731
    print(f"\n## {title}\n")
    print(f"date: {now}\nhardware: {hardware()}\npinning: {pin or pinning()}\ncommand: {COMMAND}\n")
    print(line(cells[0]))
    print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    for row in cells[1:]:
        print(line(row))
    if notes:
        print()
    for note in notes:
        print(note)
    sys.stdout.flush()


def ratio_rows(times: dict[str, list[float]], base: str) -> list[list[str]]:
    """Per contestant: its median, that median over `base`'s, and each value (a table's rows)."""
    ref = statistics.median(times[base])
    return [
        [name, f"{statistics.median(v):.1f}", f"{statistics.median(v) / ref:.2f}", each(v)] for name, v in times.items()
    ]


def each(values: Sequence[float], fmt: str = ".1f") -> str:
    return " / ".join(format(v, fmt) for v in values)


def moving_means(episodes_csv: Path, window: int = 100) -> tuple[list[int], list[float]]:
    """(env step, mean of the last `window` training returns) at every episode end, as the paper plots."""
    from rlrun.storage import bounded

    steps, returns = [], []
    with bounded.open_regular(episodes_csv, bounded.TABLE_LIMIT) as raw, io.TextIOWrapper(raw, "utf-8") as f:
        try:
            for n, row in enumerate(csv.DictReader(f), start=1):
                steps.append(number(row.get("env_step"), int, f"{episodes_csv} row {n}: env_step"))
                returns.append(number(row.get("return"), float, f"{episodes_csv} row {n}: return"))
        except UnicodeDecodeError:
            raise Refused(f"{episodes_csv} is not UTF-8 text") from None
    means, total = [], 0.0
    for i, r in enumerate(returns):
        total += r - (returns[i - window] if i >= window else 0.0)
        means.append(total / min(i + 1, window))
    return steps, means


def number(text: Any, kind: type, what: str) -> Any:
    """`text` (a CSV field) as a finite `kind` (int or float), or Refused naming `what`."""
    try:
        value = kind(text)
    except (TypeError, ValueError):
        value = None
    if value is None or not math.isfinite(value):
        raise Refused(f"{what} {text!r} is not a finite number")
    return value
