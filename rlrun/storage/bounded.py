"""Every file rlrun reads from a run directory, read within bounds: a crafted or damaged file is refused with
one line (`FileRefused`), never a hang, a traceback or gigabytes of memory.

- Only a regular file is read (a link to one is followed): a FIFO, a device (`/dev/zero`) or a directory at
  the name is refused before a byte is read. The file is opened without blocking and checked on its open
  descriptor, so what is checked is what is read.
- Its size is bounded: `TEXT_LIMIT` for configs, overrides, `summary.json` and other JSON, `TABLE_LIMIT` for
  the CSV tables and event files. A checkpoint has no fixed size (its replay buffer may be gigabytes), but
  what it holds may not exceed its size: `torch.save` stores every tensor uncompressed, so a file whose
  records inflate beyond the file (a compressed record: 3 MB that torch would inflate to 3 GB) is refused
  before torch allocates anything (`open_checkpoint`).
- Text is UTF-8. YAML and JSON are nested at most `MAX_DEPTH` deep and expand to at most `MAX_NODES` values,
  aliases counted as many times as they are used (an alias bomb is refused while it is composed, not
  expanded); so are the values unpickled from a checkpoint (`check_values`: shared references counted as
  many times as they occur).
"""

from __future__ import annotations

import json
import os
import stat
import zipfile
from pathlib import Path
from typing import IO, Any

import yaml

TEXT_LIMIT = 16 * 2**20  # a config, overrides, summary.json: kilobytes when rlrun writes them
TABLE_LIMIT = 2**30  # episodes.csv, scalars.csv, an events file: a million episodes take ~30 MB
MAX_DEPTH = 100  # rlrun's configs and checkpoints nest fewer than 10 levels
MAX_NODES = 10**6  # values in a YAML or JSON document (a config has a few hundred)
MAX_CHECKPOINT_NODES = 10**7  # values unpickled from a checkpoint (tensors count one each)


class FileRefused(ValueError):
    """A file that rlrun does not read; `reason` says why, after the file's name (`<path> <reason>`)."""

    def __init__(self, path: Path | str, reason: str):
        self.path, self.reason = Path(path), reason
        super().__init__(f"{path} {reason}")


def _size(n: int) -> str:
    return f"{n / 2**30:g} GiB" if n >= 2**30 else f"{n / 2**20:g} MiB"


# What a file that is not a regular one is, by its type's letter in `stat.filemode`
_KINDS = {"d": "a directory", "p": "a FIFO", "c": "a device", "b": "a device", "s": "a socket"}


