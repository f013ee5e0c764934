"""Where a report may be written: never through a link, as nothing rlrun writes is (rlrun.storage.rundir).
A folder given as a link (`links/runA`, a link to a sweep's job) is read through it, but writing into it
would put the report into a run directory that its own process owns."""

from __future__ import annotations

from pathlib import Path


class LinkedFolderError(ValueError):
    """The folder a report would be written into is a link."""


def refuse_link(out: Path) -> None:
    """Raise `LinkedFolderError` where `out` is a link, before anything is read or written."""
    if out.is_symlink():
        raise LinkedFolderError(
            f"{out} is a link (to {out.resolve()}); a report is never written through a link: "
            "write it elsewhere with --out DIR"
        )
