"""A run directory: who owns it, what counts as a run, and how files get into it without loss.

- A directory that holds a run (`holds_run`) is never reused by a new run; `python -m rlrun.resume <dir>`
  continues it.
- A run directory is owned by one process at a time: `owned(dir)` holds an OS file lock (`flock`, through
  the filelock library) on `<dir>/.rlrun.lock` for the run's life. The OS drops the lock when the process
  dies, however it dies, so a stale lock never blocks a later resume.
- Files are written whole or not at all (`open_atomic`): a temporary file, fsync, then a rename over the
  real name, so a full disk or a kill leaves the previous version in place.
- Nothing is written through a link: a file written whole replaces a link at its name (the rename), and
  its temporary file is new (`O_EXCL`); a file appended to is opened with `O_NOFOLLOW` (`open_append`).
  A directory that is claimed again is checked first (`check_links`, `check_rows`): a link in it that
  leads out of it, or at a name rlrun appends to or locks, is refused, and so is a CSV file it appends
  to whose rows do not parse (a file torn by a kill loses only its unfinished last line).
"""

from __future__ import annotations

import contextlib
import csv
import errno
import os
import secrets
import shlex
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import IO

from filelock import FileLock, Timeout

from rlrun.storage import bounded

LOCK_NAME = ".rlrun.lock"
# Any of these makes a directory a run of rlrun (a started run writes .hydra/ and train.log first, then
# its events, episodes.csv, checkpoints and summary).
RUN_MARKERS = (".hydra/config.yaml", "checkpoint.pt", "checkpoint.prev.pt", "episodes.csv", "summary.json")
# The CSV files a run appends a row to (their header first), and all the files it opens in place, appended
# to or locked: never through a link.
CSV_HEADERS = {"episodes.csv": "env_step,episode,return,length", "scalars.csv": "env_step,tag,value"}
IN_PLACE = (*CSV_HEADERS, "train.log", "evaluations.jsonl", LOCK_NAME)


class RunDirError(Exception):
    """The directory cannot be used as asked (it holds another run, or another process owns it)."""


def holds_run(path: Path) -> bool:
    return any((Path(path) / marker).exists() for marker in RUN_MARKERS)


def shell_quote(path: Path) -> str:
    return shlex.quote(str(path))


def resume_command(path: Path) -> str:
    return f"python -m rlrun.resume {shell_quote(path)}"


NAME_MAX = 255  # bytes in one name of a path, on Linux's file systems (ext4, xfs, btrfs, tmpfs)


def check_new(path: Path, key: str = "hydra.run.dir") -> None:
    """Refuse a directory that already holds anything (a run above all: it names the resume command), or whose
    path has a name longer than a file system allows (a long `exp_name`); `key` is the setting that chose it."""
    path = Path(path)
    long = next((name for name in path.parts if len(os.fsencode(name)) > NAME_MAX), None)
    if long is not None:
        raise RunDirError(
            f"{path} cannot be made: its name {long[:24]}... is {len(os.fsencode(long))} bytes, and a name may "
            f"have {NAME_MAX}; shorten exp_name, or choose hydra.run.dir=... (hydra.sweep.dir=... for -m)"
        )
    if not path.exists():
        return
    if not path.is_dir():
        raise RunDirError(f"{path} is a file, not a run directory; choose another {key}")
    if holds_run(path):
        raise RunDirError(
            f"{path} already holds a run; a new run never reuses it. Continue that run with "
            f"{resume_command(path)}, or choose a new {key}"
        )
    if any(p.name != LOCK_NAME for p in path.iterdir()):
        raise RunDirError(
            f"{path} is not empty, and a run never writes over files it did not make; choose a new or empty {key}"
        )


class _Owned:
    def __init__(self, path: Path, lock: FileLock, new: bool, created: bool):
        self.path, self.lock = path, lock
        self.new, self.created = new, created  # a new run's directory; created by this process


_OWNED: dict[Path, _Owned] = {}  # run directories this process owns


