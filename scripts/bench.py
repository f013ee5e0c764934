"""rlrun's benchmarks, one command: `python scripts/bench.py <subcommand> [options]`.

    python scripts/bench.py compare --base main [--repeats 5] [--overrides network=c51]  # this tree vs a git rev
    python scripts/bench.py peers --reps 5                    # whole-process env steps/s, rlrun vs SB3 (bench extra)
    python scripts/bench.py updates [--device cuda] [--overrides env.num_envs=64]  # loop env steps/s, updates/s
    python scripts/bench.py per                               # PER sample+update us at 1e4/1e5/1e6 vs uniform
    python scripts/bench.py switches --device cuda            # us per update: plain / amp / compile / cuda_graphs
    python scripts/bench.py memory                            # bytes of a 1M-transition Atari replay
    python scripts/bench.py solve --seeds 5                   # wall seconds from process start to CartPole 475
    python scripts/bench.py seeds --seeds 8 --steps 20000     # seeds=K in one process vs one single-seed run
    python scripts/bench.py sweep                             # 4-job sweep: joblib with 2 workers vs serial
    python scripts/bench.py threads                           # env steps/s with 1 torch thread vs torch's default

Contestants alternate (the order reversed every other round, so a drifting machine weighs on both alike) and
the figures are medians over the rounds. Each subcommand ends with a table under the date, the hardware and
the exact command. Figures hold for the machine they come from: compare ratios, not absolute values. For
steady single-process timings pin to an idle core: `taskset -c 0 python scripts/bench.py ...` (`compare`
pins its runs itself; `seeds --separate` and `sweep` need several idle cores and must not be pinned).

Only rlrun's stable surface is used: `python -m rlrun.train`, `rlrun.train.train`, Hydra's compose API,
and the constructors of QNetwork, DQNLearner, the replay buffers and FrameStore.
"""

from __future__ import annotations

import argparse
import datetime
import importlib.util
import itertools
import json
import os
import platform
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from statistics import median
from typing import Any, Callable, Optional, Sequence

ROOT = Path(__file__).resolve().parent.parent  # the checkout these scripts belong to: `compare`'s current tree
COMMAND = "python " + shlex.join(sys.argv)
QUIET = ["eval.interval=0", "log.plot=false", "checkpoint.every=0"]  # the training loop alone


# --- shared: running, timing, alternating, reporting ------------------------------------------------------

@dataclass
class Run:
    wall: float  # seconds until the last process exited, start-up included
    rss_mib: float  # the largest peak resident memory among the processes
    summary: dict = field(default_factory=dict)  # the run's summary.json, where there is one


def run_processes(cmds: Sequence[Sequence[str]], cwd: Optional[Path] = None,
                  env: Optional[dict[str, str]] = None) -> Run:
    """Start the commands side by side and wait for all of them; stops the benchmark if one fails."""
    env = {**os.environ, "PYTHONWARNINGS": "ignore", **(env or {})}
    errs = [tempfile.TemporaryFile() for _ in cmds]  # files, not pipes: a chatty stderr cannot block the run
    start = time.perf_counter()
    procs = [subprocess.Popen(c, stdout=subprocess.DEVNULL, stderr=e, cwd=cwd, env=env) for c, e in zip(cmds, errs)]
    rss = 0.0
    for p in procs:
        _, status, usage = os.wait4(p.pid, 0)
        p.returncode = os.waitstatus_to_exitcode(status)
        rss = max(rss, usage.ru_maxrss / 1024)
    wall = time.perf_counter() - start
    try:
        for cmd, p, e in zip(cmds, procs, errs):
            if p.returncode != 0:
                e.seek(0)
                tail = e.read().decode(errors="replace")[-3000:]
                raise SystemExit(f"run failed (exit {p.returncode}) in {cwd or os.getcwd()}:\n{shlex.join(cmd)}\n"
                                 f"{tail}")
    finally:
        for e in errs:
            e.close()
    return Run(wall, rss)


def merged(defaults: Sequence[str], overrides: Sequence[str]) -> list[str]:
    """`defaults` with `overrides` in place of those that set the same key, then the other `overrides`: the
    command line names each key once (Hydra would let the later one win)."""
    key = lambda o: o.split("=", 1)[0].lstrip("+~")  # noqa: E731
    given = {key(o): o for o in overrides}
    return [given.pop(key(d), d) for d in defaults] + list(given.values())


