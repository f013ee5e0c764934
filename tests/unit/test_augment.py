"""buffer.augment=random_shift (rlrun.replay.augment): DrQ's pad-and-crop of sampled pixel batches."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch.nn import functional as F

from rlrun.replay import ReplayBuffer, StackedReplayBuffer
from rlrun.replay.augment import RandomShift, make_augmentation, shift
from rlrun.replay.frames import FrameStore

IMAGE = torch.arange(16, dtype=torch.uint8).view(1, 1, 4, 4)  # rows 0-3, 4-7, 8-11, 12-15


def test_a_known_shift_is_the_hand_computed_crop_with_the_edges_repeated():
    # down by one row and left by one column: out[i, j] = x[min(i + 1, 3), max(j - 1, 0)]
    out = shift(IMAGE, torch.tensor([1]), torch.tensor([-1]))
    expected = [[4, 4, 5, 6], [8, 8, 9, 10], [12, 12, 13, 14], [12, 12, 13, 14]]
    assert out.dtype == torch.uint8
    assert out[0, 0].tolist() == expected


def test_a_shift_equals_replicate_padding_then_the_crop_at_its_offset():
    pad = 4
    x = torch.rand(3, 2, 12, 12)
    dy, dx = torch.tensor([-4, 0, 3]), torch.tensor([2, -1, 4])
    padded = F.pad(x, (pad, pad, pad, pad), mode="replicate")
    for n in range(3):
        top, left = pad + int(dy[n]), pad + int(dx[n])
        crop = padded[n, :, top : top + 12, left : left + 12]
        assert torch.equal(shift(x, dy, dx)[n], crop)


def test_random_shift_moves_each_sample_and_its_frames_together_within_pad():
    # a lone bright pixel in the middle of each of 64 samples: where it lands gives each sample's offset
    x = torch.zeros(64, 4, 21, 21, dtype=torch.uint8)
    x[:, :, 10, 10] = 255
    out = RandomShift(3, [torch.Generator().manual_seed(0)], batch_dims=1).images(x)
    offsets = set()
    for n in range(64):
        where = (out[n, 0] == 255).nonzero().tolist()
        assert len(where) == 1
        for c in range(1, 4):  # every stacked frame of a sample moves alike
            assert torch.equal(out[n, c], out[n, 0])
        offsets.add((10 - where[0][0], 10 - where[0][1]))
    assert all(-3 <= dy <= 3 and -3 <= dx <= 3 for dy, dx in offsets)
    assert len(offsets) > 20  # independent per sample


def test_obs_and_next_obs_draw_their_own_shifts():
    buf = ReplayBuffer(8, (1, 9, 9), obs_dtype=torch.uint8, generator=torch.Generator().manual_seed(1),
                       augment="random_shift", augment_pad=2)  # fmt: skip
    frame = torch.zeros(8, 1, 9, 9, dtype=torch.uint8)
    frame[:, 0, 4, 4] = 255
    buf.add(frame, torch.zeros(8, dtype=torch.long), torch.zeros(8), frame.clone(), torch.ones(8))
    batch = buf.sample(64)
    moved = [(batch.obs[n, 0] == 255).nonzero().tolist() != (batch.next_obs[n, 0] == 255).nonzero().tolist()
             for n in range(64)]  # fmt: skip
    assert any(moved)


def test_off_by_default_samples_are_unchanged():
    def filled(**kw):
        buf = ReplayBuffer(32, (2, 6, 6), obs_dtype=torch.uint8, generator=torch.Generator().manual_seed(5), **kw)
        obs = torch.randint(0, 255, (32, 2, 6, 6), dtype=torch.uint8, generator=torch.Generator().manual_seed(2))
        buf.add(obs, torch.arange(32), torch.zeros(32), obs.flip(0), torch.ones(32))
        return buf, obs

    default, obs = filled()
    assert default.augment is None and make_augmentation("none", 4, [None], 1) is None
    batch = default.sample(16)
    assert torch.equal(batch.obs, obs[batch.indices]) and torch.equal(batch.next_obs, obs.flip(0)[batch.indices])
    explicit, _ = filled(augment="none", augment_pad=4)
    assert torch.equal(explicit.sample(16).obs, filled()[0].sample(16).obs)


def test_stacked_agents_shift_their_own_samples():
    gens = [torch.Generator().manual_seed(s) for s in (0, 1)]
    buf = StackedReplayBuffer(2, 4, (1, 7, 7), gens, obs_dtype=torch.uint8, augment="random_shift", augment_pad=1)
    frame = torch.zeros(8, 1, 7, 7, dtype=torch.uint8)
    frame[:, 0, 3, 3] = 255
    agent = np.repeat(np.arange(2), 4)
    buf.add(agent, frame, torch.zeros(8, dtype=torch.long), torch.zeros(8), frame, torch.ones(8))
    batch = buf.sample(16)
    assert batch.obs.shape == (2, 16, 1, 7, 7)
    for k in range(2):
        for n in range(16):
            ((y, x),) = (batch.obs[k, n, 0] == 255).nonzero().tolist()
            assert abs(y - 3) <= 1 and abs(x - 3) <= 1


def test_frame_store_shifts_the_decoded_pixels():
    store = FrameStore(16, (5, 5), stack=2, num_envs=1, device="cpu")
    store.frames[:2] = IMAGE[0, 0, :, :].new_zeros(5, 5)
    store.frames[1, 2, 2] = 255
    buf = ReplayBuffer(4, (2,), obs_dtype=torch.int64, generator=torch.Generator().manual_seed(0),
                       augment="random_shift", augment_pad=1)  # fmt: skip
    store.augment, buf.augment = buf.augment, None
    idx = torch.tensor([[0, 1]])
    buf.add(idx, torch.zeros(1, dtype=torch.long), torch.zeros(1), idx, torch.ones(1))
    batch = store.decode(buf.sample(32))
    assert batch.obs.shape == (32, 2, 5, 5) and batch.obs.dtype == torch.uint8
    spots = {tuple((batch.obs[n, 1] == 255).nonzero()[0].tolist()) for n in range(32)}
    assert spots <= {(y, x) for y in (1, 2, 3) for x in (1, 2, 3)} and len(spots) > 1


def test_an_unknown_augmentation_is_refused():
    with pytest.raises(ValueError, match="random_shift"):
        make_augmentation("flip", 4, [None], 1)


def test_intensity_scales_each_shifted_observation_by_one_clipped_normal_factor():
    # 4000 flat grey observations (value 200, 2 frames): each comes out as 200 * f, f = 1 + 0.05 * clip(z, -2, 2)
    x = torch.full((4000, 2, 6, 6), 200, dtype=torch.uint8)
    out = RandomShift(2, [torch.Generator().manual_seed(3)], batch_dims=1, intensity=0.05).images(x)
    assert out.dtype == torch.float32 and out.shape == x.shape
    factors = out[:, 0, 0, 0] / 200
    assert torch.equal(out, 200 * factors.view(-1, 1, 1, 1).expand_as(out))  # one factor per observation
    assert factors.min() >= 0.9 - 1e-6 and factors.max() <= 1.1 + 1e-6
    clipped = ((factors - 0.9).abs() < 1e-6) | ((factors - 1.1).abs() < 1e-6)
    assert 0.03 < clipped.float().mean() < 0.07  # P(|z| > 2) = 4.6%
    assert abs(factors.mean().item() - 1.0) < 0.005 and 0.04 < factors.std().item() < 0.05


def test_no_intensity_draws_nothing_more_and_keeps_uint8():
    # runs without buffer.augment_intensity draw only their shifts, so they repeat as before it existed
    x = torch.randint(1, 256, (8, 2, 6, 6), dtype=torch.uint8)
    plain = RandomShift(2, [torch.Generator().manual_seed(4)], 1, intensity=0.0)
    assert plain.images(x).dtype == torch.uint8
    shifts_only = torch.Generator().manual_seed(4)
    for _ in range(2):  # dy, dx
        torch.randint(0, 5, (8,), generator=shifts_only)
    assert torch.equal(plain.generators[0].get_state(), shifts_only.get_state())
    shifted = RandomShift(2, [torch.Generator().manual_seed(4)], 1).images(x)
    scaled = RandomShift(2, [torch.Generator().manual_seed(4)], 1, intensity=0.05).images(x)
    ratio = scaled / shifted  # the same shifts, then the factors
    assert torch.all((ratio - 1).abs() <= 0.1 + 1e-5)


def test_the_buffer_passes_intensity_to_its_samples():
    buf = ReplayBuffer(8, (1, 9, 9), obs_dtype=torch.uint8, generator=torch.Generator().manual_seed(1),
                       augment="random_shift", augment_pad=2, augment_intensity=0.05)  # fmt: skip
    frame = torch.full((8, 1, 9, 9), 100, dtype=torch.uint8)
    buf.add(frame, torch.zeros(8, dtype=torch.long), torch.zeros(8), frame.clone(), torch.ones(8))
    batch = buf.sample(64)
    assert batch.obs.dtype == torch.float32 and not torch.equal(batch.obs, batch.next_obs)
    assert ((batch.obs / 100 - 1).abs() <= 0.1 + 1e-5).all()
