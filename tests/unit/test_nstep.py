"""n-step returns by hand: discounting, cuts at termination, bootstrap at truncation, env separation."""

from operator import itemgetter

import numpy as np
import pytest

from rlrun.replay.nstep import NStepAccumulator

G = 0.5


def feed(acc, steps):
    """steps: list of (obs, reward, next_obs, terminated, truncated) per env (arrays of len num_envs)."""
    out = []
    for obs, rew, nxt, term, trunc in steps:
        r = acc.step(
            np.array(obs, dtype=np.float32)[:, None],
            np.zeros(len(obs), dtype=np.int64),
            np.array(rew, dtype=np.float64),
            np.array(nxt, dtype=np.float32)[:, None],
            np.array(term),
            np.array(trunc),
        )
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
    out = feed(
        acc,
        [
            ([0, 100], [1.0, 10.0], [1, 101], [False, True], [False, False]),  # env 1 terminates at once
            ([1, 0], [2.0, 20.0], [2, 1], [False, False], [False, False]),
        ],
    )
    assert out == [
        (100, 10.0, 101, 0.0),
        (0, 1 + G * 2, 2, pytest.approx(G**2)),
    ]


def reference_nstep(trajectory, n, gamma, num_envs):
    """Plain per-env lists: the obviously-correct version to compare the vectorised one against."""
    pending = [[] for _ in range(num_envs)]
    out = []
    for obs, rew, nxt, term, trunc in trajectory:
        for i in range(num_envs):
            pending[i].append((obs[i], rew[i]))
            starts = range(len(pending[i])) if (term[i] or trunc[i]) else (range(1) if len(pending[i]) == n else [])
            for j in starts:
                rs = [r for _, r in pending[i][j:]]
                disc = 0.0 if term[i] else gamma ** len(rs)
                out.append((i, pending[i][j][0], sum(gamma**k * r for k, r in enumerate(rs)), nxt[i], disc))
            if term[i] or trunc[i]:
                pending[i] = []
            elif len(pending[i]) == n:
                pending[i].pop(0)
    return out


@pytest.mark.parametrize("n,num_envs", [(1, 1), (3, 1), (3, 4), (5, 3)])
def test_matches_reference_on_random_episodes(n, num_envs):
    rng = np.random.default_rng(n * 10 + num_envs)
    t = np.zeros(num_envs)
    trajectory = []
    for step in range(300):
        obs = t * 1000 + np.arange(num_envs) + step * 10_000  # unique per (env, step)
        end = rng.random(num_envs)
        term, trunc = end < 0.08, (end >= 0.08) & (end < 0.12)
        trajectory.append((obs, rng.normal(size=num_envs), obs + 0.5, term, trunc))
    acc = NStepAccumulator(num_envs, n, 0.9, (1,))
    got = []
    for obs, rew, nxt, term, trunc in trajectory:
        r = acc.step(obs[:, None], np.zeros(num_envs, dtype=np.int64), rew, nxt[:, None], term, trunc)
        if r is not None:
            got += [(o[0], ret, nx[0], d) for o, _, ret, nx, d in zip(*r)]
    want = [(o, ret, nx, d) for _, o, ret, nx, d in reference_nstep(trajectory, n, 0.9, num_envs)]
    got, want = sorted(got, key=itemgetter(0)), sorted(want, key=itemgetter(0))
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g[0] == w[0] and g[2] == w[2]
        assert g[1] == pytest.approx(w[1], rel=1e-5, abs=1e-5) and g[3] == pytest.approx(w[3], rel=1e-6)


def test_checkpoint_midway_continues_identically():
    """state_dict/load_state_dict mid-episode gives the same transitions as an uninterrupted run."""
    n, num_envs = 4, 3
    rng = np.random.default_rng(7)
    trajectory = []
    for step in range(200):
        obs = np.arange(num_envs) + step * 100.0
        end = rng.random(num_envs)
        trajectory.append((obs, rng.normal(size=num_envs), obs + 0.5, end < 0.05, (end >= 0.05) & (end < 0.08)))

    def run(acc, steps):
        got = []
        for obs, rew, nxt, term, trunc in steps:
            r = acc.step(obs[:, None], np.zeros(num_envs, dtype=np.int64), rew, nxt[:, None], term, trunc)
            if r is not None:
                got += [(o[0], ret, nx[0], d, e) for (o, _, ret, nx, d), e in zip(zip(*r), acc.last_envs)]
        return got

    whole = run(NStepAccumulator(num_envs, n, 0.9, (1,)), trajectory)
    first = NStepAccumulator(num_envs, n, 0.9, (1,))
    got = run(first, trajectory[:101])
    state = first.state_dict()
    second = NStepAccumulator(num_envs, n, 0.9, (1,))
    second.load_state_dict(state)
    got += run(second, trajectory[101:])
    assert got == whole
