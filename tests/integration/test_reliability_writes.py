"""Nothing written through a link, over another run or outside the outputs; no record lost (docs/reliability.md):
a batched sweep's job directory or `.batched/` that is a link, a typed `exp_name` that is a path, the resume
switch on sweeps of one-job groups."""

import json
import shutil

import pytest
from omegaconf import OmegaConf
from test_reliability import TINY, copy_run, digest, in_process, train

from rlrun.storage import rundir
from rlrun.sweeps import batching


def job_configs(compose, seeds):
    return [OmegaConf.to_container(compose(*TINY, "device=cpu", f"seed={s}"), resolve=True) for s in seeds]


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory):
    run = tmp_path_factory.mktemp("runs") / "run"
    train(f"hydra.run.dir={run}", rc=0)
    return run


def files_of(path):
    return sorted(str(p.relative_to(path)) for p in path.rglob("*"))


# --- a batched sweep's directories that are links --------------------------------------------------------


def test_a_group_refused_for_a_linked_job_dir_writes_no_failure_record_through_it(compose, finished_run, tmp_path):
    """A job directory replaced by a link to a finished run elsewhere: the group is refused, its other job is
    marked failed in its own directory, and the linked run gets no error.txt or failed summary.json."""
    elsewhere = copy_run(finished_run, tmp_path / "elsewhere")
    before, names = digest(elsewhere), files_of(elsewhere)
    sweep = tmp_path / "sweep"
    (sweep / "seed=1").mkdir(parents=True)
    (sweep / "seed=0").symlink_to(elsewhere, target_is_directory=True)
    dirs = [str(sweep / "seed=0"), str(sweep / "seed=1")]
    assert batching.run_chunk(job_configs(compose, [0, 1]), dirs, str(sweep / ".batched" / "jobs0-1")) == [None, None]
    assert digest(elsewhere) == before and files_of(elsewhere) == names
    failed = json.loads((sweep / "seed=1" / "summary.json").read_text())
    assert failed["status"] == "failed" and "is a link" in failed["error"]
    assert not batching.finished([sweep / "seed=0"], sweep)  # a rerun does not take the linked run's summary


def test_a_one_job_group_never_empties_or_trains_into_a_linked_directory(compose, tmp_path):
    """A one-job group runs in the job's own directory: a link there to a user's folder is refused, untouched
    (an earlier attempt's leftovers are emptied, but never through a link)."""
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("mine")
    sweep = tmp_path / "sweep"
    sweep.mkdir()
    (sweep / "seed=0").symlink_to(mine, target_is_directory=True)
    group = str(sweep / ".batched" / "jobs0")
    assert batching.run_chunk(job_configs(compose, [0]), [str(sweep / "seed=0")], group) == [None]
    assert files_of(mine) == ["notes.txt"] and (mine / "notes.txt").read_text() == "mine"


def test_a_batched_dir_that_is_a_link_is_refused_not_resumed(compose, tmp_path):
    """`.batched/` linked to another sweep's group state: the resume switch refuses the sweep directory, and a
    group run under it writes nothing into the other sweep (no lock, no checkpoint, no summary)."""
    from rlrun.config import preflight

    other = tmp_path / "other" / ".batched"
    (other / "jobs0-1").mkdir(parents=True)
    (other / "jobs0-1" / "checkpoint.pt").write_bytes(b"the other sweep's")
    sweep = tmp_path / "sweep"
    sweep.mkdir()
    (sweep / ".batched").symlink_to(other, target_is_directory=True)
    names = files_of(other)
    argv = ["-m", "seed=0,1", "hydra/launcher=batched", "hydra.launcher.resume=true", f"hydra.sweep.dir={sweep}"]
    with pytest.raises(rundir.RunDirError, match=r"\.batched is a link"):
        preflight.plan(argv)
    dirs = [str(sweep / "seed=0"), str(sweep / "seed=1")]
    assert batching.run_chunk(job_configs(compose, [0, 1]), dirs, str(sweep / ".batched" / "jobs0-1")) == [None, None]
    assert files_of(other) == names and (other / "jobs0-1" / "checkpoint.pt").read_bytes() == b"the other sweep's"


# --- exp_name names one directory, as typed ------------------------------------------------------------


@pytest.mark.parametrize("name", ["../../../../X", "a/b/c", "${oc.env:HOME}", "my run", "x" * 81])
@pytest.mark.parametrize("multirun", [False, True])
def test_an_exp_name_that_is_not_a_plain_name_is_refused_before_anything_is_written(tmp_path, name, multirun):
    work = tmp_path / "work"
    work.mkdir()
    proc = in_process("rlrun.train", *(["-m", "seed=0,1"] if multirun else []), f"exp_name={name}", cwd=work, rc=2)
    assert proc.stderr.startswith("rlrun: Invalid config value exp_name=") and "letters, digits" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert list(tmp_path.rglob("*")) == [work]


def test_the_run_dir_resolver_keeps_exp_name_inside_one_name(compose):
    """Where a command skips the check (Hydra's app called directly), the name is made safe as a swept value is."""
    from rlrun.config.runnames import check_exp_name

    check_exp_name("dqn_minatar_paper")
    check_exp_name(None)
    cfg = compose("exp_name=../../X")
    assert OmegaConf.select(cfg, "exp_name") == "../../X"
    resolved = OmegaConf.create({"e": "../../X", "d": "out/${rlrun_exp_name:${e},dqn}"})
    assert resolved.d == "out/..-..-X"


# --- the resume switch on every sweep of the batched launcher ------------------------------------------


def test_the_resume_switch_continues_a_sweep_of_one_job_groups(tmp_path):
    """max_agents=1: every group is one job, trained in its own directory. A job the sweep did not finish (its
    summary missing, as SIGKILL leaves it) is continued by the resume switch, not refused for lack of .batched/."""
    from test_reliability import cli

    sweep = tmp_path / "sweep"
    args = ["seed=0,1", "hydra/launcher=batched", "hydra.launcher.max_agents=1", "device=cpu",
            "network.hidden_sizes=[32]", f"hydra.sweep.dir={sweep}"]  # fmt: skip
    cli("rlrun.train", "-m", *TINY, *args, rc=0)
    job = sweep / "seed=0"
    assert (sweep / ".batched").is_dir() and (job / "checkpoint.pt").exists()
    (job / "summary.json").unlink()  # killed before its summary: the rerun continues it from its checkpoint
    proc = cli("rlrun.train", "-m", *TINY, *args, "hydra.launcher.resume=true", rc=0)
    assert json.loads((job / "summary.json").read_text())["status"] == "finished", proc.stderr[-2000:]
    shutil.rmtree(sweep)
