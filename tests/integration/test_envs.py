"""Every env option and preset trains a tiny budget. The wrappers and preprocessing: tests/unit/test_envs_checks.py."""

from pathlib import Path

import pytest

import rlrun

ENV_OPTIONS = sorted(p.stem for p in (Path(rlrun.__file__).parent / "conf" / "env").glob("*.yaml"))


@pytest.mark.parametrize("option", ENV_OPTIONS)
def test_every_env_option_trains_a_tiny_budget(tmp_path, compose, option):
    """Each env preset as composed (its tuned learner), with an evaluation and a checkpoint."""
    extra = []
    if option == "lunarlander":
        pytest.importorskip("Box2D")
        pytest.importorskip("pygame")
    if option == "atari":
        pytest.importorskip("ale_py")
        pytest.importorskip("cv2")
        extra = ["buffer.capacity=1000", "algo.batch_size=32", "env.max_episode_steps=400"]
    import rlrun.train as rt

    cfg = compose(
        f"env={option}",
        "total_steps=400",
        "algo.learning_starts=200",
        "eval.interval=400",
        "eval.episodes=1",
        "log.plot=false",
        "log.progress_bar=false",
        "log.interval=200",
        *extra,
    )
    summary = rt.train(cfg, tmp_path)
    assert summary["env_steps"] == 400


CONF = Path(rlrun.__file__).parent / "conf"
# The env presets (env=X) train in test_every_env_option_trains_a_tiny_budget.
PRESETS = [f"+experiment={p.stem}" for p in sorted((CONF / "experiment").glob("*.yaml"))]


@pytest.mark.parametrize("preset", PRESETS)
def test_every_preset_composes_and_trains_a_tiny_budget(tmp_path, compose, preset):
    import rlrun.train as rt

    cfg = compose(preset)
    if cfg.env.id.startswith("ALE/"):
        pytest.importorskip("ale_py")
        pytest.importorskip("cv2")
    if cfg.env.id.startswith("LunarLander"):
        pytest.importorskip("Box2D")
    cfg = compose(
        preset,
        "total_steps=200",
        "algo.learning_starts=150",  # 50 updates: the pixel presets' cost is their updates
        "algo.batch_size=32",
        "buffer.capacity=1000",
        "eval.interval=0",
        "log.plot=false",
        "log.progress_bar=false",
        "log.interval=100",
        "checkpoint.every=0",
        "env.max_episode_steps=150",
    )
    steps = rt.train(cfg, tmp_path)["env_steps"]
    assert 200 <= steps < 200 + cfg.env.num_envs  # whole vector steps
