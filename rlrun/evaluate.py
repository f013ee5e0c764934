"""Greedy evaluation of a trained run.

    python -m rlrun.evaluate <run dir or checkpoint> [episodes=N] [seed=S] [epsilon=E] [num_envs=M] [video=true]
                             [env.id=ID]

Loads the run's config and weights (from a checkpoint file, or a run directory's checkpoint.pt or
model.pt), plays N episodes with the greedy policy (noisy layers use their mean weights; `epsilon`: the chance
of a random action at each step, by default the run's `eval.epsilon`), prints the mean,
standard deviation and every return, and saves them next to the weights: one line per call appended to
`evaluations.jsonl` (with its time), the latest also as `evaluation.json`. The same seed gives the same
evaluation. The episodes are played as the run's evaluations play them, on its `eval.num_envs` envs each
playing a fixed share in turn (`num_envs=M` chooses another number), so the run's evaluation seed
(seed + 1,000,000 + step) repeats its evaluation. `video=true` records the episodes while they are played
(one env and one mp4 per episode) into a new `<run dir>/videos/seed<S>_<time>/` and prints where
(needs the `video` extra).

The saved config is checked as resume checks it (`rlrun.config.saved`): an interpolation is refused, and so is an
env id with a `module:` part (`helpers:CartPole-v1`, whose module gymnasium would import) unless
`env.id=<the same id>` on the command line confirms it. `env.id` cannot name another env.
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
import sys
from datetime import datetime
from pathlib import Path
from typing import Any, NoReturn

import gymnasium as gym
import numpy as np
import torch

from rlrun import console, policy
from rlrun.config import saved
from rlrun.errors import ConfigError, Exit, fail
from rlrun.storage import checkpoint as ckpt, rundir
from rlrun.training.build import eval_num_envs, make_eval_envs
from rlrun.training.device import resolve_device
from rlrun.training.evaluation import EvalProgress, evaluate

USAGE = (
    "usage: python -m rlrun.evaluate <run dir or checkpoint.pt> [episodes=10] [seed=0] [epsilon=<the run's>]"
    " [num_envs=<the run's eval.num_envs>] [video=false] [device=auto]"
    " [env.id=<the run's id, to confirm a module:id>]"
)


BOOLEANS = {"true": True, "false": False, "1": True, "0": False, "yes": True, "no": False}


COMMAND = "rlrun.evaluate"  # leads each line of `fail`


def refuse(message: str, code: int = Exit.BAD_INPUT) -> NoReturn:
    """`fail` as this command: one line on stderr, led by its name, and exit `code`."""
    fail(message, code, command=COMMAND)


def _value(key: str, value: str) -> Any:
    """One command-line value, converted and checked (refused in one line)."""
    if key in ("episodes", "seed", "num_envs"):
        try:
            number = int(value)
        except ValueError:
            refuse(f"{key} must be an integer, got {value!r}")
        if key == "seed" and not 0 <= number < 2**32:
            refuse(f"seed must be in [0, {2**32 - 1}], got {number}")
        if key != "seed" and number < 1:
            refuse(f"{key} must be >= 1, got {number}")
        return number
    if key == "epsilon":
        try:
            epsilon = float(value)
        except ValueError:
            epsilon = math.nan
        if not 0 <= epsilon <= 1:
            refuse(f"epsilon must be a number in [0, 1], got {value!r}")
        return epsilon
    if key == "video":
        if value.lower() not in BOOLEANS:
            refuse(f"video must be one of {', '.join(BOOLEANS)}, got {value!r}")
        return BOOLEANS[value.lower()]
    return value


def parse(argv: list[str]) -> tuple[Path, dict[str, Any]]:
    if not argv or argv[0] in ("-h", "--help"):
        print(USAGE, file=sys.stdout if argv else sys.stderr)
        sys.exit(Exit.OK if argv else Exit.BAD_INPUT)
    opts: dict[str, Any] = {
        "episodes": 10,
        "num_envs": None,
        "seed": 0,
        "epsilon": None,
        "video": False,
        "device": "auto",
        "env.id": None,
    }
    for arg in argv[1:]:
        key, sep, value = arg.partition("=")
        if not sep or key not in opts:
            refuse(f"unknown argument {arg!r}; allowed keys: {', '.join(opts)}")
        opts[key] = _value(key, value)
    if opts["device"] not in ("auto", "cpu", "cuda"):
        refuse(f"device must be one of auto, cpu, cuda, got {opts['device']!r}")
    return Path(argv[0]), opts


class FrameRecorder(gym.vector.VectorWrapper):
    """Keeps every sub-env's frames of its first episode while the evaluation plays it, then writes one
    video per episode: the evaluated episodes are the recorded ones (no second pass). Under gymnasium's
    SAME_STEP autoreset the step that ends an episode already shows the next one, so each video stops at
    the frame before the last step."""

    def __init__(self, envs: gym.vector.VectorEnv):
        super().__init__(envs)
        self.frames: list[list[Any]] = [[] for _ in range(envs.num_envs)]
        self.done = [False] * envs.num_envs

    def reset(self, **kwargs: Any):
        out = self.env.reset(**kwargs)
        for i, frame in enumerate(self.env.render() or ()):
            self.frames[i].append(frame)
        return out

    def step(self, actions: np.ndarray):
        obs, rewards, terminated, truncated, infos = self.env.step(actions)
        ended = terminated | truncated
        for i, frame in enumerate(self.env.render() or ()):
            if not self.done[i]:
                self.done[i] = bool(ended[i])
                if not self.done[i]:
                    self.frames[i].append(frame)
        return obs, rewards, terminated, truncated, infos

    def write(self, video_dir: Path, fps: int) -> list[Path]:
        # the video extra: only when videos are asked for
        from moviepy import ImageSequenceClip

        video_dir.mkdir(parents=True)
        paths = []
        for i, frames in enumerate(self.frames):
            path = video_dir / f"eval-episode-{i}.mp4"
            ImageSequenceClip(frames, fps=fps).write_videofile(str(path), logger=None)
            paths.append(path)
        return paths


def main(argv: list[str] | None = None) -> int:
    """`python -m rlrun.evaluate` and `rlrun-evaluate`: exit status 0 once the results are printed and saved
    (a console script exits with what its main returns)."""
    console.guard()  # `| head -1`, a full or closed stdout: the results are saved all the same
    run(argv)
    return 0


def run(argv: list[str] | None = None) -> dict[str, Any]:
    """Evaluate as the command line says and return the results (what evaluation.json holds)."""
    path, opts = parse(sys.argv[1:] if argv is None else argv)
    try:
        device = resolve_device(opts["device"])
        found = policy.read_saved(path, device, opts["env.id"])
        out_dir = found.run_dir
        if found.fallback is not None:
            used, step = found.fallback
            print(
                f"rlrun.evaluate: warning: {out_dir / ckpt.LATEST} is damaged; evaluating {used.name} (step {step})",
                file=sys.stderr,
            )
        video_dir = None
        if opts["video"]:
            check_video_extra()
            rundir.check_links(out_dir)  # videos go into the run: never through a link out of it
            # a new folder for each call (created only once the videos are written)
            video_dir = out_dir / "videos" / datetime.now().strftime(f"seed{opts['seed']}_%Y-%m-%d_%H-%M-%S-%f")
        returns, videos = play(found, opts, device, video_dir)
    except (ConfigError, ckpt.CheckpointError, rundir.RunDirError) as e:
        refuse(str(e))
    except RuntimeError as e:  # weights of another shape than the config's network
        refuse(f"the weights in {path} do not fit their config: {str(e).splitlines()[0]}")
    result = {
        "time": datetime.now().isoformat(timespec="seconds"),
        "source": str(path),
        "episodes": opts["episodes"],
        "num_envs": opts["num_envs"],  # the episodes' layout: their means differ (docs/results/atari100k.md)
        "seed": opts["seed"],
        "epsilon": opts["epsilon"],
        "mean_return": float(returns.mean()),
        "std_return": float(returns.std()),
        "returns": returns.tolist(),
    }
    print(
        f"{found.config.env.id}: mean return {result['mean_return']:.2f} +- {result['std_return']:.2f} over "
        f"{opts['episodes']} episodes (seed {opts['seed']}"
        + (f", epsilon {opts['epsilon']:g})" if opts["epsilon"] else ")")
    )
    print("returns:", " ".join(f"{r:g}" for r in returns))
    if video_dir is not None:
        result["video_dir"] = str(video_dir)
        print(f"videos: {video_dir} ({len(videos)} mp4, one per episode)")
    try:
        rundir.append_line(out_dir / "evaluations.jsonl", json.dumps(result))  # every call kept
        rundir.write_text(out_dir / "evaluation.json", json.dumps(result, indent=2) + "\n")  # the latest
    except rundir.RunDirError as e:
        refuse(f"the results above were not saved: {e}", Exit.CANNOT_WRITE)
    except OSError as e:
        refuse(f"the results above were not saved: cannot write to {out_dir} ({e.strerror or e})", Exit.CANNOT_WRITE)
    return result


def check_video_extra() -> None:
    """Before anything is played: video=true needs moviepy (and pygame for most envs' frames)."""
    missing = [m for m in ("moviepy", "pygame") if importlib.util.find_spec(m) is None]
    if missing:
        refuse(f"video=true needs the video extra (pip install -e '.[video]'): {', '.join(missing)} missing")


def play(found: policy.Saved, opts: dict[str, Any], device: torch.device, video_dir: Path | None = None):
    """The greedy returns of `opts['episodes']` episodes and, with `video_dir`, the videos of those same
    episodes, recorded while they are played. `opts`' epsilon and num_envs end as played (the run's values
    where none was given), which `run` records with the returns."""
    if video_dir is not None:
        # pygame renders off-screen: no display, no audio device, no XDG_RUNTIME_DIR warning from SDL
        for key in ("SDL_VIDEODRIVER", "SDL_AUDIODRIVER"):
            os.environ.setdefault(key, "dummy")
        os.environ.setdefault("PYGAME_HIDE_SUPPORT_PROMPT", "1")
    cfg = saved.playing_config(found.config, video=video_dir is not None)
    # the run's eval.num_envs layout unless num_envs says otherwise (a video records one episode per env)
    layout = eval_num_envs(cfg) if opts["num_envs"] is None else opts["num_envs"]
    opts["num_envs"] = opts["episodes"] if video_dir is not None else min(opts["episodes"], layout)
    envs = make_eval_envs(cfg, opts["num_envs"])
    recorder = FrameRecorder(envs) if video_dir is not None else None
    try:
        q_net = policy.q_network(cfg, envs, found.weights, device)
        if opts["epsilon"] is None:
            opts["epsilon"] = float(cfg.eval.epsilon)
        progress = EvalProgress("rlrun.evaluate", lambda line: print(line, file=sys.stderr))
        returns = evaluate(
            q_net,
            recorder or envs,
            [opts["seed"]],
            device,
            epsilon=opts["epsilon"],
            episodes=opts["episodes"],
            progress=progress,
        )
        assert returns is not None  # nothing stops it
        returns = returns[0]
        videos = []
        if recorder is not None and video_dir is not None:
            videos = recorder.write(video_dir, int(envs.metadata.get("render_fps") or 30))
        return returns, videos
    finally:
        envs.close()


if __name__ == "__main__":
    sys.exit(main())