def claim(path: Path, new: bool = False) -> None:
    """Own `path` (creating it if needed) until `release` or the end of the process; `new`: for a new run
    (`check_new` first). Owning it twice in one process is a no-op. Raises `RunDirError` if another live
    process owns it or it fails `check_links` or `check_rows`, `OSError` if it cannot be created or written."""
    path = Path(path).resolve()
    if path in _OWNED:
        return
    created = not path.exists()
    lock = FileLock(str(path / LOCK_NAME), timeout=0)
    _OWNED[path] = _Owned(path, lock, new, created)  # first: a signal from here on finds it to clean up
    try:
        path.mkdir(parents=True, exist_ok=True)
        check_links(path)  # before the lock: a linked lock file would be truncated through its link
        if not created:
            check_rows(path)
        lock.acquire()
    except BaseException as e:  # a signal included: leave no directory behind that this call made
        del _OWNED[path]
        if created:
            shutil.rmtree(path, ignore_errors=True)
        if isinstance(e, Timeout):
            raise RunDirError(f"{path} is in use by another rlrun process; it was left unchanged") from None
        raise


def owned_paths() -> list[Path]:
    return list(_OWNED)


def _release(path: Path) -> None:
    owned = _OWNED.pop(Path(path).resolve(), None)
    if owned is not None:
        owned.lock.release()


@contextlib.contextmanager
def owned(path: Path) -> Iterator[None]:
    """Own `path` for the block, unless this process already owns it (then the outer owner releases), and
    with it every directory claimed inside the block (a run's agent directories)."""
    already = Path(path).resolve() in _OWNED
    before = set(_OWNED)
    claim(path)
    try:
        yield
    finally:
        if not already:
            for claimed in [p for p in _OWNED if p not in before]:
                _release(claimed)


def discard_unstarted(path: Path, release: bool = True) -> bool:
    """Remove what a new run wrote into `path` if it ended (refused, interrupted) before its first checkpoint:
    a run that never started leaves no directory behind. A resumed run is left alone. `release=False` keeps
    the lock (a process about to exit). Returns whether anything was removed."""
    owned = _OWNED.get(Path(path).resolve())
    if owned is None or not owned.new or (owned.path / "checkpoint.pt").exists():
        return False
    if release:
        _release(owned.path)
    if owned.created:
        shutil.rmtree(owned.path, ignore_errors=True)
    else:  # it was empty before: empty it again
        for p in owned.path.iterdir():
            shutil.rmtree(p, ignore_errors=True) if p.is_dir() else p.unlink(missing_ok=True)
    return True


@contextlib.contextmanager
def open_atomic(path: Path, mode: str = "wb") -> Iterator[IO]:
    """A file that appears under `path` only once it is completely written and fsynced. Any failure to
    write is an `OSError` (torch reports some disk errors as `RuntimeError`); the old `path` stays."""
    path = Path(path)
    tmp = path.with_name(f"{path.name}.{secrets.token_hex(4)}.tmp")  # a new file: never a link planted there
    try:
        with os.fdopen(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o666), mode) as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
    except BaseException as e:
        tmp.unlink(missing_ok=True)
        if isinstance(e, RuntimeError):  # "PytorchStreamWriter failed writing file ...: file write failed"
            free = shutil.disk_usage(path.parent).free
            raise OSError(
                errno.EIO,
                f"writing {path.name} failed with {free / 2**20:.1f} MiB free on its disk "
                f"(torch: {str(e).splitlines()[0]})",
            ) from None
        raise
    try:
        os.replace(tmp, path)  # fails where `path` is a directory: the temporary file goes
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def write_text(path: Path, text: str) -> None:
    with open_atomic(path, "w") as f:
        f.write(text)


def open_append(path: Path, readable: bool = False) -> IO[str]:
    """`path` opened to append text (created if missing), never through a link: a link there is refused.
    `readable`: its descriptor may also be read (`append_line` looks at the last line)."""
    try:
        fd = os.open(path, (os.O_RDWR if readable else os.O_WRONLY) | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o666)
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise RunDirError(f"{path} is a link; rlrun appends to it in place, never through a link") from None
        raise
    return os.fdopen(fd, "a", newline="")


def append_line(path: Path, line: str) -> None:
    """Append `line` (without its line ending) to a text file of lines (JSON lines: `evaluations.jsonl`), never
    through a link. A last line left without its line ending (a write cut by a kill or a full disk) is dropped
    first, as `kept_rows` drops a CSV file's, so the new line starts a line of its own and every line parses."""
    with open_append(path, readable=True) as f:
        fd = f.fileno()
        end = os.fstat(fd).st_size
        if end and os.pread(fd, 1, end - 1) != b"\n":
            os.ftruncate(fd, _last_line_end(fd, end))
        f.write(line + "\n")
        f.flush()


