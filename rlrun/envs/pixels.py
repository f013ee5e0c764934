"""Image observations, checked before anything is written: rlrun learns from pixels only as stacks of 2-D
(grayscale) frames read by the Nature CNN (`env.frame_stack`, `network=cnn`), and from ALE games only
with env=atari's preprocessing. Anything else would store float32 copies of every image in replay (an ALE
game's raw frames: 40 GB for 100,000 transitions) or fail inside the network once the run has started.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np

from rlrun.errors import ConfigError

CNN_MIN_SIDE = 36  # the Nature CNN's three convolutions (8/4, 4/2, 3/1) need 36x36 pixels or more


def check_ale(env_id: str, spec: gym.envs.registration.EnvSpec, atari: object) -> None:
    """An ALE game's screen without env=atari (the `env.atari` node): refused, naming the command to use."""
    kwargs = spec.kwargs or {}
    if atari is None and "game" in kwargs and kwargs.get("obs_type", "rgb") != "ram":
        raise ConfigError(
            "env.id",
            env_id,
            f"an ALE game with env=atari: python -m rlrun.train env=atari env.id={env_id} (its preprocessing, "
            "frame stack and CNN)",
        )


def check_image_obs(env_id: str, space: gym.Space, frame_stack: int, encoder: str = "mlp") -> None:
    """Observations as the env gives them (`space`, a Box, stacked when `frame_stack` > 0) that the run can
    learn from: vectors without a frame stack, stacks of 2-D uint8 frames of 36x36 pixels or more, or
    (C, H, W) grids read by network.encoder=minatar_cnn (MinAtar's)."""
    shape = tuple(space.shape or ())
    if encoder == "minatar_cnn":
        if frame_stack or len(shape) != 3 or min(shape[1:]) < 3:
            raise ConfigError(
                "network.encoder",
                encoder,
                f"mlp or nature_cnn for {env_id}: minatar_cnn reads (C, H, W) grids of at least 3x3 without a "
                f"frame stack, and {env_id} gives {shape} observations with env.frame_stack={frame_stack}",
            )
        return
    frame = shape[1:] if frame_stack else shape
    pixels = space.dtype == np.uint8 and len(frame) in (2, 3)
    if pixels and len(frame) == 3:
        raise ConfigError(
            "env.id",
            env_id,
            f"an env with vector observations or 2-D frames ({env_id} gives {frame} uint8 images; for a "
            "(C, H, W) grid such as MinAtar's use network=minatar; for RGB frames register a grayscale-"
            "preprocessed id, env.id=module:Name, with env.frame_stack=4 network=cnn)",
        )
    if pixels and not frame_stack:
        raise ConfigError(
            "env.frame_stack",
            0,
            f"> 0 for image observations ({env_id} gives {frame} uint8 frames): env.frame_stack=4 network=cnn "
            "(the Nature CNN over stacked frames)",
        )
    if frame_stack and (not pixels or min(frame) < CNN_MIN_SIDE):
        raise ConfigError(
            "env.frame_stack",
            frame_stack,
            f"0 with network=mlp for {env_id}: the CNN reads stacks of 2-D uint8 frames of at least "
            f"{CNN_MIN_SIDE}x{CNN_MIN_SIDE} pixels, and {env_id} gives {frame} {space.dtype} observations",
        )
