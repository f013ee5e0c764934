"""Run directories written before rlrun's modules moved into sub-packages still evaluate, resume and report:
their saved configs name `rlrun.networks.QNetwork`, which is now `rlrun.nets.QNetwork`."""

import json
import shutil
from pathlib import Path

import yaml
from entrypoints import in_process

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "saved_before_move"


def copy_of(name, tmp_path):
    out = tmp_path / name
    shutil.copytree(FIXTURE / name, out)
    return out


def test_the_fixture_names_the_old_module_paths():
    saved = yaml.safe_load((FIXTURE / "run" / ".hydra" / "config.yaml").read_text())
    assert saved["network"]["_target_"] == "rlrun.networks.QNetwork"


def test_a_run_from_before_the_move_evaluates_and_resumes(tmp_path):
    run = copy_of("run", tmp_path)
    proc = in_process("rlrun.evaluate", run, "episodes=2", rc=0)
    assert "mean return" in proc.stdout + proc.stderr
    in_process("rlrun.resume", run, "total_steps=3008", rc=0)
    summary = json.loads((run / "summary.json").read_text())
    assert summary["env_steps"] == 3008 and summary["status"] == "finished"


def test_a_batched_sweep_from_before_the_move_resumes_evaluates_and_reports(tmp_path):
    sweep = copy_of("sweep", tmp_path)
    in_process("rlrun.resume", sweep / ".batched" / "jobs0-1", "total_steps=3008", rc=0)
    for seed in (0, 1):
        assert json.loads((sweep / f"seed={seed}" / "summary.json").read_text())["env_steps"] == 3008
    in_process("rlrun.evaluate", sweep / "seed=1", "episodes=2", rc=0)
    in_process("rlrun.report", sweep, rc=0)
    assert (sweep / "report.md").exists()
