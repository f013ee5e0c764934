"""PQN on Atari on a CPU: each row's learning curve and time to result, rows paired by seed.

    # learning: each (row, game, seed) one run under --root (a finished run is kept, a stopped one resumes
    # from its checkpoint); one core each: run a second `learn` on the other core with other seeds or rows
    taskset -c 0 python scripts/pqn_atari_bench.py learn --rows der_convln --games Pong --seeds 100 101 102 \
        --root runs/pqn_atari
    # per run: the 100-episode training mean at --marks env steps, the greedy evaluations, speed and wall time;
    # per seed: each row against --base, the differences of the final training mean and evaluation
    python scripts/pqn_atari_bench.py aggregate --root runs/pqn_atari --base preset
    python scripts/pqn_atari_bench.py plot --root runs/pqn_atari           # training curves per game

Rows (ROWS below): `preset` is +experiment=pqn_atari, `der_convln` the same on DER's small network with a
LayerNorm over each convolution's output; anything else is taken as overrides (name the experiment in them).
Every run also gets BUDGET (1.5M env steps, epsilon over the first 100k, a 10-episode greedy evaluation every
500k, one thread), which `--overrides` can change (e.g. device.threads=2 total_steps=2500000).
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

from benchlib.common import merged, moving_means, read_summary, refusing, report
from benchlib.game_runs import label_of, learn_each, runs_under

ROWS = {
    "preset": ["+experiment=pqn_atari"],
    "der_convln": ["+experiment=pqn_atari", "network=der", "network.conv_layer_norm=true"],
}
BUDGET = [
    "exploration.duration=100000",
    "total_steps=1500000",
    "eval.interval=500000",
    "eval.episodes=10",
    "eval.num_envs=10",
    "device=cpu",
    "device.threads=1",
    "checkpoint.every=100000",
]
GOAL = 18.0  # the 100-episode training mean that counts as Pong learned


def row_overrides(row: str) -> list[str]:
    return ROWS.get(row, row.split())


def overrides(row: str, game: str, seed: int, more: list[str]) -> list[str]:
    return [*row_overrides(row), f"env.id=ALE/{game}-v5", f"seed={seed}", *more]


def learn(args) -> None:
    learn_each(
        Path(args.root),
        (
            (label_of(row, ROWS), game, seed, merged(BUDGET, overrides(row, game, seed, args.overrides)))
            for row in args.rows
            for game in args.games
            for seed in args.seeds
        ),
    )


def mean_at(steps: list[int], means: list[float], step: int) -> float | None:
    """The 100-episode mean of the last episode ended by `step`; None before the first or past the run's end."""
    if not steps or steps[-1] < step - step // 100:  # the run ended short of `step` (1% slack: rollout ends)
        return None
    ended = [m for s, m in zip(steps, means) if s <= step]
    return ended[-1] if ended else None


def evaluations(run: Path) -> list[tuple[int, float]]:
    """(env step, mean return) of each greedy evaluation, from the run's TensorBoard events or scalars.csv."""
    from rlrun.sweeps.jobtable import load_curve

    curve = load_curve(run, "eval/mean_return")
    return [(int(s), float(v)) for s, v in zip(curve["step"], curve["value"])]


def _number(summary: dict, key: str) -> float | None:
    """A summary.json value that is a finite number, else None (a run that did not finish, or a damaged file)."""
    value = summary.get(key)
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    return float(value) if ok else None


def measure(run: Path, marks: list[int]) -> dict:
    """What the tables show of one run; `final` and `eval` None while it is unfinished."""
    steps, means = moving_means(run / "episodes.csv") if (run / "episodes.csv").is_file() else ([], [])
    summary = read_summary(run) if (run / "summary.json").is_file() else {}
    # a full window only: the mean of a run's first few episodes is no 100-episode mean
    reached = next((s for i, (s, m) in enumerate(zip(steps, means)) if i >= 99 and m >= GOAL), None)
    evals = evaluations(run)
    return {
        "at": [mean_at(steps, means, m) for m in marks],
        "final": _number(summary, "final_mean_return_100"),
        "eval": _number(summary, "final_eval_return"),
        "evals": evals,
        "sps": _number(summary, "sps"),
        "wall": _number(summary, "wall_time_s"),
        "reached": reached,
    }