def train_cmd(overrides: Sequence[str], run_dir: str) -> list[str]:
    return [sys.executable, "-m", "rlrun.train", *overrides, f"hydra.run.dir={run_dir}"]


def train_run(overrides: Sequence[str], prefix: Sequence[str] = (), cwd: Optional[Path] = None,
              env: Optional[dict[str, str]] = None) -> Run:
    """One `python -m rlrun.train` process into a temporary run dir, with the summary.json it wrote."""
    with tempfile.TemporaryDirectory() as out:
        run = run_processes([[*prefix, *train_cmd(overrides, out)]], cwd=cwd, env=env)
        summary = Path(out, "summary.json")
        if summary.exists():
            run.summary = json.loads(summary.read_text())
    return run


def alternate(contestants: dict[str, Callable[[], Any]], rounds: int) -> dict[str, list[Any]]:
    """Each contestant (a Run or a number) once per round, the order reversed every other round; progress
    goes to stderr."""
    results: dict[str, list[Any]] = {name: [] for name in contestants}
    for r in range(rounds):
        for name in (list(contestants) if r % 2 == 0 else list(reversed(contestants))):
            results[name].append(contestants[name]())
        shown = {k: [round(v.wall if isinstance(v, Run) else v, 1) for v in vs] for k, vs in results.items()}
        print(f"round {r + 1}/{rounds}: {shown}", file=sys.stderr, flush=True)
    return results


def hardware() -> str:
    try:
        cpuinfo = Path("/proc/cpuinfo").read_text()
        cpu = next(line.split(":", 1)[1].strip() for line in cpuinfo.splitlines() if line.startswith("model name"))
    except (OSError, StopIteration):
        cpu = platform.processor() or platform.machine()
    text = f"{cpu}, {os.cpu_count()} logical cores"
    if shutil.which("nvidia-smi"):
        gpus = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], check=False,
                              capture_output=True, text=True).stdout.split("\n")
        text += "".join(f"; GPU {g.strip()}" for g in gpus if g.strip())
    return text


def pinning(parallel: bool = False) -> str:
    cpus = sorted(os.sched_getaffinity(0))
    if parallel:
        return f"may use CPUs {cpus}: run it with those cores otherwise idle"
    if len(cpus) == 1:
        return f"pinned to CPU {cpus[0]}"
    return "not pinned: for steadier figures, `taskset -c 0 python scripts/bench.py ...` with core 0 otherwise idle"


def report(title: str, headers: Sequence[str], rows: Sequence[Sequence[Any]], notes: Sequence[str] = (),
           pin: Optional[str] = None) -> None:
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


def each(values: Sequence[float], fmt: str = ".1f") -> str:
    return " / ".join(format(v, fmt) for v in values)


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
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--quiet", "--detach", str(worktree), sha],
                       check=True)
        sides = {"base": worktree, "current": ROOT}
        for name, root in sides.items():  # the editable install of rlrun must not win over PYTHONPATH
            found = subprocess.run([sys.executable, "-c", "import rlrun; print(rlrun.__file__)"], cwd=root,
                                   env={**os.environ, "PYTHONPATH": str(root)}, capture_output=True, text=True)
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
    rows = [[label[k], f"{median(wall[k]):.2f}", f"{median(sps[k]):,.0f}" if sps[k] else "n/a", each(wall[k], ".2f"),
             each(sps[k], ",.0f")] for k in runs]
    sps_ratio = f"{median(sps['current']) / median(sps['base']):.3f}" if sps["base"] and sps["current"] else "n/a"
    rows.append(["current / base", f"{median(wall['current']) / median(wall['base']):.3f}", sps_ratio, "", ""])
    report("compare: single-seed CPU training, current tree vs base",
           ["side", "median wall s", "median env steps/s", "wall s, each run", "env steps/s, each run"], rows,
           [f"each run: {shlex.join(pin + train_cmd(overrides, 'RUN_DIR'))} (RUN_DIR: a new temporary directory)",
            "  base from its worktree with PYTHONPATH=<worktree>, current from its root with PYTHONPATH=<root>",
            f"{args.reps} rounds alternating, after {args.warmup} untimed run(s) per side; wall: whole process, "
            f"start-up included; env steps/s: the training loop's, from summary.json",
            "current / base: wall below 1, env steps/s above 1 = the current tree is faster"],
           pin=f"each run pinned with taskset -c {args.cpu}")


