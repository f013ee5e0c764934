"""Hydra's flags anywhere on rlrun's command line: `rlrun.config.argv.grouped_argv` puts them before the overrides,
the one block Hydra's argparse reads."""

import pytest

from rlrun.config.argv import grouped_argv


@pytest.mark.parametrize(
    "argv, grouped",
    [
        (["optimizer.lr=1e-3,1e-4", "seed=0,1", "-m"], ["--multirun", "optimizer.lr=1e-3,1e-4", "seed=0,1"]),
        (["device=cuda", "-m", "seed=0,1"], ["--multirun", "device=cuda", "seed=0,1"]),  # compose's train service
        (["-m", "seed=0,1"], ["--multirun", "seed=0,1"]),
        (["seed=1", "--multirun", "hydra.sweep.dir=x"], ["--multirun", "seed=1", "hydra.sweep.dir=x"]),
        (["seed=1", "--cfg", "job", "total_steps=5"], ["--cfg", "job", "seed=1", "total_steps=5"]),
        (["seed=1", "-c", "hydra", "--resolve"], ["--cfg", "hydra", "--resolve", "seed=1"]),
        (["seed=1", "--info"], ["--info", "all", "seed=1"]),
        (["--info", "defaults", "seed=1"], ["--info", "defaults", "seed=1"]),
        (
            ["seed=1", "-cn", "mine", "x=2", "-cd", "conf"],
            ["--config-name", "mine", "--config-dir", "conf", "seed=1", "x=2"],
        ),
        (
            ["seed=1", "-cp", "conf", "-p", "pkg", "--cfg", "job"],
            ["--cfg", "job", "--package", "pkg", "--config-path", "conf", "seed=1"],
        ),
        (["seed=1", "-h", "x=2"], ["--help", "seed=1", "x=2"]),
        (["seed=1", "--hydra-help"], ["--hydra-help", "seed=1"]),
        (["~buffer", "a=-1", "-m"], ["--multirun", "~buffer", "a=-1"]),
        ([], []),
    ],
)
def test_flags_anywhere_come_before_the_overrides_in_their_order(argv, grouped):
    assert grouped_argv(argv) == grouped


def test_a_line_argparse_refuses_is_left_for_hydra_to_report(capsys):
    assert grouped_argv(["--bogus", "seed=1"]) == ["--bogus", "seed=1"]
    assert grouped_argv(["--cfg", "nothing", "seed=1"]) == ["--cfg", "nothing", "seed=1"]
    assert capsys.readouterr().err == ""  # Hydra prints argparse's usage error, once


def test_a_refused_line_with_an_integral_float_is_not_reported_twice(capsys):
    """`--bogus total_steps=1e5`: the integral-float reading parsed the line a second time with a parser
    that printed argparse's usage error before Hydra's app printed it again."""
    from rlrun.config.argv import normalized_argv

    assert normalized_argv(["--bogus", "total_steps=1e5"]) == ["--bogus", "total_steps=1e5"]
    assert capsys.readouterr().err == ""
    assert normalized_argv(["total_steps=1e5", "-m"]) == ["--multirun", "total_steps=100000"]
