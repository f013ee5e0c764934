"""MinAtar benchmarks: learning runs against the paper's DQN curves, and speed against the reference code.

    # learning: each (setting, game) as one batched run of --seeds agents, kept under --root (a run that
    # finished is skipped, one that stopped resumes); then curves and the table
    python scripts/minatar_bench.py learn --setting paper --games Breakout SpaceInvaders --seeds 3 --frames 2000000
    python scripts/minatar_bench.py learn --setting preset --games all --seeds 3 --frames 1000000
    python scripts/minatar_bench.py plot --root runs/minatar
    # every setting with all five games at the budget: IQM of returns / the paper DQN's 5M value (rliable)
    python scripts/minatar_bench.py aggregate --root runs/minatar --budget 1000000
    # a candidate against the incumbent on seeds never used to choose either, pair by pair (game, seed)
    python scripts/minatar_bench.py learn --setting rainbow_eps --games all --seeds 3 --first-seed 10
    python scripts/minatar_bench.py paired --a preset --b rainbow_eps --root runs/minatar

    # speed: the reference implementation (kenjyoung/MinAtar examples/dqn.py; --reference names your copy)
    # and rlrun at the paper's settings, alternated on one pinned core: trained frames per second
    taskset -c 0 python scripts/minatar_bench.py speed --reference MinAtar/examples/dqn.py --frames 100000

    # cost: finished runs (any settings) resumed from their last checkpoint for --frames more, alternated on
    # one pinned core with the machine otherwise idle: frames/s per agent once learning, minutes per 1M
    taskset -c 0 python scripts/minatar_bench.py cost --runs runs/minatar/preset_tf4__Breakout__seeds3 \
        runs/minatar/rainbow__Breakout__seeds3 --frames 20000 --rounds 2

Settings (SETTINGS below): `paper` is +experiment=minatar_paper; `preset` is env=minatar (rlrun's own); `pqn`
is +experiment=pqn_minatar (made for 10M frames), `pqn_1m` the same scaled to 1M; anything else is taken
as extra overrides after env=minatar (e.g. --setting "network.num_quantiles=32 algo.loss=quantile_huber").
"""

from __future__ import annotations

import argparse
import re
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

from benchlib.common import (
    QUIET,
    Refused,
    Run,
    alternate,
    moving_means,
    read_summary,
    refusing,
    report,
    run_processes,
    train_cmd,
)
from benchlib.game_runs import learn_one

from rlrun.envs.minatar import GAMES as MODULES  # id name -> the game's module name (the reference's -g)
from rlrun.storage import bounded  # run files read within bounds, as rlrun reads them

GAMES = list(MODULES)
# The paper's DQN (Young & Tian 2019, the repository README's curves: 30 seeds, 100-episode mean of training
# returns), read off the figure: approximate. Seaquest's 5M value predates minatar 1.0.10's oxygen fix.
PAPER_DQN = {
    "Asterix": {1_000_000: 8.0, 2_000_000: 14.5, 5_000_000: 17.0},
    "Breakout": {1_000_000: 9.5, 2_000_000: 10.0, 5_000_000: 10.0},
    "Freeway": {1_000_000: 50.0, 2_000_000: 50.0, 5_000_000: 50.0},
    "Seaquest": {1_000_000: 1.0, 2_000_000: 4.0, 5_000_000: 20.0},
    "SpaceInvaders": {1_000_000: 30.0, 2_000_000: 40.0, 5_000_000: 43.0},
}
RANDOM_FRAMES = 5_000  # the paper's random play before learning
BUDGETS = (500_000, 1_000_000, 2_000_000, 5_000_000, 10_000_000)  # the table's columns


