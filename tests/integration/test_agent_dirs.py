"""Agent directories and the batched launcher (issue 28): nothing on disk chooses where an agent writes, no
agent directory is another run's, and bad per-agent values or launcher settings get one line and exit 2.

One batched sweep of two jobs (a group `.batched/jobs0-1` with its joint checkpoint) is shared by the module;
each test works on a copy of it."""

import fcntl
import re

import pytest
import torch
from test_reliability import TINY, cli, copy_run, digest, in_process

from rlrun.storage import checkpoint as ckpt, rundir

GROUP = ".batched/jobs0-1"


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    """A finished batched sweep: jobs seed=0 and seed=1 trained as the two agents of one process."""
    where = tmp_path_factory.mktemp("sweeps") / "sweep"
    short_names = "hydra.job.config.override_dirname.exclude_keys=[" + ",".join(o.split("=")[0] for o in TINY) + "]"
    no_report = "~hydra.callbacks.report"  # the sweep report has tests of its own: seconds saved here
    cli(
        "rlrun.train",
        "-m",
        *TINY,
        "hydra/launcher=batched",
        "seed=0,1",
        short_names,
        no_report,
        f"hydra.sweep.dir={where}",
        rc=0,
    )
    assert (where / GROUP / ckpt.LATEST).exists()
    return where


def saved_dirs(group):
    return [a["dir"] for a in torch.load(group / ckpt.LATEST, weights_only=True)["config"]["agents"]]


def craft_dirs(group, dirs):
    """Point the group's checkpoints (both) at these agent dirs."""
    for name in (ckpt.LATEST, ckpt.PREVIOUS):
        state = torch.load(group / name, weights_only=True)
        for agent, d in zip(state["config"]["agents"], dirs):
            agent["dir"] = d
        torch.save(state, group / name)


def one_line_refusal(proc, says):
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert says in proc.stderr, proc.stderr


# --- 1. a batched group's checkpoint never decides where resume writes ---------------------------------


def test_job_dirs_are_stored_relative_to_the_group(sweep):
    assert saved_dirs(sweep / GROUP) == ["../../seed=0", "../../seed=1"]


def test_a_copied_sweep_resumes_into_its_own_job_dirs(sweep, tmp_path):
    copy = copy_run(sweep, tmp_path / "copy")
    before = digest(sweep)
    in_process("rlrun.resume", copy / GROUP, "total_steps=960", rc=0)
    assert digest(sweep) == before
    for job in ("seed=0", "seed=1"):
        rows = (copy / job / "episodes.csv").read_text().splitlines()
        assert len(rows) > len((sweep / job / "episodes.csv").read_text().splitlines())
        assert int(rows[-1].split(",")[0]) > 640  # the copy's own jobs went on


@pytest.mark.parametrize(
    "where", ["another run in the sweep", "swapped jobs", "outside", "outside, relative", "symlink"]
)
def test_a_checkpoint_pointing_an_agent_elsewhere_is_refused_and_changes_nothing(sweep, tmp_path, where):
    copy = copy_run(sweep, tmp_path / "copy")
    other = copy_run(sweep / "seed=1", copy / "other")  # a run of another config (seed 1) inside the sweep
    outside = tmp_path / "outside"
    dirs = {
        "another run in the sweep": ["../../other", "../../seed=1"],
        "swapped jobs": ["../../seed=1", "../../seed=0"],
        "outside": [str(outside), "../../seed=1"],
        "outside, relative": ["../../../outside", "../../seed=1"],
        "symlink": ["../../link", "../../seed=1"],
    }[where]
    if where == "symlink":  # a link to a copy of this very job: only the link is wrong
        (copy / "link").symlink_to(copy_run(sweep / "seed=0", tmp_path / "job0"), target_is_directory=True)
    craft_dirs(copy / GROUP, dirs)
    before, before_other = digest(copy), digest(other)
    job0 = digest(tmp_path / "job0") if where == "symlink" else None
    proc = in_process("rlrun.resume", copy / GROUP, "total_steps=960")
    one_line_refusal(proc, "agents[0].dir")
    assert digest(copy) == before and digest(other) == before_other
    assert not outside.exists()
    if job0 is not None:
        assert digest(tmp_path / "job0") == job0


def test_an_old_checkpoint_with_absolute_dirs_resumes_inside_its_sweep_only(sweep, tmp_path):
    """Checkpoints from before relative dirs hold absolute ones: kept where they lie inside the group's own
    sweep, refused where they name another sweep (a copied sweep's original)."""
    copy = copy_run(sweep, tmp_path / "copy")
    craft_dirs(copy / GROUP, [str(sweep / "seed=0"), str(sweep / "seed=1")])  # the original sweep's jobs
    before = digest(sweep)
    one_line_refusal(in_process("rlrun.resume", copy / GROUP, "total_steps=960"), "agents[0].dir")
    assert digest(sweep) == before
    craft_dirs(copy / GROUP, [str(copy / "seed=0"), str(copy / "seed=1")])
    in_process("rlrun.resume", copy / GROUP, "total_steps=960", rc=0)
    assert digest(sweep) == before
    assert int((copy / "seed=1" / "episodes.csv").read_text().splitlines()[-1].split(",")[0]) > 640


