"""Everything a run writes besides checkpoints: episodes.csv, summary.json, returns.png, the progress bar,
and the scalars, config and summary it fans out to the logging backends of the `logger` group
(rlrun.logs.sinks: TensorBoard by default). By default all of it goes under the run's output directory."""

from __future__ import annotations

import logging
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from tqdm import tqdm
from tqdm.contrib.logging import logging_redirect_tqdm

from rlrun.logs.sinks import Sink
from rlrun.logs.sinks.csv import open_rows
from rlrun.storage import rundir, summary as run_summary
from rlrun.storage.summary import Summary

log = logging.getLogger(__name__)

# One speed (env steps per second over the last log window), the 100-episode mean, the last greedy eval.
BAR_FORMAT = "{l_bar}{bar}| {n_fmt}/{total_fmt} [{elapsed}<{remaining}{postfix}]"


HParam = bool | int | float | str  # a value of TensorBoard's hparams table


def flat_hparams(tree: object) -> dict[str, HParam]:
    """A config's plain tree as `a.b.c -> value`, with TensorBoard-friendly values (lists and None as text)."""
    out: dict[str, HParam] = {}

    def walk(node: object, prefix: str) -> None:
        if isinstance(node, dict):
            for k, v in node.items():
                walk(v, f"{prefix}{k}.")
        else:
            out[prefix[:-1]] = node if isinstance(node, (bool, int, float, str)) else str(node)

    walk(tree, "")
    return out


@dataclass(frozen=True)
class ConfigRecord:
    """The run's config as the sinks record it when the run starts: `a.b.c -> value` for TensorBoard's
    hparams table, and the YAML text (made from the config by rlrun.training.build.config_record)."""

    hparams: dict[str, HParam]
    yaml: str