def _last_line_end(fd: int, end: int, chunk: int = 1 << 16) -> int:
    """The offset just past the last newline of the file before `end` (0 if none), read backwards in chunks."""
    while end > 0:
        start = max(0, end - chunk)
        found = os.pread(fd, end - start, start).rfind(b"\n")
        if found >= 0:
            return start + found + 1
        end = start
    return 0


def linked_part(path: Path, root: Path) -> Path | None:
    """The first of `path` and its parents below `root` (not `root` itself) that is a symlink, or None: a
    directory reached through it is another's, and rlrun never writes there."""
    path, root = Path(os.path.abspath(path)), Path(os.path.abspath(root))
    return next((p for p in [path, *path.parents] if p.is_relative_to(root) and p != root and p.is_symlink()), None)


def check_unlinked(paths: list[Path], root: Path) -> None:
    """Refuse (`RunDirError`) directories of which one, or a directory on the way to it from `root`, is a link."""
    for path in paths:
        link = linked_part(path, root)
        if link is not None:
            raise RunDirError(
                f"{link} is a link to {link.resolve()}: rlrun never writes through a link; "
                "replace it by a directory of its own, or remove it"
            )


def check_links(path: Path) -> None:
    """Refuse a directory holding, anywhere under it, a link that leads out of it (rlrun or a logging
    backend would write through it: a `.hydra` or `mlruns` link, a file a backend opens in place), or a link
    at a name rlrun appends to or locks (`IN_PLACE`: a linked lock file would be truncated).
    Links within the directory (W&B's `latest-run`) are allowed: files rlrun writes whole replace them."""
    root = Path(path).resolve()
    for parent, dirs, files in os.walk(root):  # os.walk does not follow links
        for name in dirs + files:
            link = Path(parent, name)
            if not link.is_symlink():
                continue
            target = link.resolve()
            if name in IN_PLACE:
                why = f"rlrun opens {name} in place"
            elif not target.is_relative_to(root):
                why = "it leads out of the run"
            else:
                continue
            raise RunDirError(
                f"{link} is a link to {target}, and {why}: rlrun never writes through a link; "
                "replace it by a copy of what it points to, or remove it"
            )


def kept_rows(path: Path, resume_step: int | None) -> list[str]:
    """The rows (header first) of a CSV file of `CSV_HEADERS` that a run continued at `resume_step` keeps:
    those up to that env step (the first field); all of them for None. An unfinished last line (no line
    ending: a write cut by a kill, after the last checkpoint) is dropped. A row that does not parse is
    refused with `RunDirError`, naming the file and the line: a damaged file is never silently rewritten."""
    path = Path(path)
    header = CSV_HEADERS[path.name]
    if not path.exists():
        return [header]
    try:
        text = bounded.read_text(path, bounded.TABLE_LIMIT)
    except bounded.FileRefused as e:
        raise RunDirError(f"{e}; fix or remove it to continue the run") from None
    lines = text.splitlines(keepends=True)
    if lines and not lines[-1].endswith("\n"):
        lines.pop()
    kept = [header]
    width = len(header.split(","))
    for number, line in enumerate(lines, 1):
        fields = next(csv.reader([line]), [])
        if number == 1:
            ok = line.rstrip("\r\n") == header
        else:
            ok = len(fields) == width and fields[0].isascii() and fields[0].isdigit()
        if not ok:
            expected = "the header " + header if number == 1 else f"{width} fields, an env step first"
            raise RunDirError(
                f"{path}, line {number}: {line.rstrip()!r} is damaged (expected {expected}); "
                "fix or remove that line to continue the run"
            )
        if number > 1 and (resume_step is None or int(fields[0]) <= resume_step):
            kept.append(line.rstrip("\r\n"))
    return kept


def check_rows(path: Path) -> None:
    """Refuse a directory where a CSV file rlrun appends to (`CSV_HEADERS`), anywhere under it, is damaged."""
    for parent, _, files in os.walk(Path(path)):
        for name in files:
            if name in CSV_HEADERS:
                kept_rows(Path(parent, name), None)
