"""`python -m rlrun.doctor`: what a user runs first in a new machine or container.

Reports torch, CUDA and cuDNN versions, the GPUs, whether CUDA works for a real tensor op, and the
versions of the required packages and of each extra's optional ones, in aligned columns. Exits non-zero if
a required piece is missing or CUDA is present but broken.
"""

from __future__ import annotations

import argparse
import importlib.metadata as md
import platform
import sys
from importlib.machinery import PathFinder
from pathlib import Path

from packaging.requirements import Requirement

from rlrun import console

# Extras for developing rlrun itself, not for using it.
DEV_EXTRAS = ("test",)


def version(package: str) -> str:
    try:
        return md.version(package)
    except md.PackageNotFoundError:
        return "not installed"


def requirements() -> tuple[list[str], dict[str, list[str]]]:
    """The packages rlrun requires, and each extra's (`pip install -e ".[extra]"`), from its installed
    metadata (pyproject.toml): the list cannot drift from what pip installs."""
    try:
        reqs = [Requirement(r) for r in md.requires("rlrun") or []]
        extras = md.metadata("rlrun").get_all("Provides-Extra") or []
    except md.PackageNotFoundError:  # run from a source tree that pip never installed
        return [], {}
    required = [r.name for r in reqs if r.marker is None and r.name != "torch"]  # torch has rows of its own
    optional = {
        extra: [
            r.name for r in reqs if r.name != "rlrun" and r.marker is not None and r.marker.evaluate({"extra": extra})
        ]
        for extra in extras
        if extra not in DEV_EXTRAS
    }
    return required, optional


def bf16_line(flags: list[str] | None) -> str:
    """Whether this CPU computes bf16 natively, which decides if device.amp=bf16 speeds a pixel network's
    update on it (docs/devices-and-benchmarks.md)."""
    if flags is None:
        return "unknown (no /proc/cpuinfo): time device.amp=bf16 with `python scripts/bench.py pixels`"
    if flags:
        return f"native ({', '.join(flags)}): device.amp=bf16 can speed pixel networks' updates"
    return "emulated (no avx512_bf16 or amx_bf16 flag): device.amp=bf16 runs slower than fp32 here"


def shadowing_folder(folder: Path) -> Path | None:
    """A `rlrun` folder without `__init__.py` in `folder` (a clone of the repository, say): a script or
    `python -m` run there imports it as an empty namespace package instead of an editable install of rlrun
    (`module 'rlrun' has no attribute 'load'`)."""
    spec = PathFinder.find_spec("rlrun", [str(folder)])
    return folder / "rlrun" if spec is not None and spec.origin is None else None


def main(argv: list[str] | None = None) -> int:
    console.guard()  # `| head -1`, a full or closed stdout: no traceback
    argparse.ArgumentParser(
        prog="python -m rlrun.doctor",
        description="torch, CUDA, the GPUs and the installed packages of rlrun and its extras; "
        "exits 1 when a required one is missing or CUDA is present but broken",
    ).parse_args(argv)  # --help prints this; anything else exits 2
    # the doctor reports a broken torch install instead of failing to import
    import torch

    from rlrun.training.device import cpu_bf16

    ok = True
    rows = [
        ("python", f"{platform.python_version()} ({sys.executable})"),
        ("torch", f"{torch.__version__} (CUDA build: {torch.version.cuda or 'none'})"),
        ("cudnn", str(torch.backends.cudnn.version()) if torch.backends.cudnn.is_available() else "unavailable"),
        ("cpu threads", f"{torch.get_num_threads()} (rlrun uses device.threads, default 1)"),
        ("cpu bf16", bf16_line(cpu_bf16())),
    ]
    if torch.cuda.is_available():
        n = torch.cuda.device_count()
        rows.append(("gpus", str(n)))
        for i in range(n):
            p = torch.cuda.get_device_properties(i)
            rows.append((f"  cuda:{i}", f"{p.name}, {p.total_memory / 2**30:.1f} GiB, capability {p.major}.{p.minor}"))
        try:
            x = torch.randn(256, 256, device="cuda")
            err = (x @ x - (x.cpu() @ x.cpu()).cuda()).abs().max().item()
            torch.cuda.synchronize()
            rows.append(("cuda check", f"ok (matmul on cuda:0 matches the CPU, max abs diff {err:.2e})"))
        except Exception as e:  # a driver/runtime mismatch shows up here
            ok = False
            rows.append(("cuda check", f"FAILED: {e}"))
    else:
        rows.append(("gpus", "0 (device=auto will use the CPU)"))
    required, optional = requirements()
    for pkg in required:
        v = version(pkg)
        ok &= v != "not installed"
        rows.append((pkg, v))
    for extra, packages in optional.items():
        for pkg in packages:
            rows.append((pkg, f"{version(pkg)} (optional: the {extra} extra)"))
    shadow = shadowing_folder(Path.cwd())
    if shadow is not None:
        ok = False
        rows.append(
            (
                "rlrun folder",
                f"PROBLEM: {shadow} has no __init__.py; a script or `python -m` run in {shadow.parent} imports it "
                "as an empty package `rlrun` instead of the installed one (\"module 'rlrun' has no attribute "
                "'load'\"): run from another folder, or rename it",
            )
        )
    width = max(len(name) for name, _ in rows) + 2
    print("\n".join(f"{name:<{width}}{value}" for name, value in rows))
    print("rlrun doctor: " + ("all good" if ok else "problems found"), flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
