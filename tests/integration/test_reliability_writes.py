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


# --- PBT state in a checkpoint, checked as the rest of it ----------------------------------------------

PBT = ["seeds=4", "+pbt=truncation", "pbt.interval=320", "pbt.fitness=train", "network.hidden_sizes=[32]",
       "device=cpu", "logger=[csv]"]  # fmt: skip


@pytest.fixture(scope="module")
def pbt_run(tmp_path_factory):
    run = tmp_path_factory.mktemp("pbt") / "run"
    train(*PBT, f"hydra.run.dir={run}", rc=0)
    return run


def crafted(state, case):
    pbt = state["pbt"]
    lrs = pbt["values"]["optimizer.lr"]
    if case == "none":
        state["pbt"] = None
    elif case == "three values for four agents":
        pbt["values"]["optimizer.lr"] = lrs[:3]
    elif case == "strings":
        pbt["values"]["optimizer.lr"] = ["0.001"] * 4
    elif case in ("rng", "values"):
        del pbt[case]
    elif case == "events=5":
        pbt["events"] = 5
    elif case == "diverged=[99]":
        pbt["diverged"] = [99]
    elif case == "eval fitness of two":
        pbt["eval_fitness"] = [1.0, 2.0]
    elif case == "inherited strings":
        pbt["inherited"] = ["x"] * 4
    elif case == "events rows of 2":
        pbt["events"] = [row[:2] for row in pbt["events"]]
    elif case == "lr -1":
        pbt["values"]["optimizer.lr"] = [-1.0] * 4
    return state


@pytest.mark.parametrize(
    "case, says",
    [("none", "not the state of a run with +pbt"), ("three values for four agents", "values[optimizer.lr]"),
     ("strings", "values[optimizer.lr]"), ("rng", "no rng"), ("values", "no values"), ("events=5", "events hold 5"),
     ("diverged=[99]", "diverged is [99]"), ("eval fitness of two", "eval_fitness"), ("inherited strings", "inherited"),
     ("events rows of 2", "rows of 6 fields"), ("lr -1", "optimizer.lr's own rule")],
)  # fmt: skip
def test_a_crafted_pbt_state_is_refused_with_one_line_and_loses_no_record(pbt_run, tmp_path, case, says):
    import torch

    from rlrun.storage import checkpoint as ckpt

    run = copy_run(pbt_run, tmp_path / "run")
    state = torch.load(run / ckpt.LATEST, weights_only=True)
    torch.save(crafted(state, case), run / ckpt.LATEST)
    kept = {name: (run / name).read_bytes() for name in ("pbt.csv", ckpt.LATEST, ckpt.PREVIOUS, "summary.json")}
    proc = in_process("rlrun.resume", run, "total_steps=960", rc=2)
    assert "the checkpoint's PBT state does not fit this run" in proc.stderr and says in proc.stderr, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert {name: (run / name).read_bytes() for name in kept} == kept


def listing(path):
    """Every path under `path` (directories too) with its modification time and size: nothing written."""
    return {str(p.relative_to(path)): (p.stat().st_mtime_ns, p.stat().st_size) for p in sorted(path.rglob("*"))}


@pytest.mark.parametrize(
    "refused, args",
    [("crafted pbt state", ["total_steps=960"]), ("finished", []), ("bad override", ["seed=7"]),
     ("unknown key", ["nope=1"]), ("bad value", ["total_steps=foo"])],
)  # fmt: skip
def test_a_refused_resume_writes_nothing(pbt_run, tmp_path, refused, args):
    """Bad input is refused before anything is written: no `.hydra/resume_<time>/`, no log or csv touched."""
    import torch

    from rlrun.storage import checkpoint as ckpt

    run = tmp_path / "run"
    shutil.copytree(pbt_run, run)  # the lock file too: a resume of a run finds it there
    if refused == "crafted pbt state":
        state = torch.load(run / ckpt.LATEST, weights_only=True)
        torch.save(crafted(state, "diverged=[99]"), run / ckpt.LATEST)
    before = listing(run)
    for command in (("rlrun.resume", run), ("rlrun.train", f"resume={run}")):
        proc = in_process(*command, *args, rc=2)
        assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
        assert listing(run) == before, (command, proc.stderr)


