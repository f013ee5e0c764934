"""Device selection and CPU thread count."""

from __future__ import annotations

import sys

import torch

from rlrun.validate import ConfigError


def resolve_device(kind: str, pixels: bool = True) -> torch.device:
    """`auto`: CUDA when there is a GPU and the network reads pixels; the CPU otherwise. An MLP on vector
    observations (CartPole, LunarLander) makes kernels too small to pay for their launches and for a
    device round trip per env step: one CPU core runs it faster (docs/devices-and-benchmarks.md;
    Stable-Baselines3 warns about MLP policies on a GPU for the same reason). `device=cuda` forces it."""
    if kind == "auto":
        if not torch.cuda.is_available():
            return torch.device("cpu")
        if not pixels:
            print(
                "rlrun: device=auto runs this MLP on the CPU (faster than a GPU at this size); "
                "device=cuda to use the GPU anyway",
                file=sys.stderr,
            )
            return torch.device("cpu")
        return torch.device("cuda")
    if kind == "cuda" and not torch.cuda.is_available():
        raise ConfigError(
            "device.type",
            kind,
            "cpu or auto on this machine: torch sees no CUDA device "
            f"(torch {torch.__version__}, built with CUDA {torch.version.cuda})",
        )
    return torch.device(kind)


def set_threads(threads: int | None) -> None:
    """One thread per job: as fast as torch's default for these small networks on this 2-core machine
    (scripts/bench.py threads), and parallel sweep jobs do not oversubscribe the cores. null keeps
    torch's default (one thread per core)."""
    if threads is not None:
        torch.set_num_threads(threads)
