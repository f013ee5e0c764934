"""How robust a preset is on seeds it was not tuned on: `seeds=N` agents of the preset in one process (seeds
S..S+N-1, batched: rlrun.training.population), then per preset the figures docs/presets.md reports.

    python scripts/preset_seeds.py                                   # every preset, seeds 2000-2019
    python scripts/preset_seeds.py --presets default qrdqn --seeds 20 --first 2000
    python scripts/preset_seeds.py --keep outputs/presets            # keep the runs (else a temporary dir)
    python scripts/preset_seeds.py --compare default_pre_retune default_retune --seeds 100 --first 7000 --keep runs

The confirmation step of the tuning recipe (docs/sweeps.md): `--compare INCUMBENT CANDIDATE` runs both on
the same seeds (>= 100, never used to choose either) and compares them pairwise (rlrun.compare.stats):
solved counts with McNemar's exact test on the seeds only one of them solved, a paired-bootstrap interval of
the difference in solve rates, and the steps-to-threshold quantiles. The candidate replaces the incumbent
only when it solves significantly more seeds (p < 0.05); a tie keeps the incumbent. Settings to compare are
the presets, their settings before the robustness retune (`<preset>_pre_retune`), or your own:
`--define lr15='optimizer.lr=1.5e-3 algo.train_freq=8'`. With `--keep DIR`, a run already in DIR with the
same composed config and seeds is reused, so a comparison can be re-read or extended without training again;
two runs of the script may fill one folder (e.g. the two settings on two cores): a run the other is training
is waited for, then reused.

Per preset: seeds whose 100-episode training mean reached the env's threshold within the budget (n/N), the
median and the worst step at which they did, how many of those held it (final 100-episode mean still at the
threshold and the last greedy evaluation at the env's maximum, 500 on CartPole), and the median first step
at which the greedy evaluation (`eval.interval` 10k steps by default, 5 episodes) reached the threshold, and
how many of each seed's last 100 training episodes ended below the threshold, summed over the seeds (a seed
that collapses mid-run and recovers shows there, where the solved and held counts only see its end).
A Markdown table under the date, the hardware and the command.
"""

from __future__ import annotations

import argparse
import csv
import io
import shlex
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from statistics import median

sys.path.insert(0, str(Path(__file__).resolve().parent))  # benchlib, next to this script

from benchlib.common import Refused, number, read_summary, refusing, report, same_config  # noqa: E402

from rlrun.compare.stats import Comparison, compare, quantile_step, rate_interval  # noqa: E402
from rlrun.storage import bounded, runstate  # noqa: E402

PRESETS = {
    "default": ([], 100_000),
    "qrdqn": (["network=qrdqn"], 100_000),
    "iqn": (["network=iqn"], 100_000),
    "noisy": (["network=noisy"], 100_000),
    "rainbow": (["+experiment=rainbow"], 100_000),
    "pqn": (["+experiment=pqn_cartpole"], 500_000),
    "dueling_per": (["network=dueling", "buffer=per"], 100_000),
    "c51": (["network=c51"], 100_000),
    "mdqn": (["algo=mdqn"], 100_000),
}
# Each retuned preset's settings before the robustness retune of 2026-12-02 (commit 6f4c82c and after), as
# overrides of today's: what a retune has to beat in the paired check.
PRE_RETUNE = {
    "default_retune": (  # the retune itself, which env=cartpole has since dropped
        ["optimizer.lr=0.0019", "algo.tau=0.05", "algo.lr_end_factor=0.0", "exploration.duration=5000"], 100_000),
    "default_pre_retune": (
        ["optimizer.lr=0.002", "algo.tau=0.1", "algo.lr_end_factor=0.1", "exploration.duration=10000"], 100_000),
    "qrdqn_pre_retune": (
        ["network=qrdqn", "optimizer.lr=0.003", "algo.train_freq=16", "exploration.duration=20000"], 100_000),
    "iqn_pre_retune": (["network=iqn", "algo.train_freq=16"], 100_000),
    "noisy_pre_retune": (
        ["network=noisy", "network.dueling=false", "buffer=uniform", "network.noisy_sigma0=0.1", "optimizer.lr=0.002",
         "algo.tau=0.1", "algo.lr_end_factor=0.1", "exploration.duration=10000"], 100_000),
    "rainbow_pre_retune": (
        ["+experiment=rainbow", "optimizer.lr=0.002", "algo.tau=0.1", "exploration.duration=10000"], 100_000),
    "pqn_pre_retune": (
        ["+experiment=pqn_cartpole", "optimizer.lr=0.00025", "algo.tau=0.1", "algo.q_lambda=0.65",
         "exploration.end=0.05"], 500_000),
}  # fmt: skip
VARIANTS = {**PRESETS, **PRE_RETUNE}
MAX_RETURN = 500.0  # CartPole-v1's


