"""Benchmark of a pixel network's update on the CPU: fp32 or bf16 autocast, contiguous or channels-last weights."""

from __future__ import annotations

import statistics
import time

from benchlib.common import alternate, report

# contestant -> (device.amp, device.channels_last), rlrun's own switches
VARIANTS = {
    "fp32": ("none", False),
    "fp32 channels_last": ("none", True),
    "bf16": ("bf16", False),
    "bf16 channels_last": ("bf16", True),
}
ENCODERS = {"nature_cnn": [512], "der_cnn": [256]}


def pixels(args) -> None:
    """Milliseconds of CPU time per DQN update (sample from replay, online and target forwards, backward, Adam
    step) of a pixel network on 84x84x4 frames with 18 actions, and per greedy forward of `--envs` frames (the
    acting step), for each of rlrun's switches device.amp (none, bf16) and device.channels_last. The
    contestants alternate, each round timing `--calls` calls after 3 warm-up calls; medians over the rounds.
    CPU time of this one-thread process, so that other work on the machine weighs less."""
    import torch

    from rlrun.algos.dqn import dqn_learner
    from rlrun.nets.networks import QNetwork
    from rlrun.replay import ReplayBuffer
    from rlrun.training.device import cpu_bf16, memory_format

    torch.set_num_threads(1)
    cpu = torch.device("cpu")
    shape = (4, 84, 84)
    buf = ReplayBuffer(2048, shape, obs_dtype=torch.uint8, device=cpu)
    n = 2048
    frames = torch.randint(0, 256, (n, *shape), dtype=torch.uint8)
    buf.add(frames, torch.randint(0, 18, (n,)), torch.randn(n), frames.roll(1, 0), torch.full((n,), 0.99))
    rows = []
    for encoder in args.encoders:
        for batch in args.batches:
            forwards: dict[str, list[float]] = {name: [] for name in VARIANTS}

            def contestant(name: str, amp: str, channels_last: bool, encoder=encoder, batch=batch, forwards=forwards):
                torch.manual_seed(0)
                net = QNetwork(
                    0, 18, obs_shape=list(shape), encoder=encoder, hidden_sizes=ENCODERS[encoder], layer_norm=False
                )
                net = net.to(memory_format=memory_format(channels_last, cpu))
                learner = dqn_learner(net, torch.optim.Adam(net.parameters(), lr=1e-4), loss="huber", amp=amp)
                obs = frames[: args.envs].float()

                def timed() -> float:
                    for _ in range(3):
                        learner.update(buf.sample(batch))
                    start = time.process_time()
                    for _ in range(args.calls):
                        learner.update(buf.sample(batch))
                    update = (time.process_time() - start) / args.calls
                    start = time.process_time()
                    with torch.no_grad(), learner.autocast():
                        for _ in range(args.calls):
                            net(obs).argmax(-1)
                    forwards[name].append((time.process_time() - start) / args.calls * 1e3)
                    return update * 1e3

                return timed

            updates = alternate({name: contestant(name, *switch) for name, switch in VARIANTS.items()}, args.reps)
            base_update, base_act = statistics.median(updates["fp32"]), statistics.median(forwards["fp32"])
            for name, values in updates.items():
                update, act = statistics.median(values), statistics.median(forwards[name])
                rows.append(
                    [
                        encoder,
                        batch,
                        name,
                        f"{update:.1f}",
                        f"{base_update / update:.2f}x",
                        f"{act:.2f}",
                        f"{base_act / act:.2f}x",
                    ]
                )
    flags = cpu_bf16()
    native = "unknown (no /proc/cpuinfo)" if flags is None else (", ".join(flags) or "none: bf16 is emulated")
    report(
        "pixels: ms of CPU time per pixel-network update and per greedy forward",
        ["encoder", "batch", "switches", "ms/update", "speed-up", f"ms/forward of {args.envs}", "speed-up"],
        rows,
        [
            f"native bf16 flags: {native}",
            f"medians of {args.reps} alternating rounds of {args.calls} calls each",
            "speed-up: fp32's time over the row's",
        ],
    )
