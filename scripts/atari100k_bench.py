"""Atari 100k: the DQN family's data-efficient rows beside DER's and DrQ(eps)'s published per-game means.

    # learning: each (row, game, seed) one run under --root (a finished run is kept, a stopped one resumes
    # from its checkpoint); 100k agent steps, then the final evaluation (100 episodes at epsilon 0.001)
    python scripts/atari100k_bench.py learn --rows drq_eps der --games all --seeds 3 --root runs/atari100k
    # per game and seed: the final evaluation's mean, human-normalised, beside the published means; per row
    # the IQM of human-normalised scores over games and seeds with its 95% stratified bootstrap interval
    python scripts/atari100k_bench.py aggregate --root runs/atari100k
    python scripts/atari100k_bench.py plot --root runs/atari100k            # training curves per game
    # cost: seconds of one update (the row's network, batch 32), on one pinned core
    taskset -c 0 python scripts/atari100k_bench.py cost --row der

Rows (ROWS below): `der` is +experiment=der_atari100k, `drq_eps` +experiment=drq_eps_atari100k, `drq_eps_small`
the latter on DER's small network without the intensity augmentation, gradients clipped at 10; anything else
is taken as overrides (name the experiment in them, e.g. --rows "+experiment=drq_eps_atari100k buffer.n_step=20").
The games and the published numbers live in benchlib/atari100k_data.py (docs/results/atari100k.md says why).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from benchlib.atari100k_data import GAMES, HUMAN, PUBLISHED, RANDOM, human_normalised
from benchlib.common import moving_means, report
from benchlib.game_runs import label_of, learn_each, run_dir, runs_under
from minatar_bench import last_eval

from rlrun.storage import bounded  # run files read within bounds, as rlrun reads them

ROWS = {
    "der": ["+experiment=der_atari100k"],  # Data-Efficient Rainbow (Dopamine's DER.gin)
    "drq_eps": ["+experiment=drq_eps_atari100k"],  # DrQ(eps) (Dopamine's DrQ_eps.gin)
    # DrQ(eps) on DER's small network, shifts only, gradients clipped at 10: the preset before 2026-12-07
    "drq_eps_small": [
        "+experiment=drq_eps_atari100k",
        "network=der",
        "buffer.augment_intensity=0",
        "algo.max_grad_norm=10",
    ],
}


def row_overrides(row: str) -> list[str]:
    return ROWS.get(row, row.split())


# --- learning runs -------------------------------------------------------------------------------------------


def learn(args) -> None:
    games = GAMES if args.games == ["all"] else args.games
    learn_each(
        Path(args.root),
        (
            (
                label_of(row, ROWS),
                game,
                seed,
                [
                    *row_overrides(row),
                    f"env.id=ALE/{game}-v5",
                    f"seed={seed}",
                    "log.progress_interval=0",
                    *args.overrides,
                ],
            )  # fmt: skip
            for row in args.rows
            for game in games
            for seed in range(args.first_seed, args.first_seed + args.seeds)
        ),
    )


# --- the table -------------------------------------------------------------------------------------------------


def collect(root: Path) -> dict[str, dict[str, dict[int, dict]]]:
    """row label -> game -> seed -> {"score": the final evaluation's mean or None, "wall": seconds or None}."""
    found: dict[str, dict[str, dict[int, dict]]] = {}
    for row, game, seed, run in runs_under(root):
        summary = run / "summary.json"
        wall = bounded.load_json(summary).get("wall_time_s") if summary.is_file() else None
        entry = {"score": last_eval(run), "wall": wall if isinstance(wall, (int, float)) else None}
        found.setdefault(row, {}).setdefault(game, {})[seed] = entry
    return found


def iqm_with_interval(matrix, reps: int) -> tuple[float, float, float]:
    """rliable's IQM of a (runs, games) matrix of human-normalised scores and its 95% stratified bootstrap
    interval (runs resampled within each game; seeded, so a report repeats)."""
    import numpy as np
    from rliable import library as rly, metrics

    from rlrun.report.aggregate import bootstrap_seed

    with bootstrap_seed(0):
        point, ci = rly.get_interval_estimates(
            {"row": np.asarray(matrix, dtype=float)}, lambda x: np.array([metrics.aggregate_iqm(x)]), reps=reps
        )
    return float(point["row"][0]), float(ci["row"][0, 0]), float(ci["row"][1, 0])


def published(game: str) -> list[str]:
    return [_fmt(PUBLISHED[name][game]) for name in PUBLISHED]


def aggregate(args) -> None:
    found = collect(Path(args.root))
    if not found:
        raise SystemExit(f"no runs under {args.root}")
    per_run, per_row, left_out = [], [], []
    for row, games in sorted(found.items()):
        for game in GAMES:
            for seed, run in sorted(games.get(game, {}).items()):
                score = run["score"]
                hns = None if score is None else human_normalised(game, score)
                minutes = None if run["wall"] is None else run["wall"] / 60
                per_run.append([row, game, seed, _fmt(score), _fmt(hns, ".3f"), *published(game), _fmt(minutes)])
        scored = {g: [r["score"] for r in games.get(g, {}).values() if r["score"] is not None] for g in GAMES}
        counts = {len(v) for v in scored.values()}
        if 0 in counts or len(counts) != 1:
            left_out.append(f"{row}: finished runs per game " + ", ".join(f"{g} {len(v)}" for g, v in scored.items()))
            continue
        matrix = [[human_normalised(g, scored[g][i]) for g in GAMES] for i in range(counts.pop())]
        iqm, lo, hi = iqm_with_interval(matrix, args.reps)
        means = {g: sum(v) / len(v) for g, v in scored.items()}
        beats = sum(means[g] >= value for g, value in PUBLISHED["DrQ(eps)"].items() if value is not None)
        per_row.append([row, len(matrix), f"{iqm:.3f}", f"{lo:.3f}-{hi:.3f}", f"{beats}/{len(GAMES)}",
                        *(f"{means[g]:.1f}" for g in GAMES)])  # fmt: skip
    names = list(PUBLISHED)
    report(
        "Atari 100k: the final evaluation per game and seed",
        ["row", "game", "seed", "score", "human-normalised", *(f"{n} (published mean)" for n in names), "minutes"],
        per_run,
        notes=[
            "score: the mean return of the final evaluation (100 episodes at the run's eval.epsilon after 100k"
            " agent steps, the run's summary.json final_eval_return); human-normalised:"
            " (score - random) / (human - random) with "
            + ", ".join(f"{g} {RANDOM[g]:g} / {HUMAN[g]:g}" for g in GAMES),
            "published means: DrQ(eps) the mean of Agarwal et al. 2021's 100 runs per game, DER van Hasselt et al."
            " 2019's scores (scripts/benchlib/atari100k_data.py); minutes: the run's wall time, evaluation included",
        ],
        pin="runs as started by `learn` (see each run's train.log for its hardware)",
    )
    report(
        "Atari 100k: IQM of human-normalised scores over the games and seeds of each row",
        ["row", "seeds", "IQM", "95% CI", ">= DrQ(eps) mean", *(f"{g} (mean)" for g in GAMES)],
        per_row,
        notes=[
            f"IQM and its stratified bootstrap interval by rliable ({args.reps} resamples, seeded); DrQ(eps)'s"
            " published means on these games: " + ", ".join(f"{g} {PUBLISHED['DrQ(eps)'][g]}" for g in GAMES),
            *(f"left out: {line}" for line in left_out),
        ],
        pin="runs as started by `learn`",
    )


def _fmt(value: float | None, spec: str = ".1f") -> str:
    return "n/a" if value is None else format(value, spec)


# --- curves ------------------------------------------------------------------------------------------------------


def plot(args) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    root = Path(args.root)
    found = collect(root)
    if not found:
        raise SystemExit(f"no runs under {root}")
    fig, axes = plt.subplots(1, len(GAMES), figsize=(4 * len(GAMES), 3.2), squeeze=False)
    for ax, game in zip(axes[0], GAMES):
        for i, (row, games) in enumerate(sorted(found.items())):
            for seed in sorted(games.get(game, {})):
                episodes = run_dir(root, row, game, seed) / "episodes.csv"
                if episodes.is_file():
                    steps, means = moving_means(episodes)
                    ax.plot(steps, means, color=f"C{i}", alpha=0.8, label=row if seed == min(games[game]) else None)
        for name, style in (("DrQ(eps)", "--"), ("DER", ":")):
            value = PUBLISHED[name][game]
            if value is not None:
                ax.axhline(value, color="k", ls=style, lw=1, label=f"{name} published")
        ax.set_title(game)
        ax.set_xlabel("agent steps")
    axes[0][0].set_ylabel("100-episode mean of training returns")
    axes[0][0].legend(fontsize=7)
    out = root / "atari100k_curves.png"
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    print(out)


# --- cost of one update ---------------------------------------------------------------------------------------


def cost(args) -> None:
    """Seconds per gradient step (sample, decode, update) of a row's learner at batch 32, fp32, one thread,
    on a replay of random frames: what 100k updates of one game-seed cost, without the env."""
    import torch
    from hydra import compose, initialize_config_module

    import rlrun.train  # noqa: F401  registers the schemas
    from rlrun.algos.dqn import dqn_learner
    from rlrun.nets.networks import QNetwork
    from rlrun.replay import PrioritizedReplayBuffer, ReplayBuffer
    from rlrun.replay.frames import FrameStore

    torch.set_num_threads(1)
    with initialize_config_module(config_module="rlrun.conf", version_base="1.3"):
        cfg = compose(config_name="config", overrides=row_overrides(args.row))
    n, a = cfg.network, cfg.algo
    torch.manual_seed(0)
    net = QNetwork(4 * 84 * 84, 18, obs_shape=[4, 84, 84], encoder=n.encoder, hidden_sizes=list(n.hidden_sizes),
                   layer_norm=n.layer_norm, dueling=n.dueling, noisy=n.noisy, num_atoms=n.num_atoms,
                   v_min=n.v_min, v_max=n.v_max)  # fmt: skip
    opt = torch.optim.Adam(net.parameters(), lr=cfg.optimizer.lr, eps=cfg.optimizer.eps, fused=True)
    learner = dqn_learner(net, opt, loss=a.loss, double=a.double, tau=a.tau,
                          target_update_period=a.target_update_period, max_grad_norm=a.max_grad_norm,
                          on_nonfinite="off")  # fmt: skip
    fill = 10_000
    frames = FrameStore(fill + 8, (84, 84), 4, 1, "cpu")
    frames.frames.copy_(torch.randint(0, 256, frames.frames.shape, dtype=torch.uint8))
    per = cfg.buffer._target_.endswith("PrioritizedReplayBuffer")
    buf = (PrioritizedReplayBuffer if per else ReplayBuffer)(
        fill, (4,), obs_dtype=torch.int64, generator=torch.Generator().manual_seed(0),
        augment=cfg.buffer.augment, augment_pad=cfg.buffer.augment_pad,
        augment_intensity=cfg.buffer.augment_intensity,
    )  # fmt: skip
    frames.augment, buf.augment = buf.augment, None
    idx = torch.arange(fill).unsqueeze(1) + torch.arange(4)
    buf.add(idx, torch.randint(0, 18, (fill,)), torch.randn(fill), idx + 1, torch.full((fill,), 0.99**10))

    def step() -> None:
        batch = frames.decode(buf.sample(a.batch_size, 0.5))
        metrics = learner.update(batch)
        if per:
            buf.update_priorities(batch.indices, metrics["priority"])

    for _ in range(20):
        step()
    times = []
    for _ in range(args.rounds):
        start = time.process_time()
        for _ in range(args.updates):
            step()
        times.append((time.process_time() - start) / args.updates)
    ms = sorted(t * 1e3 for t in times)
    median = ms[len(ms) // 2]
    report(
        f"Atari 100k: CPU time of one update, {args.row}",
        ["row", "network", "batch", "ms per update (median)", "each round", "minutes per 100k updates"],
        [
            [
                args.row,
                f"{n.encoder} {list(n.hidden_sizes)}",
                a.batch_size,
                f"{median:.1f}",
                " / ".join(f"{t:.1f}" for t in ms),
                f"{median * 100_000 / 1e3 / 60:.0f}",
            ]
        ],  # fmt: skip
        notes=[
            f"fp32, 1 thread, {args.rounds} rounds of {args.updates} updates after 20 to warm up; CPU time of this"
            " process (sample, frame decode, augmentation where the row has it, forward, target, backward, Adam,"
            " PER's priorities); 18 actions (the full action set: the costliest head)"
        ],
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("learn", help="one run per (row, game, seed), resumable")
    p.add_argument("--rows", nargs="+", default=list(ROWS), help=f"{' | '.join(ROWS)} | overrides")
    p.add_argument("--games", nargs="+", default=["all"], help=f"all, or some of {' '.join(GAMES)}")
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument("--first-seed", type=int, default=0)
    p.add_argument("--root", default="runs/atari100k")
    p.add_argument("--overrides", nargs="*", default=[], help="more overrides for every run (e.g. device=cpu)")
    p.set_defaults(fn=learn)
    p = sub.add_parser("aggregate", help="per game and seed, and the IQM of human-normalised scores per row")
    p.add_argument("--root", default="runs/atari100k")
    p.add_argument("--reps", type=int, default=50_000, help="bootstrap resamples (Agarwal et al. use 50,000)")
    p.set_defaults(fn=aggregate)
    p = sub.add_parser("plot", help="training curves per game, every row and seed")
    p.add_argument("--root", default="runs/atari100k")
    p.set_defaults(fn=plot)
    p = sub.add_parser("cost", help="CPU time of one update of a row's learner (batch 32, fp32, one thread)")
    p.add_argument("--row", default="der", help=f"{' | '.join(ROWS)} | overrides")
    p.add_argument("--updates", type=int, default=200)
    p.add_argument("--rounds", type=int, default=3)
    p.set_defaults(fn=cost)
    args = parser.parse_args()
    args.fn(args)


if __name__ == "__main__":
    main()
