"""A pixel run learns something real on a budget (`-m slow`, 10-12 minutes of one core's CPU time).

PQN (`+experiment=pqn_atari`, the Nature CNN on stacked 84x84 frames) on Breakout, epsilon over the first
100k env steps, 150k env steps in all: the mean return of the last 100 training episodes must rise clearly
above that of the episodes played while epsilon was near 1 (random play, about 1.3). Measured on 3 seeds
(docs/results/atari.md, "Breakout by PQN in 150k env steps"): the last 100 episodes 4.71, 6.93 and 6.69
(seeds 0, 1, 2; 4.56, 4.40 and 5.63 before the convolutions were initialised orthogonally), 9.4 to 9.8
minutes of CPU each on a shared Intel Xeon core. Pong would
show nothing at this budget (its mean leaves -21 only after about 500k env steps). The default tier keeps
the Atari smoke runs (test_pixels.py, test_atari_vector.py).
"""

import csv
import statistics

import pytest

pytest.importorskip("ale_py")
pytest.importorskip("cv2")

THRESHOLD = 3.0  # the last 100 episodes' mean: random play scores about 1.3, 3 measured seeds 4.7 to 6.9
BREAKOUT = [
    "+experiment=pqn_atari",
    "env.id=ALE/Breakout-v5",
    "exploration.duration=100000",
    "total_steps=150000",
    "eval.interval=0",
    "checkpoint.every=0",
    "log.plot=false",
    "log.progress_bar=false",
    "device=cpu",
]


def returns_by_step(run_dir):
    with open(run_dir / "episodes.csv", newline="") as f:
        return [(int(row["env_step"]), float(row["return"])) for row in csv.DictReader(f)]


@pytest.mark.slow
@pytest.mark.timeout(3600)  # 10 minutes of an idle core; a shared core can take several times that
def test_pqn_learns_breakout_within_150k_env_steps(compose, tmp_path):
    from rlrun.run import train

    summary = train(compose(*BREAKOUT, "seed=0"), tmp_path)
    episodes = returns_by_step(tmp_path)
    random_play = statistics.mean(r for step, r in episodes if step <= 20_000)  # epsilon above 0.8
    last_100 = statistics.mean(r for _, r in episodes[-100:])
    assert summary["env_steps"] == 150_000 and len(episodes) > 300, summary
    assert random_play < 2.0, f"random play scored {random_play:.2f}: the game or its preprocessing changed"
    assert last_100 >= THRESHOLD, f"the last 100 episodes' mean {last_100:.2f} (random play {random_play:.2f})"
