"""What rlrun guarantees (docs/reliability.md), checked without a run: every bad config is refused by the
pre-flight before anything is written and a failed torch write keeps the old file. The commands and runs
around them: tests/integration/test_reliability.py; every option's and preset's keys in the schema:
tests/integration/test_config.py and test_envs.py (each composes, validates and builds or trains)."""

import pytest
import torch

from rlrun.storage import rundir

BAD_CONFIGS = [
    (["network=duelling"], "dueling"),
    (["algo.batch_size=big"], "algo.batch_size"),
    (["total_step=1000"], "did you mean total_steps?"),
    (["+algo.gama=0.5"], "did you mean algo.gamma?"),
    (["-m", "optimizer.lr=1e-3,abc"], "optimizer.lr=abc"),
    (["-m", "seed=0,1", "algo.gamma=2"], "algo.gamma"),
    (["env.id=Blackjack-v1"], "Tuple(Discrete(32)"),
    (["env.id=NoSuchEnv-v0"], "env.id"),
    (["logger=[tensorboard,csvv]"], "logger='csvv': allowed one of csv, mlflow, tensorboard, wandb"),  # was Hydra's
    (["seeds=3", "seed=4294967294"], "seed=4294967294: allowed at most 4294967293 with seeds=3"),  # was a traceback
]


@pytest.mark.parametrize("args, says", BAD_CONFIGS)
def test_every_bad_config_is_refused_before_anything_is_written(tmp_path, monkeypatch, args, says):
    """The check the command runs first (rlrun.config.preflight): one line naming the key, nothing written."""
    from rlrun.config import preflight
    from rlrun.errors import ConfigError

    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError) as refused:
        preflight.plan(args)
    assert says in str(refused.value) and "\n" not in str(refused.value)
    assert list(tmp_path.iterdir()) == []


def test_torch_write_errors_become_oserror_and_keep_the_old_file(tmp_path, monkeypatch):
    target = tmp_path / "model.pt"
    target.write_bytes(b"old")

    def failing_save(obj, f):
        f.write(b"partial")
        raise RuntimeError("[enforce fail at inline_container.cc:1] . PytorchStreamWriter failed writing file")

    monkeypatch.setattr(torch, "save", failing_save)
    with pytest.raises(OSError, match="failed writing"), rundir.open_atomic(target) as f:
        torch.save({}, f)
    assert target.read_bytes() == b"old" and list(tmp_path.iterdir()) == [target]


@pytest.mark.parametrize("pending", [["pbt"], ["eval", "eval"], "eval", [1], [torch.zeros(1)], None])
def test_a_checkpoint_owing_anything_but_an_evaluation_and_a_round_is_refused(pending):
    from rlrun.storage.checkpoint import CheckpointError
    from rlrun.training.trainer_state import _pending

    with pytest.raises(CheckpointError, match="pending work"):
        _pending(pending, pbt=True)
    with pytest.raises(CheckpointError, match="pending work"):
        _pending(["eval", "pbt"], pbt=False)  # a round without PBT
    assert _pending(["eval", "pbt"], pbt=True) == ["eval", "pbt"] and _pending([], pbt=False) == []
