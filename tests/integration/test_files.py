"""Files are never written through links; damaged files a run appends to are named in one line, never a
traceback and never silently rewritten (issue 28, docs/reliability.md): resumes and evaluations of a real
run. The same without a run (rlrun.storage.rundir, the logger, the sweep report): tests/unit/test_files_checks.py."""

import json

import pytest
from test_files_checks import PRECIOUS, assert_untouched
from test_reliability import copy_run, digest, in_process, train


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory):
    """A finished run that also logs scalars.csv (logger=csv), shared by the tests of this module."""
    run = tmp_path_factory.mktemp("runs") / "run"
    train(f"hydra.run.dir={run}", "logger=[tensorboard,csv]", rc=0)
    return run


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