# Named settings; anything else is taken as extra overrides after env=minatar.
SETTINGS = {
    "paper": ["+experiment=minatar_paper"],  # the paper's DQN
    "preset": ["env=minatar"],  # rlrun's DQN preset (one update per four frames; per frame before 2026-12-05)
    "pqn": ["+experiment=pqn_minatar"],  # purejaxql's PQN, made for 10M frames
    # the same recipe scaled to a 1M-frame budget, as purejaxql scales it: epsilon's decay over the first
    # 10% of the frames, the lr's linear decay over all of them (total_steps)
    "pqn_1m": ["+experiment=pqn_minatar", "exploration.duration=100000"],
    # the DQN preset with one update per four frames (Dopamine's and Revisiting Rainbow's MinAtar period)
    "preset_tf4": ["env=minatar", "algo.train_freq=4"],
    # Rainbow (+experiment=rainbow: C51, PER, noisy dueling head, Double, 3-step, an update per 4 frames) on
    # the MinAtar preset's network, replay, target period and Adam epsilon
    "rainbow": ["env=minatar", "+experiment=rainbow"],
    # Rainbow exploring epsilon-greedy (the preset's schedule) instead of through noisy layers; named
    # +experiment=rainbow_minatar (the same config under its own exp_name)
    "rainbow_eps": ["env=minatar", "+experiment=rainbow", "network.noisy=false"],
    # Munchausen-DQN (algo=mdqn at the paper's alpha 0.9, temperature 0.03, l0 -1) on the DQN preset with an
    # update per four frames: its dueling network, 3-step returns, replay, target period and Adam
    "mdqn": ["env=minatar", "algo=mdqn", "algo.train_freq=4"],
    # the paired check of the preset's period: one update per frame, as the paper (and the preset before)
    "preset_tf1": ["env=minatar", "algo.train_freq=1"],
}


def setting_overrides(setting: str) -> list[str]:
    return SETTINGS.get(setting, ["env=minatar", *setting.split()])


def label_of(setting: str) -> str:
    """The setting's folder label: no '=', which Hydra's override grammar refuses in hydra.run.dir."""
    return setting if setting in SETTINGS else re.sub(r"[^A-Za-z0-9_.-]+", "_", setting)


# --- learning runs -------------------------------------------------------------------------------------------


def seeds_label(first: int, count: int) -> str:
    """The folder's seed part: `seeds3` for seeds 0-2, `seeds3from10` for 10-12 (another set, another folder)."""
    return f"seeds{count}" if first == 0 else f"seeds{count}from{first}"


def learn(args) -> None:
    root = Path(args.root)
    root.mkdir(parents=True, exist_ok=True)
    games = GAMES if args.games == ["all"] else args.games
    for game in games:
        run_dir = root / f"{label_of(args.setting)}__{game}__{seeds_label(args.first_seed, args.seeds)}"
        overrides = [
            *setting_overrides(args.setting),
            f"env.id=MinAtar/{game}-v0",
            f"seeds={args.seeds}",
            f"seed={args.first_seed}",
            f"total_steps={args.frames}",
            "log.progress_interval=0",
        ]
        learn_one(run_dir, overrides)


def value_at(steps: list[int], means: list[float], step: int, reach: float = 0.99) -> float | None:
    """The 100-episode mean at the last episode end at or before `step` (None when the last episode ended
    before `reach` x `step`: the run stopped earlier)."""
    if not steps or steps[-1] < step * reach:
        return None
    i = max(j for j, s in enumerate(steps) if s <= step) if steps[0] <= step else 0
    return means[i]


def last_eval(agent_dir: Path) -> float | None:
    """The agent's last greedy evaluation (its summary.json's final_eval_return), if it finished."""
    summary = bounded.load_json(agent_dir / "summary.json") if (agent_dir / "summary.json").exists() else {}
    value = summary.get("final_eval_return") if isinstance(summary, dict) else None
    return value if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def agent_runs(root: Path) -> list[tuple[str, str, int, Path]]:
    """(setting label, game, seed, episodes.csv) of every agent under root."""
    found = []
    for episodes in sorted(root.glob("*__*__seeds*/**/episodes.csv")):
        run = next(p for p in episodes.parents if p.parent == root)
        if not re.fullmatch(r".+__.+__seeds\d+(from\d+)?", run.name):  # a run set aside by `learn` (.stopped-N)
            continue
        label, game, _ = run.name.rsplit("__", 2)
        if game not in GAMES:
            raise Refused(f"{run}: game {game!r} in its name is not one of {', '.join(GAMES)}")
        seed_dir = episodes.parent.name
        if seed_dir.startswith("seed="):  # an agent of a batched run
            if not re.fullmatch(r"seed=\d+", seed_dir):
                raise Refused(f"{episodes.parent}: {seed_dir!r} names no seed (seed=<integer>)")
            seed = int(seed_dir.split("=")[1])
        else:  # a single run: its composed config names the seed
            found_seed = re.search(r"^seed: (\d+)$", bounded.read_text(run / ".hydra" / "config.yaml"), re.M)
            seed = int(found_seed.group(1)) if found_seed else -1
        found.append((label, game, seed, episodes))
    return found