def open_regular(path: Path | str, limit: int | None) -> IO[bytes]:
    """`path` opened for reading once it is a regular file of at most `limit` bytes (None: any size)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)  # a FIFO opens at once instead of waiting for a writer
    except OSError as e:
        raise FileRefused(path, f"cannot be read ({e.strerror or e})") from None
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        os.close(fd)
        kind = _KINDS.get(stat.filemode(info.st_mode)[0], "not a regular file")
        raise FileRefused(path, f"is {kind}, not a regular file; rlrun reads only regular files")
    if limit is not None and info.st_size > limit:
        os.close(fd)
        raise FileRefused(path, f"is larger than {_size(limit)} ({info.st_size} bytes): rlrun never writes one so big")
    os.set_blocking(fd, True)
    return os.fdopen(fd, "rb")


def check_file(path: Path | str) -> None:
    """Refuse `path` unless it is a regular file of at most `TABLE_LIMIT` bytes (for files a library reads by
    name: CSV tables, TensorBoard event files)."""
    open_regular(path, TABLE_LIMIT).close()


def read_text(path: Path | str, limit: int = TEXT_LIMIT, what: str = "UTF-8 text") -> str:
    """The text of `path` (at most `limit` bytes), UTF-8; refused as not `what` otherwise."""
    with open_regular(path, limit) as f:
        try:
            data = f.read(limit + 1)
        except OSError as e:
            raise FileRefused(path, f"cannot be read ({e.strerror or e})") from None
    if len(data) > limit:  # it grew while it was read
        raise FileRefused(path, f"is larger than {_size(limit)}: rlrun never writes one so big")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        byte = f"byte {data[e.start]:#04x} at offset {e.start}"
        raise FileRefused(path, f"is not {what} ({byte}{'' if what == 'UTF-8 text' else ' is not UTF-8'})") from None


class _BoundedLoader(yaml.SafeLoader):
    """PyYAML's safe loader that counts, while it composes, the depth and the expanded number of nodes (an
    alias counts the nodes of what it names): a document beyond the bounds stops at once."""

    def __init__(self, stream: str):
        super().__init__(stream)
        self.depth, self.nodes = 0, 0
        self.expanded: dict[int, int] = {}  # id of a composed node -> the nodes it expands to

    def compose_node(self, parent: yaml.Node | None, index: object) -> yaml.Node | None:
        if self.check_event(yaml.AliasEvent):
            named = self.anchors.get(self.peek_event().anchor)
            if named is not None and id(named) not in self.expanded:  # inside the node it names
                raise _Bound("holds a recursive alias (a value that contains itself)")
            self._count(self.expanded.get(id(named), 1) if named is not None else 1)
            return super().compose_node(parent, index)
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise _Bound(f"is nested deeper than {MAX_DEPTH} levels")
        before = self.nodes
        self._count(1)
        node = super().compose_node(parent, index)
        self.expanded[id(node)] = self.nodes - before
        self.depth -= 1
        return node

    def _count(self, n: int) -> None:
        self.nodes += n
        if self.nodes > MAX_NODES:
            raise _Bound(f"expands to more than {MAX_NODES} values (YAML aliases included)")


class _Bound(Exception):
    def __init__(self, reason: str):
        self.reason = reason


def load_yaml(path: Path | str) -> Any:
    """A YAML file (a config, overrides, multirun.yaml), read within the bounds above."""
    loader = _BoundedLoader(read_text(path, TEXT_LIMIT, "YAML"))
    try:
        return loader.get_single_data()
    except _Bound as e:
        raise FileRefused(path, e.reason) from None
    except yaml.YAMLError as e:
        reason = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        if isinstance(e, yaml.MarkedYAMLError) and e.problem_mark is not None:  # what is wrong, and where
            reason = f"{e.problem}, line {e.problem_mark.line + 1}"
        raise FileRefused(path, f"is not YAML ({reason})") from None
    finally:
        loader.dispose()


def load_json(path: Path | str) -> Any:
    """A JSON file (summary.json, a logging backend's state), read within the bounds above."""
    text = read_text(path, TEXT_LIMIT, "JSON")
    try:
        value = json.loads(text)
    except RecursionError:
        raise FileRefused(path, f"is nested deeper than {MAX_DEPTH} levels") from None
    except ValueError as e:
        reason = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise FileRefused(path, f"is not JSON ({reason})") from None
    check_values(value, path, MAX_NODES)
    return value


def check_values(value: object, path: Path | str, max_nodes: int = MAX_CHECKPOINT_NODES) -> None:
    """Refuse `value` (read from `path`) if it nests deeper than `MAX_DEPTH` or expands to more than
    `max_nodes` values, a container referenced twice counted twice. Each container is visited once, so a
    structure of shared references (a small pickle expanding to 10^9 leaves) is measured, not walked."""
    expanded: dict[int, int] = {}  # id of a container -> the values it expands to
    stack: list[tuple[object, int, bool]] = [(value, 1, False)]
    while stack:
        node, depth, children_done = stack.pop()
        items = _children(node)
        if items is None:
            continue
        if children_done:
            expanded[id(node)] = 1 + sum(expanded.get(id(c), 1) for c in items)
            if expanded[id(node)] > max_nodes:
                raise FileRefused(path, f"holds more than {max_nodes} values (shared references included)")
            continue
        if id(node) in expanded:
            continue
        if depth > MAX_DEPTH:
            raise FileRefused(path, f"is nested deeper than {MAX_DEPTH} levels")
        stack.append((node, depth, True))
        stack.extend((c, depth + 1, False) for c in items if _children(c) is not None and id(c) not in expanded)


def _children(node: object) -> list[object] | None:
    if isinstance(node, dict):
        return [*node.keys(), *node.values()]
    if isinstance(node, (list, tuple, set)):
        return list(node)
    return None


def open_checkpoint(path: Path | str) -> IO[bytes]:
    """A file written by `torch.save`, opened for `torch.load` once it is a regular file whose records fit in
    it: torch stores every record uncompressed, so together they are no larger than the file. A compressed
    record, which torch would inflate into memory before checking its size, is refused here, and so is a file
    that is no zip archive (torch's legacy format allocates the storage sizes it declares before reading)."""
    f = open_regular(path, None)
    try:
        size = os.fstat(f.fileno()).st_size
        try:
            with zipfile.ZipFile(f) as archive:
                declared = sum(info.file_size for info in archive.infolist())
        except (zipfile.BadZipFile, OSError, ValueError, EOFError):  # torch.save has written zip archives since 1.6
            what = "an empty file" if size == 0 else "not a zip archive"
            raise FileRefused(path, f"is unreadable, damaged or not written by torch.save ({what})") from None
        if declared > size:
            raise FileRefused(
                path,
                f"declares {declared} bytes of records in {size} bytes of file (compressed records, which "
                "torch.save never writes); rlrun does not inflate them",
            )
        f.seek(0)
        return f
    except BaseException:
        f.close()
        raise
