"""A checkpoint's trainer state crafted by hand (rlrun.training.trainer_state): refused as a CheckpointError
(one line, exit 2 from rlrun.resume), never an IndexError or TypeError from the loop."""

import pytest

from rlrun.storage.checkpoint import CheckpointError
from rlrun.training.trainer_state import _failed_agents


@pytest.mark.parametrize("failed", [{99: "x"}, {-1: "x"}, {True: "x"}, {"0": "x"}, {0: 1}, [0], "0", None])
def test_stopped_agents_outside_the_population_are_refused(failed):
    with pytest.raises(CheckpointError, match="stopped agents"):
        _failed_agents(failed, agents=4)  # before: IndexError at learner.failed[list(...)] (a {99: 'x'})


def test_stopped_agents_of_the_population_are_kept():
    assert _failed_agents({3: "non-finite loss", 0: "x"}, agents=4) == {3: "non-finite loss", 0: "x"}
    assert _failed_agents({}, agents=1) == {}