# --- peers: rlrun against Stable-Baselines3 --------------------------------------------------------------

# CleanRL's CartPole defaults, and an update-bound variant (one gradient step per env step).
PEER_SETTINGS: dict[str, dict[str, Any]] = {
    "cleanrl_defaults": dict(steps=50_000, hidden=[120, 84], batch=128, train_freq=10, buffer=10_000,
                             learning_starts=10_000, lr=2.5e-4, target_every_env_steps=500, eps_fraction=0.5),
    "update_bound": dict(steps=20_000, hidden=[120, 84], batch=128, train_freq=1, buffer=10_000,
                         learning_starts=1_000, lr=2.5e-4, target_every_env_steps=500, eps_fraction=0.5),
}


def rlrun_peer_overrides(s: dict) -> list[str]:
    return [f"total_steps={s['steps']}", "env.num_envs=1",  # SB3: one env
            f"network.hidden_sizes=[{','.join(map(str, s['hidden']))}]", "network.layer_norm=false",
            f"algo.batch_size={s['batch']}", f"algo.train_freq={s['train_freq']}", "algo.gradient_steps=1",
            f"buffer.capacity={s['buffer']}", "buffer.n_step=1", f"algo.learning_starts={s['learning_starts']}",
            f"optimizer.lr={s['lr']}", "algo.tau=1.0", "algo.lr_end_factor=1.0", "algo.loss=huber",
            "algo.double=false",  # SB3's DQN is the Nature DQN target, not Double DQN
            f"algo.target_update_period={max(1, s['target_every_env_steps'] // s['train_freq'])}",
            "exploration.end=0.05", f"exploration.duration={int(s['eps_fraction'] * s['steps'])}",
            *QUIET, "device=cpu", "device.threads=1"]


def sb3_cmd(s: dict) -> list[str]:
    code = f"""
import torch
torch.set_num_threads(1)
from stable_baselines3 import DQN
DQN("MlpPolicy", "CartPole-v1", learning_rate={s['lr']}, buffer_size={s['buffer']},
    learning_starts={s['learning_starts']}, batch_size={s['batch']}, tau=1.0, gamma=0.99,
    train_freq={s['train_freq']}, gradient_steps=1, target_update_interval={s['target_every_env_steps']},
    exploration_fraction={s['eps_fraction']}, exploration_final_eps=0.05,
    policy_kwargs=dict(net_arch={s['hidden']}), seed=0, device="cpu", verbose=0).learn({s['steps']})
"""
    return [sys.executable, "-c", code]


