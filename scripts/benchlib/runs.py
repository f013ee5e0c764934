"""Benchmarks of whole training processes: compare, peers, updates, solve, seeds, sweep, threads."""

from __future__ import annotations

import importlib.util
import itertools
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from statistics import median
from typing import Any

from benchlib.common import (
    QUIET,
    ROOT,
    Run,
    alternate,
    each,
    merged,
    pinning,
    ratio_rows,
    report,
    run_processes,
    train_cmd,
    train_run,
)

# --- compare: this tree against another git revision -------------------------------------------------------

COMPARE_DEFAULTS = ["device=cpu", "total_steps=30000", *QUIET]


def git(*args: str) -> str:
    return subprocess.run(["git", "-C", str(ROOT), *args], check=True, capture_output=True, text=True).stdout.strip()


def compare(args) -> None:
    """Single-seed CPU training speed of this checkout against a git revision, both as whole processes
    pinned to one core. The revision is checked out into a temporary worktree and imported from there
    (PYTHONPATH and working directory); both run in this Python environment, so a revision that needs other
    dependencies fails on its first run."""
    if shutil.which("taskset") is None:
        raise SystemExit("compare pins its runs with taskset (util-linux), which is not installed")
    try:
        sha = git("rev-parse", "--verify", "--quiet", f"{args.base}^{{commit}}")
    except subprocess.CalledProcessError:
        raise SystemExit(f"--base {args.base}: not a commit of {ROOT}") from None
    head = git("rev-parse", "--short", "HEAD")
    dirty = " + uncommitted changes" if git("status", "--porcelain") else ""
    overrides = merged(COMPARE_DEFAULTS, args.overrides)
    pin = ["taskset", "-c", str(args.cpu)]
    tmp = Path(tempfile.mkdtemp(prefix="rlrun-compare-"))
    worktree = tmp / "base"
    try:
        subprocess.run(
            ["git", "-C", str(ROOT), "worktree", "add", "--quiet", "--detach", str(worktree), sha], check=True
        )
        sides = {"base": worktree, "current": ROOT}
        for name, root in sides.items():  # the editable install of rlrun must not win over PYTHONPATH
            found = subprocess.run(
                [sys.executable, "-c", "import rlrun; print(rlrun.__file__)"],
                cwd=root,
                env={**os.environ, "PYTHONPATH": str(root)},
                capture_output=True,
                text=True,
            )
            if not found.stdout.strip().startswith(str(root)):
                raise SystemExit(f"{name}: `import rlrun` from {root} found {found.stdout.strip() or found.stderr}")

        def contestant(root: Path) -> Callable[[], Run]:
            return lambda: train_run(overrides, prefix=pin, cwd=root, env={"PYTHONPATH": str(root)})

        contestants = {name: contestant(root) for name, root in sides.items()}
        for once in contestants.values():  # untimed: compiles the fresh worktree's bytecode, and fails early
            for _ in range(args.warmup):
                once()
        runs = alternate(contestants, args.reps)
    finally:
        subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(worktree)], check=False)
        shutil.rmtree(tmp, ignore_errors=True)

    label = {"base": f"base: {args.base} = {sha[:10]}", "current": f"current: {ROOT} at {head}{dirty}"}
    wall = {k: [r.wall for r in v] for k, v in runs.items()}
    sps = {k: [r.summary["sps"] for r in v if "sps" in r.summary] for k, v in runs.items()}
    rows = [
        [
            label[k],
            f"{median(wall[k]):.2f}",
            f"{median(sps[k]):,.0f}" if sps[k] else "n/a",
            each(wall[k], ".2f"),
            each(sps[k], ",.0f"),
        ]
        for k in runs
    ]
    sps_ratio = f"{median(sps['current']) / median(sps['base']):.3f}" if sps["base"] and sps["current"] else "n/a"
    rows.append(["current / base", f"{median(wall['current']) / median(wall['base']):.3f}", sps_ratio, "", ""])
    report(
        "compare: single-seed CPU training, current tree vs base",
        ["side", "median wall s", "median env steps/s", "wall s, each run", "env steps/s, each run"],
        rows,
        [
            f"each run: {shlex.join(pin + train_cmd(overrides, 'RUN_DIR'))} (RUN_DIR: a new temporary directory)",
            "  base from its worktree with PYTHONPATH=<worktree>, current from its root with PYTHONPATH=<root>",
            f"{args.reps} rounds alternating, after {args.warmup} untimed run(s) per side; wall: whole process, "
            f"start-up included; env steps/s: the training loop's, from summary.json",
            "current / base: wall below 1, env steps/s above 1 = the current tree is faster",
        ],
        pin=f"each run pinned with taskset -c {args.cpu}",
    )


