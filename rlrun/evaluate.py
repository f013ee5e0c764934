"""Greedy evaluation of a trained run: `python -m rlrun.evaluate <run dir or checkpoint> [episodes=N] [seed=S] [video=true]`.

Loads the run's config and weights (from a checkpoint file, or a run directory's checkpoint.pt or
model.pt), plays N episodes with the greedy policy (noisy layers use their mean weights), prints the mean,
standard deviation and every return, and saves them to `evaluation.json` next to the weights. The same
seed gives the same evaluation. `video=true` records the episodes with gymnasium's RecordVideo into
`<run dir>/videos/` (needs the `video` extra: moviepy).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from hydra.utils import instantiate
from omegaconf import OmegaConf

from rlrun import checkpoint as ckpt
from rlrun.device import resolve_device
from rlrun.envs import make_vector_env
from rlrun.evaluation import evaluate
from rlrun.wrappers import DiscretizeAction

USAGE = "usage: python -m rlrun.evaluate <run dir or checkpoint.pt> [episodes=10] [seed=0] [video=false] [device=auto]"


def parse(argv: list[str]) -> tuple[Path, dict[str, Any]]:
    if not argv or argv[0] in ("-h", "--help") or ("=" in argv[0] and not Path(argv[0]).exists()):
        raise SystemExit(USAGE)
    opts: dict[str, Any] = {"episodes": 10, "seed": 0, "video": False, "device": "auto"}
    for arg in argv[1:]:
        key, sep, value = arg.partition("=")
        if not sep or key not in opts:
            raise SystemExit(f"rlrun.evaluate: unknown argument {arg!r}; allowed keys: {', '.join(opts)}\n{USAGE}")
        if key in ("episodes", "seed"):
            try:
                opts[key] = int(value)
            except ValueError:
                raise SystemExit(f"rlrun.evaluate: {key} must be an integer, got {value!r}") from None
        elif key == "video":
            opts[key] = value.lower() in ("1", "true", "yes")
        else:
            opts[key] = value
    if opts["episodes"] < 1:
        raise SystemExit(f"rlrun.evaluate: episodes must be >= 1, got {opts['episodes']}")
    return Path(argv[0]), opts


def load_policy(path: Path, device: torch.device):
    """(config, network, directory) from a checkpoint file or a run directory."""
    agents = sorted(path.glob("seed=*/model.pt")) if path.is_dir() else []
    if agents:  # a batched run (seeds=K): each agent is evaluated on its own, like a single-seed run
        raise SystemExit(f"rlrun.evaluate: {path} is a batched run of {len(agents)} agents; evaluate one of them: "
                         + ", ".join(str(a.parent) for a in agents))
    if path.is_file():
        state = torch.load(path, map_location=device, weights_only=True)
        return OmegaConf.create(state["config"]), state["learner"]["online"], path.parent
    if (path / ckpt.LATEST).exists() or (path / ckpt.PREVIOUS).exists():
        state, _ = ckpt.load(path, map_location=device)
        return OmegaConf.create(state["config"]), state["learner"]["online"], path
    if (path / "model.pt").exists() and (path / ".hydra" / "config.yaml").exists():
        cfg = OmegaConf.load(path / ".hydra" / "config.yaml")
        return cfg, torch.load(path / "model.pt", map_location=device, weights_only=True), path
    raise SystemExit(f"rlrun.evaluate: {path} is neither a checkpoint nor a run directory with weights")


def record_video(q_net, cfg, episodes: int, seed: int, out_dir: Path, device: torch.device) -> Path:
    from gymnasium.wrappers import RecordVideo

    video_dir = out_dir / "videos"
    env = gym.make(cfg.env.id, render_mode="rgb_array")
    if cfg.env.get("action_bins") is not None:
        env = DiscretizeAction(env, cfg.env.action_bins)
    env = RecordVideo(env, str(video_dir), episode_trigger=lambda _: True,
                      name_prefix="eval", disable_logger=True)
    q_net.eval()
    for i in range(episodes):
        obs, _ = env.reset(seed=seed + i)
        done = False
        while not done:
            with torch.no_grad():
                action = int(q_net(torch.as_tensor(obs, device=device).unsqueeze(0)).argmax(1).item())
            obs, _, terminated, truncated, _ = env.step(action)
            done = terminated or truncated
    env.close()
    return video_dir


def main(argv: list[str] | None = None) -> dict[str, Any]:
    path, opts = parse(sys.argv[1:] if argv is None else argv)
    device = resolve_device(opts["device"])
    cfg, weights, out_dir = load_policy(path, device)
    e = cfg.env
    atari = None if e.get("atari") is None else OmegaConf.to_container(e.atari)
    envs = make_vector_env(e.id, opts["episodes"], "sync", e.max_episode_steps, action_bins=e.get("action_bins"),
                           frame_stack=e.get("frame_stack", 0), atari=atari, train=False)
    shape = envs.single_observation_space.shape
    q_net = instantiate(cfg.network, obs_dim=int(np.prod(shape)), n_actions=int(envs.single_action_space.n),
                        obs_shape=list(shape)).to(device)
    q_net.load_state_dict(weights)
    returns = evaluate(q_net, envs, opts["seed"], device)
    envs.close()
    result = {"source": str(path), "episodes": opts["episodes"], "seed": opts["seed"],
              "mean_return": float(returns.mean()), "std_return": float(returns.std()), "returns": returns.tolist()}
    if opts["video"]:
        try:
            result["video_dir"] = str(record_video(q_net, cfg, opts["episodes"], opts["seed"], out_dir, device))
        except (ImportError, gym.error.DependencyNotInstalled) as e:
            raise SystemExit(f"rlrun.evaluate: video=true needs the video extra (pip install -e '.[video]'): {e}")
    (out_dir / "evaluation.json").write_text(json.dumps(result, indent=2) + "\n")
    print(f"{cfg.env.id}: mean return {result['mean_return']:.2f} +- {result['std_return']:.2f} over "
          f"{opts['episodes']} episodes (seed {opts['seed']})")
    print("returns:", " ".join(f"{r:g}" for r in returns))
    return result


if __name__ == "__main__":
    main()
