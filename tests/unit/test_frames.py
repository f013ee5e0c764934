"""Frame storage reconstructs exactly the stacked observations it was given, across episode ends."""

import gymnasium as gym
import numpy as np
import torch
from gymnasium import spaces
from gymnasium.wrappers import FrameStackObservation

from rlrun.envs.vector import next_obs_for_storage
from rlrun.replay import Batch
from rlrun.replay.frames import FrameStore


class FrameEnv(gym.Env):
    """2x2 'frames' whose pixels encode (episode, t); episodes end after 3, 5, 2, ... steps."""

    observation_space = spaces.Box(0, 255, (2, 2), np.uint8)
    action_space = spaces.Discrete(2)
    lengths = [3, 5, 2, 6, 1, 4]

    def __init__(self):
        self.episode, self.t = -1, 0

    def _frame(self):
        return np.full((2, 2), 10 * (self.episode % 20) + self.t, dtype=np.uint8)

    def reset(self, *, seed=None, options=None):
        self.episode += 1
        self.t = 0
        return self._frame(), {}

    def step(self, action):
        self.t += 1
        end = self.t >= self.lengths[self.episode % len(self.lengths)]
        return self._frame(), 0.0, end, False, {}


def test_decoded_stacks_equal_framestack_observations_across_episodes():
    from gymnasium.vector import AutoresetMode, SyncVectorEnv

    envs = SyncVectorEnv([lambda: FrameStackObservation(FrameEnv(), 4)] * 2, autoreset_mode=AutoresetMode.SAME_STEP)
    obs, _ = envs.reset(seed=0)
    store = FrameStore(capacity=200, frame_shape=(2, 2), stack=4, num_envs=2, device="cpu")
    store.start(obs)
    given, stored = [], []
    for _ in range(25):
        next_obs, _, term, trunc, infos = envs.step(np.zeros(2, dtype=np.int64))
        real_next = next_obs_for_storage(next_obs, infos)
        obs_idx = store.current.copy()
        next_idx = store.advance(next_obs, real_next, term | trunc)
        given.append((obs.copy(), real_next.copy()))
        stored.append((obs_idx, next_idx))
        obs = next_obs
    obs_idx = torch.from_numpy(np.concatenate([o for o, _ in stored]))
    next_idx = torch.from_numpy(np.concatenate([n for _, n in stored]))
    batch = Batch(obs_idx, None, None, next_idx, None, None, None, None)
    decoded = store.decode(batch)
    np.testing.assert_array_equal(decoded.obs.numpy(), np.concatenate([o for o, _ in given]))
    np.testing.assert_array_equal(decoded.next_obs.numpy(), np.concatenate([n for _, n in given]))
    # A stack right after a reset is the first frame four times, not frames of the previous episode.
    first = decoded.obs.numpy()[2 * 3 + 0]  # env 0 at step 3: a new episode (the first lasted 3 steps)
    assert (first == first[-1]).all() and first[-1, 0, 0] % 10 == 0


def test_frames_are_stored_once():
    store = FrameStore(capacity=1000, frame_shape=(84, 84), stack=4, num_envs=1, device="cpu")
    store.start(np.zeros((1, 4, 84, 84), np.uint8))
    for _ in range(10):
        store.advance(np.zeros((1, 4, 84, 84), np.uint8), np.zeros((1, 4, 84, 84), np.uint8), np.array([False]))
    assert store.written == 11  # one frame per step (+ the first), not 4 per observation
    assert store.frames.element_size() * store.frames[0].numel() == 84 * 84