def plot(args) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    root = Path(args.root)
    runs = agent_runs(root)
    if not runs:
        raise SystemExit(f"no runs under {root}")
    games = [g for g in GAMES if any(r[1] == g for r in runs)]
    fig, axes = plt.subplots(1, len(games), figsize=(4.2 * len(games), 3.4), squeeze=False)
    colours: dict[str, str] = {}
    rows = []
    for ax, game in zip(axes[0], games):
        for label, g, seed, episodes in runs:
            if g != game:
                continue
            colour = colours.setdefault(label, f"C{len(colours)}")
            steps, means = moving_means(episodes)
            ax.plot(steps, means, color=colour, lw=0.9, alpha=0.8, label=label)
            budgets = [b for b in BUDGETS if steps and steps[-1] >= b * 0.99]
            rows.append(
                [label, game, seed, f"{steps[-1]:,}" if steps else "0"]
                + [_fmt(value_at(steps, means, b)) for b in BUDGETS]
                + [_fmt(means[-1] if means else None), _fmt(last_eval(episodes.parent)), str(len(budgets))]
            )
        paper = PAPER_DQN[game]
        ax.scatter(list(paper), list(paper.values()), marker="x", color="black", zorder=5, label="paper DQN")
        ax.set_title(game)
        ax.set_xlabel("frames (env steps)")
        ax.set_ylabel("100-episode mean training return")
        handles, names = ax.get_legend_handles_labels()
        unique = dict(zip(names, handles))
        ax.legend(unique.values(), unique.keys(), fontsize=7)
    fig.tight_layout()
    out = root / "minatar_curves.png"
    fig.savefig(out, dpi=110)
    report(
        "MinAtar: 100-episode mean of training returns",
        [
            "setting",
            "game",
            "seed",
            "frames",
            "at 500k",
            "at 1M",
            "at 2M",
            "at 5M",
            "at 10M",
            "last",
            "last greedy eval",
            "budgets reached",
        ],
        rows,
        notes=[
            "paper DQN (read off the repository's figure): "
            + "; ".join(f"{g} {v[1_000_000]:g} / {v[2_000_000]:g} / {v[5_000_000]:g}" for g, v in PAPER_DQN.items())
            + " at 1M / 2M / 5M",
            f"curves: {out}",
        ],
        pin="runs as started by `learn` (see each run's train.log for its hardware and wall time)",
    )


def normalised_scores(root: Path, budget: int) -> dict[str, dict[str, list[float | None]]]:
    """{setting: {game: [each seed's 100-episode training mean at `budget` / the paper DQN's 5M value]}}."""
    scores: dict[str, dict[str, list[float | None]]] = {}
    for (label, game, _seed), value in seed_scores(root, budget).items():
        scores.setdefault(label, {}).setdefault(game, []).append(value)
    return scores


def seed_scores(root: Path, budget: int) -> dict[tuple[str, str, int], float | None]:
    """{(setting, game, seed): the 100-episode training mean at `budget` / the paper DQN's 5M value}."""
    return {
        # reach: Freeway's games last 2,500 frames
        (label, game, seed): None if (v := value_at(*moving_means(ep), budget, reach=0.95)) is None
        else v / PAPER_DQN[game][5_000_000]
        for label, game, seed, ep in agent_runs(root)
    }  # fmt: skip