def peers(args) -> None:
    """The same work through rlrun and SB3, identical hyperparameters (network sizes, batch, update frequency,
    buffer, steps, one torch thread each): whole-process env steps/s (start-up included) and peak RSS."""
    if importlib.util.find_spec("stable_baselines3") is None:
        raise SystemExit("peers needs Stable-Baselines3: pip install -e '.[bench]'")
    rows = []
    for name, s in PEER_SETTINGS.items():
        runs = alternate({"rlrun": lambda: train_run(rlrun_peer_overrides(s)),
                          "sb3": lambda: run_processes([sb3_cmd(s)])}, args.reps)
        sps = {k: median([s["steps"] / r.wall for r in v]) for k, v in runs.items()}
        rss = {k: median([r.rss_mib for r in v]) for k, v in runs.items()}
        rows.append([f"{name} ({s['steps']} steps, train_freq {s['train_freq']})", f"{sps['rlrun']:,.0f}",
                     f"{sps['sb3']:,.0f}", f"{sps['rlrun'] / sps['sb3']:.2f}x", f"{rss['rlrun']:.0f}",
                     f"{rss['sb3']:.0f}"])
    report("peers: whole-process env steps/s, rlrun vs Stable-Baselines3 (CartPole-v1, CPU, one thread)",
           ["setting", "rlrun steps/s", "SB3 steps/s", "rlrun/SB3", "rlrun peak RSS MiB", "SB3 peak RSS MiB"], rows,
           [f"medians of {args.reps} alternating rounds"])


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
        memory = [r.summary["device_max_memory_allocated_mb"] for r in rs
                  if r.summary.get("device_max_memory_allocated_mb") is not None]
        rows.append([" ".join([name, *args.overrides]), f"{median([r.summary['sps'] for r in rs]):,.0f}",
                     f"{median([r.summary['gradient_updates'] / r.summary['wall_time_s'] for r in rs]):,.0f}",
                     f"{loop:.1f}", f"{median([r.wall for r in rs]):.1f}", f"{median([r.rss_mib for r in rs]):.0f}",
                     f"{median(memory):.0f}" if memory else "n/a"])
    report(f"updates: whole training runs, 20k env steps, device={args.device}",
           ["config", "loop env steps/s", "loop updates/s", "loop s", "whole process s", "peak RSS MiB",
            "peak device MiB"], rows, [f"medians of {args.reps} alternating round(s)"])


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
    report("solve: time to the env's reward threshold, from process start", ["seed", "solved at step", "wall s"],
           rows, [f"median time-to-solve: {median(walls):.1f}s; solved {solved}/{args.seeds}"])


def seeds(args) -> None:
    """K seeds batched in one process (`seeds=K`) against one single-seed run, same env steps per agent, as
    whole processes; with --separate also K single-seed processes side by side (what PyTorch peers do)."""
    k = args.seeds

    def command(out: str, **keys) -> list[str]:
        base = [f"total_steps={args.steps}", f"device={args.device}", *QUIET, "log.progress_bar=false",
                *(f"{key}={v}" for key, v in keys.items())]
        return train_cmd(merged(base, args.overrides), out)

    with tempfile.TemporaryDirectory() as tmp:
        n = itertools.count()  # a fresh run dir for every process
        contestants = {"single": lambda: run_processes([command(f"{tmp}/{next(n)}", seed=0)]).wall,
                       f"batched x{k}": lambda: run_processes([command(f"{tmp}/{next(n)}", seed=0, seeds=k)]).wall}
        if args.separate:
            contestants[f"{k} processes"] = lambda: run_processes(
                [command(f"{tmp}/{next(n)}", seed=i) for i in range(k)]).wall
        times = alternate(contestants, args.reps)
    single = median(times["single"])
    rows = [[name, f"{median(v):.1f}", f"{median(v) / single:.2f}", each(v)] for name, v in times.items()]
    report(f"seeds: seeds={k} in one process vs one seed ({args.steps} env steps per agent, {args.device})",
           ["contestant", "median wall s", "ratio to single", "wall s, each run"], rows,
           [f"medians of {args.reps} alternating rounds; whole processes, start-up included"],
           pin=pinning(parallel=args.separate))


def sweep(args) -> None:
    """A 4-job sweep through the joblib launcher (2 workers) against the same sweep run serially; each job a
    real training run with one torch thread."""
    def contestant(parallel: bool) -> Callable[[], float]:
        def once() -> float:
            with tempfile.TemporaryDirectory() as out:
                cmd = [sys.executable, "-m", "rlrun.train", "-m", "seed=0,1,2,3", f"total_steps={args.steps}",
                       "eval.interval=0", "log.plot=false", "device.threads=1", f"hydra.sweep.dir={out}"]
                if parallel:
                    cmd += ["hydra/launcher=joblib", "hydra.launcher.n_jobs=2"]
                return run_processes([cmd]).wall
        return once

    times = alternate({"serial": contestant(False), "joblib x2": contestant(True)}, args.reps)
    serial, parallel = median(times["serial"]), median(times["joblib x2"])
    report(f"sweep: 4 jobs of {args.steps} env steps, joblib 2 workers vs serial",
           ["launcher", "median wall s", "wall s, each run"],
           [["serial", f"{serial:.1f}", each(times["serial"])],
            ["joblib, 2 workers", f"{parallel:.1f}", each(times["joblib x2"])],
            ["joblib / serial", f"{parallel / serial:.2f}", ""]],
           [f"medians of {args.reps} alternating rounds"], pin=pinning(parallel=True))


