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


# Overrides as rlrun's commands see them: added, forced, deleted, group choices, lists, quoted `=`, sweeps
CORPUS = [
    "+a.b=1",
    "~a",
    "~a=1",
    "++a=1",
    "a=[1,2]",
    "a=[1, 2]",
    "hydra/launcher=batched",
    "a='x=y'",
    'a="x=y"',
    "a=",
    "seed=1,2,3",
    "lr=range(1,3)",
    "optimizer.lr=choice(0.1,0.01)",
    "group@pkg=x",
    "+experiment=minatar_breakout",
    "logger=[tensorboard,csv]",
    "env.id=module:Env-v0",
    "a={b:1,c:2}",
    "a=1e5",
    "a=null",
    "a=${b}",
]


@pytest.mark.parametrize("override", CORPUS)
def test_the_key_and_value_are_what_hydras_parser_reads(override):
    from hydra.core.override_parser.overrides_parser import OverridesParser

    from rlrun.config.overrides import override_key, override_value, split

    parser = OverridesParser.create()
    parsed = parser.parse_override(override)
    assert override_key(override) == parsed.key_or_group + (f"@{parsed.package}" if parsed.package else "")
    assert (split(override)[1] is None) == (parsed.value_type is None)
    if parsed.value_type is not None:  # the value's text means what Hydra read (as typed: `[1, 2]` keeps its space)
        assert parser.parse_override(f"k={override_value(override)}").value() == parsed.value()


def test_values_are_the_overrides_with_a_value():
    from rlrun.config.overrides import override_values

    assert override_values(["+a=1", "~b", "c='x=y'", "a=2"]) == {"a": "2", "c": "'x=y'"}
