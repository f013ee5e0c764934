"""MinAtar's five games (Young & Tian 2019) as gymnasium envs that rlrun registers itself.

`MinAtar/<Game>-v0` plays the full action set of 6 (the paper's setting), `-v1` the game's minimal set.
rlrun's own entry point (not the package's `minatar.gym`, which needs seaborn and hands out bool arrays)
so that a saved `MinAtar/...` id resolves to code in rlrun, never to a module named by a run directory.

Observations are the game's 10x10 grid, one channel per object kind, as uint8 0/1 in channels-first
(C, 10, 10) order: what the MinAtar network's convolution reads, and a quarter of float32's replay memory.
Sticky actions (the previous action repeats with probability 0.1, drawn from the env's own seeded stream)
and the difficulty ramp are the paper's defaults. A game's end is a termination; MinAtar has no time limit
(env.max_episode_steps adds one, which truncates and is bootstrapped; env=minatar sets 27,000).
"""

from __future__ import annotations

import colorsys
import copy
import importlib
import importlib.util
import warnings
from pathlib import Path
from types import ModuleType
from typing import Any

import gymnasium as gym
import numpy as np

from rlrun.errors import ConfigError

# id name -> the game's module in minatar.environments
GAMES = {
    "Asterix": "asterix",
    "Breakout": "breakout",
    "Freeway": "freeway",
    "Seaquest": "seaquest",
    "SpaceInvaders": "space_invaders",
}
FULL_ACTIONS = 6  # every MinAtar game: n, l, u, r, d, f
ENTRY_POINT = "rlrun.envs.minatar:MinAtarEnv"  # this module's class: a fixed name, never one read from a run
CELL_PIXELS = 16  # rgb_array frames: each grid cell as a 16x16 block (160x160 images)


class MinAtarEnv(gym.Env):
    """One MinAtar game. `minatar_game`: a value of GAMES; `minimal_action_set`: the game's own action subset.
    (Not `game`: that kwarg marks an ALE id to rlrun.envs.pixels.check_ale.)"""

    metadata = {"render_modes": ["rgb_array"], "render_fps": 15}

    def __init__(
        self,
        minatar_game: str,
        minimal_action_set: bool = False,
        sticky_action_prob: float = 0.1,
        difficulty_ramping: bool = True,
        render_mode: str | None = None,
    ):
        self.game = game_module(minatar_game).Env(ramping=difficulty_ramping)
        self.actions = list(self.game.minimal_action_set()) if minimal_action_set else list(range(FULL_ACTIONS))
        self.sticky_action_prob = sticky_action_prob
        self.render_mode = render_mode
        height, width, channels = self.game.state_shape()
        self.observation_space = gym.spaces.Box(0, 1, (channels, height, width), np.uint8)
        self.action_space = gym.spaces.Discrete(len(self.actions))
        self.last_action = 0
        self._game_seeded = False

    def _obs(self) -> np.ndarray:
        return np.ascontiguousarray(self.game.state().transpose(2, 0, 1), dtype=np.uint8)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        if seed is not None or not self._game_seeded:
            # The game draws its own randomness (spawns, ball start) from a RandomState: seeded from ours.
            self.game.random = np.random.RandomState(int(self.np_random.integers(2**31)))
            self._game_seeded = True
        self.game.reset()
        self.last_action = 0
        return self._obs(), {}

    def step(self, action):
        action = self.actions[int(action)]
        if self.np_random.random() < self.sticky_action_prob:
            action = self.last_action
        self.last_action = action
        reward, terminal = self.game.act(action)
        return self._obs(), float(reward), bool(terminal), False, {}

    # The game's constants (not state): left out of checkpoints.
    GAME_CONSTANTS = frozenset({"channels", "action_map", "random", "ramping"})

    def rlrun_env_state(self) -> dict[str, Any]:
        """The game's dynamic state as plain values (rlrun.storage.checkpoint saves it with the run)."""
        game = {k: copy.deepcopy(v) for k, v in vars(self.game).items() if k not in self.GAME_CONSTANTS}
        return {
            "game": game,
            "game_random": self.game.random.get_state(legacy=False),
            "last_action": self.last_action,
            "game_seeded": self._game_seeded,
        }

    def load_rlrun_env_state(self, state: dict[str, Any]) -> None:
        """Put `rlrun_env_state`'s values back: only attributes this game already has, of the same kind."""
        for key, value in state["game"].items():
            current = vars(self.game).get(key, _MISSING)
            if key in self.GAME_CONSTANTS or current is _MISSING:
                raise ValueError(f"{key!r} is not a MinAtar {self.game.__class__.__module__} state attribute")
            if current is not None and value is not None and not isinstance(value, _KINDS[type(current)]):
                raise TypeError(f"{key!r}: {type(value).__name__} where the game holds {type(current).__name__}")
            setattr(self.game, key, value)
        self.game.random.set_state(state["game_random"])
        self.last_action, self._game_seeded = int(state["last_action"]), bool(state["game_seeded"])

    def render(self) -> np.ndarray | None:
        """rgb_array: the grid as a 160x160 RGB image, each channel in its own colour (black: empty)."""
        if self.render_mode != "rgb_array":
            return None
        state = self.game.state()  # (10, 10, C) bool
        channels = state.shape[-1]
        # Colour i + 1 for channel i (the highest channel wins a shared cell), 0 for an empty cell.
        index = np.where(state.any(-1), (state * (np.arange(channels) + 1)).max(-1), 0)
        palette = np.array(
            [(0, 0, 0)] + [_hsv(i / channels) for i in range(channels)],
            dtype=np.uint8,
        )
        image = palette[index]
        return image.repeat(CELL_PIXELS, axis=0).repeat(CELL_PIXELS, axis=1)