def threads(args) -> None:
    """The same short training job in this process, with `device.threads=1` and with `device.threads=null`
    (torch's default thread count): env steps/s of the training loop."""
    import torch
    from hydra import compose, initialize_config_module

    from rlrun.config import register_configs
    from rlrun.train import train

    register_configs()
    default_threads = torch.get_num_threads()

    def contestant(threads: str) -> Callable[[], float]:
        def once() -> float:
            with initialize_config_module(config_module="rlrun.conf", version_base="1.3"):
                cfg = compose("config", overrides=merged([f"total_steps={args.steps}", "eval.interval=0",
                                                          "log.plot=false", f"device.threads={threads}"],
                                                         args.overrides))
            try:
                with tempfile.TemporaryDirectory() as out:
                    return train(cfg, Path(out))["sps"]
            finally:
                torch.set_num_threads(default_threads)
        return once

    sps = alternate({"1": contestant("1"), "null": contestant("null")}, args.reps)
    one, default = median(sps["1"]), median(sps["null"])
    rows = [["1", f"{one:,.0f}", each(sps["1"], ",.0f")],
            [f"null ({default_threads})", f"{default:,.0f}", each(sps["null"], ",.0f")],
            ["1 / default", f"{one / default:.2f}", ""]]
    report(f"threads: env steps/s with one torch thread vs torch's default ({default_threads} here)",
           ["device.threads", "median env steps/s", "env steps/s, each run"], rows,
           [f"{args.steps} env steps, medians of {args.reps} alternating rounds, in one process"],
           pin=pinning(parallel=True))


# --- per, switches, memory: parts in this process ----------------------------------------------------------

def _learner_and_buffer(kind: str, capacity: int, device, fill: int):
    import torch

    from rlrun.learner import DQNLearner
    from rlrun.networks import QNetwork
    from rlrun.replay import PrioritizedReplayBuffer, ReplayBuffer

    torch.manual_seed(0)
    net = QNetwork(4, 2, hidden_sizes=[128, 128], layer_norm=True).to(device)
    learner = DQNLearner(net, torch.optim.Adam(net.parameters(), lr=1e-3, fused=True), loss="mse", tau=0.05,
                         on_nonfinite="off")
    buf = (PrioritizedReplayBuffer if kind == "per" else ReplayBuffer)(capacity, (4,), device=device)
    chunk = 10_000
    for i in range(0, fill, chunk):
        n = min(chunk, fill - i)
        buf.add(torch.randn(n, 4), torch.randint(0, 2, (n,)), torch.randn(n), torch.randn(n, 4), torch.full((n,), 0.99))
    return learner, buf


def _seconds_per_call(fn: Callable[[], Any], reps: int, sync: Callable[[], Any]) -> float:
    for _ in range(10):
        fn()
    sync()
    start = time.perf_counter()
    for _ in range(reps):
        fn()
    sync()
    return (time.perf_counter() - start) / reps


def per(args) -> None:
    """PER's sample + priority update at three sizes, and a whole gradient step with PER against uniform."""
    import torch

    torch.set_num_threads(1)
    device = torch.device(args.device)
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    rows = []
    for capacity in (10_000, 100_000, 1_000_000):
        _, buf = _learner_and_buffer("per", capacity, device, capacity)
        td = torch.rand(128, device=device)

        def sample_update():
            b = buf.sample(128, 0.5)
            buf.update_priorities(b.indices, td)

        t = _seconds_per_call(sample_update, 200, sync)
        rows.append([f"PER sample(128) + update_priorities, {capacity:,} stored", f"{t * 1e6:.1f}", ""])
    step_time = {}
    for kind in ("uniform", "per"):
        learner, buf = _learner_and_buffer(kind, 100_000, device, 100_000)

        def step():
            b = buf.sample(128, 0.5)
            m = learner.update(b)
            buf.update_priorities(b.indices, m["priority"])

        step_time[kind] = t = _seconds_per_call(step, 300, sync)
        rows.append([f"{kind}: sample + gradient step + priorities, 100,000 stored", f"{t * 1e6:.1f}", f"{1 / t:,.0f}"])
    rows.append(["PER / uniform, time per update", f"{step_time['per'] / step_time['uniform']:.2f}x", ""])
    report(f"per: prioritized replay costs, device={args.device}, one thread",
           ["what", "us per call", "updates/s"], rows, ["means over 200-300 calls after 10 warm-up calls"])