def run_command(name: str, first: int, seeds: int) -> list[str]:
    """The overrides of one variant's batched run (as its .hydra/overrides.yaml records them)."""
    overrides, budget = VARIANTS[name]
    budget_set = [o for o in overrides if o.startswith("total_steps=")]
    return [*overrides, f"seeds={seeds}", f"seed={first}", *([] if budget_set else [f"total_steps={budget}"]),
            "logger=[tensorboard,csv]", "log.plot=false"]  # fmt: skip


def wait_for_owner(out: Path) -> None:
    """Wait while another process owns the run in `out` (its lock held: another preset_seeds filling the same
    --keep folder), so that its run is then reused or resumed rather than refused as in use."""
    if runstate.in_use(out):
        print(f"{out}: trained by another process; waiting for it to end", file=sys.stderr, flush=True)
        runstate.wait_for_owner(out)


def run_process(name: str, first: int, seeds: int, out: Path) -> tuple[dict, float]:
    """Train `seeds` agents of the variant in one process into `out`, or reuse a finished run there whose
    composed config is the variant's (its wall time is then the one the run recorded)."""
    overrides = run_command(name, first, seeds)
    wait_for_owner(out)
    saved = out / ".hydra" / "config.yaml"
    now = runstate.state(out)
    if now in (runstate.DONE, runstate.FAILED) and saved.exists():
        import yaml  # omegaconf's dependency; only a reused run needs it

        # The composed configs, not the overrides, must match: a preset's files may have changed since.
        cmd = [sys.executable, "-m", "rlrun.train", *overrides, "--cfg", "job"]
        now = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
        if not same_config(bounded.load_yaml(saved), yaml.safe_load(now)):
            raise SystemExit(f"{out} holds a run of another config than {name}'s: choose another --keep folder")
        summary = read_summary(out, agents=True)
        print(f"{name}: reusing the run in {out}", file=sys.stderr, flush=True)
        return summary, max(a["wall_time_s"] for a in summary["agents"].values())
    start = time.perf_counter()
    if now == runstate.STOPPED:  # an interrupted run of this variant: continue it where it stopped
        print(f"{name}: python -m rlrun.resume {out}", file=sys.stderr, flush=True)
        subprocess.run([sys.executable, "-m", "rlrun.resume", str(out)], check=True, capture_output=True)
        summary = read_summary(out, agents=True)
        return summary, max(a["wall_time_s"] for a in summary["agents"].values())
    else:
        print(f"{name}: python -m rlrun.train {shlex.join(overrides)}", file=sys.stderr, flush=True)
        subprocess.run([sys.executable, "-m", "rlrun.train", *overrides, f"hydra.run.dir={out}"], check=True,
                       capture_output=True)  # fmt: skip
    return read_summary(out, agents=True), time.perf_counter() - start


def run_preset(name: str, first: int, seeds: int, root: Path, per_process: int | None) -> tuple[dict, float]:
    """The variant's `seeds` agents under root/name, `per_process` of them batched in each process (one after
    another, each in its chunk's folder root/name/seeds<a>-<b>, even a single chunk, so that two runs of the
    script can fill one folder from both ends; None: all in one process, in root/name): the agents' summaries
    merged, each agent's folder under "dirs", and the summed wall time. Batching more agents per process
    costs more than proportionally once their tensors outgrow the caches (QR-DQN on CartPole: 100 agents step
    15x slower than 20), hence the split."""
    out = root / name
    if per_process is None:
        summary, wall = run_process(name, first, seeds, out)
        return {"agents": summary["agents"], "dirs": {s: out / f"seed={s}" for s in summary["agents"]}}, wall
    merged: dict = {"agents": {}, "dirs": {}}
    total = 0.0
    for a in range(first, first + seeds, per_process):
        n = min(per_process, first + seeds - a)
        part = out / f"seeds{a}-{a + n - 1}"
        summary, wall = run_process(name, a, n, part)
        merged["agents"].update(summary["agents"])
        merged["dirs"].update({s: part / f"seed={s}" for s in summary["agents"]})
        total += wall
    return merged, total


