"""Registered env ids: the one place that turns `env.id` into gymnasium's spec (shared by rlrun.envs.vector and
rlrun.envs.atari, which both need it)."""

from __future__ import annotations

import importlib

import gymnasium as gym

from rlrun.errors import ConfigError


def env_spec(env_id: str) -> gym.envs.registration.EnvSpec:
    """The registered spec of `env_id` (registering ALE's games first for `ALE/` ids, rlrun's MinAtar games
    for `MinAtar/` ids), or a ConfigError.
    A `module:name` id imports its module first, as `gym.make` does: such ids come from the command line
    only (a saved one is refused unless the command line repeats it, rlrun.config.saved)."""
    module, _, name = env_id.rpartition(":")
    if module:
        try:
            importlib.import_module(module)
        except ImportError as e:
            raise ConfigError("env.id", env_id, f"an id whose module can be imported ({e})") from None
        env_id = name
    if env_id.startswith("ALE/"):
        try:
            # the atari extra: only for ALE games
            import ale_py

            gym.register_envs(ale_py)
        except ImportError:
            raise ConfigError(
                "env.id", env_id, "an installed env: ALE games need the atari extra (pip install -e '.[atari]')"
            ) from None
    if env_id.startswith("MinAtar/"):  # rlrun's own registration (rlrun.envs.minatar), the minatar extra
        from rlrun.envs.minatar import register_minatar

        register_minatar()
    try:
        return gym.spec(env_id)
    except gym.error.Error as e:
        raise ConfigError("env.id", env_id, f"a registered gymnasium id ({e})") from None
