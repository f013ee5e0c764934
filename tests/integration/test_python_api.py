"""`rlrun.run.train(cfg, out_dir)` from a script or notebook speaks as the command line does: its start and
progress lines through `logging` (on stdout where logging is not configured; silenced by the `rlrun`
logger's level), into the run's `train.log`, and its config in `.hydra/config.yaml`, so evaluate, resume and
`rlrun.load(model.pt)` treat the run as a command-line one. The last progress line shows the final evaluation."""

import logging
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

import rlrun
from rlrun.run import train

TINY = [
    "total_steps=640",
    "algo.learning_starts=100",
    "exploration.duration=300",
    "log.plot=false",
    "logger=[]",
    "log.progress_bar=false",
]
LINES = ["log.progress_interval=0", "log.interval=320", "eval.interval=320", "eval.episodes=2"]


def test_train_logs_its_lines_and_leaves_train_log_and_the_config(tmp_path, compose, caplog):
    caplog.set_level(logging.INFO, logger="rlrun")
    run = tmp_path / "run"
    summary = train(compose(*TINY, *LINES), run)
    messages = [r.getMessage() for r in caplog.records if r.name.startswith("rlrun")]
    assert messages[0] == f"rlrun: run {run} on cpu (1 thread)", messages
    progress = [m for m in messages if m.startswith("rlrun: step ")]
    assert len(progress) == 2, messages
    # the last line shows the evaluation the final block reports (it ran before the line)
    assert f"eval {summary['final_eval_return']:.1f}," in progress[-1], (progress, summary)
    log_text = (run / "train.log").read_text()
    assert "[rlrun.run][INFO] - rlrun: run " in log_text and progress[-1] in log_text
    config = yaml.safe_load((run / ".hydra" / "config.yaml").read_text())
    assert config["total_steps"] == 640
    assert rlrun.load(run / "model.pt")([[0.0, 0.0, 0.0, 0.0]]).shape == (1,)  # loads with its .hydra/, as a CLI run
    assert not logging.getLogger("rlrun").handlers  # the run's handlers are gone with it


def test_a_caller_silences_the_lines_with_the_rlrun_logger_level(tmp_path, compose, caplog):
    caplog.set_level(logging.INFO)
    logging.getLogger("rlrun").setLevel(logging.WARNING)
    try:
        train(compose(*TINY, *LINES), tmp_path / "run")
    finally:
        logging.getLogger("rlrun").setLevel(logging.NOTSET)
    assert not [r for r in caplog.records if r.name.startswith("rlrun")]
    assert (tmp_path / "run" / "train.log").exists()


# the documented import, in a fresh interpreter, either first or after the command's module (which it names)
@pytest.mark.parametrize("imports", ["from rlrun import train\n", "import rlrun.train\nfrom rlrun import train\n"])
def test_a_script_that_configures_no_logging_prints_the_lines(tmp_path, imports):
    script = (
        "import sys\n"
        "from hydra import compose, initialize_config_module\n"
        f"{imports}"
        "with initialize_config_module(config_module='rlrun.conf', version_base='1.3'):\n"
        f"    cfg = compose(config_name='config', overrides={TINY + LINES!r})\n"
        "train(cfg, sys.argv[1])\n"
    )
    run = tmp_path / "run"
    done = subprocess.run([sys.executable, "-c", script, str(run)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == f"rlrun: run {run} on cpu (1 thread)", done.stdout
    assert re.fullmatch(r"rlrun: step 640/640 \(100%\), .*", lines[-1]), done.stdout
    assert Path(run / "train.log").read_text().count("rlrun: step ") == 2
