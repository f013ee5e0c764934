"""The algorithms rlrun trains, each in a room of its own (one module: config schema, rules, loss, learner
factory), and the registry that maps `algo=<name>` to them. Adding an algorithm is its module, its
conf/algo/<name>.yaml, its tests and its docs section, plus its entry in `ALGORITHMS` below
(docs/adding-an-algorithm.md)."""

from __future__ import annotations

from rlrun.algos import dqn, mdqn, pqn
from rlrun.algos.base import Algorithm

ALGORITHMS: dict[str, Algorithm] = {m.ALGORITHM.name: m.ALGORITHM for m in (dqn, pqn, mdqn)}


def algo_kind(algo: object) -> str:
    """The algorithm an `algo` config node names: its `kind` (DQN's config has none: dqn), or whatever a
    crafted file says (rlrun.config.validate checks it against ALGORITHMS)."""
    return algo.get("kind", "dqn") if hasattr(algo, "get") else "dqn"


def algorithm(algo: object) -> Algorithm:
    """The registered algorithm of an `algo` config node (its kind already checked by rlrun.config.validate)."""
    return ALGORITHMS[algo_kind(algo)]
