"""Which agent a job directory holds (rlrun.storage.agent_dirs.same_run): its config's keys, less those a
resume may change."""

import pytest
import yaml

from rlrun.config.saved import RESUME_SAFE
from rlrun.storage.agent_dirs import same_run


def agent_dir(tmp_path, config):
    (tmp_path / ".hydra").mkdir()
    (tmp_path / ".hydra" / "config.yaml").write_text(yaml.safe_dump(config))
    return tmp_path


@pytest.mark.parametrize("key", [*RESUME_SAFE, "seeds"])
def test_a_key_a_resume_may_change_leaves_the_agent_its_directory(tmp_path, key):
    """A resumed batched run with, say, `objective=robust` finds its agents' directories (objective was
    missing from a hand-kept copy of the resume-safe keys, so such a resume lost them)."""
    saved = {"seed": 3, "optimizer": {"lr": 0.001}, key: "before"}
    assert same_run(agent_dir(tmp_path, saved), {**saved, key: "after"})


def test_another_key_is_another_agent(tmp_path):
    saved = {"seed": 3, "optimizer": {"lr": 0.001}}
    assert not same_run(agent_dir(tmp_path, saved), {**saved, "optimizer": {"lr": 0.01}})
