"""Whole-process time of a short run: `python -m rlrun.train` against CleanRL's DQN at the same settings.

    python scripts/startup_bench.py [--steps 2000 50000] [--reps 5] [--cpu 0] [--base /path/to/other/source/tree]
                                    [--also log.plot=false]   # rlrun once more with these overrides

Each contestant is one process from start to exit (imports, config, the run, its files), on CartPole-v1 with
CleanRL's `dqn.py` defaults (one env, a 120-84 MLP, batch 128, an update every 10 steps after 10,000,
buffer 10,000, lr 2.5e-4, a hard target copy every 500 steps, epsilon 1 -> 0.05 over half the run):
CleanRL's script is `scripts/benchlib/cleanrl_dqn.py` (it needs Stable-Baselines3: the `bench` extra).
rlrun runs as a user runs it, with its run directory, checkpoint, model.pt, summary and returns.png; only the
greedy evaluations are off (CleanRL has none). `--base` adds the rlrun of another source tree (e.g.
`git archive <rev> | tar -x -C /tmp/base`), run by this interpreter with `PYTHONPATH=<tree>`, for
before/after figures. The trees' modules are compiled to bytecode first, as an installed package's are (with
PYTHONDONTWRITEBYTECODE set, every process would compile rlrun's ~100 modules again). Contestants
alternate (the order reversed every other round), every process pinned to one core (`taskset -c <cpu>`),
and the figures are medians of wall time and of CPU time (user + system: on a core that other work shares,
a process's wall time grows with that work and its CPU time hardly does).
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # benchlib, next to this script

from benchlib.common import ROOT, Run, alternate, each, report, run_processes  # noqa: E402
from benchlib.runs import PEER_SETTINGS, rlrun_peer_overrides  # noqa: E402

CLEANRL = Path(__file__).resolve().parent / "benchlib" / "cleanrl_dqn.py"


def rlrun_overrides(steps: int) -> list[str]:
    """CleanRL's settings in rlrun's keys (benchlib.runs), with rlrun's own outputs on but evaluations."""
    settings = {**PEER_SETTINGS["cleanrl_defaults"], "steps": steps}
    kept = [o for o in rlrun_peer_overrides(settings) if not o.startswith(("log.plot", "checkpoint.every"))]
    return [o.replace("algo.loss=huber", "algo.loss=mse") for o in kept] + ["log.progress_bar=false"]  # CleanRL's


def rlrun_run(root: Path, steps: int, pin: list[str], also: tuple[str, ...] = ()) -> Run:
    """One run of the rlrun in `root` (this checkout, or `--base`'s tree first on the path)."""
    with tempfile.TemporaryDirectory() as out:
        cmd = [*pin, sys.executable, "-m", "rlrun.train", *rlrun_overrides(steps), *also, f"hydra.run.dir={out}/run"]
        env = {"PYTHONPATH": str(root)} if root != ROOT else None
        return run_processes([cmd], cwd=root, env=env)


def compiled(root: Path) -> None:
    """rlrun's modules in `root` as bytecode, as an installed package has them."""
    dirs = [str(root / d) for d in ("rlrun", "hydra_plugins", "scripts/benchlib") if (root / d).is_dir()]
    subprocess.run([sys.executable, "-m", "compileall", "-q", *dirs], check=True)


def cleanrl_run(steps: int, pin: list[str]) -> Run:
    with tempfile.TemporaryDirectory() as out:
        cmd = [*pin, sys.executable, str(CLEANRL), "--total-timesteps", str(steps), "--runs-dir", out]
        return run_processes([cmd])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, nargs="+", default=[2000, 50_000])
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--cpu", type=int, default=0, help="the core every process is pinned to")
    p.add_argument("--base", type=Path, help="another source tree of rlrun to time as well (PYTHONPATH)")
    p.add_argument("--also", nargs="+", default=[], help="overrides of one more rlrun contestant (log.plot=false)")
    args = p.parse_args()
    pin = ["taskset", "-c", str(args.cpu)] if shutil.which("taskset") else []
    for root in (ROOT, args.base) if args.base is not None else (ROOT,):
        compiled(root)
    rows = []
    for steps in args.steps:
        contestants = {
            "rlrun": lambda s=steps: rlrun_run(ROOT, s, pin),
            "cleanrl": lambda s=steps: cleanrl_run(s, pin),
        }
        if args.base is not None:
            contestants["rlrun (base)"] = lambda s=steps: rlrun_run(args.base, s, pin)
        if args.also:
            also = tuple(args.also)
            contestants[f"rlrun {' '.join(also)}"] = lambda s=steps, a=also: rlrun_run(ROOT, s, pin, a)
        runs = alternate(contestants, args.reps)
        ref_wall = statistics.median(r.wall for r in runs["cleanrl"])
        ref_cpu = statistics.median(r.cpu for r in runs["cleanrl"])
        for name, done in runs.items():
            wall, cpu = statistics.median(r.wall for r in done), statistics.median(r.cpu for r in done)
            rows.append(
                [f"{steps:,}", name, f"{wall:.2f}", f"{wall - ref_wall:+.2f}", f"{cpu:.2f}", f"{cpu - ref_cpu:+.2f}"]
                + [each([r.wall for r in done], ".2f")]
            )
    report(
        "startup: whole-process seconds, rlrun vs CleanRL's dqn.py (CartPole-v1, CleanRL's settings)",
        ["env steps", "contestant", "median wall s", "minus CleanRL's", "median CPU s", "minus CleanRL's", "walls, s"],
        rows,
        [
            f"rlrun: python -m rlrun.train {' '.join(rlrun_overrides(args.steps[0]))} hydra.run.dir=<tmp>",
            f"cleanrl: python {CLEANRL.relative_to(ROOT)} --total-timesteps <steps> --runs-dir <tmp>",
            f"{args.reps} alternating rounds" + (f"; base: {args.base}" if args.base else ""),
        ],
        pin=f"every process pinned with taskset -c {args.cpu}" if pin else "not pinned (no taskset)",
    )


if __name__ == "__main__":
    main()
