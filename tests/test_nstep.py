"""n-step returns by hand: discounting, cuts at termination, bootstrap at truncation, env separation."""

import numpy as np
import pytest

from rlrun.nstep import NStepAccumulator

G = 0.5


def feed(acc, steps):
    """steps: list of (obs, reward, next_obs, terminated, truncated) per env (arrays of len num_envs)."""
    out = []
    for obs, rew, nxt, term, trunc in steps:
        r = acc.step(np.array(obs, dtype=np.float32)[:, None], np.zeros(len(obs), dtype=np.int64),
                     np.array(rew, dtype=np.float64), np.array(nxt, dtype=np.float32)[:, None],
                     np.array(term), np.array(trunc))
        if r is not None:
            out += [(o[0], ret, n[0], d) for o, _, ret, n, d in zip(*r)]
    return out


def test_one_step_is_plain_transition():
    acc = NStepAccumulator(1, 1, G, (1,))
    out = feed(acc, [([0], [1.0], [1], [False], [False]), ([1], [2.0], [2], [True], [False])])
    assert out == [(0, 1.0, 1, pytest.approx(G)), (1, 2.0, 2, 0.0)]


def test_three_step_returns_and_termination_cut():
    acc = NStepAccumulator(1, 3, G, (1,))
    rewards = [1.0, 2.0, 4.0, 8.0]
    steps = [([t], [rewards[t]], [t + 1], [t == 3], [False]) for t in range(4)]
    out = feed(acc, steps)
    assert out == [
        (0, 1 + G * 2 + G**2 * 4, 3, pytest.approx(G**3)),  # full window
        (1, 2 + G * 4 + G**2 * 8, 4, 0.0),  # terminated at t=3: no bootstrap
        (2, 4 + G * 8, 4, 0.0),
        (3, 8.0, 4, 0.0),
    ]


def test_truncation_bootstraps_with_gamma_to_steps_taken():
    acc = NStepAccumulator(1, 3, G, (1,))
    out = feed(acc, [([0], [1.0], [1], [False], [False]), ([1], [1.0], [2], [False], [True])])
    # truncated after 2 steps: both pending starts bootstrap from s=2 with gamma^(steps taken)
    assert out == [(0, 1 + G, 2, pytest.approx(G**2)), (1, 1.0, 2, pytest.approx(G))]
    # the next episode starts clean
    out = feed(acc, [([10], [1.0], [11], [False], [False])] * 1)
    assert out == []


def test_vector_envs_never_mix():
    acc = NStepAccumulator(2, 2, G, (1,))
    out = feed(acc, [
        ([0, 100], [1.0, 10.0], [1, 101], [False, True], [False, False]),  # env 1 terminates at once
        ([1, 0], [2.0, 20.0], [2, 1], [False, False], [False, False]),
    ])
    assert out == [
        (100, 10.0, 101, 0.0),
        (0, 1 + G * 2, 2, pytest.approx(G**2)),
    ]