def paired_differences(scores: dict, a: str, b: str) -> list[tuple[str, int, float, float]]:
    """(game, seed, A's score, B's score) for every game and seed both settings have a score at the budget."""
    return [
        (game, seed, value, scores[(b, game, seed)])
        for (label, game, seed), value in sorted(scores.items(), key=lambda kv: (GAMES.index(kv[0][1]), kv[0][2]))
        if label == a and value is not None and scores.get((b, game, seed)) is not None
    ]


def paired(args) -> None:
    """B against A on the (game, seed) pairs both ran: B - A of the normalised scores, their mean with a 95%
    paired bootstrap interval and the paired sign-flip p over all pairs (rlrun.compare's statistics), and
    per game. Run both settings on seeds never used to choose either (`learn --first-seed`)."""
    import numpy as np

    from rlrun.compare.stats import paired_bootstrap, sign_flip_p

    pairs = paired_differences(seed_scores(Path(args.root), args.budget), args.a, args.b)
    if not pairs:
        raise SystemExit(f"no game and seed with a score at {args.budget:,} for both {args.a} and {args.b}")
    rows = []
    for game in GAMES:
        here = [(s, x, y) for g, s, x, y in pairs if g == game]
        if here:
            seeds, x, y = zip(*here)
            ahead = sum(v > u for u, v in zip(x, y))
            rows.append([game, " ".join(map(str, seeds)), f"{np.mean(x):.2f}", f"{np.mean(y):.2f}",
                         f"{np.mean(y) - np.mean(x):+.2f}", f"{ahead}/{len(x)}"])  # fmt: skip
    x, y = np.array([p[2] for p in pairs]), np.array([p[3] for p in pairs])
    low, high = paired_bootstrap(x, y)
    rows.append(["all pairs", str(len(pairs)), f"{x.mean():.2f}", f"{y.mean():.2f}", f"{(y - x).mean():+.2f} "
                 f"[{low:+.2f}, {high:+.2f}]", f"{int(np.sum(y > x))}/{len(pairs)}"])  # fmt: skip
    report(
        f"MinAtar, paired: B = {args.b} against A = {args.a} at {args.budget:,} frames",
        ["game", "seeds", "A (mean)", "B (mean)", "B - A", "B ahead"],
        rows,
        notes=[
            "scores: 100-episode training mean at the budget / the paper DQN's 5M value (as `aggregate`)",
            f"paired sign-flip p over all pairs: {sign_flip_p(x, y):.3g} (two-sided); interval: 95% paired bootstrap",
        ],
        pin="runs as started by `learn` (see each run's train.log for its hardware and wall time)",
    )


def aggregate(args) -> None:
    """rliable's IQM of the normalised scores over every game and seed of a setting, with its 95% stratified
    bootstrap interval (resampling seeds within each game), for the settings with every game at the budget."""
    import numpy as np
    from rliable import library as rly

    from rlrun.report.aggregate import BOOTSTRAP_REPS, bootstrap_seed, trimmed_mean

    rows, incomplete = [], []
    for label, games in sorted(normalised_scores(Path(args.root), args.budget).items()):
        seeds = {len(v) for v in games.values()}
        missing = [g for g in GAMES if g not in games or any(x is None for x in games[g])]
        if missing or len(seeds) != 1:
            incomplete.append(f"{label}: " + (f"no value at {args.budget:,} for {', '.join(missing)}" if missing
                                              else "unequal seed counts across games"))  # fmt: skip
            continue
        matrix = np.array([[float(x) for x in games[g]] for g in GAMES]).T  # (seeds, games)
        with bootstrap_seed(0):
            point, ci = rly.get_interval_estimates(
                {label: matrix}, lambda x: np.array([trimmed_mean(x)]), reps=BOOTSTRAP_REPS
            )
        per_game = [f"{np.mean(games[g]):.2f}" for g in GAMES]
        rows.append([label, str(matrix.shape[0]), f"{point[label][0]:.2f}",
                     f"{ci[label][0, 0]:.2f}-{ci[label][1, 0]:.2f}", *per_game])  # fmt: skip
    report(
        f"MinAtar at {args.budget:,} frames: returns / the paper DQN's 5M-frame value, IQM over games and seeds",
        ["setting", "seeds", "IQM", "95% CI", *(f"{g} (mean)" for g in GAMES)],
        rows,
        notes=[
            "100-episode mean of training returns at the budget, divided per game by the paper DQN's 5M value ("
            + ", ".join(f"{g} {v[5_000_000]:g}" for g, v in PAPER_DQN.items())
            + "); 1.0 = the paper's DQN after 5M frames; a run counts when its last episode ended within 5% of"
            " the budget (Freeway's games last 2,500 frames: 128 envs end their third at 960,000)",
            f"IQM and stratified bootstrap CI by rliable ({BOOTSTRAP_REPS} resamples, seeded)",
            *(f"left out: {line}" for line in incomplete),
        ],
        pin="runs as started by `learn` (see each run's train.log for its hardware and wall time)",
    )


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


