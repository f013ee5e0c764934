"""A command line's overrides read against the config before Hydra composes them (rlrun.config.overrides):
integral floats for integer keys, and rlrun's own line for an unknown key with a near name."""

import pytest
from entrypoints import in_process

from rlrun.config.overrides import integral, may_be_integral, nearest_key


@pytest.mark.parametrize(
    "given, read",
    [
        ("total_steps=1e5", "total_steps=100000"),
        ("total_steps=1.5e3", "total_steps=1500"),
        ("total_steps=100000.0", "total_steps=100000"),
        ("+algo.learning_starts=2E2", "+algo.learning_starts=200"),
        ("total_steps=1.5", "total_steps=1.5"),  # not integral: the schema refuses it, naming the key
        ("optimizer.lr=1e3", "optimizer.lr=1e3"),  # a float key keeps its float
        ("seed=7", "seed=7"),
        ("total_steps=1e5,2e5", "total_steps=1e5,2e5"),  # a sweep: left to Hydra
        ("exp_name=1e5", "exp_name=1e5"),  # a string key
    ],
)
def test_integral_floats_of_integer_keys_are_integers(compose, given, read):
    assert integral([given], compose()) == [read]


def test_only_float_literals_are_looked_at():
    assert [may_be_integral(o) for o in ("a=1e5", "a=1.0", "a=12", "a=abc", "a", "~a=1e5")] == [
        True,
        True,
        False,
        False,
        False,
        True,
    ]


def test_an_unknown_key_gets_its_nearest_name(compose):
    defaults = compose()
    assert nearest_key(["seed=1", "netwrok=dueling"], defaults) == ("netwrok", "network")
    assert nearest_key(["algo.gama=0.5"], defaults) == ("algo.gama", "algo.gamma")
    assert nearest_key(["algo.gamma=0.5", "network=dueling"], defaults) is None


@pytest.mark.parametrize(
    "args, out",
    [
        (["total_steps=1e5", "--cfg", "job"], "total_steps: 100000\n"),  # Hydra's own path reads it too
        (["netwrok=dueling"], "rlrun: Invalid config: no key netwrok in the config (did you mean network?)\n"),
        # no near name: the node's keys (before: Hydra's advice to append it with +, which the schema refuses)
        (
            ["seeds=4", "+pbt=truncation", "pbt.foo=1"],
            "rlrun: Invalid config: no key pbt.foo in the config (the "
            "keys of pbt are fitness, fraction, initial, interval, perturb, resample_probability, space)\n",
        ),
    ],
)
def test_the_command_line_reads_them_so(args, out):
    proc = in_process("rlrun.train", *args)
    if "--cfg" in args:
        assert proc.returncode == 0 and out in proc.stdout, proc.stderr
    else:  # rlrun's line alone: not Hydra's advice to append the misspelt key with +
        assert proc.returncode == 2 and proc.stderr == out, proc.stderr