def test_a_pbt_run_resumes_from_its_own_state(pbt_run, tmp_path):
    run = copy_run(pbt_run, tmp_path / "run")
    rows = (run / "pbt.csv").read_text().splitlines()
    in_process("rlrun.resume", run, "total_steps=960", rc=0)
    assert (run / "pbt.csv").read_text().splitlines()[: len(rows)] == rows


@pytest.mark.parametrize(
    "override, says",
    [("pbt.space.exploration.end={low: 0.5, high: 2.0}", "a range in exploration.end's [0.0, 1.0]"),
     ("pbt.space.algo.tau={low: 0.5, high: 5}", "a range in algo.tau's (0.0, 1.0]"),
     ("pbt.space.optimizer.lr={low: -1, high: 0.1, log: false}", "a range in optimizer.lr's a number > 0")],
)  # fmt: skip
def test_a_pbt_range_outside_its_keys_rule_is_refused(tmp_path, override, says):
    proc = in_process("rlrun.train", *PBT, override, cwd=tmp_path, rc=2)
    key = override.partition("=")[0]
    assert proc.stderr.startswith(f"rlrun: Invalid config value {key}=") and says in proc.stderr, proc.stderr
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("override", ["pbt.fraction=0.9", "pbt.space.optimizer.lr.high=1e30"])
def test_a_resume_that_changes_pbt_names_the_key(pbt_run, tmp_path, override):
    run = copy_run(pbt_run, tmp_path / "run")
    before = digest(run)
    for args in (("rlrun.resume", run, override), ("rlrun.train", f"resume={run}", override)):
        proc = in_process(*args, rc=2)
        key = override.partition("=")[0]
        assert proc.stderr.startswith(f"rlrun: Invalid config value {key}=") and "only the saved value" in proc.stderr
    assert digest(run) == before


# --- records appended after a torn line, and a run on a console that fails ------------------------------


def test_an_evaluation_after_a_torn_line_starts_a_line_of_its_own(finished_run, tmp_path):
    run = copy_run(finished_run, tmp_path / "run")
    (run / "evaluations.jsonl").write_text('{"episodes": 1}\n{"partial": tru')
    in_process("rlrun.evaluate", run, "episodes=1", rc=0)
    in_process("rlrun.evaluate", run, "episodes=2", rc=0)
    lines = [json.loads(line) for line in (run / "evaluations.jsonl").read_text().splitlines()]
    assert [r["episodes"] for r in lines] == [1, 1, 2]


@pytest.mark.parametrize("redirect", ["2>&-", ">&- 2>&-", "| head -1", "> /dev/full"])
def test_a_closed_full_or_broken_console_does_not_fail_a_run(tmp_path, redirect):
    """Start-up itself: a real subprocess, through a shell that closes or redirects its streams."""
    import shlex
    import subprocess
    import sys

    run = tmp_path / "run"
    shown = [a for a in TINY if not a.startswith("log.progress_bar")]  # the bar writes to stderr too
    args = " ".join(shlex.quote(a) for a in [*shown, "device=cpu", f"hydra.run.dir={run}"])
    command = f"{shlex.quote(sys.executable)} -m rlrun.train {args} {redirect}; echo rc=$? >&3"
    if redirect.startswith("|"):
        command = f"{{ {shlex.quote(sys.executable)} -m rlrun.train {args}; echo rc=$? >&3; }} {redirect} >/dev/null"
    proc = subprocess.run(["bash", "-c", f"exec 3>{tmp_path / 'rc'}; {command}"], capture_output=True, text=True)
    assert (tmp_path / "rc").read_text().strip() == "rc=0", proc.stderr[-3000:]
    assert "Logging error" not in proc.stderr and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    assert json.loads((run / "summary.json").read_text())["status"] == "finished"
    assert {"checkpoint.pt", "model.pt", "episodes.csv", "train.log"} <= {p.name for p in run.iterdir()}