def aggregate(args) -> None:
    root = Path(args.root)
    found = {(row, game, seed): measure(run, args.marks) for row, game, seed, run in runs_under(root)}
    if not found:
        raise SystemExit(f"no runs under {root}")
    per_run = []
    for (row, game, seed), m in sorted(found.items()):
        to_goal = _to_goal(m["reached"], m["sps"])
        per_run.append([row, game, seed, *(_fmt(v) for v in m["at"]), _fmt(m["final"]),
                        " / ".join(f"{v:.1f}" for _, v in m["evals"]) or "-", _fmt(m["sps"], ".0f"),
                        _fmt(None if m["wall"] is None else m["wall"] / 60, ".0f"), to_goal])  # fmt: skip
    report(
        "PQN on Atari: each run",
        [
            "row",
            "game",
            "seed",
            *(f"{k / 1e6:g}M" for k in args.marks),
            "final",
            "greedy evaluations",
            "env steps/s",
            "minutes",
            f"steps to {GOAL:g}",
        ],  # fmt: skip
        per_run,
        notes=[
            "the 100-episode mean of training returns (exploration included) at each number of env steps, and at"
            " the run's end (final); greedy evaluations: each evaluation's mean return, in order; env steps/s and"
            " minutes: the run's summary.json (wall time of its processes, a resume's included); steps to"
            f" {GOAL:g}: the first episode end at which the training mean reached it, with the minutes that"
            " takes at the run's mean speed"
        ],
        pin="runs as started by `learn` (see each run's train.log for its hardware and threads)",
    )
    paired = []
    for (row, game, seed), m in sorted(found.items()):
        base = found.get((args.base, game, seed))
        if row == args.base or base is None or None in (m["final"], base["final"]):
            continue
        paired.append([row, game, seed, f"{m['final']:.1f} - {base['final']:.1f} = {m['final'] - base['final']:+.1f}",
                       _diff(m["eval"], base["eval"]), _ratio(m["sps"], base["sps"])])  # fmt: skip
    if paired:
        report(
            f"PQN on Atari: each row against {args.base}, seed by seed",
            ["row", "game", "seed", "final training mean", "final greedy evaluation", "speed"],
            paired,
            notes=[f"differences row - {args.base} on the same game and seed; speed: env steps/s over the base's"],
            pin="runs as started by `learn`",
        )


def _to_goal(step: int | None, sps: float | None) -> str:
    return "-" if step is None or not sps else f"{step:,} ({step / sps / 60:.0f} min)"


def _fmt(value: float | None, spec: str = ".1f") -> str:
    return "-" if value is None else format(value, spec)


def _diff(a: float | None, b: float | None) -> str:
    return "-" if a is None or b is None else f"{a:.1f} - {b:.1f} = {a - b:+.1f}"


def _ratio(a: float | None, b: float | None) -> str:
    return "-" if not a or not b else f"{a / b:.2f}x"


def plot(args) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    root = Path(args.root)
    runs = list(runs_under(root))
    if not runs:
        raise SystemExit(f"no runs under {root}")
    games = sorted({game for _, game, _, _ in runs})
    rows = sorted({row for row, _, _, _ in runs})
    # by env steps, and by minutes at each run's mean speed (time to result: a finished run's summary has it)
    fig, axes = plt.subplots(2, len(games), figsize=(5 * len(games), 7.2), squeeze=False)
    for col, game in enumerate(games):
        labelled = set()
        for row, g, _, run in runs:
            if g != game or not (run / "episodes.csv").is_file():
                continue
            steps, means = moving_means(run / "episodes.csv")
            sps = (read_summary(run) if (run / "summary.json").is_file() else {}).get("sps")
            style = {"color": f"C{rows.index(row)}", "alpha": 0.8, "label": None if row in labelled else row}
            axes[0][col].plot(steps, means, **style)
            if sps:
                axes[1][col].plot([s / sps / 60 for s in steps], means, **style)
            labelled.add(row)
        for ax in axes[:, col]:
            ax.axhline(GOAL, color="k", ls=":", lw=1)
        axes[0][col].set_title(game)
        axes[0][col].set_xlabel("env steps (4 frames each)")
        axes[1][col].set_xlabel("minutes at the run's mean env steps/s")
    for ax in axes[:, 0]:
        ax.set_ylabel("100-episode mean of training returns")
    axes[0][0].legend(fontsize=7)
    out = root / "pqn_atari_curves.png"
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    print(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("learn", help="one run per (row, game, seed), resumable")
    p.add_argument("--rows", nargs="+", default=["der_convln"], help=f"{' | '.join(ROWS)} | overrides")
    p.add_argument("--games", nargs="+", default=["Pong"], help="ALE game names (ALE/<game>-v5)")
    p.add_argument("--seeds", nargs="+", type=int, default=[100, 101, 102])
    p.add_argument("--root", default="runs/pqn_atari")
    p.add_argument("--overrides", nargs="*", default=[], help="more overrides for every run, in place of BUDGET's")
    p.set_defaults(fn=learn)
    p = sub.add_parser("aggregate", help="per run the curve at --marks; per seed each row against --base")
    p.add_argument("--root", default="runs/pqn_atari")
    p.add_argument("--marks", nargs="+", type=int, default=[250_000, 500_000, 750_000, 1_000_000, 1_250_000, 1_500_000])
    p.add_argument("--base", default="preset", help="the row the others are paired against")
    p.set_defaults(fn=aggregate)
    p = sub.add_parser("plot", help="training curves per game, every row and seed")
    p.add_argument("--root", default="runs/pqn_atari")
    p.set_defaults(fn=plot)
    args = parser.parse_args()
    args.fn(args)


if __name__ == "__main__":
    refusing(main)
