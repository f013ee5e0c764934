"""rlrun's speed, measured against Stable-Baselines3 and against itself, on one device.

    python scripts/benchmark.py peers  [--reps 3]    # whole-process env steps/s, rlrun vs SB3 (needs the bench extra)
    python scripts/benchmark.py updates [--device cpu]  # env steps/s, updates/s, peak memory: default, dueling+PER
    python scripts/benchmark.py per    [--device cpu]  # PER sample+update microseconds at 1e4/1e5/1e6 vs uniform
    python scripts/benchmark.py solve  [--seeds 5]   # wall seconds from process start to CartPole 475 (default config)
    python scripts/benchmark.py memory               # bytes of a 1M-transition Atari replay (frames stored once)
    python scripts/benchmark.py switches --device cuda  # us per update for plain / amp / compile / cuda_graphs

`peers` runs the same work through both tools with identical hyperparameters (network sizes, batch, update
frequency, buffer, steps, one torch thread each), alternating the two commands, and reports medians of
whole-process env steps per second (start-up included) and peak resident memory, plus the ratio.
Numbers are for the machine it runs on: compare ratios, not absolute values.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

# CleanRL's CartPole defaults, and an update-bound variant (one gradient step per env step).
SETTINGS = {
    "cleanrl_defaults": dict(steps=50_000, hidden=[120, 84], batch=128, train_freq=10, buffer=10_000,
                             learning_starts=10_000, lr=2.5e-4, target_every_env_steps=500, eps_fraction=0.5),
    "update_bound": dict(steps=20_000, hidden=[120, 84], batch=128, train_freq=1, buffer=10_000,
                         learning_starts=1_000, lr=2.5e-4, target_every_env_steps=500, eps_fraction=0.5),
}


def rlrun_cmd(s: dict, out: str) -> list[str]:
    return [sys.executable, "-m", "rlrun.train", f"total_steps={s['steps']}", "env.num_envs=1",  # SB3: one env
            f"network.hidden_sizes=[{','.join(map(str, s['hidden']))}]", "network.layer_norm=false",
            f"algo.batch_size={s['batch']}", f"algo.train_freq={s['train_freq']}", "algo.gradient_steps=1",
            f"buffer.capacity={s['buffer']}", "buffer.n_step=1", f"algo.learning_starts={s['learning_starts']}",
            f"optimizer.lr={s['lr']}", "algo.tau=1.0", "algo.lr_end_factor=1.0", "algo.loss=huber",
            "algo.double=false",  # SB3's DQN is the Nature DQN target, not Double DQN
            f"algo.target_update_period={max(1, s['target_every_env_steps'] // s['train_freq'])}",
            "exploration.end=0.05", f"exploration.duration={int(s['eps_fraction'] * s['steps'])}",
            "eval.interval=0", "log.plot=false", "checkpoint.every=0", "device=cpu", "device.threads=1",
            f"hydra.run.dir={out}"]


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


def timed(cmd: list[str]) -> tuple[float, float]:
    """Wall seconds and peak RSS (MiB) of one whole process."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env={**os.environ, "PYTHONWARNINGS": "ignore"})
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError(f"{cmd[:3]} failed: {proc.stderr.read().decode()[-2000:]}")
    return wall, usage.ru_maxrss / 1024


def peers(args) -> None:
    for name, s in SETTINGS.items():
        results: dict[str, list[tuple[float, float]]] = {"rlrun": [], "sb3": []}
        for _ in range(args.reps):
            with tempfile.TemporaryDirectory() as out:
                results["rlrun"].append(timed(rlrun_cmd(s, out)))
            results["sb3"].append(timed(sb3_cmd(s)))
        sps = {k: statistics.median(s["steps"] / w for w, _ in v) for k, v in results.items()}
        rss = {k: statistics.median(m for _, m in v) for k, v in results.items()}
        print(f"{name}: {s['steps']} steps, train_freq {s['train_freq']}, {args.reps} reps alternating")
        for k in results:
            print(f"  {k:6s} median whole-process env steps/s {sps[k]:8.0f}   peak RSS {rss[k]:6.0f} MiB")
        print(f"  ratio rlrun/SB3: {sps['rlrun'] / sps['sb3']:.2f}x", flush=True)


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


def _time(fn, reps: int, sync) -> float:
    for _ in range(10):
        fn()
    sync()
    start = time.perf_counter()
    for _ in range(reps):
        fn()
    sync()
    return (time.perf_counter() - start) / reps


def per(args) -> None:
    import torch

    torch.set_num_threads(1)
    device = torch.device(args.device)
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    for capacity in (10_000, 100_000, 1_000_000):
        _, buf = _learner_and_buffer("per", capacity, device, capacity)
        td = torch.rand(128, device=device)

        def sample_update():
            b = buf.sample(128, 0.5)
            buf.update_priorities(b.indices, td)

        t = _time(sample_update, 200, sync)
        print(f"PER sample(128)+update_priorities at {capacity:>9,}: {t * 1e6:8.1f} us")
    per_update = {}
    for kind in ("uniform", "per"):
        learner, buf = _learner_and_buffer(kind, 100_000, device, 100_000)

        def step():
            b = buf.sample(128, 0.5)
            m = learner.update(b)
            buf.update_priorities(b.indices, m["priority"])

        per_update[kind] = _time(step, 300, sync)
        print(f"{kind:7s} sample + gradient step + priorities: {per_update[kind] * 1e6:8.1f} us "
              f"({1 / per_update[kind]:.0f} updates/s)")
    print(f"PER / uniform time per update: {per_update['per'] / per_update['uniform']:.2f}x")


