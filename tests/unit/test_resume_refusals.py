"""What a resume of a finished run says (rlrun.resume.check_unfinished), without training."""

from pathlib import Path

import pytest
from omegaconf import OmegaConf

from rlrun.errors import FinishedRunError
from rlrun.resume import check_unfinished


def refusal(step: int, own: int, asked: int) -> str:
    state = {"step": step, "config": {"total_steps": own}}
    with pytest.raises(FinishedRunError) as e:
        check_unfinished(Path("run"), state, OmegaConf.create({"stop_on_solve": False, "total_steps": asked}))
    return str(e.value)


def test_a_budget_below_the_steps_trained_is_named_as_the_asked_one_not_the_runs():
    assert refusal(40_000, 40_000, 30_000) == (
        "run is finished: it trained 40,000 env steps, more than the asked total_steps=30,000; to train it "
        "further, name a larger total_steps, e.g. python -m rlrun.resume run total_steps=80000"
    )


def test_a_run_resumed_with_its_own_budget_says_it_trained_that_budget():
    assert refusal(40_000, 40_000, 40_000).startswith(
        "run is finished: it trained 40,000 env steps of total_steps=40,000;"
    )
