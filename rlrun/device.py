"""Device selection and CPU thread count."""

from __future__ import annotations

import torch

from rlrun.validate import ConfigError


def resolve_device(kind: str) -> torch.device:
    if kind == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
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
