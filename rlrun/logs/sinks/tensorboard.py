"""logger=tensorboard: `events.out.tfevents.*` in the agent's directory, the config as text and hparams."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from torch.utils.tensorboard import SummaryWriter
from torch.utils.tensorboard.summary import hparams

# Scalars the HParams tab shows next to each run's hyperparameters.
HPARAM_METRICS = ["charts/mean_return_100", "eval/mean_return", "hparams/best_mean_return_100", "hparams/solved_step"]


def wait_to_sort_last(out_dir: Path, longest: float = 2.0) -> None:
    """TensorBoard reads a directory's event files in name order, and a name starts with the second it was
    opened in, then the host and pid: a resume opened in the same second as the dead process's file, by a
    process whose pid sorts lower, would be read first, and the dead process's steps would come after the
    resumed ones (their purge undone). Waiting for the next second (at most `longest`) keeps the order."""
    seconds = [p.name.split(".")[3] for p in out_dir.glob("events.out.tfevents.*")]
    newest = max((int(s) for s in seconds if s.isdigit()), default=0)
    deadline = time.time() + longest
    while int(time.time()) <= newest and time.time() < deadline:
        time.sleep(0.05)


class TensorBoardSink:
    def __init__(self, out_dir: Path, resume_step: int | None = None):
        """With `resume_step`, TensorBoard purges what a dead process wrote after that step."""
        self.out_dir = Path(out_dir)
        if resume_step is not None:
            wait_to_sort_last(self.out_dir)
        self.writer = SummaryWriter(str(self.out_dir), purge_step=None if resume_step is None else resume_step + 1)

    def start(self, params: dict[str, Any], config_yaml: str) -> None:
        self.writer.add_text("config", "    " + config_yaml.replace("\n", "\n    "), 0)
        file_writer = self.writer.file_writer
        assert file_writer is not None
        for summary in hparams(params, {m: 0.0 for m in HPARAM_METRICS}):
            file_writer.add_summary(summary)

    def scalar(self, tag: str, value: float, step: int) -> None:
        self.writer.add_scalar(tag, value, step)

    def text(self, tag: str, text: str, step: int) -> None:
        self.writer.add_text(tag, text, step)

    def flush(self) -> None:
        self.writer.flush()

    def close(self, summary: dict[str, Any]) -> dict[str, Any]:
        self.writer.add_text(
            "summary", "    " + json.dumps(summary, indent=2).replace("\n", "\n    "), summary["env_steps"]
        )
        self.writer.close()
        return {"logdir": str(self.out_dir.absolute())}  # as a fresh run's, for a resume of a relative path
