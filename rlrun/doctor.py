"""`python -m rlrun.doctor`: what a user runs first in a new machine or container.

Reports torch, CUDA and cuDNN versions, the GPUs, whether CUDA works for a real tensor op, and the
versions of the required packages and of each extra's optional ones, in aligned columns. Exits non-zero if
a required piece is missing or CUDA is present but broken.
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


REQUIRED = ("gymnasium", "hydra-core", "omegaconf", "tensorboard", "numpy", "filelock")
# Optional packages by the extra that installs them (`pip install -e ".[extra]"`).
OPTIONAL = {
    "report": ("rliable", "pandas", "scipy"),  # the sweep report (the sweep extra includes it)
    "sweep": ("hydra-joblib-launcher", "hydra-submitit-launcher", "hydra-optuna-sweeper"),
    "ray": ("ray",),  # hydra/launcher=ray_cluster (rlrun's own plugin)
    "atari": ("ale-py", "opencv-python-headless"),
    "box2d": ("box2d", "pygame"),
    "video": ("moviepy",),
    "notebook": ("nbclient", "nbformat"),
    "mlflow": ("mlflow",),  # logger=mlflow
    "wandb": ("wandb",),  # logger=wandb
}


def main() -> int:
    # the doctor reports a broken torch install instead of failing to import
    import torch

    ok = True
    rows = [
        ("python", f"{platform.python_version()} ({sys.executable})"),
        ("torch", f"{torch.__version__} (CUDA build: {torch.version.cuda or 'none'})"),
        ("cudnn", str(torch.backends.cudnn.version()) if torch.backends.cudnn.is_available() else "unavailable"),
        ("cpu threads", f"{torch.get_num_threads()} (rlrun uses device.threads, default 1)"),
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
    for pkg in REQUIRED:
        v = version(pkg)
        ok &= v != "not installed"
        rows.append((pkg, v))
    for extra, packages in OPTIONAL.items():
        for pkg in packages:
            rows.append((pkg, f"{version(pkg)} (optional: the {extra} extra)"))
    width = max(len(name) for name, _ in rows) + 2
    print("\n".join(f"{name:<{width}}{value}" for name, value in rows))
    print("rlrun doctor: " + ("all good" if ok else "problems found"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
