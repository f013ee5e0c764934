"""`--help` describes every key of the chosen algorithm's own schema (rlrun/algos), not only
rlrun/config/schemas.py's."""

import re

import pytest

from rlrun.cli import print_help


@pytest.mark.parametrize(
    "algo,line",
    [
        ("dqn", r"^  gamma: 0.99 +# discount factor$"),
        ("pqn", r"^  q_lambda: 0.65 +# lambda of the Q\(lambda\) returns$"),
        ("mdqn", r"^  temperature: 0.03 +# entropy temperature"),
    ],
)
def test_help_describes_the_algorithm_keys(capsys, algo, line):
    print_help([f"algo={algo}"])
    out = capsys.readouterr().out
    assert re.search(line, out, re.M), out
    algo_block = out.split("\nalgo:")[1].split("\nexploration:")[0]
    undescribed = [k for k in algo_block.splitlines() if k.startswith("  ") and "  # " not in k]
    assert not undescribed
