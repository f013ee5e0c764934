"""Files are never written through links; damaged files a run appends to, and damaged jobs of a sweep, are
named in one line, never a traceback and never silently rewritten (issue 28, docs/reliability.md)."""

import json
import math

import pytest
from omegaconf import OmegaConf
from test_reliability import copy_run, digest, in_process, train
from test_report import make_run

from rlrun import rundir
from rlrun.logger import RunLogger
from rlrun.report import write_report

PRECIOUS = b"a file outside the run\n"


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory):
    """A finished run that also logs scalars.csv (logger=csv), shared by the tests of this module."""
    run = tmp_path_factory.mktemp("runs") / "run"
    train(f"hydra.run.dir={run}", "logger=[tensorboard,csv]", rc=0)
    return run


def outside_files(tmp_path, *names):
    """Files outside the run (in `tmp_path/outside/`), each holding PRECIOUS, to link to."""
    outside = tmp_path / "outside"
    outside.mkdir()
    for name in names:
        (outside / name).write_bytes(PRECIOUS)
    return outside


def assert_untouched(outside, names):
    assert sorted(p.name for p in outside.iterdir()) == sorted(names), "something appeared outside the run"
    for name in names:
        assert (outside / name).read_bytes() == PRECIOUS, f"{name} was written through its link"


# --- files written whole replace a link at their name -------------------------------------------------


def test_a_resume_replaces_linked_files_and_never_writes_through_them(finished_run, tmp_path):
    """Links within the run are allowed (a link out of it is refused, below): a file written whole replaces
    the link at its name, and the file the link pointed to keeps its bytes."""
    run = copy_run(finished_run, tmp_path / "run")
    names = ["returns.png", "summary.json", "model.pt"]
    kept = run / "kept"
    kept.mkdir()
    for name in names:
        (kept / name).write_bytes(PRECIOUS)
        (run / name).unlink(missing_ok=True)
        (run / name).symlink_to(kept / name)

    in_process("rlrun.resume", run, "total_steps=960", "log.plot=true", rc=0)

    assert_untouched(kept, names)
    for name in names:
        assert not (run / name).is_symlink()
    assert (run / "returns.png").read_bytes()[:4] == b"\x89PNG"
    assert json.loads((run / "summary.json").read_text())["env_steps"] == 960


def test_a_link_at_the_temporary_name_is_never_written_through(tmp_path):
    outside = outside_files(tmp_path, "target")
    (tmp_path / "summary.json.tmp").symlink_to(outside / "target")  # the old, predictable temporary name
    rundir.write_text(tmp_path / "summary.json", "{}\n")
    assert_untouched(outside, ["target"])
    assert (tmp_path / "summary.json").read_text() == "{}\n"


def test_a_file_appended_to_is_never_opened_through_a_link(tmp_path):
    outside = outside_files(tmp_path, "episodes.csv")
    (tmp_path / "agent").mkdir()
    (tmp_path / "agent" / "episodes.csv").symlink_to(outside / "episodes.csv")
    with pytest.raises(rundir.RunDirError, match="episodes.csv is a link"):
        rundir.open_append(tmp_path / "agent" / "episodes.csv")
    # An agent's directory of a batched group is not claimed by the resume: its logger checks it itself.
    with pytest.raises(rundir.RunDirError, match="never writes through a link"):
        RunLogger(tmp_path / "agent", OmegaConf.create({}), 100, None, False, resume_step=10, sinks=[])
    assert_untouched(outside, ["episodes.csv"])


def test_the_report_replaces_linked_outputs_and_never_writes_through_them(tmp_path):
    sweep = tmp_path / "sweep"
    for seed in range(2):
        make_run(sweep, 0.001, seed, 100.0 + seed, 50.0, None)
    names = ["report.md", "report.csv", "profile.png"]
    outside = outside_files(tmp_path, *names)
    for name in names:
        (sweep / name).symlink_to(outside / name)
    write_report(sweep, reps=100)
    assert_untouched(outside, names)
    assert (sweep / "report.md").read_text().startswith("# Sweep report") and not (sweep / "report.md").is_symlink()


# --- links that would lead a write out of the run are refused ---------------------------------------


@pytest.mark.parametrize(
    "name", [".hydra", "mlruns", "returns.png", "episodes.csv", "scalars.csv", "train.log", ".rlrun.lock"]
)
def test_a_resume_refuses_a_run_holding_a_link_it_would_write_through(finished_run, tmp_path, name):
    """A directory link leads every write inside it out of the run (`.hydra/resume_<time>/`, an MLflow
    store), a file link out of it may be opened in place by a backend; a file rlrun appends to or locks
    would be written, or truncated, through its link."""
    run = copy_run(finished_run, tmp_path / "run")
    outside = tmp_path / "outside"
    outside.mkdir()
    if (run / name).exists():  # the run's own file or directory, moved out and linked to
        (run / name).rename(outside / name)
    else:
        (outside / name).mkdir() if name == "mlruns" else (outside / name).write_bytes(PRECIOUS)
    (run / name).symlink_to(outside / name)
    before, before_outside = digest(run), digest(outside)

    proc = in_process("rlrun.resume", run, "total_steps=960", rc=2)

    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert f"{run / name} is a link" in proc.stderr and "never writes through a link" in proc.stderr
    assert digest(outside) == before_outside and sorted(p.name for p in outside.iterdir()) == [name]
    assert digest(run) == before