# --- speed against the reference implementation --------------------------------------------------------------


def reference_copy(reference: Path, frames: int, into: Path) -> Path:
    """The reference script with its frame budget set to `frames` (its only change)."""
    text = reference.read_text()
    if "NUM_FRAMES = 5000000" not in text:
        raise SystemExit(f"{reference}: not MinAtar's examples/dqn.py (NUM_FRAMES = 5000000 not found)")
    copy = into / "dqn.py"
    copy.write_text(text.replace("NUM_FRAMES = 5000000", f"NUM_FRAMES = {frames}", 1))
    return copy


def speed(args) -> None:
    game = args.game
    total = RANDOM_FRAMES + args.frames
    work = Path(tempfile.mkdtemp(prefix="minatar_speed_"))
    script = reference_copy(Path(args.reference), total, work)
    rlrun = ["+experiment=minatar_paper", f"env.id=MinAtar/{game}-v0", f"total_steps={total}", *QUIET]

    def reference() -> Run:
        cmd = [sys.executable, str(script), "-g", MODULES[game], "-o", str(work / "ref")]
        return run_processes([cmd], cwd=work)

    def ours(seeds: int):
        def go() -> Run:
            out = work / f"rlrun{seeds}"
            shutil.rmtree(out, ignore_errors=True)
            return run_processes([train_cmd([*rlrun, f"seeds={seeds}"], str(out))])

        return go

    contestants = {"reference dqn.py": reference, "rlrun": ours(1)}
    if args.seeds > 1:
        contestants[f"rlrun seeds={args.seeds}"] = ours(args.seeds)
    results = alternate(contestants, args.rounds)
    frames = {"reference dqn.py": total, "rlrun": total, f"rlrun seeds={args.seeds}": total * args.seeds}
    base = total / statistics.median(r.wall for r in results["reference dqn.py"])
    rows = []
    for name, runs in results.items():
        walls = [r.wall for r in runs]
        fps = frames[name] / statistics.median(walls)
        rows.append([name, f"{frames[name]:,}", f"{statistics.median(walls):.1f}", f"{fps:.0f}", f"{fps / base:.2f}"])
    report(
        f"MinAtar {game}: the paper's DQN, frames per second against the reference code",
        ["contestant", "frames (all agents)", "median wall s", "frames/s", "x reference"],
        rows,
        notes=[
            f"{RANDOM_FRAMES:,} random frames then {args.frames:,} trained ones (one update of 32 per frame), "
            f"{args.rounds} rounds alternated; walls include each process's start-up.",
        ],
    )
    shutil.rmtree(work, ignore_errors=True)


# --- cost: minutes of a core per agent per 1M frames, once learning -----------------------------------------

RATE = re.compile(r"step [\d,]+/[\d,]+ .* ([\d,]+) step/s")


def resumed_rates(train_log: str) -> list[float]:
    """Per-agent frames/s of the log lines after the last resume, less the first (start-up inside it)."""
    after = train_log.rsplit("rlrun: resuming ", 1)
    if len(after) < 2:
        raise SystemExit("no resume in train.log")
    return [float(m.group(1).replace(",", "")) for m in RATE.finditer(after[1])][1:]


