"""Benchmarks of parts timed in this process: per, switches, memory."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import Any

from benchlib.common import report

# --- per, switches, memory: parts in this process ----------------------------------------------------------


def _learner_and_buffer(kind: str, capacity: int, device, fill: int):
    import torch

    from rlrun.algos.dqn import dqn_learner
    from rlrun.nets.networks import QNetwork
    from rlrun.replay import PrioritizedReplayBuffer, ReplayBuffer

    torch.manual_seed(0)
    net = QNetwork(4, 2, hidden_sizes=[128, 128], layer_norm=True).to(device)
    learner = dqn_learner(
        net, torch.optim.Adam(net.parameters(), lr=1e-3, fused=True), loss="mse", tau=0.05, on_nonfinite="off"
    )
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

        def sample_update(buf=buf, td=td):
            b = buf.sample(128, 0.5)
            buf.update_priorities(b.indices, td)

        t = _seconds_per_call(sample_update, 200, sync)
        rows.append([f"PER sample(128) + update_priorities, {capacity:,} stored", f"{t * 1e6:.1f}", ""])
    step_time = {}
    for kind in ("uniform", "per"):
        learner, buf = _learner_and_buffer(kind, 100_000, device, 100_000)

        def step(buf=buf, learner=learner):
            b = buf.sample(128, 0.5)
            m = learner.update(b)
            buf.update_priorities(b.indices, m["priority"])

        step_time[kind] = t = _seconds_per_call(step, 300, sync)
        rows.append([f"{kind}: sample + gradient step + priorities, 100,000 stored", f"{t * 1e6:.1f}", f"{1 / t:,.0f}"])
    rows.append(["PER / uniform, time per update", f"{step_time['per'] / step_time['uniform']:.2f}x", ""])
    report(
        f"per: prioritized replay costs, device={args.device}, one thread",
        ["what", "us per call", "updates/s"],
        rows,
        ["means over 200-300 calls after 10 warm-up calls"],
    )


def switches(args) -> None:
    """Microseconds per gradient step (sample + update) for each device switch, after a warm-up that includes
    any compilation, at the default size and (on CUDA) at a large one."""
    import warnings

    import torch

    from rlrun.algos.dqn import dqn_learner
    from rlrun.nets.networks import QNetwork
    from rlrun.replay import ReplayBuffer

    device = torch.device(args.device)
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    variants: dict[str, dict[str, Any]] = {
        "plain": {},
        "amp=bf16": {"amp": "bf16"},
        "amp=fp16": {"amp": "fp16"},
        "compile": {"compile": True},
        # rlrun.training.graphs: the whole step (sample, update, target sync) recorded; per step, phases of 1 and 4
        "cuda_graphs": {"graph": 1},
        "cuda_graphs x4": {"graph": 4},
        "compile + cuda_graphs x4": {"compile": True, "graph": 4},
    }
    sizes = [([128, 128], 128), ([1024, 1024], 1024)]
    if device.type != "cuda":
        for name in [n for n in variants if "cuda_graphs" in n]:
            variants.pop(name)
        sizes = sizes[:1]
        torch.set_num_threads(1)
    rows = []
    for hidden, batch in sizes:
        base = None
        for name, kw in variants.items():
            if batch > 128 and kw.get("compile"):  # compile pays off where launches dominate: the small size
                continue
            torch.manual_seed(0)
            kw = dict(kw)
            graph_count = kw.pop("graph", 0)
            net = QNetwork(4, 2, hidden_sizes=hidden, layer_norm=True).to(device)
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                capturable = {"capturable": True, "lr": torch.tensor(1e-3, device=device)} if graph_count else {}
                learner = dqn_learner(
                    net,
                    torch.optim.Adam(net.parameters(), **{"lr": 1e-3, "fused": True, **capturable}),
                    loss="mse",
                    tau=0.05,
                    on_nonfinite="off",
                    **kw,
                )
                buf = ReplayBuffer(100_000, (4,), device=device)
                n = 100_000
                buf.add(
                    torch.randn(n, 4),
                    torch.randint(0, 2, (n,)),
                    torch.randn(n),
                    torch.randn(n, 4),
                    torch.full((n,), 0.99),
                )

                def step(learner=learner, buf=buf, batch=batch):
                    learner.update(buf.sample(batch))

                if graph_count:
                    from rlrun.training.graphs import GraphedUpdates

                    generator = torch.Generator(device=device).manual_seed(0)
                    buf.generator = generator
                    graphed = GraphedUpdates(learner, buf, None, batch, graph_count, [generator])

                    def step(graphed=graphed):  # noqa: F811  (one call = graph_count steps; timed per step below)
                        graphed.run(1.0)

                start = time.perf_counter()
                for _ in range(30):  # warm-up: compilation, graph capture, cuBLAS handles
                    step()
                sync()
                warm = time.perf_counter() - start
                t = _seconds_per_call(step, 300, sync) / max(1, graph_count)
            fell_back = [
                str(w.message)[:100]
                for w in caught
                if "device." in str(w.message) or "torch.compile failed" in str(w.message)
            ]
            base = base or t
            rows.append(
                [
                    str(hidden),
                    batch,
                    name,
                    f"{t * 1e6:.1f}",
                    f"{base / t:.2f}x",
                    f"{warm:.1f}",
                    "FELL BACK: " + fell_back[0] if fell_back else "",
                ]
            )
            print(f"{hidden} {batch} {name}: {t * 1e6:.1f} us", file=sys.stderr, flush=True)
    report(
        f"switches: us per gradient step, device={args.device}",
        ["hidden", "batch", "switch", "us/update", "vs plain", "warm-up s", "note"],
        rows,
        ["means over 300 steps after a 30-step warm-up (compilation, graph capture)"],
    )


def memory(args) -> None:
    """Bytes held by an Atari replay (84x84 frames, stack 4) that stores each frame once."""
    import torch

    from rlrun.replay import ReplayBuffer
    from rlrun.replay.frames import FrameStore

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
    rows = [
        ["frames, each stored once", gib(frame_bytes)],
        ["transitions (frame indices, actions, rewards, ...)", gib(index_bytes)],
        ["total", gib(frame_bytes + index_bytes)],
        ["storing stacked obs and next_obs instead", gib(naive)],
    ]
    report(
        f"memory: a {capacity:,}-transition Atari replay (84x84 frames, stack 4)",
        ["part", "GiB"],
        rows,
        pin="not a timing",
    )


def envs(args) -> None:
    """One CartPole-v1 vector step of `--envs` sub-envs with random actions: gymnasium's sync vector env
    against rlrun's numpy one (`env.vectorization=vector`, the same numbers), both as rlrun makes them
    (SAME_STEP autoreset, episode statistics)."""
    from statistics import median

    import numpy as np

    from benchlib.common import alternate, each
    from rlrun.envs.vector import make_vector_env

    made = {mode: make_vector_env("CartPole-v1", args.envs, mode) for mode in ("sync", "vector")}
    rng = np.random.default_rng(0)
    actions = rng.integers(0, 2, (1000, args.envs))

    def contestant(env) -> Callable[[], float]:
        env.reset(seed=0)

        def once() -> float:
            start = time.perf_counter()
            for a in actions:
                env.step(a)
            return (time.perf_counter() - start) / len(actions) * 1e3

        return once

    ms = alternate({mode: contestant(env) for mode, env in made.items()}, args.reps)
    sync, vector = median(ms["sync"]), median(ms["vector"])
    report(
        f"envs: CartPole-v1 vector step, {args.envs} sub-envs",
        ["env.vectorization", "ms per vector step (median)", "rounds"],
        [
            ["sync", f"{sync:.3f}", each(ms["sync"], ".3f")],
            ["vector", f"{vector:.3f}", each(ms["vector"], ".3f")],
            ["sync / vector", f"{sync / vector:.1f}x", ""],
        ],
        ["1,000 steps of random actions per round"],
    )
