"""Everything a run writes besides checkpoints: TensorBoard events, episodes.csv, summary.json,
returns.png and the progress bar. All of it goes under the run's output directory."""

from __future__ import annotations

import csv
import json
import logging
import time
from collections import deque
from pathlib import Path
from typing import Any

import numpy as np
from omegaconf import DictConfig, OmegaConf
from torch.utils.tensorboard import SummaryWriter
from torch.utils.tensorboard.summary import hparams
from tqdm import tqdm

from rlrun import rundir

# Scalars the HParams tab shows next to each run's hyperparameters.
log = logging.getLogger(__name__)

EPISODE_HEADER = "env_step,episode,return,length"
HPARAM_METRICS = ["charts/mean_return_100", "eval/mean_return", "hparams/best_mean_return_100", "hparams/solved_step"]


def flat_hparams(cfg: DictConfig) -> dict[str, Any]:
    """The config as `a.b.c -> value` with TensorBoard-friendly values (lists and None become strings)."""
    out = {}

    def walk(node: Any, prefix: str) -> None:
        if isinstance(node, dict):
            for k, v in node.items():
                walk(v, f"{prefix}{k}.")
        else:
            key = prefix[:-1]
            out[key] = node if isinstance(node, (bool, int, float, str)) else str(node)

    walk(OmegaConf.to_container(cfg, resolve=True), "")
    return out


