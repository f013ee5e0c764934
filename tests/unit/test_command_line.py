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