def switches(args) -> None:
    """Microseconds per gradient step (sample + update) for each device switch, after a warm-up that includes
    any compilation, at the default size and (on CUDA) at a large one."""
    import warnings

    import torch

    from rlrun.learner import DQNLearner
    from rlrun.networks import QNetwork
    from rlrun.replay import ReplayBuffer

    device = torch.device(args.device)
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    variants: dict[str, dict[str, Any]] = {
        "plain": {}, "amp=bf16": {"amp": "bf16"}, "amp=fp16": {"amp": "fp16"}, "compile": {"compile": True},
        "cuda_graphs": {"compile": True, "compile_mode": "reduce-overhead"}}
    sizes = [([128, 128], 128), ([1024, 1024], 1024)]
    if device.type != "cuda":
        variants.pop("cuda_graphs")
        sizes = sizes[:1]
        torch.set_num_threads(1)
    rows = []
    for hidden, batch in sizes:
        base = None
        for name, kw in variants.items():
            if batch > 128 and kw.get("compile"):  # compile pays off where launches dominate: the small size
                continue
            torch.manual_seed(0)
            net = QNetwork(4, 2, hidden_sizes=hidden, layer_norm=True).to(device)
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                learner = DQNLearner(net, torch.optim.Adam(net.parameters(), lr=1e-3, fused=True), loss="mse",
                                     tau=0.05, on_nonfinite="off", **kw)
                buf = ReplayBuffer(100_000, (4,), device=device)
                n = 100_000
                buf.add(torch.randn(n, 4), torch.randint(0, 2, (n,)), torch.randn(n), torch.randn(n, 4),
                        torch.full((n,), 0.99))

                def step():
                    learner.update(buf.sample(batch))

                start = time.perf_counter()
                for _ in range(30):  # warm-up: compilation, graph capture, cuBLAS handles
                    step()
                sync()
                warm = time.perf_counter() - start
                t = _seconds_per_call(step, 300, sync)
            fell_back = [str(w.message)[:100] for w in caught
                         if "device." in str(w.message) or "torch.compile failed" in str(w.message)]
            base = base or t
            rows.append([str(hidden), batch, name, f"{t * 1e6:.1f}", f"{base / t:.2f}x", f"{warm:.1f}",
                         "FELL BACK: " + fell_back[0] if fell_back else ""])
            print(f"{hidden} {batch} {name}: {t * 1e6:.1f} us", file=sys.stderr, flush=True)
    report(f"switches: us per gradient step, device={args.device}",
           ["hidden", "batch", "switch", "us/update", "vs plain", "warm-up s", "note"], rows,
           ["means over 300 steps after a 30-step warm-up (compilation, graph capture)"])


