"""Replay storage and prioritized replay, checked against values computed by hand or by numpy."""

import numpy as np
import pytest
import torch

from rlrun.replay import PrioritizedReplayBuffer, ReplayBuffer, SumTree


def fill(buffer, n):
    obs = torch.arange(n, dtype=torch.float32).unsqueeze(1)
    buffer.add(obs, torch.zeros(n, dtype=torch.long), obs.squeeze(1), obs + 1, torch.full((n,), 0.99))


def test_ring_buffer_wraps_and_tracks_age():
    buf = ReplayBuffer(5, (1,))
    fill(buf, 7)  # slots hold 5, 6, 2, 3, 4
    assert len(buf) == 5 and buf.pos == 2
    assert buf.obs[:, 0].tolist() == [5.0, 6.0, 2.0, 3.0, 4.0]
    batch = buf.sample(1000)
    # age = transitions added after this one: 7 - 1 - value
    torch.testing.assert_close(batch.age, (6 - batch.obs[:, 0]).long())
    torch.testing.assert_close(batch.next_obs, batch.obs + 1)


def test_sum_tree_find_matches_cumsum():
    rng = np.random.default_rng(0)
    values = rng.random(37)
    tree = SumTree(37, torch.device("cpu"))
    tree.update(torch.arange(37), torch.as_tensor(values))
    assert tree.total.item() == pytest.approx(values.sum())
    mass = rng.random(500) * values.sum()
    expected = np.searchsorted(np.cumsum(values), mass, side="right")
    np.testing.assert_array_equal(tree.find(torch.as_tensor(mass)).numpy(), expected)


def make_per(priorities, alpha=0.6, seed=0):
    g = torch.Generator().manual_seed(seed)
    buf = PrioritizedReplayBuffer(len(priorities), (1,), generator=g, alpha=alpha, priority_eps=0.0)
    fill(buf, len(priorities))
    buf.update_priorities(torch.arange(len(priorities)), torch.tensor(priorities, dtype=torch.float64))
    return buf


def test_per_sampling_frequency_is_proportional_to_priority_alpha():
    priorities = [0.1, 0.5, 1.0, 2.0, 4.0, 0.25, 3.0, 8.0]
    alpha = 0.6
    buf = make_per(priorities, alpha)
    counts = torch.zeros(len(priorities))
    draws = 0
    for _ in range(500):
        batch = buf.sample(64, beta=0.4)
        counts += torch.bincount(batch.indices, minlength=len(priorities))
        draws += 64
    p = np.array(priorities) ** alpha
    expected = p / p.sum() * draws
    chi2 = float(((counts.numpy() - expected) ** 2 / expected).sum())
    assert chi2 < 24.32  # chi-square 0.999 quantile with 7 degrees of freedom
    np.testing.assert_allclose(counts.numpy() / draws, p / p.sum(), atol=0.01)


def test_per_importance_weights_exact():
    priorities = [1.0, 2.0, 4.0, 8.0]
    alpha, beta = 0.5, 0.7
    buf = make_per(priorities, alpha)
    batch = buf.sample(16, beta=beta)
    p = np.array(priorities) ** alpha
    probs = p / p.sum()
    w = (len(priorities) * probs[batch.indices.numpy()]) ** (-beta)
    np.testing.assert_allclose(batch.weights.numpy(), w / w.max(), rtol=1e-6)
    # By hand for index 0: P = 1 / (1 + sqrt2 + 2 + sqrt8), w = (4P)^-0.7, and it is the largest weight.
    P0 = 1 / (1 + 2**0.5 + 2 + 8**0.5)
    P_sampled = probs[batch.indices.numpy()]
    assert (buf.priorities(torch.tensor([0])) / buf.tree.total).item() == pytest.approx(P0)
    assert batch.weights.max().item() == pytest.approx(1.0)
    assert batch.weights.min().item() == pytest.approx(
        ((4 * P_sampled.max()) / (4 * P_sampled.min())) ** -beta, rel=1e-6
    )


def test_new_transitions_enter_at_max_priority():
    buf = PrioritizedReplayBuffer(8, (1,), alpha=0.5, priority_eps=0.01)
    fill(buf, 2)
    assert (buf.priorities(torch.tensor([0])) / buf.tree.total).item() == 0.5
    assert buf.priorities(torch.tensor([0, 1])).tolist() == [1.0, 1.0]  # max priority starts at 1
    buf.update_priorities(torch.tensor([0, 1]), torch.tensor([3.99, -0.5]))  # |td| + eps: 4.0, 0.51
    fill(buf, 1)
    assert buf.priorities(torch.tensor([2])).item() == pytest.approx(4.0**0.5)
    assert buf.priorities(torch.tensor([1])).item() == pytest.approx(0.51**0.5)


def test_beta_anneals_to_one():
    buf = PrioritizedReplayBuffer(4, (1,), beta_start=0.4)
    assert buf.beta(0, 1000) == pytest.approx(0.4)
    assert buf.beta(500, 1000) == pytest.approx(0.7)
    assert buf.beta(2000, 1000) == 1.0
    buf.beta_anneal_steps = 100
    assert buf.beta(50, 1000) == pytest.approx(0.7)


def test_per_stats_effective_sample_size():
    buf = make_per([1.0, 1.0, 1.0, 1.0], alpha=1.0)
    assert buf.stats()["ess_fraction"].item() == pytest.approx(1.0)
    buf.update_priorities(torch.tensor([0]), torch.tensor([1e6]))
    assert buf.stats()["ess_fraction"].item() == pytest.approx(0.25, rel=1e-3)


def test_per_wrapping_add_gives_every_new_slot_the_max_priority():
    buf = PrioritizedReplayBuffer(4, (1,), alpha=1.0, priority_eps=0.0)
    fill(buf, 3)
    buf.update_priorities(torch.arange(3), torch.tensor([2.0, 1.0, 1.0]))
    fill(buf, 3)  # slots 3, 0, 1: wraps
    assert buf.priorities(torch.arange(4)).tolist() == [2.0, 2.0, 1.0, 2.0]
    assert buf.tree.total.item() == 7.0