# --- peers: rlrun against Stable-Baselines3 --------------------------------------------------------------

# CleanRL's CartPole defaults, and an update-bound variant (one gradient step per env step).
PEER_SETTINGS: dict[str, dict[str, Any]] = {
    "cleanrl_defaults": dict(
        steps=50_000,
        hidden=[120, 84],
        batch=128,
        train_freq=10,
        buffer=10_000,
        learning_starts=10_000,
        lr=2.5e-4,
        target_every_env_steps=500,
        eps_fraction=0.5,
    ),
    "update_bound": dict(
        steps=20_000,
        hidden=[120, 84],
        batch=128,
        train_freq=1,
        buffer=10_000,
        learning_starts=1_000,
        lr=2.5e-4,
        target_every_env_steps=500,
        eps_fraction=0.5,
    ),
}


def rlrun_peer_overrides(s: dict) -> list[str]:
    return [
        f"total_steps={s['steps']}",
        "env.num_envs=1",  # SB3: one env
        f"network.hidden_sizes=[{','.join(map(str, s['hidden']))}]",
        "network.layer_norm=false",
        f"algo.batch_size={s['batch']}",
        f"algo.train_freq={s['train_freq']}",
        "algo.gradient_steps=1",
        f"buffer.capacity={s['buffer']}",
        "buffer.n_step=1",
        f"algo.learning_starts={s['learning_starts']}",
        f"optimizer.lr={s['lr']}",
        "algo.tau=1.0",
        "algo.lr_end_factor=1.0",
        "algo.loss=huber",
        "algo.double=false",  # SB3's DQN is the Nature DQN target, not Double DQN
        f"algo.target_update_period={max(1, s['target_every_env_steps'] // s['train_freq'])}",
        "exploration.end=0.05",
        f"exploration.duration={int(s['eps_fraction'] * s['steps'])}",
        *QUIET,
        "device=cpu",
        "device.threads=1",
    ]


def sb3_cmd(s: dict) -> list[str]:
    code = f"""
import torch
torch.set_num_threads(1)
from stable_baselines3 import DQN
DQN("MlpPolicy", "CartPole-v1", learning_rate={s["lr"]}, buffer_size={s["buffer"]},
    learning_starts={s["learning_starts"]}, batch_size={s["batch"]}, tau=1.0, gamma=0.99,
    train_freq={s["train_freq"]}, gradient_steps=1, target_update_interval={s["target_every_env_steps"]},
    exploration_fraction={s["eps_fraction"]}, exploration_final_eps=0.05,
    policy_kwargs=dict(net_arch={s["hidden"]}), seed=0, device="cpu", verbose=0).learn({s["steps"]})
"""
    return [sys.executable, "-c", code]


def peers(args) -> None:
    """The same work through rlrun and SB3, identical hyperparameters (network sizes, batch, update frequency,
    buffer, steps, one torch thread each): whole-process env steps/s (start-up included) and peak RSS."""
    if importlib.util.find_spec("stable_baselines3") is None:
        raise SystemExit("peers needs Stable-Baselines3: pip install -e '.[bench]'")
    rows = []
    for name, s in PEER_SETTINGS.items():
        runs = alternate(
            {"rlrun": lambda s=s: train_run(rlrun_peer_overrides(s)), "sb3": lambda s=s: run_processes([sb3_cmd(s)])},
            args.reps,
        )
        sps = {k: median([s["steps"] / r.wall for r in v]) for k, v in runs.items()}
        rss = {k: median([r.rss_mib for r in v]) for k, v in runs.items()}
        rows.append(
            [
                f"{name} ({s['steps']} steps, train_freq {s['train_freq']})",
                f"{sps['rlrun']:,.0f}",
                f"{sps['sb3']:,.0f}",
                f"{sps['rlrun'] / sps['sb3']:.2f}x",
                f"{rss['rlrun']:.0f}",
                f"{rss['sb3']:.0f}",
            ]
        )
    report(
        "peers: whole-process env steps/s, rlrun vs Stable-Baselines3 (CartPole-v1, CPU, one thread)",
        ["setting", "rlrun steps/s", "SB3 steps/s", "rlrun/SB3", "rlrun peak RSS MiB", "SB3 peak RSS MiB"],
        rows,
        [f"medians of {args.reps} alternating rounds"],
    )


