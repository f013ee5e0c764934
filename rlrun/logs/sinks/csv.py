"""logger=csv: every scalar as a row `env_step,tag,value` of `scalars.csv` in the agent's directory.

The config and the summary are already files of the run (`.hydra/config.yaml`, `summary.json`).
"""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

from rlrun.storage import rundir

HEADER = rundir.CSV_HEADERS["scalars.csv"]


class CsvSink:
    def __init__(self, out_dir: Path, resume_step: int | None = None):
        """With `resume_step`, rows a dead process wrote after that step are dropped."""
        self.path = Path(out_dir) / "scalars.csv"
        kept = [HEADER] if resume_step is None else rundir.kept_rows(self.path, resume_step)
        rundir.write_text(self.path, "".join(row + "\n" for row in kept))
        self._file = rundir.open_append(self.path)  # closed in close(); never through a link
        self._rows = csv.writer(self._file, lineterminator="\n")

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
