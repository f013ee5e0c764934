"""rlrun's benchmarks, one command: `python scripts/bench.py <subcommand> [options]`.

    python scripts/bench.py compare --base main [--repeats 5] [--overrides network=c51]  # this tree vs a git rev
    python scripts/bench.py peers --reps 5                    # whole-process env steps/s, rlrun vs SB3 (bench extra)
    python scripts/bench.py updates [--device cuda] [--overrides env.num_envs=64]  # loop env steps/s, updates/s
    python scripts/bench.py per                               # PER sample+update us at 1e4/1e5/1e6 vs uniform
    python scripts/bench.py switches --device cuda            # us per update: plain / amp / compile / cuda_graphs
    python scripts/bench.py pixels                            # ms per Nature/DER CNN update: bf16, channels_last
    python scripts/bench.py envs --envs 160                   # CartPole vector step: sync vs numpy (env.vectorization)
    python scripts/bench.py memory                            # bytes of a 1M-transition Atari replay
    python scripts/bench.py solve --seeds 5                   # wall seconds from process start to CartPole 475
    python scripts/bench.py seeds --seeds 8 --steps 20000     # seeds=K in one process vs one single-seed run
    python scripts/bench.py sweep                             # 4-job sweep: joblib with 2 workers vs serial
    python scripts/bench.py launchers --reps 2                # 20-job sweep: batched launcher vs joblib, 2 at a time
    python scripts/bench.py backends --reps 3                 # 40-job sweep: batched local / submitit vs joblib
    python scripts/bench.py backends --identical              # the same sweep on each backend: same episodes?
    python scripts/bench.py threads                           # env steps/s with 1 torch thread vs torch's default
    python scripts/bench.py atari --envs 8 [--base REV]        # Atari env steps/s: ale-py's vector env vs gymnasium's

Contestants alternate (the order reversed every other round, so a drifting machine weighs on both alike) and
the figures are medians over the rounds. Each subcommand ends with a table under the date, the hardware and
the exact command. Figures hold for the machine they come from: compare ratios, not absolute values. For
steady single-process timings pin to an idle core: `taskset -c 0 python scripts/bench.py ...` (`compare`
pins its runs itself; `seeds --separate` and `sweep` need several idle cores and must not be pinned).

Only rlrun's stable surface is used: `python -m rlrun.train`, `rlrun.train.train`, Hydra's compose API,
the constructors of QNetwork, the replay buffers and FrameStore, `rlrun.algos.dqn.dqn_learner` (and
`atari`'s env-alone figure, `rlrun.envs.vector.make_vector_env`).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # benchlib, next to this script

from benchlib.atari import atari  # noqa: E402
from benchlib.backends import backends  # noqa: E402
from benchlib.parts import envs, memory, per, switches  # noqa: E402
from benchlib.pixels import pixels  # noqa: E402
from benchlib.runs import (  # noqa: E402
    COMPARE_DEFAULTS,
    compare,
    launchers,
    peers,
    seeds,
    solve,
    sweep,
    threads,
    updates,
)

# --- command line ------------------------------------------------------------------------------------------


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(
        dest="subcommand",
        required=True,
        metavar="<subcommand>",
        title="subcommands (python scripts/bench.py <subcommand> --help for its options)",
    )

    def command(
        name: str, fn: Callable, summary: str, reps: int | None = None, device: bool = False, overrides: bool = False
    ) -> argparse.ArgumentParser:
        sp = sub.add_parser(
            name,
            help=summary,
            description=f"{summary}\n\n{fn.__doc__ or ''}",
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        sp.set_defaults(fn=fn)
        if reps is not None:
            sp.add_argument(
                "--reps",
                "--repeats",
                dest="reps",
                type=int,
                default=reps,
                help=f"alternating rounds; medians over them (default {reps})",
            )
        if device:
            sp.add_argument("--device", default="cpu", help="torch device (default cpu)")
        if overrides:
            sp.add_argument(
                "--overrides",
                nargs="+",
                default=[],
                metavar="KEY=VALUE",
                help="rlrun overrides for every run (they replace the subcommand's own for the same key)",
            )
        return sp

    sp = command(
        "compare",
        compare,
        "single-seed CPU training speed of this tree vs a git revision, pinned",
        reps=5,
        overrides=True,
    )
    sp.add_argument("--base", required=True, help="git revision to compare against (branch, tag, commit)")
    sp.add_argument("--cpu", type=int, default=0, help="the core both sides run on, `taskset -c CPU` (default 0)")
    sp.add_argument("--warmup", type=int, default=1, help="untimed runs per side first (default 1)")
    sp.epilog = f"default overrides: {' '.join(COMPARE_DEFAULTS)} (the same for both sides)"
    command("peers", peers, "whole-process env steps/s and peak RSS, rlrun vs Stable-Baselines3", reps=3)
    command(
        "updates",
        updates,
        "loop env steps/s, updates/s, peak memory: default and dueling+PER",
        reps=1,
        device=True,
        overrides=True,
    )
    command("per", per, "PER sample+update us at 1e4/1e5/1e6 stored, and a PER vs uniform gradient step", device=True)
    command("switches", switches, "us per gradient step for plain / amp / compile / cuda_graphs", device=True)
    sp = command("pixels", pixels, "ms per pixel-network update on the CPU: fp32 / bf16, channels-last or not", reps=5)
    sp.add_argument("--encoders", nargs="+", default=["nature_cnn", "der_cnn"], help="network.encoder values")
    sp.add_argument("--batches", nargs="+", type=int, default=[32, 256], help="update batch sizes (default 32 256)")
    sp.add_argument("--envs", type=int, default=8, help="frames per greedy forward (default 8)")
    sp.add_argument("--calls", type=int, default=10, help="timed calls per round (default 10)")
    sp = command("envs", envs, "CartPole-v1 vector step: gymnasium's sync vector env vs rlrun's numpy one", reps=5)
    sp.add_argument("--envs", type=int, default=160, help="sub-envs (default 160: a seeds=10 run)")
    sp = command("memory", memory, "bytes of a 1M-transition Atari replay that stores frames once")
    sp.add_argument("--capacity", type=int, default=1_000_000, help="transitions (default 1,000,000)")
    sp = command(
        "solve", solve, "wall seconds from process start to CartPole 475, default config, per seed", overrides=True
    )
    sp.add_argument("--seeds", type=int, default=5, help="seeds 0..N-1 (default 5)")
    sp = command(
        "seeds",
        seeds,
        "seeds=K batched in one process vs one single-seed run, whole processes",
        reps=3,
        device=True,
        overrides=True,
    )
    sp.add_argument("--seeds", type=int, default=8, help="K (default 8)")
    sp.add_argument("--steps", type=int, default=20_000, help="env steps per agent (default 20000)")
    sp.add_argument("--separate", action="store_true", help="also time K single-seed processes side by side")
    sp = command("sweep", sweep, "4-job sweep: joblib launcher with 2 workers vs serial", reps=3)
    sp.add_argument("--steps", type=int, default=20_000, help="env steps per job (default 20000)")
    sp = command("launchers", launchers, "20-job lr x seed sweep: batched launcher vs joblib", reps=3)
    sp.add_argument("--steps", type=int, default=100_000, help="env steps per job (default 100000)")
    sp.add_argument("--n-jobs", dest="n_jobs", type=int, default=2, help="processes at a time (default 2)")
    sp = command("backends", backends, "40-job sweep: the batched launcher's backends vs joblib", reps=3)
    sp.add_argument("--steps", type=int, default=20_000, help="env steps per job (default 20000)")
    sp.add_argument("--identical", action="store_true", help="compare each backend's episodes.csv and report")
    sp = command(
        "threads", threads, "loop env steps/s with one torch thread vs torch's default count", reps=3, overrides=True
    )
    sp.add_argument("--steps", type=int, default=20_000, help="env steps per run (default 20000)")
    sp = command(
        "atari",
        atari,
        "env steps/s of the Atari backends (env.atari.backend): env alone and the training loop",
        reps=3,
        device=True,
        overrides=True,
    )
    sp.add_argument("--envs", type=int, default=8, help="Pong envs (env.num_envs, default 8)")
    sp.add_argument("--steps", type=int, default=1000, help="vector steps of the env-alone timing (default 1000)")
    sp.add_argument(
        "--loop-steps", type=int, default=4000, help="env steps per training run; 0 skips the loop (default 4000)"
    )
    sp.add_argument("--threads", type=int, default=None, help="env.atari.threads (default: ale-py's)")
    sp.add_argument(
        "--base", default=None, help="also time the env alone as git revision BASE builds it (its whole Atari pipeline)"
    )
    args = p.parse_args()
    args.fn(args)


if __name__ == "__main__":
    main()
