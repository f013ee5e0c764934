"""Text files of lines that runs and commands append records to (JSON lines: `evaluations.jsonl`)."""

from __future__ import annotations

import os
from pathlib import Path

from rlrun.storage import rundir


def append_line(path: Path, line: str) -> None:
    """Append `line` (without its line ending) to a text file of lines (JSON lines), never through a link. A
    last line left without its line ending (a write cut by a kill or a full disk) is dropped first, as
    `rundir.kept_rows` drops a CSV file's, so the new line starts a line of its own and every line parses."""
    with rundir.open_append(path, readable=True) as f:
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
