"""The Atari backends side by side: ale-py's C++ vector env against gymnasium's AtariPreprocessing."""

from __future__ import annotations

import time
from collections.abc import Callable
from statistics import median

import gymnasium as gym
import numpy as np

from benchlib.common import QUIET, Run, alternate, each, merged, report, train_run

BACKENDS = ("vector", "gymnasium")
ATARI = {"noop_max": 30, "frame_skip": 4, "screen_size": 84, "terminal_on_life_loss": True}  # env=atari's


def env_alone(backend: str, envs: int, steps: int, threads: int | None) -> Run:
    """`envs` Pong envs under uniformly random actions, as training builds them (4 stacked frames, clipped
    rewards), reset and warmed up before the clock starts: wall seconds, and env steps per second of wall
    time and of the process's CPU time (all threads; steadier than wall time on a shared machine)."""
    from rlrun.envs import make_vector_env

    vec = make_vector_env(
        "ALE/Pong-v5", envs, frame_stack=4, clip_reward=1.0, atari={**ATARI, "backend": backend, "threads": threads}
    )
    space = vec.single_action_space
    assert isinstance(space, gym.spaces.Discrete)
    actions = np.random.default_rng(0).integers(int(space.n), size=(steps + 20, envs))
    vec.reset(seed=0)
    for a in actions[:20]:
        vec.step(a)
    start, cpu_start = time.perf_counter(), time.process_time()
    for a in actions[20:]:
        vec.step(a)
    wall, cpu = time.perf_counter() - start, time.process_time() - cpu_start
    vec.close()
    return Run(wall, 0.0, {"sps": envs * steps / wall, "cpu_sps": envs * steps / cpu})


def atari(args) -> None:
    """Two measurements per backend (env.atari.backend), alternating, medians over the rounds:
    - env alone: env steps/s of --envs Pong envs under random actions (`--steps` vector steps, in-process);
    - training loop: `python -m rlrun.train env=atari` at the Nature settings (batch 32, one update per 4 env
      steps, the Nature CNN) on --device, --loop-steps env steps of which the first quarter are random play;
      the loop's env steps/s from summary.json (every step counted, updates included)."""
    threads = args.threads

    def alone_run(backend: str) -> Callable[[], Run]:
        return lambda: env_alone(backend, args.envs, args.steps, threads)

    alone = alternate({b: alone_run(b) for b in BACKENDS}, args.reps)

    def loop(backend: str) -> Callable[[], Run]:
        base = [
            "env=atari",
            f"env.atari.backend={backend}",
            f"env.num_envs={args.envs}",
            f"device={args.device}",
            f"total_steps={args.loop_steps}",
            f"algo.learning_starts={args.loop_steps // 4}",
            f"buffer.capacity={args.loop_steps}",
            *QUIET,
            "log.progress_bar=false",
            *([] if threads is None else [f"env.atari.threads={threads}"]),
        ]
        return lambda: train_run(merged(base, args.overrides))

    loops = alternate({b: loop(b) for b in BACKENDS}, args.reps) if args.loop_steps else {}
    rows = []
    for b in BACKENDS:
        sps, cpu_sps = [r.summary["sps"] for r in alone[b]], [r.summary["cpu_sps"] for r in alone[b]]
        row = [b, f"{median(sps):,.0f}", each(sps, ",.0f"), f"{median(cpu_sps):,.0f}"]
        if loops:
            row.append(f"{median([r.summary['sps'] for r in loops[b]]):,.0f}")
        rows.append(row)

    def ratio(runs: dict, key: str) -> str:
        vector, gym = (median([r.summary[key] for r in runs[b]]) for b in BACKENDS)
        return f"{vector / gym:.2f}x"

    notes = [f"vector / gymnasium: env alone {ratio(alone, 'sps')} (per CPU second {ratio(alone, 'cpu_sps')})"]
    headers = ["backend", "env alone: env steps/s", "per round", "env steps per CPU s"]
    if loops:
        headers.append(f"training loop ({args.device}): env steps/s")
        notes[0] += f", training loop {ratio(loops, 'sps')}"
        notes.append(
            f"training loop: env=atari, {args.loop_steps} env steps, updates after {args.loop_steps // 4}; "
            "its env steps/s from summary.json"
        )
    report(
        f"atari: {args.envs} Pong envs, env.atari.threads={threads}",
        headers,
        rows,
        [*notes, f"medians of {args.reps} alternating rounds; env alone: {args.steps} vector steps"],
    )
