"""The Atari backends side by side: ale-py's C++ vector env against gymnasium's AtariPreprocessing."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from statistics import median

from benchlib.common import QUIET, ROOT, Run, alternate, each, merged, report, train_run

BACKENDS = ("vector", "gymnasium")
ATARI = {"noop_max": 30, "frame_skip": 4, "screen_size": 84, "terminal_on_life_loss": True}  # env=atari's


# The env-alone timing, run in a fresh process that imports rlrun from the given checkout (this one, or
# another revision's for `--base`): `envs` Pong envs under uniformly random actions, as training builds them
# (4 stacked frames, clipped rewards), reset and warmed up before the clock starts; wall seconds, and env
# steps per second of wall time and of the process's CPU time (all threads; steadier on a shared machine).
# Only `rlrun.envs.vector.make_vector_env(id, n, frame_stack=, clip_reward=, atari=)`, which every revision since the
# Atari support has, is assumed; an earlier revision ignores the atari keys it does not know (backend, threads).
ENV_ALONE = """
import json, sys, time
import numpy as np
from rlrun.envs.vector import make_vector_env
envs, steps = int(sys.argv[1]), int(sys.argv[2])
atari = json.loads(sys.argv[3])
vec = make_vector_env("ALE/Pong-v5", envs, frame_stack=4, clip_reward=1.0, atari=atari)
actions = np.random.default_rng(0).integers(int(vec.single_action_space.n), size=(steps + 20, envs))
vec.reset(seed=0)
for a in actions[:20]:
    vec.step(a)
start, cpu_start = time.perf_counter(), time.process_time()
for a in actions[20:]:
    vec.step(a)
wall, cpu = time.perf_counter() - start, time.process_time() - cpu_start
vec.close()
print(json.dumps({"wall": wall, "sps": envs * steps / wall, "cpu_sps": envs * steps / cpu}))
"""


def env_alone(root: Path, envs: int, steps: int, atari: dict) -> Run:
    """ENV_ALONE with rlrun imported from the checkout at `root`."""
    # PYTHONPATH keeps what it held (an offline machine's packages may live there), with `root` first
    path = os.pathsep.join(p for p in (str(root), os.environ.get("PYTHONPATH", "")) if p)
    proc = subprocess.run(
        [sys.executable, "-c", ENV_ALONE, str(envs), str(steps), json.dumps(atari)],
        cwd=root,
        env={**os.environ, "PYTHONPATH": path},
        capture_output=True,
        text=True,
    )
    if proc.returncode != 0:
        raise SystemExit(f"bench atari: the env-alone timing failed:\n{proc.stderr[-2000:]}")
    out = proc.stdout
    result = json.loads(out.strip().splitlines()[-1])
    return Run(result["wall"], 0.0, result)


@contextlib.contextmanager
def base_checkout(rev: str) -> Iterator[Path]:
    """`rev` checked out into a temporary git worktree, removed afterwards."""
    tmp = Path(tempfile.mkdtemp(prefix="rlrun-atari-base-"))
    try:
        add = ["git", "-C", str(ROOT), "worktree", "add", "--quiet", "--detach", str(tmp / "b"), rev]
        subprocess.run(add, check=True)
        yield tmp / "b"
    finally:
        subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(tmp / "b")], check=False)
        shutil.rmtree(tmp, ignore_errors=True)


def atari(args) -> None:
    """Two measurements per backend (env.atari.backend), alternating, medians over the rounds:
    - env alone: env steps/s of --envs Pong envs under random actions (`--steps` vector steps, a process each);
    - training loop: `python -m rlrun.train env=atari` at the Nature settings (batch 32, one update per 4 env
      steps, the Nature CNN) on --device, --loop-steps env steps of which the first quarter are random play;
      the loop's env steps/s from summary.json (every step counted, updates included)."""
    threads = args.threads

    def alone_run(backend: str) -> Callable[[], Run]:
        return lambda: env_alone(ROOT, args.envs, args.steps, {**ATARI, "backend": backend, "threads": threads})

    with contextlib.ExitStack() as stack:
        contestants = {b: alone_run(b) for b in BACKENDS}
        if args.base:
            root = stack.enter_context(base_checkout(args.base))
            contestants[f"base {args.base}"] = lambda: env_alone(root, args.envs, args.steps, ATARI)
        alone = alternate(contestants, args.reps)

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
    for name in alone:
        if name not in BACKENDS:  # --base: that revision's whole Atari pipeline, env alone
            sps, cpu_sps = [r.summary["sps"] for r in alone[name]], [r.summary["cpu_sps"] for r in alone[name]]
            row = [name, f"{median(sps):,.0f}", each(sps, ",.0f"), f"{median(cpu_sps):,.0f}"]
            rows.append(row + ([""] if loops else []))
            vector = median([r.summary["sps"] for r in alone["vector"]])
            vector_cpu = median([r.summary["cpu_sps"] for r in alone["vector"]])
            per_cpu = vector_cpu / median(cpu_sps)
            notes.append(f"vector / {name}: env alone {vector / median(sps):.2f}x (per CPU second {per_cpu:.2f}x)")
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
