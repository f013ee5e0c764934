"""One mistake, one answer: what `python -m rlrun.train` says of a bad command line is the same one line and
exit code 2 whether it would run, show its config (`--cfg`) or show Hydra's info (`--info`)."""

import pytest
from entrypoints import in_process

ENV_LINE = (
    "rlrun: Invalid config value env='nope': allowed one of acrobot, atari, cartpole, lunarlander, minatar, "
    "mountaincar, pendulum.\n"
)


@pytest.mark.parametrize("flags", [[], ["--cfg", "job"], ["--cfg", "all"], ["--info"], ["--info", "config"]])
def test_an_unknown_option_reads_the_same_with_cfg_and_info(tmp_path, flags):
    proc = in_process("rlrun.train", "env=nope", f"hydra.run.dir={tmp_path / 'run'}", *flags, cwd=tmp_path)
    assert proc.returncode == 2 and proc.stderr == ENV_LINE, proc.stderr
    assert list(tmp_path.iterdir()) == []


def test_cfg_still_shows_a_config_that_composes():
    proc = in_process("rlrun.train", "env=acrobot", "--cfg", "job")
    assert proc.returncode == 0 and "id: Acrobot-v1" in proc.stdout, proc.stderr


@pytest.mark.parametrize(
    "args, line",
    [
        (["total_steps=0", "total_steps=2000"], "total_steps is given twice (total_steps=0 and total_steps=2000)"),
        (["env=acrobot", "seed=1", "env=cartpole"], "env is given twice (env=acrobot and env=cartpole)"),
        (["algo.gamma=0.9", "+algo.gamma=0.8"], "algo.gamma is given twice (algo.gamma=0.9 and +algo.gamma=0.8)"),
        (["seed=1", "-m", "seed=2,3"], "seed is given twice (seed=1 and seed=2,3)"),
        (["total_steps=0", "total_steps=2000", "--cfg", "job"], "total_steps is given twice"),
    ],
)
def test_a_key_given_twice_is_refused_before_anything_is_written(tmp_path, args, line):
    proc = in_process("rlrun.train", *args, cwd=tmp_path)
    assert proc.returncode == 2 and proc.stderr.startswith(f"rlrun: Invalid config: {line}"), proc.stderr
    assert len(proc.stderr.splitlines()) == 1 and proc.stderr.endswith(": give it once\n"), proc.stderr
    assert list(tmp_path.iterdir()) == []


def test_keys_given_once_and_a_deletion_pass_the_check():
    from rlrun.config.overrides import given_twice

    assert given_twice(["total_steps=5", "algo.gamma=0.9", "network=dueling", "seed=0,1"]) is None
    assert given_twice(["~logger", "logger=csv"]) is None  # a deletion, then a value: Hydra's to read