class RunLogger:
    def __init__(
        self,
        out_dir: Path,
        cfg: DictConfig,
        total_steps: int,
        reward_threshold: float | None,
        progress_bar: bool | None = None,
        window: int = 100,
        resume_step: int | None = None,
        label: str = "",
    ):
        """With `resume_step`, continue the run's files: TensorBoard purges what a dead process wrote
        after that step, and episodes.csv drops its rows past it."""
        self.out_dir = Path(out_dir)
        self.label = label  # prefixes this run's log lines (an agent of a batched run: "seed=3: ")
        episodes_path = self.out_dir / "episodes.csv"
        if resume_step is None:
            self.writer = SummaryWriter(str(self.out_dir))
            self.writer.add_text("config", "    " + OmegaConf.to_yaml(cfg).replace("\n", "\n    "), 0)
            file_writer = self.writer.file_writer
            assert file_writer is not None
            for summary in hparams(flat_hparams(cfg), {m: 0.0 for m in HPARAM_METRICS}):
                file_writer.add_summary(summary)
            kept = [EPISODE_HEADER]
        else:
            self.writer = SummaryWriter(str(self.out_dir), purge_step=resume_step + 1)
            rows = episodes_path.read_text().splitlines() if episodes_path.exists() else []
            kept = [EPISODE_HEADER] + [r for r in rows[1:] if int(r.split(",", 1)[0]) <= resume_step]
        # Written whole, then renamed: a full disk on resume cannot truncate the rows already there.
        rundir.write_text(episodes_path, "".join(row + "\n" for row in kept))
        # Open for the run's life (closed in close()), appended to at every episode end.
        self._episodes_file = open(episodes_path, "a", newline="")  # noqa: SIM115
        self._episodes = csv.writer(self._episodes_file, lineterminator="\n")
        self.window: deque[float] = deque(maxlen=window)
        self.history: list[tuple[int, float]] = []
        self.reward_threshold = reward_threshold
        self.episode = 0
        self.best_mean: float | None = None
        self.solved: dict[str, int] | None = None
        self.last_eval: float | None = None
        self.start_time = time.perf_counter()
        self.wall_before = 0.0  # wall time of earlier sessions of a resumed run
        self.bar = tqdm(
            total=total_steps,
            unit="step",
            dynamic_ncols=True,
            initial=resume_step or 0,
            disable=None if progress_bar is None else not progress_bar,
        )

    STATE = ("episode", "best_mean", "solved", "last_eval")

    def state_dict(self) -> dict[str, Any]:
        state = {k: getattr(self, k) for k in self.STATE}
        state.update(
            window=list(self.window),
            history=[list(h) for h in self.history],
            wall_time=self.wall_before + time.perf_counter() - self.start_time,
        )
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        for k in self.STATE:
            setattr(self, k, state[k])
        self.window.extend(state["window"])
        self.history = [tuple(h) for h in state["history"]]
        self.wall_before = state["wall_time"]

    def flush(self) -> None:
        self.writer.flush()
        self._episodes_file.flush()

    @property
    def mean_return(self) -> float | None:
        return float(np.mean(self.window)) if self.window else None

    def episodes_end(self, step: int, episodes: list[tuple[int, float, int]]) -> bool:
        """Record the (env step, return, length) of the episodes that finished in the vector step that ended
        at env step `step`. Each episode has its own env step (sub-env i of N makes env step
        `step - N + i + 1` of that vector step), so every episode is a point of its own in TensorBoard;
        charts/mean_return_100 is written once, at `step`, after all of them. Returns True if one of them
        first solves the env."""
        solved = False
        for env_step, ret, length in episodes:
            solved |= self._episode_end(env_step, ret, length)
        if episodes:
            self.writer.add_scalar("charts/mean_return_100", self.mean_return, step)
        return solved

    def _episode_end(self, step: int, ret: float, length: int) -> bool:
        self.episode += 1
        self.window.append(ret)
        self.history.append((step, ret))
        self._episodes.writerow([step, self.episode, ret, length])
        mean = float(np.mean(self.window))  # the window holds this episode: never empty here
        self.writer.add_scalar("charts/episodic_return", ret, step)
        self.writer.add_scalar("charts/episodic_length", length, step)
        if len(self.window) == self.window.maxlen:
            self.best_mean = mean if self.best_mean is None else max(self.best_mean, mean)
        if (
            self.solved is None
            and self.reward_threshold is not None
            and len(self.window) == self.window.maxlen
            and mean >= self.reward_threshold
        ):
            self.solved = {"step": step, "episode": self.episode}
            message = (
                f"{self.label}solved at step {step}, episode {self.episode} "
                f"(100-episode mean {mean:.1f} >= {self.reward_threshold})"
            )
            self.writer.add_text("solved", message, step)
            self.writer.add_scalar("hparams/solved_step", step, step)
            log.info(message)
            return True
        return False

    def scalars(self, step: int, values: dict[str, float]) -> None:
        for tag, value in values.items():
            self.writer.add_scalar(tag, value, step)
        if "eval/mean_return" in values:
            self.last_eval = values["eval/mean_return"]

    def progress(self, step: int, sps: float, epsilon: float) -> None:
        self.bar.n = step
        mean = self.mean_return
        self.bar.set_postfix(sps=f"{sps:.0f}", ret100="-" if mean is None else f"{mean:.1f}", eps=f"{epsilon:.3f}")

    def close(self, step: int, status: str = "finished", extra: dict[str, Any] | None = None) -> dict[str, Any]:
        """Write summary.json (the fields below plus `extra`) and close every file."""
        wall = self.wall_before + time.perf_counter() - self.start_time
        summary = {
            "status": status,
            "env_steps": step,
            "episodes": self.episode,
            "final_mean_return_100": self.mean_return,
            "best_mean_return_100": self.best_mean,
            "final_eval_return": self.last_eval,
            "reward_threshold": self.reward_threshold,
            "solved_step": None if self.solved is None else self.solved["step"],
            "solved_episode": None if self.solved is None else self.solved["episode"],
            "wall_time_s": wall,
            "sps": step / wall if wall > 0 else None,
            **(extra or {}),
        }
        if self.best_mean is not None:
            self.writer.add_scalar("hparams/best_mean_return_100", self.best_mean, step)
        rundir.write_text(self.out_dir / "summary.json", json.dumps(summary, indent=2) + "\n")
        self.bar.close()
        self.writer.close()
        self._episodes_file.close()
        return summary

    def plot(self, title: str) -> Path | None:
        if not self.history:
            return None
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        steps, rets = map(np.asarray, zip(*self.history))
        k = min(len(rets), self.window.maxlen or len(rets))
        rolling = np.convolve(rets, np.ones(k) / k, mode="valid")
        fig, ax = plt.subplots(figsize=(7, 4))
        ax.plot(steps, rets, ".", alpha=0.3, label="episode return")
        ax.plot(steps[k - 1 :], rolling, label=f"{k}-episode mean")
        if self.reward_threshold is not None:
            ax.axhline(self.reward_threshold, color="gray", ls="--", label="reward threshold")
        ax.set_xlabel("env step")
        ax.set_ylabel("return")
        ax.set_title(title)
        ax.legend(loc="lower right")
        fig.tight_layout()
        path = self.out_dir / "returns.png"
        fig.savefig(path, dpi=100)
        plt.close(fig)
        return path
