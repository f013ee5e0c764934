"""Files are never written through links, and damaged files are named in one line (issue 28,
docs/reliability.md), checked without a run: rlrun.storage.rundir's writes, the logger, the sweep report. The
resumes and evaluations of real runs: tests/integration/test_files.py."""

import math

import pytest
from entrypoints import in_process
from omegaconf import OmegaConf
from test_report import make_run

from rlrun.logs.logger import RunLogger
from rlrun.report import write_report
from rlrun.storage import rundir
from rlrun.training.build import config_record

PRECIOUS = b"a file outside the run\n"


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
        RunLogger(tmp_path / "agent", config_record(OmegaConf.create({})), 100, None, False, resume_step=10, sinks=[])
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

    *warnings, written = proc.stderr.strip().splitlines()
    assert len(warnings) == 2 and written == f"rlrun.report: written into {sweep}", proc.stderr
    assert f"damaged job {not_json}: summary.json is not JSON" in warnings[0]
    assert f"damaged job {not_yaml}: config.yaml is not YAML" in warnings[1]
    text = (sweep / "report.md").read_text()
    assert "6 jobs (6 finished, 2 damaged and skipped)" in text
    assert f"## Damaged jobs (skipped)\n\n- `{not_json}`: summary.json is not JSON" in text
    assert f"- `{not_yaml}`: config.yaml is not YAML" in text
    assert f"## Jobs left out of the aggregates\n\n- `{nan_job}`: final_eval_return is nan, left out" in text
    assert " 300.0 [" in text  # the IQM of the five finite returns 100..500: (200 + 300 + 400) / 3


def test_the_report_names_curves_it_cannot_read(tmp_path):
    """A finished job whose episodes.csv holds a value that is no number: its curve is left out of curves.png,
    and report.md and stderr say so, one line each."""
    sweep = tmp_path / "sweep"
    for seed in range(3):
        make_run(sweep, 0.001, seed, 100.0 + seed, 50.0, None)
        rows = "env_step,episode,return,length\n" + "".join(f"{10 * i},{i},{i}.0,10\n" for i in range(1, 5))
        (sweep / "optimizer.lr=0.001" / f"seed={seed}" / "episodes.csv").write_text(rows)
    bad = sweep / "optimizer.lr=0.001" / "seed=1"
    (bad / "episodes.csv").write_text("env_step,episode,return,length\n10,1,ten,10\n")

    proc = in_process("rlrun.report", sweep, rc=0)

    *warnings, _ = proc.stderr.strip().splitlines()
    assert len(warnings) == 1 and f"left out the training curve of {bad}: episodes.csv" in warnings[0], proc.stderr
    text = (sweep / "report.md").read_text()
    assert f"## Curves left out (unreadable)\n\n- `{bad}` (training curve): episodes.csv" in text
    assert "3 jobs (3 finished)" in text  # the job itself counts