def solve_steps(summary: dict) -> dict[int, int | None]:
    """Per seed, the step its 100-episode training mean reached the threshold (None: not within the budget)."""
    return {int(s): a["solved_step"] for s, a in summary["agents"].items()}


def first_eval_at(agent_dir: Path, threshold: float) -> int | None:
    """The first step at which the greedy evaluation reached `threshold` (scalars.csv: env_step,tag,value)."""
    for n, row in scalars(agent_dir):
        if row.get("tag") == "eval/mean_return" and number(row.get("value"), float, f"{n}: value") >= threshold:
            return number(row.get("env_step"), int, f"{n}: env_step")
    return None


def scalars(agent_dir: Path) -> Iterator[tuple[str, dict]]:
    """The rows of the agent's scalars.csv (env_step,tag,value), read within bounds, each with its place
    (`<file> row <n>`) for a message."""
    path = agent_dir / "scalars.csv"
    with bounded.open_regular(path, bounded.TABLE_LIMIT) as raw, io.TextIOWrapper(raw, "utf-8") as f:
        try:
            for n, row in enumerate(csv.DictReader(f), start=1):
                yield f"{path} row {n}", row
        except UnicodeDecodeError:
            raise Refused(f"{path} is not UTF-8 text") from None


def late_misses(agent_dir: Path, threshold: float, last: int = 100) -> int:
    """How many of the agent's last `last` training episodes returned less than `threshold`."""
    returns = [
        number(r.get("value"), float, f"{n}: value")
        for n, r in scalars(agent_dir)
        if r.get("tag") == "charts/episodic_return"
    ]
    return sum(r < threshold for r in returns[-last:])


def figures(name: str, summary: dict, wall: float) -> list[str]:
    agents = summary["agents"]
    threshold = next(iter(agents.values()))["reward_threshold"]
    solved = {s: a["solved_step"] for s, a in agents.items() if a["solved_step"] is not None}
    held = [
        s
        for s in solved
        if agents[s]["final_mean_return_100"] >= threshold and agents[s]["final_eval_return"] == MAX_RETURN
    ]
    evals = [first_eval_at(summary["dirs"][s], threshold) for s in agents]
    reached = [e for e in evals if e is not None]
    misses = sum(late_misses(summary["dirs"][s], threshold) for s in agents)
    not_held = {
        s: (agents[s]["final_mean_return_100"], agents[s]["final_eval_return"]) for s in solved if s not in held
    }
    low, high = rate_interval(len(solved), len(agents))
    p90 = quantile_step(list(solve_steps(summary).values()), 0.9)
    return [
        name,
        f"{len(solved)}/{len(agents)} ({100 * low:.0f}-{100 * high:.0f}%)",
        f"{median(solved.values()):,.0f}" if solved else "-",
        f"{p90:,}" if p90 is not None else "not reached",
        f"{max(solved.values()):,}" if solved else "-",
        f"{len(held)}/{len(solved)}" + (f" (not: {not_held})" if not_held else ""),
        f"{median(reached):,.0f} ({len(reached)}/{len(agents)})" if reached else "-",
        f"{misses}",
        f"{wall:.0f} s",
    ]


