"""`python -m rlrun.doctor`: what a user runs first in a new machine or container.

Reports torch, CUDA and cuDNN versions, the GPUs, whether CUDA works for a real tensor op, and the
versions of gymnasium, hydra, omegaconf and tensorboard. Exits non-zero if a required piece is missing
or CUDA is present but broken.
"""

from __future__ import annotations

import importlib.metadata as md
import platform
import sys


def version(package: str) -> str:
    try:
        return md.version(package)
    except md.PackageNotFoundError:
        return "not installed"


def main() -> int:
    import torch

    ok = True
    lines = [f"python       {platform.python_version()} ({sys.executable})",
             f"torch        {torch.__version__} (CUDA build: {torch.version.cuda or 'none'})",
             f"cudnn        {torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else 'unavailable'}",
             f"cpu threads  {torch.get_num_threads()} (rlrun uses device.threads, default 1)"]
    if torch.cuda.is_available():
        n = torch.cuda.device_count()
        lines.append(f"gpus         {n}")
        for i in range(n):
            p = torch.cuda.get_device_properties(i)
            lines.append(f"  cuda:{i}     {p.name}, {p.total_memory / 2**30:.1f} GiB, capability {p.major}.{p.minor}")
        try:
            x = torch.randn(256, 256, device="cuda")
            err = (x @ x - (x.cpu() @ x.cpu()).cuda()).abs().max().item()
            torch.cuda.synchronize()
            lines.append(f"cuda check   ok (matmul on cuda:0 matches the CPU, max abs diff {err:.2e})")
        except Exception as e:  # a driver/runtime mismatch shows up here
            ok = False
            lines.append(f"cuda check   FAILED: {e}")
    else:
        lines.append("gpus         0 (device=auto will use the CPU)")
    for pkg in ("gymnasium", "hydra-core", "omegaconf", "tensorboard", "numpy"):
        v = version(pkg)
        ok &= v != "not installed"
        lines.append(f"{pkg:<12} {v}")
    for pkg in ("hydra-joblib-launcher", "hydra-submitit-launcher", "hydra-optuna-sweeper", "moviepy"):
        lines.append(f"{pkg:<12} {version(pkg)} (optional)")
    print("\n".join(lines))
    print("rlrun doctor: " + ("all good" if ok else "problems found"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