# --- updates, solve, seeds, sweep: whole training runs ---------------------------------------------------


def updates(args) -> None:
    """Whole training runs (20k env steps) of the default config and of dueling + PER, each its own process:
    env steps/s and gradient updates/s of the training loop (summary.json), whole-process time, peak memory."""
    configs = {"default": [], "network=dueling buffer=per": ["network=dueling", "buffer=per"]}

    def contestant(config: list[str]) -> Callable[[], Run]:
        base = [*config, f"device={args.device}", "total_steps=20000", *QUIET, "log.progress_bar=false"]
        return lambda: train_run(merged(base, args.overrides))

    runs = alternate({name: contestant(c) for name, c in configs.items()}, args.reps)
    rows = []
    for name, rs in runs.items():
        loop = median([r.summary["wall_time_s"] for r in rs])
        memory = [
            r.summary["device_max_memory_allocated_mb"]
            for r in rs
            if r.summary.get("device_max_memory_allocated_mb") is not None
        ]
        rows.append(
            [
                " ".join([name, *args.overrides]),
                f"{median([r.summary['sps'] for r in rs]):,.0f}",
                f"{median([r.summary['gradient_updates'] / r.summary['wall_time_s'] for r in rs]):,.0f}",
                f"{loop:.1f}",
                f"{median([r.wall for r in rs]):.1f}",
                f"{median([r.rss_mib for r in rs]):.0f}",
                f"{median(memory):.0f}" if memory else "n/a",
            ]
        )
    report(
        f"updates: whole training runs, 20k env steps, device={args.device}",
        [
            "config",
            "loop env steps/s",
            "loop updates/s",
            "loop s",
            "whole process s",
            "peak RSS MiB",
            "peak device MiB",
        ],
        rows,
        [f"medians of {args.reps} alternating round(s)"],
    )


def solve(args) -> None:
    """Wall seconds from process start to CartPole 475, the default config as a user runs it (evaluations,
    checkpoints, the plot), stopping once solved."""
    rows, walls, solved = [], [], 0
    for seed in range(args.seeds):
        run = train_run(merged([f"seed={seed}", "stop_on_solve=true", "log.progress_bar=false"], args.overrides))
        step = run.summary["solved_step"]
        walls.append(run.wall)
        solved += step is not None
        rows.append([seed, "not solved" if step is None else f"{step:,}", f"{run.wall:.1f}"])
        print(f"seed {seed}: solved at step {step}, {run.wall:.1f}s from process start", file=sys.stderr, flush=True)
    report(
        "solve: time to the env's reward threshold, from process start",
        ["seed", "solved at step", "wall s"],
        rows,
        [f"median time-to-solve: {median(walls):.1f}s; solved {solved}/{args.seeds}"],
    )


def seeds(args) -> None:
    """K seeds batched in one process (`seeds=K`) against one single-seed run, same env steps per agent, as
    whole processes; with --separate also K single-seed processes side by side (what PyTorch peers do)."""
    k = args.seeds

    def command(out: str, **keys) -> list[str]:
        base = [
            f"total_steps={args.steps}",
            f"device={args.device}",
            *QUIET,
            "log.progress_bar=false",
            *(f"{key}={v}" for key, v in keys.items()),
        ]
        return train_cmd(merged(base, args.overrides), out)

    with tempfile.TemporaryDirectory() as tmp:
        n = itertools.count()  # a fresh run dir for every process
        contestants = {
            "single": lambda: run_processes([command(f"{tmp}/{next(n)}", seed=0)]).wall,
            f"batched x{k}": lambda: run_processes([command(f"{tmp}/{next(n)}", seed=0, seeds=k)]).wall,
        }
        if args.separate:
            contestants[f"{k} processes"] = lambda: (
                run_processes([command(f"{tmp}/{next(n)}", seed=i) for i in range(k)]).wall
            )
        times = alternate(contestants, args.reps)
    rows = ratio_rows(times, "single")
    report(
        f"seeds: seeds={k} in one process vs one seed ({args.steps} env steps per agent, {args.device})",
        ["contestant", "median wall s", "ratio to single", "wall s, each run"],
        rows,
        [f"medians of {args.reps} alternating rounds; whole processes, start-up included"],
        pin=pinning(parallel=args.separate),
    )