def memory(args) -> None:
    """Bytes held by an Atari replay (84x84 frames, stack 4) that stores each frame once."""
    import torch

    from rlrun.frames import FrameStore
    from rlrun.replay import ReplayBuffer

    def tensor_bytes(obj) -> int:
        """Bytes of the tensor storages that `obj` holds in its attributes, or in those of rlrun objects there."""
        found: dict[int, int] = {}
        todo, seen = [obj], set()
        while todo:
            o = todo.pop()
            if id(o) in seen:
                continue
            seen.add(id(o))
            for v in vars(o).values():
                if isinstance(v, torch.Tensor):
                    found[v.untyped_storage().data_ptr()] = v.untyped_storage().nbytes()
                elif type(v).__module__.startswith("rlrun.") and hasattr(v, "__dict__"):
                    todo.append(v)
        return sum(found.values())

    capacity = args.capacity
    frames = FrameStore(capacity + capacity // 16 + 1024 + 4, (84, 84), 4, 1, "cpu")  # sized as rlrun sizes it
    buf = ReplayBuffer(capacity, (4,), obs_dtype=torch.int64)
    frame_bytes, index_bytes = tensor_bytes(frames), tensor_bytes(buf)
    naive = capacity * 2 * 4 * 84 * 84  # obs and next_obs as stacked uint8 frames
    gib = lambda b: f"{b / 2**30:.2f}"  # noqa: E731
    rows = [["frames, each stored once", gib(frame_bytes)],
            ["transitions (frame indices, actions, rewards, ...)", gib(index_bytes)],
            ["total", gib(frame_bytes + index_bytes)],
            ["storing stacked obs and next_obs instead", gib(naive)]]
    report(f"memory: a {capacity:,}-transition Atari replay (84x84 frames, stack 4)", ["part", "GiB"], rows,
           pin="not a timing")


# --- command line ------------------------------------------------------------------------------------------

def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="subcommand", required=True, metavar="<subcommand>",
                           title="subcommands (python scripts/bench.py <subcommand> --help for its options)")

    def command(name: str, fn: Callable, summary: str, reps: Optional[int] = None, device: bool = False,
                overrides: bool = False) -> argparse.ArgumentParser:
        sp = sub.add_parser(name, help=summary, description=f"{summary}\n\n{fn.__doc__ or ''}",
                            formatter_class=argparse.RawDescriptionHelpFormatter)
        sp.set_defaults(fn=fn)
        if reps is not None:
            sp.add_argument("--reps", "--repeats", dest="reps", type=int, default=reps,
                            help=f"alternating rounds; medians over them (default {reps})")
        if device:
            sp.add_argument("--device", default="cpu", help="torch device (default cpu)")
        if overrides:
            sp.add_argument("--overrides", nargs="+", default=[], metavar="KEY=VALUE",
                            help="rlrun overrides for every run (they replace the subcommand's own for the same key)")
        return sp

    sp = command("compare", compare, "single-seed CPU training speed of this tree vs a git revision, pinned",
                 reps=5, overrides=True)
    sp.add_argument("--base", required=True, help="git revision to compare against (branch, tag, commit)")
    sp.add_argument("--cpu", type=int, default=0, help="the core both sides run on, `taskset -c CPU` (default 0)")
    sp.add_argument("--warmup", type=int, default=1, help="untimed runs per side first (default 1)")
    sp.epilog = f"default overrides: {' '.join(COMPARE_DEFAULTS)} (the same for both sides)"
    command("peers", peers, "whole-process env steps/s and peak RSS, rlrun vs Stable-Baselines3", reps=3)
    command("updates", updates, "loop env steps/s, updates/s, peak memory: default and dueling+PER", reps=1,
            device=True, overrides=True)
    command("per", per, "PER sample+update us at 1e4/1e5/1e6 stored, and a PER vs uniform gradient step",
            device=True)
    command("switches", switches, "us per gradient step for plain / amp / compile / cuda_graphs", device=True)
    sp = command("memory", memory, "bytes of a 1M-transition Atari replay that stores frames once")
    sp.add_argument("--capacity", type=int, default=1_000_000, help="transitions (default 1,000,000)")
    sp = command("solve", solve, "wall seconds from process start to CartPole 475, default config, per seed",
                 overrides=True)
    sp.add_argument("--seeds", type=int, default=5, help="seeds 0..N-1 (default 5)")
    sp = command("seeds", seeds, "seeds=K batched in one process vs one single-seed run, whole processes", reps=3,
                 device=True, overrides=True)
    sp.add_argument("--seeds", type=int, default=8, help="K (default 8)")
    sp.add_argument("--steps", type=int, default=20_000, help="env steps per agent (default 20000)")
    sp.add_argument("--separate", action="store_true", help="also time K single-seed processes side by side")
    sp = command("sweep", sweep, "4-job sweep: joblib launcher with 2 workers vs serial", reps=3)
    sp.add_argument("--steps", type=int, default=20_000, help="env steps per job (default 20000)")
    sp = command("threads", threads, "loop env steps/s with one torch thread vs torch's default count", reps=3,
                 overrides=True)
    sp.add_argument("--steps", type=int, default=20_000, help="env steps per run (default 20000)")
    args = p.parse_args()
    args.fn(args)


if __name__ == "__main__":
    main()