# --- 2. a new run never writes over a run through an agent dir ---------------------------------------


@pytest.mark.parametrize("form", ["absolute", "relative"])
def test_a_new_run_never_writes_over_a_run_through_an_agent_dir(sweep, tmp_path, form):
    other = copy_run(sweep / "seed=0", tmp_path / "other")
    before = digest(other)
    target = str(other) if form == "absolute" else "../other"
    proc = in_process(
        "rlrun.train", *TINY, f"agents=[{{seed:0,dir:'{target}'}},{{seed:1}}]", f"hydra.run.dir={tmp_path / 'new'}"
    )
    one_line_refusal(proc, "agents[0].dir")
    assert digest(other) == before
    assert not (tmp_path / "new").exists()


def test_a_group_run_dir_never_takes_a_finished_job_as_an_agent_dir(sweep, tmp_path):
    """Inside a sweep, agent dirs may name the sweep's job dirs, but only new ones or ones the launcher
    prepared for that agent, never one that holds a run, nor one reached through a link."""
    copy = copy_run(sweep, tmp_path / "copy")
    (copy / "link").symlink_to(tmp_path / "elsewhere", target_is_directory=True)
    before = digest(copy)
    for target, says in [("../../seed=0", "already holds a run"), ("../../link/job", "symlink")]:
        proc = in_process(
            "rlrun.train",
            *TINY,
            f"agents=[{{seed:0,dir:'{target}'}},{{seed:1,dir:'../../new1'}}]",
            f"hydra.run.dir={copy / '.batched' / 'jobs9-10'}",
        )
        one_line_refusal(proc, says)
        assert digest(copy) == before
    assert not (copy / ".batched" / "jobs9-10").exists() and not (tmp_path / "elsewhere").exists()


def test_agent_dirs_are_owned_for_the_run(compose, tmp_path, monkeypatch):
    """Each agent directory is locked by the process that trains it while it trains, as its run directory
    is, and released with it when `train` returns (a notebook that trained agents can resume them in a
    subprocess)."""
    from rlrun.run import train as train_in_process
    from rlrun.training.loop import Trainer

    out = tmp_path / "run"
    agents = (out / "seed=0", out / "mine")

    def locked(agent):
        with open(agent / rundir.LOCK_NAME, "a") as f:
            try:
                fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return True
            fcntl.flock(f.fileno(), fcntl.LOCK_UN)
            return False

    seen, run = {}, Trainer.run

    def run_and_look(self):
        seen.update({agent: locked(agent) for agent in agents})
        return run(self)

    monkeypatch.setattr(Trainer, "run", run_and_look)
    train_in_process(compose(*TINY, "agents=[{seed:0},{seed:1,dir:mine}]"), out)
    assert seen == {agent: True for agent in agents}
    assert [locked(agent) for agent in agents] == [False, False]
    assert not set(rundir.owned_paths()) & {out, *agents}


# --- 3. typos in agent values, 4. launcher settings: one line, exit 2, nothing written ----------------


@pytest.mark.parametrize(
    "entry, key",
    [("{seed:0,optimizer.lr:abc}", "agents[0].optimizer.lr"), ("{seed:0,algo.gamma:'0.99'}", "agents[0].algo.gamma")],
)
def test_a_mistyped_agent_value_is_refused_by_key(compose, tmp_path, entry, key):
    from rlrun.config.validate import validate
    from rlrun.errors import ConfigError

    with pytest.raises(ConfigError, match="^" + re.escape(f"Invalid config value {key}=")):
        validate(compose(f"agents=[{entry},{{seed:1}}]"))
    proc = in_process("rlrun.train", *TINY, f"agents=[{entry},{{seed:1}}]", f"hydra.run.dir={tmp_path / 'run'}")
    one_line_refusal(proc, key)
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("key", ["max_agents", "n_jobs"])
def test_batched_launcher_settings_below_one_are_refused(tmp_path, key):
    args = ["hydra/launcher=batched", f"hydra.launcher.{key}=0", "seed=0,1", f"hydra.sweep.dir={tmp_path / 's'}"]
    proc = in_process("rlrun.train", "-m", *TINY, *args)
    one_line_refusal(proc, f"hydra.launcher.{key}=0")
    assert not (tmp_path / "s").exists()
