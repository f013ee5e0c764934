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


def memory_format(channels_last: bool | None, device: torch.device, encoder: str) -> torch.memory_format:
    """The memory format of a frame network's weights. Channels-last lets oneDNN run the convolutions without
    reordering their activations. On an Intel Xeon without native bf16 (2026-12-07, `python scripts/bench.py
    pixels`, one shared core) a Nature-CNN Adam step took 1.17x less time on a batch of 256 frames and 1.03x
    on 32, and a whole `+experiment=pqn_atari` run of 10,240 steps 1.22x less CPU time; DER's small network
    gained nothing (0.92-1.05x). `None` (the default) turns it on where it was measured to pay: the Nature CNN
    on the CPU; on CUDA it stays off until measured there. The weights' values, and what a checkpoint holds,
    are the same either way."""
    on = device.type == "cpu" and encoder == "nature_cnn" if channels_last is None else channels_last
    return torch.channels_last if on else torch.contiguous_format


# The CPU flags under which torch's oneDNN kernels compute bf16 natively (Linux names of /proc/cpuinfo):
# AVX-512 BF16 (AMD Zen 4 on, Intel Cooper Lake, Sapphire Rapids on), AMX (Sapphire Rapids on), Arm's BF16.
BF16_FLAGS = ("avx512_bf16", "amx_bf16", "bf16")


def native_bf16_flags(cpuinfo: str) -> list[str]:
    """The bf16 flags of the first processor listed in a /proc/cpuinfo text ('flags' on x86, 'Features' on Arm)."""
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        if key.strip() in ("flags", "Features"):
            return [flag for flag in BF16_FLAGS if flag in value.split()]
    return []


def cpu_bf16() -> list[str] | None:
    """This CPU's native bf16 flags (empty: bf16 is emulated, slower than fp32), or None where the CPU's flags
    cannot be read (not Linux). A virtual machine's flags are those its hypervisor passes on."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            return native_bf16_flags(f.read(1 << 20))
    except OSError:
        return None


def warn_emulated_bf16(amp: str, device: torch.device) -> None:
    """device.amp=bf16 on a CPU without native bf16: each update runs slower than in fp32 (a Nature-CNN Adam
    step 1.7x slower on an Intel Xeon whose hypervisor hides AVX-512 BF16), which the user should know."""
    if amp == "bf16" and device.type == "cpu" and cpu_bf16() == []:
        print(
            "rlrun: device.amp=bf16 on a CPU without native bf16 (no avx512_bf16 or amx_bf16 flag): updates run "
            "slower than fp32 here; device.amp=none for speed (python -m rlrun.doctor)",
            file=sys.stderr,
        )


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
