"""Device selection, CPU thread count and the process's memory allocator."""

from __future__ import annotations

import ctypes
import sys

import torch

from rlrun.errors import ConfigError


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


def flush_denormals() -> None:
    """Flush subnormal floats (below 1.2e-38) to zero on the CPU, as TensorFlow's CPU kernels do.

    Adam's moments of weights whose gradients stay near zero (dead units, rarely seen inputs) decay into
    the subnormal range, and x86 cores compute on subnormals through slow microcode: a 3-agent Rainbow run
    on MinAtar Seaquest, resumed from a 300k-frame checkpoint whose Adam moments were 36% subnormal in its
    largest layers, ran 10k frames at 164-172 frames/s with them and 257-268 flushed (docs/results/minatar.md).
    A setting of the calling thread for the rest of the process, like torch's thread count; values this
    small are below the float32 resolution of any weight larger than about 1e-31.
    """
    torch.set_flush_denormal(True)


def keep_freed_memory() -> None:
    """Let glibc's malloc keep freed memory for the next allocation instead of handing it back to the OS.

    By default a block over 128 KiB is mmap'ed fresh and unmapped when freed, and the heap top is trimmed:
    every training step then pays page faults for its activations (a stacked batch of 10 agents makes
    655 KiB tensors). With the threshold at glibc's maximum (32 MiB) and no trimming, the same memory is
    reused from step to step: a 20k-step `seeds=10` CartPole run made 130k page faults instead of 410k.
    Allocations over 32 MiB (replay storage, made once) are still mapped directly. No-op where the C
    library has no `mallopt`.
    """
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):  # not glibc (macOS, Windows, musl without mallopt)
        return
    m_trim_threshold, m_top_pad, m_mmap_threshold = -1, -2, -3
    mallopt(m_mmap_threshold, 32 * 2**20)
    mallopt(m_trim_threshold, 2**31 - 1)
    mallopt(m_top_pad, 64 * 2**20)
