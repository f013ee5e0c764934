"""scripts/compare_null_real.py's pure parts: which batched runs the pool still needs, and repetitions that
never use an agent twice."""

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))

from compare_null_real import missing_chunks, repetitions  # noqa: E402


def test_missing_chunks_skip_the_seeds_already_trained_and_split_at_the_run_size():
    assert missing_chunks(set(), 100, 5, 2) == [(100, 2), (102, 2), (104, 1)]
    assert missing_chunks({100, 101, 103}, 100, 6, 10) == [(102, 1), (104, 2)]
    assert missing_chunks(set(range(100, 106)), 100, 6, 10) == []


def test_repetitions_never_use_an_agent_twice_and_disjoint_ones_never_share_one():
    seeds = np.arange(1000, 1250)
    disjoint = list(repetitions(seeds, 40, True, 0, np.random.default_rng(0)))
    assert len(disjoint) == 3  # 250 agents: three repetitions of 2 x 40
    used = np.concatenate([np.concatenate(r) for r in disjoint])
    assert len(set(used)) == len(used) == 240
    resampled = list(repetitions(seeds, 40, False, 50, np.random.default_rng(0)))
    assert len(resampled) == 50
    assert all(len(set(a) | set(b)) == 80 for a, b in resampled)