def comparison_rows(c: Comparison, steps: dict[str, dict[int, int | None]]) -> list[list[str]]:
    """The comparison as table rows: each setting's quantiles of steps to threshold, then the test."""

    def step(s: int | None) -> str:
        return "not reached" if s is None else f"{s:,}"

    low, high = c.rate_difference
    rows = [
        [
            name,
            f"{solved}/{len(c.seeds)}",
            *(step(quantile_step([steps[name][s] for s in c.seeds], q)) for q in (0.5, 0.9, 1.0)),
        ]
        for name, solved in ((c.incumbent, c.solved_incumbent), (c.candidate, c.solved_candidate))
    ]
    rows.append(
        ["only " + c.incumbent, str(len(c.only_incumbent)), " ".join(map(str, c.only_incumbent)) or "-", "", ""]
    )
    rows.append(
        ["only " + c.candidate, str(len(c.only_candidate)), " ".join(map(str, c.only_candidate)) or "-", "", ""]
    )
    rows.append(
        [
            "McNemar exact p (two-sided)",
            f"{c.p_value:.3g}",
            f"rate difference {100 * low:+.0f} to {100 * high:+.0f} points (95% paired bootstrap)",
            "",
            "",
        ]
    )
    rows.append(["outcome", c.outcome, "decision: " + c.decision, "", ""])
    return rows


def define(text: str) -> str:
    """`--define NAME='OVERRIDES'`: a setting of the user's, added to the variants (budget 100k unless set)."""
    name, sep, overrides = text.partition("=")
    if not sep or not name.isidentifier():
        raise argparse.ArgumentTypeError(f"--define {text!r}: expected NAME='OVERRIDE ...'")
    VARIANTS[name] = (shlex.split(overrides), 100_000)
    return name


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--presets", nargs="+", default=list(PRESETS), help=f"variants to measure, of {list(VARIANTS)}")
    p.add_argument("--compare", nargs=2, metavar=("INCUMBENT", "CANDIDATE"), help="a paired check of two variants")
    p.add_argument("--define", type=define, action="append", default=[], metavar="NAME='OVERRIDES'",
                   help="a variant of your own, e.g. lr15='optimizer.lr=1.5e-3'")  # fmt: skip
    p.add_argument("--seeds", type=int, default=20, help="agents per preset (default 20)")
    p.add_argument("--first", type=int, default=2000, help="the first seed (default 2000: never used for tuning)")
    p.add_argument("--per-process", type=int, default=None, metavar="N",
                   help="agents batched in each process (default: all of them in one)")  # fmt: skip
    p.add_argument("--keep", type=Path, default=None, help="keep the runs in this folder")
    args = p.parse_args()
    names = list(args.compare) if args.compare else args.presets
    unknown = [n for n in names if n not in VARIANTS]
    if unknown:
        p.error(f"unknown variant {unknown[0]!r}: allowed {list(VARIANTS)} or one given by --define")
    steps: dict[str, dict[int, int | None]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        root = args.keep or Path(tmp)
        rows = []
        for name in names:
            summary, wall = run_preset(name, args.first, args.seeds, root, args.per_process)
            steps[name] = solve_steps(summary)
            rows.append(figures(name, summary, wall))
            print(" | ".join(rows[-1]), file=sys.stderr, flush=True)
    report(
        f"presets on seeds {args.first}-{args.first + args.seeds - 1} ({args.per_process or args.seeds} per process)",
        [
            "preset",
            "solved (95% interval)",
            "median step",
            "90th percentile step",
            "worst step",
            "held",
            "greedy eval >= threshold: median step",
            "last 100 episodes below threshold (all seeds)",
            "wall",
        ],
        rows,
        ["budget: 100k env steps per seed (pqn: 500k); held: final 100-episode mean >= threshold, last eval 500",
         *(f"{n}: {shlex.join(VARIANTS[n][0]) or '(no overrides)'}" for n in names)],
    )  # fmt: skip
    if args.compare:
        c = compare(*args.compare, steps[args.compare[0]], steps[args.compare[1]])
        report(
            f"{c.candidate} against {c.incumbent}, paired on seeds {args.first}-{args.first + args.seeds - 1}",
            ["setting", "solved", "median step (all seeds)", "90th percentile step", "worst step"],
            comparison_rows(c, steps),
            ["steps to a 100-episode training mean >= threshold; a seed that never reached it ranks last",
             "the candidate replaces the incumbent only when it solves significantly more seeds (p < 0.05)"],
        )  # fmt: skip


if __name__ == "__main__":
    refusing(main)
