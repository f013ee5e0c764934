"""The machine a measurement ran on, in one line: what compare.md and the benchmark scripts' tables state
under their date (figures carry their date, hardware and command)."""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
from pathlib import Path


def hardware() -> str:
    """The CPU's model name (as `lscpu` shows it, else what Python knows of the machine), its logical cores
    and each GPU `nvidia-smi` lists: `AMD EPYC 9654, 16 logical cores; GPU NVIDIA H100 80GB HBM3`."""
    try:
        cpuinfo = Path("/proc/cpuinfo").read_text()
        cpu = next(line.split(":", 1)[1].strip() for line in cpuinfo.splitlines() if line.startswith("model name"))
    except (OSError, StopIteration):
        cpu = platform.processor() or platform.machine()
    text = f"{cpu}, {os.cpu_count()} logical cores"
    if shutil.which("nvidia-smi"):
        gpus = subprocess.run(
            ["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], check=False, capture_output=True, text=True
        ).stdout.split("\n")
        text += "".join(f"; GPU {g.strip()}" for g in gpus if g.strip())
    return text
