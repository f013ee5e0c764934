"""The `rlrun-train` and `rlrun-resume` console scripts: the exit handler of `rlrun.process_exit` registered
before the command's module is imported (which registers atexit handlers of its own), then the command."""

from __future__ import annotations

from rlrun.process_exit import register, run_then_exit


def train() -> None:
    """`rlrun-train`: `python -m rlrun.train`."""
    register()
    from rlrun.cli import main

    run_then_exit(main)


def resume() -> None:
    """`rlrun-resume`: `python -m rlrun.resume`."""
    register()
    from rlrun.resume import main

    run_then_exit(main)
