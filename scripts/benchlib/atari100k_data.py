"""Atari 100k's published numbers for the five games rlrun's table runs (scripts/atari100k_bench.py).

The games, chosen before any run (docs/results/atari100k.md says why): Pong and Breakout (the games
of rlrun's Atari presets and of issue 64's PQN runs, so the two tables meet), Boxing (a dense reward that
both published agents learn within 100k steps), Freeway (one sparse reward, where DrQ(eps)'s runs split into
about 0 and about 28: exploration decides it) and Asterix (many small rewards; human-normalised scores far
below 1 for both agents). All five play short episodes, so 100 evaluation episodes stay cheap.

Sources:
- RANDOM and HUMAN: the Atari-57 random and human scores every Atari 100k paper normalises by (Mnih et al.
  2015 / Badia et al. 2020), as rliable's Atari 100k data and Table 1 of Alonso et al. 2024 (DIAMOND) list them.
- DRQ_EPS: the per-game mean of the 100 runs per game of Agarwal et al. 2021 ("Deep RL at the Edge of the
  Statistical Precipice", NeurIPS; the scores released with rliable), each run the mean of 100 evaluation
  episodes after 100k agent steps; computed from the copy in eloialonso/iris results/data/DrQ(eps).json
  (commit 75e5ab57).
- DER: the per-game scores of Data-Efficient Rainbow after 100k agent steps as published by van Hasselt,
  Hessel and Aslanides 2019 ("When to use parametric models in reinforcement learning?", NeurIPS), the values
  the CURL (Laskin et al. 2020) and SPR (Schwarzer et al. 2021) papers list as DER / Eff. Rainbow. They are the
  original paper's runs, not Agarwal et al. 2021's re-runs of DER in Dopamine (whose 26-game IQM is quoted
  below; their per-game means were not found in any file searched).
"""

from __future__ import annotations

GAMES = ("Pong", "Breakout", "Boxing", "Freeway", "Asterix")

RANDOM = {"Pong": -20.7, "Breakout": 1.7, "Boxing": 0.1, "Freeway": 0.0, "Asterix": 210.0}
HUMAN = {"Pong": 14.6, "Breakout": 30.5, "Boxing": 12.1, "Freeway": 29.6, "Asterix": 8503.3}

# Mean of Agarwal et al. 2021's 100 runs per game (see above).
DRQ_EPS: dict[str, float | None] = {
    "Pong": -9.06,
    "Breakout": 19.76,
    "Boxing": 9.04,
    "Freeway": 20.26,
    "Asterix": 763.59,
}
# van Hasselt et al. 2019 (see above).
DER: dict[str, float | None] = {
    "Pong": -19.3,
    "Breakout": 1.9,
    "Boxing": 0.2,
    "Freeway": 27.9,
    "Asterix": 470.8,
}

PUBLISHED = {"DER": DER, "DrQ(eps)": DRQ_EPS}
# 26-game IQMs of human-normalised scores, for scale (BBF paper, Table A.1, as issue 64 quotes it; Agarwal et al.
# 2021's Figure A.17 shows the same, about 0.18 and 0.28): not comparable with a 5-game IQM.
IQM_26_GAMES = {"DER": 0.183, "DrQ(eps)": 0.280}


def human_normalised(game: str, score: float) -> float:
    """(score - random) / (human - random): 0 plays like random, 1 like the human tester."""
    return (score - RANDOM[game]) / (HUMAN[game] - RANDOM[game])