_MISSING = object()
# What a saved attribute may hold, by the kind of the game's own value (saved numpy scalars come back as numbers).
_KINDS: dict[type, tuple[type, ...]] = {
    int: (int,),
    bool: (bool, int),
    float: (float, int),
    list: (list,),
    np.ndarray: (np.ndarray,),
}


def _hsv(hue: float) -> tuple[int, int, int]:
    """A saturated RGB colour of the given hue in [0, 1)."""
    r, g, b = colorsys.hsv_to_rgb(hue, 0.75, 1.0)
    return int(r * 255), int(g * 255), int(b * 255)


def game_module(game: str) -> ModuleType:
    """`minatar.environments.<game>` (game: a value of GAMES), loaded from the installed package's file
    without running the package's __init__, which imports matplotlib and seaborn for its own display
    (5 s of start-up; the game modules need only numpy). ImportError when minatar is not installed."""
    if game in _GAME_MODULES:
        return _GAME_MODULES[game]
    if game not in GAMES.values():
        raise ValueError(f"unknown MinAtar game {game!r}: one of {', '.join(GAMES.values())}")
    package = importlib.util.find_spec("minatar")
    if package is None or not package.submodule_search_locations:
        raise ImportError("No module named 'minatar'")
    path = Path(next(iter(package.submodule_search_locations))) / "environments" / f"{game}.py"
    spec = importlib.util.spec_from_file_location(f"rlrun.envs._minatar_games.{game}", path)
    if spec is None or spec.loader is None:
        raise ImportError(f"minatar's {game} module is missing ({path})")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    _GAME_MODULES[game] = module
    return module


_GAME_MODULES: dict[str, ModuleType] = {}


def register_minatar() -> None:
    """Register `MinAtar/<Game>-v0` (full action set) and `-v1` (minimal) for every game, once; a
    ConfigError naming the extra when the `minatar` package is missing."""
    try:
        game_module("breakout")
    except ImportError:
        raise ConfigError(
            "env.id",
            "MinAtar/...",
            "an installed env: MinAtar games need the minatar extra (pip install -e '.[minatar]')",
        ) from None
    # -v0 and -v1 are two action sets, not an old and a new version: gymnasium's "out of date" note would mislead.
    warnings.filterwarnings("ignore", message=r".*MinAtar/\w+-v0 is out of date")
    for name, game in GAMES.items():
        for version, minimal in (("v0", False), ("v1", True)):
            env_id = f"MinAtar/{name}-{version}"
            spec = gym.registry.get(env_id)
            if spec is not None and spec.entry_point == ENTRY_POINT:
                continue
            # MinAtar's own minatar.gym.register_envs() may have registered the id to its BaseEnv: ours wins.
            gym.registry.pop(env_id, None)
            gym.register(
                id=env_id, entry_point=ENTRY_POINT, kwargs={"minatar_game": game, "minimal_action_set": minimal}
            )