def test_a_robust_search_goes_on_past_diverging_trials(tmp_path):
    """Every trial diverges (lr 1e30): each is recorded failed and scores robust's worst, 0.0, so the search ends
    with its results and report instead of Optuna's "No trials are completed yet"."""
    from test_reliability import cli

    pytest.importorskip("hydra_plugins.hydra_optuna_sweeper")
    sweep = tmp_path / "search"
    args = ["-m", "+hparams_search=robust", "seeds=2", "total_steps=400", "algo.learning_starts=100",
            "eval.interval=0", "hydra.sweeper.n_trials=2", "optimizer.lr=choice(1e30)", "device=cpu",
            f"hydra.sweep.dir={sweep}"]  # fmt: skip
    proc = cli("rlrun.train", *args, rc=0)
    assert "No trials are completed" not in proc.stderr
    assert "best_value: 0.0" in (sweep / "optimization_results.yaml").read_text()
    failed = [json.loads(p.read_text()) for p in sweep.rglob("summary.json")]
    assert len(failed) == 6 and all(s["status"] == "failed" for s in failed)  # 2 trials of 2 agents each
    assert (sweep / "report.md").exists()


@pytest.mark.parametrize("redirect", ["| head -1", "> /dev/full"])
def test_evaluate_saves_its_results_past_a_broken_or_full_console(finished_run, tmp_path, redirect):
    import shlex
    import subprocess
    import sys

    run = copy_run(finished_run, tmp_path / "run")
    command = f"{shlex.quote(sys.executable)} -m rlrun.evaluate {shlex.quote(str(run))} episodes=2"
    proc = subprocess.run(["bash", "-o", "pipefail", "-c", f"{command} {redirect}"], capture_output=True, text=True)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    assert json.loads((run / "evaluations.jsonl").read_text().splitlines()[-1])["episodes"] == 2


def test_the_resume_switch_never_marks_a_linked_run_failed(finished_run, tmp_path):
    """The whole command: a batched sweep whose job `seed=0` was replaced by a link to a finished run elsewhere,
    rerun with the resume switch, leaves that run as it was."""
    from test_reliability import cli

    sweep, elsewhere = tmp_path / "sweep", copy_run(finished_run, tmp_path / "elsewhere")
    args = ["-m", *TINY, "seed=0,1", "hydra/launcher=batched", "device=cpu", "network.hidden_sizes=[32]",
            f"hydra.sweep.dir={sweep}"]  # fmt: skip
    cli("rlrun.train", *args, rc=0)
    shutil.rmtree(sweep / "seed=0")
    (sweep / "seed=0").symlink_to(elsewhere, target_is_directory=True)
    (sweep / "seed=1" / "summary.json").unlink()  # the group is unfinished: it runs again
    before, names = digest(elsewhere), files_of(elsewhere)
    proc = cli("rlrun.train", *args, "hydra.launcher.resume=true", rc=0)
    assert "link" in proc.stderr
    assert digest(elsewhere) == before and files_of(elsewhere) == names


# a reader gone before the command writes (`| head -1` may not be yet), and a full disk
@pytest.mark.parametrize("redirect", ["| { exec 0<&-; sleep 0; }", "> /dev/full"], ids=["reader gone", "full"])
@pytest.mark.parametrize("command", ["compare --help", "doctor", "report {run} --out {tmp}/report", "export {run}"])
def test_every_command_ends_quietly_on_a_broken_or_full_console(finished_run, tmp_path, command, redirect):
    """rlrun.compare, doctor, report and export take the console guard as train, resume and evaluate do: the
    reader that leaves first (`| head -1` before anything is written) or a full disk is no traceback."""
    import shlex
    import subprocess
    import sys

    run = copy_run(finished_run, tmp_path / "run")
    args = command.format(run=shlex.quote(str(run)), tmp=shlex.quote(str(tmp_path)))
    shell = f"{shlex.quote(sys.executable)} -m rlrun.{args} {redirect}"
    proc = subprocess.run(["bash", "-o", "pipefail", "-c", shell], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