def timed_sweep(overrides: Sequence[str]) -> Callable[[], float]:
    """A contestant: `python -m rlrun.train -m <overrides>` into a temporary sweep dir, its wall seconds."""

    def once() -> float:
        with tempfile.TemporaryDirectory() as out:
            cmd = [sys.executable, "-m", "rlrun.train", "-m", *overrides, f"hydra.sweep.dir={out}"]
            return run_processes([cmd]).wall

    return once


def two_sweeps(title: str, contestants: dict[str, Callable[[], float]], reps: int, note: str) -> None:
    """Alternate two timed sweeps and report each one's median wall time and the second over the first."""
    times = alternate(contestants, reps)
    (a, a_times), (b, b_times) = times.items()
    rows = [[name, f"{median(t):.1f}", each(t)] for name, t in times.items()]
    rows.append([f"{b} / {a}", f"{median(b_times) / median(a_times):.2f}", ""])
    report(title, ["launcher", "median wall s", "wall s, each round"], rows, [note], pin=pinning(parallel=True))


def sweep(args) -> None:
    """A 4-job sweep through the joblib launcher (2 workers) against the same sweep run serially; each job a
    real training run with one torch thread."""
    jobs = ["seed=0,1,2,3", f"total_steps={args.steps}", "eval.interval=0", "log.plot=false", "device.threads=1"]
    contestants = {
        "serial": timed_sweep(jobs),
        "joblib, 2 workers": timed_sweep([*jobs, "hydra/launcher=joblib", "hydra.launcher.n_jobs=2"]),
    }
    title = f"sweep: 4 jobs of {args.steps} env steps, joblib 2 workers vs serial"
    two_sweeps(title, contestants, args.reps, f"medians of {args.reps} alternating rounds")


def launchers(args) -> None:
    """The sweep `-m optimizer.lr=3e-4,1e-3,2e-3,5e-3 seed=0,1,2,3,4` (default config, `--steps` env steps per
    job) through `hydra/launcher=joblib` and through `hydra/launcher=batched`, both with `n_jobs` processes
    at a time: whole-command wall time, Hydra's start, the report and every process start-up included."""
    jobs = ["optimizer.lr=3e-4,1e-3,2e-3,5e-3", "seed=0,1,2,3,4", f"total_steps={args.steps}"]
    contestants = {
        name: timed_sweep([*jobs, f"hydra/launcher={name}", f"hydra.launcher.n_jobs={args.n_jobs}"])
        for name in ("joblib", "batched")
    }
    title = f"launchers: 20-job lr x seed sweep of {args.steps:,} env steps per job, n_jobs={args.n_jobs}"
    two_sweeps(title, contestants, args.reps, f"medians of {args.reps} alternating rounds, default config otherwise")


def threads(args) -> None:
    """The same short training job in this process, with `device.threads=1` and with `device.threads=null`
    (torch's default thread count): env steps/s of the training loop."""
    import torch
    from hydra import compose, initialize_config_module

    from rlrun.config.schemas import register_configs
    from rlrun.train import train

    register_configs()
    default_threads = torch.get_num_threads()

    def contestant(threads: str) -> Callable[[], float]:
        def once() -> float:
            with initialize_config_module(config_module="rlrun.conf", version_base="1.3"):
                cfg = compose(
                    "config",
                    overrides=merged(
                        [f"total_steps={args.steps}", "eval.interval=0", "log.plot=false", f"device.threads={threads}"],
                        args.overrides,
                    ),
                )
            try:
                with tempfile.TemporaryDirectory() as out:
                    return train(cfg, Path(out))["sps"]
            finally:
                torch.set_num_threads(default_threads)

        return once

    sps = alternate({"1": contestant("1"), "null": contestant("null")}, args.reps)
    one, default = median(sps["1"]), median(sps["null"])
    rows = [
        ["1", f"{one:,.0f}", each(sps["1"], ",.0f")],
        [f"null ({default_threads})", f"{default:,.0f}", each(sps["null"], ",.0f")],
        ["1 / default", f"{one / default:.2f}", ""],
    ]
    report(
        f"threads: env steps/s with one torch thread vs torch's default ({default_threads} here)",
        ["device.threads", "median env steps/s", "env steps/s, each run"],
        rows,
        [f"{args.steps} env steps, medians of {args.reps} alternating rounds, in one process"],
        pin=pinning(parallel=True),
    )
