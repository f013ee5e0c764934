"""A run directory as a command that fills folders of runs finds it (rlrun.compare's rounds,
scripts/minatar_bench.py, atari100k_bench.py and preset_seeds.py): whether a live process owns it (holds its
lock, `rlrun.storage.rundir.claim`) and what its run needs next: nothing (done), a resume (stopped) or a
first start (new)."""

from __future__ import annotations

from pathlib import Path

from rlrun.storage import rundir, summary as run_summary

NEW = "new"  # no directory: train it
DONE = "done"  # a summary.json that does not say failed (finished, or solved): read it
FAILED = "failed"  # a summary.json that says failed, and no checkpoint to resume from
STOPPED = "stopped"  # a checkpoint, and no summary.json or a failed one: resume it
UNSTARTED = "unstarted"  # a directory with neither: the run stopped before its first checkpoint


def in_use(run_dir: Path) -> bool:
    """Whether a live process owns `run_dir` (holds its lock). No lock file (or a linked one, which no run
    makes) is no owner; the probe never creates one."""
    from filelock import FileLock, Timeout

    lock = Path(run_dir) / rundir.LOCK_NAME
    if not lock.exists() or lock.is_symlink():
        return False
    try:
        with FileLock(str(lock), timeout=0):
            return False
    except Timeout:
        return True


def wait_for_owner(run_dir: Path) -> bool:
    """Block while a live process owns `run_dir`; returns whether one did (and has now ended)."""
    from filelock import FileLock

    if not in_use(run_dir):
        return False
    with FileLock(str(Path(run_dir) / rundir.LOCK_NAME)):  # blocks until the owner ends
        return True


def state(run_dir: Path) -> str:
    """NEW, DONE, FAILED, STOPPED or UNSTARTED (see each). `run_summary.DamagedJob` for a summary.json that
    cannot be read."""
    run_dir = Path(run_dir)
    if not run_dir.exists():
        return NEW
    checkpoint = (run_dir / "checkpoint.pt").exists()
    if (run_dir / run_summary.FILE).exists():
        if run_summary.read(run_dir).get("status") != "failed":
            return DONE
        if not checkpoint:
            return FAILED
    return STOPPED if checkpoint else UNSTARTED
