"""The random numbers of epsilon-greedy, per agent, drawn in blocks.

Each env step takes 2 x num_envs uniforms in [0, 1) per agent from `np.random.default_rng(seed)`: the
first num_envs decide exploration (u < epsilon), the second pick the random action floor(u * n_actions).
A block of steps is drawn with one call per agent; numpy fills it in the order that step-by-step draws
would come, so an agent's numbers do not depend on the block size nor on how many agents share the
process (a batched run's agent k explores exactly as the single-seed run with its seed).

Agents may also have an epsilon schedule of their own (`agent_epsilons`): `next` then takes a (K, 1)
column of epsilons, one per agent, each computed with the same float arithmetic as its single run.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from rlrun.algos import schedules


class ExplorationDraws:
    def __init__(self, seeds: Sequence[int], num_envs: int, n_actions: int, block: int = 512):
        self.rngs = [np.random.default_rng(s) for s in seeds]
        self.num_envs, self.n_actions, self.block = num_envs, n_actions, block
        self._block_states = [r.bit_generator.state for r in self.rngs]
        self._draws = np.empty((len(self.rngs), 0, 2 * num_envs))
        self.cursor = 0  # steps of the current block already used

    def _draw_block(self) -> None:
        self._block_states = [r.bit_generator.state for r in self.rngs]
        self._draws = np.stack([r.random((self.block, 2 * self.num_envs)) for r in self.rngs])
        e = self.num_envs
        self._explore_u = self._draws[:, :, :e]
        self._actions = (self._draws[:, :, e:] * self.n_actions).astype(np.int64)
        self.cursor = 0

    def next(self, epsilon: float | np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(explore, random_actions) of one env step, each (agents, num_envs). `epsilon`: one for all
        agents, or a (K, 1) column with one per agent."""
        if self.cursor == self._draws.shape[1]:
            self._draw_block()
        c = self.cursor
        self.cursor += 1
        return self._explore_u[:, c] < epsilon, self._actions[:, c]

    def state_dict(self) -> dict:
        """The generators' states at the start of the current block, and how much of it was used."""
        return {"block_states": self._block_states, "cursor": self.cursor, "drawn": self._draws.shape[1]}

    def load_state_dict(self, state: dict) -> None:
        for rng, s in zip(self.rngs, state["block_states"]):
            rng.bit_generator.state = s
        if state["drawn"]:
            self._draw_block()
            self.cursor = state["cursor"]
        else:
            self._draws, self.cursor = self._draws[:, :0], 0


def agent_epsilons(
    schedule: str,
    start: float | list[float],
    end: float | list[float],
    duration: int | list[int],
    agents: int,
    step: int,
) -> np.ndarray:
    """Each agent's epsilon at `step` as a (K, 1) column; `start`, `end`, `duration` are one value for all
    agents or a list with one per agent."""

    def each(value: float | list[float] | list[int]) -> list:
        return list(value) if isinstance(value, (list, tuple)) else [value] * agents

    fn = schedules.SCHEDULES[schedule]
    return np.array([fn(s, e, d, step) for s, e, d in zip(each(start), each(end), each(duration))]).reshape(-1, 1)
