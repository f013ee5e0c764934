"""RunLogger's episode bookkeeping, with hand-made episodes."""

from omegaconf import OmegaConf
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from rlrun.logger import RunLogger


def test_episodes_ending_at_one_vector_step_give_one_mean_return_point(tmp_path):
    log = RunLogger(
        tmp_path, OmegaConf.create({"seed": 0}), total_steps=64, reward_threshold=2.5, progress_bar=False, window=2
    )
    assert log.episodes_end(16, [(16, 1.0, 5)]) is False
    # two envs end at step 32: the window becomes [2, 3] after the second, whose mean 2.5 solves
    assert log.episodes_end(32, [(31, 2.0, 7), (32, 3.0, 9)]) is True
    assert log.episodes_end(48, []) is False
    summary = log.close(64)
    assert log.solved == {"step": 32, "episode": 3}
    assert summary["episodes"] == 3 and summary["final_mean_return_100"] == 2.5

    acc = EventAccumulator(str(tmp_path), size_guidance={"scalars": 0})
    acc.Reload()
    mean = [(e.step, e.value) for e in acc.Scalars("charts/mean_return_100")]
    assert mean == [(16, 1.0), (32, 2.5)]  # one point per step, after all of its episodes
    assert [(e.step, e.value) for e in acc.Scalars("charts/episodic_return")] == [(16, 1.0), (31, 2.0), (32, 3.0)]
    rows = (tmp_path / "episodes.csv").read_text().splitlines()
    assert rows[1:] == ["16,1,1.0,5", "31,2,2.0,7", "32,3,3.0,9"]