def test_evaluate_never_writes_videos_through_a_linked_videos_directory(finished_run, tmp_path):
    run = copy_run(finished_run, tmp_path / "run")
    outside = tmp_path / "outside"
    outside.mkdir()
    (run / "videos").symlink_to(outside)
    before = digest(run)
    proc = in_process("rlrun.evaluate", run, "episodes=1", "video=true", rc=2)
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert f"{run / 'videos'} is a link" in proc.stderr
    assert not list(outside.iterdir()) and digest(run) == before


def test_links_within_the_run_are_allowed_and_links_out_of_it_refused(tmp_path):
    run = tmp_path / "run"
    (run / "wandb" / "run-1").mkdir(parents=True)
    (run / "wandb" / "latest-run").symlink_to("run-1")  # what W&B makes in every run
    (run / "notes.txt").write_text("mine\n")
    (run / "returns.png").symlink_to(run / "notes.txt")  # replaced when written
    rundir.check_links(run)
    outside = outside_files(tmp_path, "target")
    (run / "wandb" / "run-1" / "videos").symlink_to(outside)
    with pytest.raises(rundir.RunDirError, match="videos is a link .* leads out of the run"):
        rundir.check_links(run)


# --- damaged CSV files a run appends to --------------------------------------------------------------


@pytest.mark.parametrize("name", ["episodes.csv", "scalars.csv"])
def test_a_resume_refuses_a_damaged_row_naming_its_line_and_changes_nothing(finished_run, tmp_path, name):
    run = copy_run(finished_run, tmp_path / "run")
    lines = (run / name).read_text().splitlines(keepends=True)
    lines.insert(3, "abc,1,2,3\n" if name == "episodes.csv" else "abc,charts/x,1.0\n")
    (run / name).write_text("".join(lines))
    before = digest(run)

    proc = in_process("rlrun.resume", run, "total_steps=960", rc=2)

    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert f"{run / name}, line 4: 'abc," in proc.stderr
    assert digest(run) == before, "a damaged file was rewritten or a resume record was left"


def test_kept_rows_drop_rows_past_the_step_and_an_unfinished_last_line(tmp_path):
    path = tmp_path / "episodes.csv"
    header = "env_step,episode,return,length\n"
    path.write_text(header + "10,1,10.0,10\n30,2,20.0,20\n50,3,2")  # the last line cut by a kill
    assert rundir.kept_rows(path, 30) == [header.strip(), "10,1,10.0,10", "30,2,20.0,20"]
    assert rundir.kept_rows(path, 10) == [header.strip(), "10,1,10.0,10"]
    for damaged, line in [("10,1,10.0,10\n1e3,2,1,1\n", 3), ("10,1,10.0\n", 2), ("10,1,1,1\n,\n", 3)]:
        path.write_text(header + damaged)
        with pytest.raises(rundir.RunDirError, match=f"episodes.csv, line {line}: "):
            rundir.kept_rows(path, 100)
    path.write_text("step,what\n")
    with pytest.raises(rundir.RunDirError, match=r"line 1: .* \(expected the header"):
        rundir.kept_rows(path, 100)


# --- a sweep report of damaged jobs ------------------------------------------------------------------


def test_the_report_names_damaged_jobs_and_jobs_left_out_of_the_iqm(tmp_path):
    sweep = tmp_path / "sweep"
    for seed, ev in enumerate([100.0, 200.0, 300.0, 400.0, 500.0]):
        make_run(sweep, 0.001, seed, ev, 50.0, None)
    make_run(sweep, 0.001, 5, math.nan, 50.0, None)  # NaN: json.dumps writes it, json.loads reads it back
    make_run(sweep, 0.001, 6, 1000.0, 50.0, None)
    make_run(sweep, 0.001, 7, 1000.0, 50.0, None)
    not_json = sweep / "optimizer.lr=0.001" / "seed=6"
    (not_json / "summary.json").write_text('{"status": "finished", "final_eval')  # cut by a full disk
    not_yaml = sweep / "optimizer.lr=0.001" / "seed=7"
    (not_yaml / ".hydra" / "config.yaml").write_text("seed: [7\nenv: {id: CartPole-v1\n")
    nan_job = sweep / "optimizer.lr=0.001" / "seed=5"

    proc = in_process("rlrun.report", sweep, rc=0)

    warnings = proc.stderr.strip().splitlines()
    assert len(warnings) == 2, proc.stderr
    assert f"damaged job {not_json}: summary.json is not JSON" in warnings[0]
    assert f"damaged job {not_yaml}: config.yaml is not YAML" in warnings[1]
    text = (sweep / "report.md").read_text()
    assert "6 jobs (6 finished, 2 damaged and skipped)" in text
    assert f"## Damaged jobs (skipped)\n\n- `{not_json}`: summary.json is not JSON" in text
    assert f"- `{not_yaml}`: config.yaml is not YAML" in text
    assert f"## Jobs left out of the aggregates\n\n- `{nan_job}`: final_eval_return is nan, left out" in text
    assert " 300.0 [" in text  # the IQM of the five finite returns 100..500: (200 + 300 + 400) / 3
