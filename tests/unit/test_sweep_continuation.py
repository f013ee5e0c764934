"""A sweep's continuation (rlrun.sweeps.continuation) read from its multirun.yaml: the command line that
continues it, the refusals, and the planned jobs the report counts."""

import pytest
import yaml

from rlrun.errors import ConfigError
from rlrun.sweeps.continuation import BASIC_SWEEPER, MARKER, continue_argv, planned_jobs

OPTUNA = "hydra_plugins.hydra_optuna_sweeper.optuna_sweeper.OptunaSweeper"
BATCHED = "hydra_plugins.rlrun_batched_launcher.batched_launcher.BatchedLauncher"


def sweep(tmp_path, task, hydra=(), sweeper=BASIC_SWEEPER, launcher="basic"):
    saved = {
        "hydra": {
            "sweep": {"dir": str(tmp_path), "subdir": "${rlrun_job_dir:}"},
            "sweeper": {"_target_": sweeper, "params": None},
            "launcher": {"_target_": launcher},
            "overrides": {"task": list(task), "hydra": ["hydra.mode=MULTIRUN", f"hydra.sweep.dir={tmp_path}", *hydra]},
            "job": {"config_name": "config", "config": {"override_dirname": {"exclude_keys": ["device"]}}},
        }
    }
    (tmp_path / "multirun.yaml").write_text(yaml.safe_dump(saved))
    return tmp_path


def test_the_planned_jobs_are_the_basic_sweepers_product_named_as_rlrun_names_them(tmp_path):
    s = sweep(tmp_path, ["optimizer.lr=1e-3,2e-3", "seed=0,1", "total_steps=600"])
    jobs = [p.relative_to(tmp_path).as_posix() for p in planned_jobs(s)]
    assert jobs == [f"optimizer.lr={lr}/seed={k}" for lr in ("0.001", "0.002") for k in (0, 1)]  # as Hydra writes them


def test_a_sampled_search_has_no_planned_jobs_and_is_not_continued(tmp_path):
    s = sweep(tmp_path, ["seed=0"], sweeper=OPTUNA)
    assert planned_jobs(s) is None
    with pytest.raises(ConfigError, match="chooses its trials as it goes"):
        continue_argv(s, [])


def test_the_continuation_reruns_the_same_sweep_into_its_directory(tmp_path):
    s = sweep(tmp_path, ["seed=0,1", "total_steps=600"], hydra=["hydra/launcher=joblib", "hydra.launcher.n_jobs=2"])
    argv = continue_argv(s, [])
    assert argv[:5] == ["-m", "seed=0,1", "total_steps=600", "hydra/launcher=joblib", "hydra.launcher.n_jobs=2"]
    assert "hydra.output_subdir=null" in argv  # each job writes Hydra's record once it goes on
    assert any(a.startswith(f"+hydra.job.env_set.{MARKER}=.hydra/resume_") for a in argv) and not any(
        a.startswith("hydra.sweep.dir") for a in argv
    )
    assert not any(a.startswith("hydra.mode") for a in argv)
    again = sweep(tmp_path, ["seed=0,1"], hydra=argv[3:], launcher=BATCHED)  # its own settings are not taken twice
    argv = continue_argv(again, [])
    assert argv[-1] == "hydra.launcher.resume=true" and not any(MARKER in a for a in argv)


@pytest.mark.parametrize(
    "overrides, hydra, message",
    [
        (["seed=3"], [], "a sweep continues as it was planned"),
        ([], ["hydra.callbacks.x._target_=os.system"], "chooses code"),
    ],
)
def test_a_continuation_takes_nothing_that_changes_the_sweep_or_chooses_code(tmp_path, overrides, hydra, message):
    s = sweep(tmp_path, ["seed=0,1"], hydra=hydra)
    with pytest.raises(ConfigError, match=message):
        continue_argv(s, overrides)


def test_a_module_env_id_is_imported_only_when_the_command_line_repeats_it(tmp_path):
    s = sweep(tmp_path, ["seed=0,1", "env.id=mypkg.envs:Foo-v0"])
    with pytest.raises(ConfigError, match="repeated on the command line"):
        continue_argv(s, [])
    assert "env.id=mypkg.envs:Foo-v0" in continue_argv(s, ["env.id=mypkg.envs:Foo-v0"])