def updates(args) -> None:
    """Whole training runs (20k env steps) of the default config and of dueling + PER, each its own process:
    env steps/s and gradient updates/s of the training loop (summary.json), and peak memory."""
    for overrides in ([], ["network=dueling", "buffer=per"]):
        with tempfile.TemporaryDirectory() as out:
            cmd = [sys.executable, "-m", "rlrun.train", *overrides, f"device={args.device}", "total_steps=20000",
                   "eval.interval=0", "log.plot=false", "log.progress_bar=false", "checkpoint.every=0",
                   f"hydra.run.dir={out}", *args.overrides]
            wall, rss = timed(cmd)
            summary = json.load(open(os.path.join(out, "summary.json")))
        loop = summary["wall_time_s"]
        device_mem = summary.get("device_max_memory_allocated_mb")
        print(f"{' '.join(overrides + args.overrides) or 'default'}: {summary['sps']:.0f} env steps/s and "
              f"{summary['gradient_updates'] / loop:.0f} gradient updates/s in the training loop ({loop:.1f}s; "
              f"{wall:.1f}s whole process); peak RSS {rss:.0f} MiB"
              + (f", peak device memory {device_mem:.0f} MiB" if device_mem is not None else ""), flush=True)


def memory(args) -> None:
    """Bytes held by a 1M-transition Atari replay (84x84 frames, stack 4) with frames stored once."""
    import torch
    from rlrun.frames import FrameStore
    from rlrun.replay import ReplayBuffer

    capacity = args.capacity
    frames = FrameStore(capacity + capacity // 16 + 1024 + 4, (84, 84), 4, 1, "cpu")
    buf = ReplayBuffer(capacity, (4,), obs_dtype=torch.int64)
    frame_bytes = frames.frames.nbytes
    index_bytes = sum(getattr(buf, k).nbytes for k in buf.STORAGE)
    naive = capacity * 2 * 4 * 84 * 84  # obs and next_obs as stacked uint8 frames
    print(f"{capacity:,} transitions: frames {frame_bytes / 2**30:.2f} GiB + transitions {index_bytes / 2**30:.2f} GiB "
          f"= {(frame_bytes + index_bytes) / 2**30:.2f} GiB (storing stacked obs and next_obs: {naive / 2**30:.1f} GiB)")


def switches(args) -> None:
    """Microseconds per gradient step (sample + update + priorities) for each device switch, after a
    warm-up that includes any compilation, at the default size and at a large one."""
    import warnings

    import torch
    from rlrun.learner import DQNLearner
    from rlrun.networks import QNetwork
    from rlrun.replay import ReplayBuffer

    device = torch.device(args.device)
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    variants = {"plain": {}, "amp=bf16": {"amp": "bf16"}, "amp=fp16": {"amp": "fp16"}, "compile": {"compile": True},
                "cuda_graphs": {"compile": True, "compile_mode": "reduce-overhead"}}
    sizes = [([128, 128], 128), ([1024, 1024], 1024)]
    if device.type != "cuda":
        variants.pop("cuda_graphs")
        sizes = sizes[:1]
        torch.set_num_threads(1)
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
                t = _time(step, 300, sync)
            fell_back = [str(w.message)[:100] for w in caught if "device." in str(w.message) or "torch.compile failed" in str(w.message)]
            base = base or t
            print(f"hidden {hidden} batch {batch:5d} {name:12s}: {t * 1e6:8.1f} us/update  "
                  f"({base / t:4.2f}x plain; warm-up {warm:5.1f}s){'  FELL BACK: ' + fell_back[0] if fell_back else ''}",
                  flush=True)


def solve(args) -> None:
    walls, steps = [], []
    for seed in range(args.seeds):
        with tempfile.TemporaryDirectory() as out:
            # The default config as a user runs it (evaluations, checkpoints, the plot), stopping once solved.
            cmd = [sys.executable, "-m", "rlrun.train", f"seed={seed}", "stop_on_solve=true",
                   "log.progress_bar=false", f"hydra.run.dir={out}", *args.overrides]
            wall, _ = timed(cmd)
            summary = json.load(open(os.path.join(out, "summary.json")))
        walls.append(wall)
        steps.append(summary["solved_step"])
        print(f"seed {seed}: solved at step {summary['solved_step']}, {wall:.1f}s from process start", flush=True)
    print(f"median time-to-solve: {statistics.median(walls):.1f}s; solved {sum(s is not None for s in steps)}/{len(steps)}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("suite", choices=["peers", "updates", "per", "solve", "memory", "switches"])
    p.add_argument("--capacity", type=int, default=1_000_000, help="replay size for the memory suite")
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--seeds", type=int, default=5)
    p.add_argument("--device", default="cpu")
    p.add_argument("overrides", nargs="*", help="extra rlrun overrides (updates, solve)")
    args = p.parse_intermixed_args()  # overrides may come after --device
    {"peers": peers, "updates": updates, "per": per, "solve": solve, "memory": memory,
     "switches": switches}[args.suite](args)


if __name__ == "__main__":
    main()