class RunLogger:
    def __init__(
        self,
        out_dir: Path,
        config: ConfigRecord,
        total_steps: int,
        reward_threshold: float | None,
        progress_bar: bool | None = None,
        window: int = 100,
        resume_step: int | None = None,
        label: str = "",
        sinks: list[Sink] | None = None,
    ):
        """With `resume_step`, continue the run's files: episodes.csv drops its rows past that step, and
        the backends continue their runs (TensorBoard purges what a dead process wrote after it).
        `sinks`: the logging backends (rlrun.logs.sinks.make_sinks); None: TensorBoard into `out_dir`."""
        self.out_dir = Path(out_dir)
        self.label = label  # prefixes this run's log lines (an agent of a batched run: "seed=3: ")
        if sinks is None:
            # each backend's client only when its logger is chosen
            from rlrun.logs.sinks.tensorboard import TensorBoardSink

            sinks = [TensorBoardSink(self.out_dir, resume_step)]
        self.sinks = sinks
        rundir.check_links(self.out_dir)  # an agent's directory too (the run's is checked when claimed)
        # Open for the run's life (closed in close()), appended to at every episode end.
        self._episodes_file, self._episodes = open_rows(self.out_dir / "episodes.csv", resume_step)
        if resume_step is None:
            for sink in self.sinks:
                sink.start(config.hparams, config.yaml)
        self.window: deque[float] = deque(maxlen=window)
        self.history: list[tuple[int, float]] = []
        self.evals: list[tuple[int, float]] = []  # (env step, mean return) of each evaluation, for returns.png
        self.reward_threshold = reward_threshold
        self.episode = 0
        self.best_mean: float | None = None
        self.solved: dict[str, int] | None = None
        self.last_eval: float | None = None
        self.sps: float | None = None  # env steps per second over the last log window
        self.start_time = time.perf_counter()
        self.wall_before = 0.0  # wall time of earlier sessions of a resumed run
        self.bar = tqdm(
            total=total_steps,
            unit="step",
            unit_scale=True,
            dynamic_ncols=True,
            initial=resume_step or 0,
            bar_format=BAR_FORMAT,
            disable=None if progress_bar is None else not progress_bar,
        )
        # While the bar is shown, log lines (console handlers of the root logger) print above it.
        self._redirect = None if self.bar.disable else logging_redirect_tqdm()
        if self._redirect is not None:
            self._redirect.__enter__()

    STATE = ("episode", "best_mean", "solved", "last_eval")

    def state_dict(self) -> dict[str, Any]:
        state = {k: getattr(self, k) for k in self.STATE}
        state.update(
            window=list(self.window),
            history=[list(h) for h in self.history],
            evals=[list(e) for e in self.evals],
            wall_time=self.wall_before + time.perf_counter() - self.start_time,
        )
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        for k in self.STATE:
            setattr(self, k, state[k])
        self.window.extend(state["window"])
        self.history = [tuple(h) for h in state["history"]]
        self.evals = [tuple(e) for e in state.get("evals", [])]  # none in checkpoints older than the key
        self.wall_before = state["wall_time"]

    def flush(self) -> None:
        for sink in self.sinks:
            sink.flush()
        self._episodes_file.flush()

    def _scalar(self, tag: str, value: float, step: int) -> None:
        for sink in self.sinks:
            sink.scalar(tag, value, step)

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
            self._scalar("charts/mean_return_100", float(np.mean(self.window)), step)
        return solved

    def _episode_end(self, step: int, ret: float, length: int) -> bool:
        self.episode += 1
        self.window.append(ret)
        self.history.append((step, ret))
        self._episodes.writerow([step, self.episode, ret, length])
        self._scalar("charts/episodic_return", ret, step)
        self._scalar("charts/episodic_length", length, step)
        if len(self.window) != self.window.maxlen:
            return False
        mean = float(np.mean(self.window))
        self.best_mean = mean if self.best_mean is None else max(self.best_mean, mean)
        # `not >=`: a NaN mean never solves
        if self.solved is not None or self.reward_threshold is None or not mean >= self.reward_threshold:
            return False
        self.solved = {"step": step, "episode": self.episode}
        message = (
            f"{self.label}solved at step {step}, episode {self.episode} "
            f"(100-episode mean {mean:.1f} >= {self.reward_threshold})"
        )
        for sink in self.sinks:
            sink.text("solved", message, step)
        self._scalar("hparams/solved_step", step, step)
        log.info(message)
        return True

    def scalars(self, step: int, values: dict[str, float]) -> None:
        for tag, value in values.items():
            self._scalar(tag, value, step)
        if "eval/mean_return" in values:
            self.last_eval = values["eval/mean_return"]
            self.evals.append((step, self.last_eval))
            self._show(self.bar.n)

    def progress(self, step: int, sps: float) -> None:
        """At every log: the speed, the bar, and episodes.csv flushed (its rows readable while the run goes on)."""
        self.sps = sps
        self._episodes_file.flush()
        self._show(step)

    def _show(self, step: int) -> None:
        if self.bar.disable:
            return
        self.bar.update(step - self.bar.n)  # tqdm's ETA comes from its smoothed rate of these updates
        mean, last_eval, sps = self.mean_return, self.last_eval, self.sps
        self.bar.set_postfix_str(
            f"{'-' if sps is None else f'{sps:,.0f}'} step/s, ret100 {'-' if mean is None else f'{mean:.1f}'}, "
            f"eval {'-' if last_eval is None else f'{last_eval:.1f}'}"
        )

    def close(
        self, step: int, status: str = "finished", extra: dict[str, Any] | None = None, now: float | None = None
    ) -> Summary:
        """Write summary.json (rlrun.storage.summary: the run's figures, then `extra`) and close every file.
        `now`: the perf_counter() at which the run ended (the agents of one process share it)."""
        summary = run_summary.of_run(
            status=status,
            env_steps=step,
            episodes=self.episode,
            final_mean_return_100=self.mean_return,
            best_mean_return_100=self.best_mean,
            final_eval_return=self.last_eval,
            reward_threshold=self.reward_threshold,
            solved_step=None if self.solved is None else self.solved["step"],
            solved_episode=None if self.solved is None else self.solved["episode"],
            wall_time_s=self.wall_before + (time.perf_counter() if now is None else now) - self.start_time,
            extra=extra,
        )
        if self.best_mean is not None:
            self._scalar("hparams/best_mean_return_100", self.best_mean, step)
        self.bar.close()
        if self._redirect is not None:
            self._redirect.__exit__(None, None, None)
        where = {type(sink).__name__.removesuffix("Sink").lower(): sink.close(dict(summary)) for sink in self.sinks}
        if where:  # per backend, where it logged the run
            summary["logged_to"] = where
        run_summary.write(self.out_dir, summary)
        self._episodes_file.close()
        return summary

    def plot(self, title: str) -> Path | None:
        if not self.history:
            return None
        # matplotlib takes ~0.5 s to import (here and below): only when a figure is drawn
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        steps, rets = map(np.asarray, zip(*self.history))
        k = min(len(rets), self.window.maxlen or len(rets))
        rolling = np.convolve(rets, np.ones(k) / k, mode="valid")
        fig, ax = plt.subplots(figsize=(7, 4))
        ax.plot(steps, rets, ".", alpha=0.3, label="episode return")
        ax.plot(steps[k - 1 :], rolling, label=f"{k}-episode mean")
        if self.evals:
            ax.plot(*zip(*self.evals), "D", color="black", ms=5, label="evaluation (mean return)")
        if self.reward_threshold is not None:
            ax.axhline(self.reward_threshold, color="gray", ls="--", label="reward threshold")
        ax.set_xlabel("env step")
        ax.set_ylabel("return")
        ax.set_title(title)
        ax.legend(loc="lower right")
        fig.tight_layout()
        path = self.out_dir / "returns.png"
        with rundir.open_atomic(path) as f:  # replaces a link there, never writes through it
            fig.savefig(f, format="png", dpi=100)
        plt.close(fig)
        return path
