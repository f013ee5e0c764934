"""What a run says about its budget at its start: `total_steps` rounded up to whole vector steps, and a
schedule longer than the run (once, as a warning); and `--help`'s exploration text agrees with the code."""

from types import SimpleNamespace

import pytest

from rlrun.cli import field_docs
from rlrun.config.schemas import ExplorationConfig, RunConfig
from rlrun.training.build import loop_settings

NO_PER = SimpleNamespace(prioritized=False)


def test_a_budget_that_is_not_whole_vector_steps_is_stated(compose):
    settings = loop_settings(compose("total_steps=3000", "exploration.duration=1000"))  # 16 envs
    info, warnings = settings.budget_notes(NO_PER)
    assert settings.last_step == 3008
    assert info == [
        "rlrun: total_steps=3,000 is rounded up to whole vector steps of 16 env steps: the run ends at 3,008"
    ]
    assert warnings == []
    assert loop_settings(compose("total_steps=3008", "exploration.duration=1000")).budget_notes(NO_PER) == ([], [])
    assert "rounded up to whole vector steps" in field_docs(RunConfig)["total_steps"]  # --help says so


def test_schedules_longer_than_the_run_warn(compose):
    settings = loop_settings(compose("total_steps=20000", "exploration.duration=1000000"))
    per = SimpleNamespace(prioritized=True, beta=lambda step, total: 0.7, beta_anneal_steps=50_000)
    _, warnings = settings.budget_notes(per)
    assert warnings[0].startswith(
        "rlrun: warning: exploration.duration=1,000,000 is longer than the run (total_steps=20,000)"
    )
    assert warnings[1].startswith("rlrun: warning: buffer.beta_anneal_steps=50,000 is longer than the run")
    assert len(warnings) == 2
    assert loop_settings(compose("total_steps=20000")).budget_notes(NO_PER) == ([], [])


def test_noisy_nets_have_no_epsilon_schedule_to_warn_about(compose):
    """Noisy nets explore through their weights: epsilon is 0 after random play, whatever exploration.* say."""
    settings = loop_settings(compose("total_steps=20000", "exploration.duration=1000000", "network.noisy=true"))
    assert settings.epsilon(settings.learning_starts) == 0.0
    assert settings.budget_notes(NO_PER) == ([], [])


def test_help_on_exploration_start_says_what_the_code_does(compose):
    settings = loop_settings(
        compose(
            "algo.learning_starts=5000", "exploration.duration=10000", "exploration.start=0.8", "exploration.end=0.0"
        )
    )
    assert settings.epsilon(4999) == 1.0  # uniform-random play until learning starts, whatever `start` says
    # then the schedule's value at that step: it counts from env step 0, not from learning_starts
    assert settings.epsilon(5000) == pytest.approx(0.4)
    docs = field_docs(ExplorationConfig)
    assert "until algo.learning_starts epsilon is 1.0" in docs["start"] and "env step 0" in docs["start"]
    assert "counted from step 0" in docs["duration"]