def cost(args) -> None:
    def resumed(run: Path):
        def go() -> float:
            with tempfile.TemporaryDirectory(prefix="minatar_cost_") as tmp:
                copy = Path(tmp) / run.name
                shutil.copytree(run, copy, ignore=shutil.ignore_patterns("checkpoint.prev.pt", ".rlrun.lock"))
                end = f"total_steps={finished[run]['env_steps_per_agent'] + args.frames}"
                log = f"log.interval={args.frames // 5}"
                cmd = [sys.executable, "-m", "rlrun.resume", str(copy), end, log, "eval.interval=0"]
                run_processes([[*cmd, "checkpoint.every=0"]])
                return statistics.median(resumed_rates(bounded.read_text(copy / "train.log", bounded.TABLE_LIMIT)))

        return go

    runs = {Path(r).name: Path(r) for r in args.runs}
    finished = {run: read_summary(run, agents=True) for run in runs.values()}
    results = alternate({name: resumed(run) for name, run in runs.items()}, args.rounds)
    rows = []
    for name, rounds in results.items():
        rate, agents = statistics.median(rounds), len(finished[runs[name]]["seeds"])
        minutes = 1e6 / rate / 60 / agents  # the process steps each agent `rate` times a second
        rows.append([name, agents, " / ".join(f"{r:.0f}" for r in rounds), f"{minutes:.1f}"])
    report(
        "MinAtar: cost of a run once learning, per agent",
        ["run", "agents", "frames/s per agent, each round's median", "minutes of a core per agent per 1M frames"],
        rows,
        notes=[
            f"each run copied and resumed from its last checkpoint for {args.frames:,} frames (no evaluation or "
            "checkpoint inside them), its agents batched as they ran; the rate of its log lines but the first",
        ],
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("learn", help="batched learning runs, one per (setting, game)")
    p.add_argument("--setting", default="preset", help=f"{' | '.join(SETTINGS)} | extra overrides after env=minatar")
    p.add_argument("--games", nargs="+", default=["all"], help=f"all, or some of {' '.join(GAMES)}")
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument("--first-seed", type=int, default=0)
    p.add_argument("--frames", type=int, default=1_000_000)
    p.add_argument("--root", default="runs/minatar")
    p.set_defaults(fn=learn)
    p = sub.add_parser("plot", help="curves and the table of the runs under --root")
    p.add_argument("--root", default="runs/minatar")
    p.set_defaults(fn=plot)
    p = sub.add_parser("aggregate", help="rliable IQM of scores normalised by the paper DQN's 5M value, per setting")
    p.add_argument("--root", default="runs/minatar")
    p.add_argument("--budget", type=int, default=1_000_000, help="frames at which each run is scored")
    p.set_defaults(fn=aggregate)
    p = sub.add_parser("paired", help="B against A on the games and seeds both ran: paired differences")
    p.add_argument("--a", required=True, help="the incumbent's setting label (its folder's first part)")
    p.add_argument("--b", required=True, help="the candidate's setting label")
    p.add_argument("--root", default="runs/minatar")
    p.add_argument("--budget", type=int, default=1_000_000, help="frames at which each run is scored")
    p.set_defaults(fn=paired)
    p = sub.add_parser("speed", help="frames/s against the reference dqn.py, alternated")
    p.add_argument("--reference", required=True, help="kenjyoung/MinAtar's examples/dqn.py")
    p.add_argument("--game", default="Breakout", choices=GAMES)
    p.add_argument("--frames", type=int, default=100_000, help="trained frames after the 5,000 random ones")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--seeds", type=int, default=8, help="also rlrun with this many agents batched (1: not)")
    p.set_defaults(fn=speed)
    p = sub.add_parser("cost", help="minutes of a core per agent per 1M frames, finished runs resumed")
    p.add_argument("--runs", nargs="+", required=True, help="run directories with a checkpoint")
    p.add_argument("--frames", type=int, default=20_000)
    p.add_argument("--rounds", type=int, default=2)
    p.set_defaults(fn=cost)
    args = parser.parse_args()
    refusing(lambda: args.fn(args))


if __name__ == "__main__":
    main()
