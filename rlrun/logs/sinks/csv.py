"""logger=csv: every scalar as a row `env_step,tag,value` of `scalars.csv` in the agent's directory.

The config and the summary are already files of the run (`.hydra/config.yaml`, `summary.json`).
"""

from __future__ import annotations

import csv
from pathlib import Path
from typing import IO, Any

from rlrun.storage import rundir


def open_rows(path: Path, resume_step: int | None) -> tuple[IO[str], Any]:
    """A CSV file of `rundir.CSV_HEADERS` opened to append rows (never through a link), and its csv writer:
    new, or with `resume_step` its rows up to that step (a damaged row is refused, naming its line, before
    anything is written). Written whole, then renamed: a full disk on resume cannot truncate the rows there."""
    kept = [rundir.CSV_HEADERS[path.name]] if resume_step is None else rundir.kept_rows(path, resume_step)
    rundir.write_text(path, "".join(row + "\n" for row in kept))
    file = rundir.open_append(path)
    return file, csv.writer(file, lineterminator="\n")


class CsvSink:
    def __init__(self, out_dir: Path, resume_step: int | None = None):
        """With `resume_step`, rows a dead process wrote after that step are dropped."""
        self.path = Path(out_dir) / "scalars.csv"
        self._file, self._rows = open_rows(self.path, resume_step)  # the file closed in close()

    def start(self, params: dict[str, Any], config_yaml: str) -> None:
        pass

    def scalar(self, tag: str, value: float, step: int) -> None:
        self._rows.writerow([step, tag, value])

    def text(self, tag: str, text: str, step: int) -> None:
        pass

    def flush(self) -> None:
        self._file.flush()

    def close(self, summary: dict[str, Any]) -> dict[str, Any]:
        self._file.close()
        return {"path": str(self.path.absolute())}  # as a fresh run's, for a resume of a relative path
