"""`python -m rlrun.compare` end to end on CartPole with tiny budgets: bad input refused before anything is
written, two rounds of two paired seeds (the solved metric is all-zero at such budgets: these test the
machinery), existing folders decided without training, and an interrupted comparison continued by
rerunning its command without training its finished round again; and the arms composed with presets
and experiments (every check before anything is written)."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from entrypoints import in_process

COMMAND = [sys.executable, "-m", "rlrun.compare"]


@pytest.mark.parametrize(
    "args, message",
    [
        (["A=", "B=network=nope"], "arm B (network=nope): Invalid config"),
        (["A=", "B=", "optimizer.lrr=1"], "no key optimizer.lrr in the config (did you mean optimizer.lr?)"),
        (["A=.", "B=nope/runs"], "B=nope/runs: no such folder (A is a folder of runs)"),
        (["A=", "B=."], "A and B are both folders of runs or both overrides, not one of each"),
        (["A=.", "B=network=dueling"], "A and B are both folders of runs or both overrides, not one of each"),
        (["A=", "B=", "metric=speed"], "metric=speed: allowed solved, steps, final, auc"),
        (["A=total_steps=1000", "B=", "metric=steps"], "metric=steps needs one budget for both arms"),
        (["A=", "B=", "seeds=10", "max_seeds=5"], "max_seeds=5: at least seeds=10"),
        (["A=", "B=seed=3"], "the comparison chooses the seeds"),
        (["A=", "B=", "lr=0.1,0.2"], "is a sweep"),
        (["A=", "B=", "hydra.run.dir=x"], "not in a comparison"),
        (["A=network=dueling"], "B= is missing"),
        (["A=", "B=", "name=" + "x" * 300], "name=xxx"),  # was an OSError traceback (File name too long)
        (["A=", "B=", "name=my run"], "name=my run: one folder name of letters"),
        (["A=", "B=", "dir=" + "y" * 300], "a name may have 255"),
        (["A=", "B=exp_name=../x"], "Invalid config value exp_name='../x'"),  # was refused by round 1's run
        (["A=", "B=+pbt=truncation"], "arm B (+pbt=truncation): population-based training"),
        (["A=", "B=", "+pbt=truncation"], "arm A (the defaults): population-based training"),
        (["A=", "B=algo.double=true"], "A and B compose the same config"),  # was 100 seeds of the same run twice
        (["A=nope", "B="], "'nope' is not an override (key=value), nor an existing folder of runs"),
    ],
)
def test_bad_input_is_one_line_exit_2_and_nothing_written(tmp_path, args, message):
    proc = in_process("rlrun.compare.cli", *args, cwd=tmp_path, rc=2)
    assert message in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert not any(tmp_path.iterdir())  # not even outputs/compare/


def test_a_folder_that_cannot_be_made_is_one_line_exit_4(tmp_path):
    proc = in_process(
        "rlrun.compare.cli", "A=", "B=algo.double=false", "dir=/proc/rlrun_cannot_be_here", cwd=tmp_path, rc=4
    )
    assert "cannot write" in proc.stderr and "/proc/rlrun_cannot_be_here" in proc.stderr, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr


def fake_runs(folder, returns, total_steps="100"):
    """Finished runs as the report reads them (a composed config, a summary), one per seed."""
    for seed, value in enumerate(returns):
        run = folder / f"seed={seed}"
        (run / ".hydra").mkdir(parents=True)
        config = f"seed: {seed}\ntotal_steps: {total_steps}\nenv:\n  id: CartPole-v1\n"
        (run / ".hydra" / "config.yaml").write_text(config)
        summary = {"status": "finished", "final_mean_return_100": value, "reward_threshold": 475.0}
        (run / "summary.json").write_text(json.dumps(summary))
    return folder


def test_folders_compared_into_a_folder_that_cannot_be_made_give_the_verdict_and_one_line(tmp_path):
    a, b = fake_runs(tmp_path / "a", [10.0, 11.0]), fake_runs(tmp_path / "b", [12.0, 13.0])
    args = [f"A={a}", f"B={b}", "metric=final", "dir=/proc/rlrun_cannot_be_here"]
    proc = in_process("rlrun.compare.cli", *args, cwd=tmp_path, rc=4)
    assert "undecided after 2 paired seeds" in proc.stdout, proc
    assert "cannot write" in proc.stderr and "Traceback" not in proc.stderr, proc.stderr


def test_folders_whose_configs_hold_a_budget_that_is_no_number_are_still_compared(tmp_path):
    """The budget only shows in compare.md: a crafted `total_steps` is left out of it, not a ValueError."""
    a, b = fake_runs(tmp_path / "a", [10.0, 11.0], total_steps="abc"), fake_runs(tmp_path / "b", [12.0, 13.0])
    proc = in_process("rlrun.compare.cli", f"A={a}", f"B={b}", "metric=final", f"dir={tmp_path / 'out'}", rc=0)
    assert "undecided after 2 paired seeds" in proc.stdout and "Traceback" not in proc.stderr, proc
    assert "budgets (total_steps): A [], B [100]" in (tmp_path / "out" / "compare.md").read_text()


def test_a_run_whose_seed_is_no_integer_is_left_out_not_paired(tmp_path):
    """`seed: true` in a crafted config is no seed 1 (as the report reads it): that run is left out."""
    from rlrun.compare.arms import read_arm

    folder = fake_runs(tmp_path / "a", [10.0, 11.0])
    config = folder / "seed=0" / ".hydra" / "config.yaml"
    config.write_text(config.read_text().replace("seed: 0", "seed: true"))
    table = read_arm("A", folder)
    assert table.index.tolist() == [1] and table.attrs["left_out"] == [
        f"{folder / 'seed=0'}: no seed in .hydra/config.yaml"
    ]


def test_a_run_whose_env_id_is_no_string_is_compared_as_text(tmp_path):
    """A crafted `env.id: [1]` is another env (refused in one line), not an unhashable-list traceback."""
    a, b = fake_runs(tmp_path / "a", [10.0, 11.0]), fake_runs(tmp_path / "b", [12.0, 13.0])
    config = a / "seed=0" / ".hydra" / "config.yaml"
    config.write_text(config.read_text().replace("id: CartPole-v1", "id: [1]"))
    proc = in_process("rlrun.compare.cli", f"A={a}", f"B={b}", "metric=final", f"dir={tmp_path / 'out'}", rc=2)
    assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr, proc.stderr


def compare(*args, cwd, **kwargs):
    return subprocess.run([*COMMAND, *map(str, args)], cwd=cwd, capture_output=True, text=True, **kwargs)


def mtimes(folder):
    return {p: p.stat().st_mtime_ns for p in folder.rglob("summary.json")}


@pytest.mark.slow  # four training processes, ~40 s on two cores
def test_two_rounds_of_two_paired_seeds_then_the_folders_again(tmp_path):
    args = ["A=", "B=algo=mdqn", "seeds=2", "max_seeds=4", "seed=100", "total_steps=1000", "dir=out"]
    proc = compare(*args, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.startswith("undecided after 4 paired seeds (the budget): 0/4 (B) against 0/4 (A) reached 475")
    assert proc.stdout.strip().endswith("4 paired seeds, 2 rounds")
    out = tmp_path / "out"
    for arm in ("A", "B"):
        assert sorted(p.name for p in (out / arm).iterdir()) == ["seeds100-101", "seeds102-103"]
        assert json.loads((out / arm / "seeds102-103" / "summary.json").read_text())["seeds"] == [102, 103]
    assert (out / "curves.png").stat().st_size > 0
    rows = (out / "compare.csv").read_text().splitlines()
    assert rows[0].startswith("seed,a_job,a_solved") and [r.split(",")[0] for r in rows[1:]] == [
        "100",
        "101",
        "102",
        "103",
    ]
    md = (out / "compare.md").read_text()
    assert "| 2 | 4 | 0 | 0 | 0 | 0 | 1 | 1 | p <= 0.05 |" in md  # the second look
    assert "python -m rlrun.train algo=mdqn total_steps=1000 seed=102 seeds=2 hydra.run.dir=out/B/seeds102-103" in md

    before = mtimes(out)
    again = compare(*args, cwd=tmp_path)  # the same command: everything is read again, nothing trained
    assert again.returncode == 0 and again.stdout == proc.stdout
    assert "rlrun.train" not in again.stderr.replace("python -m rlrun.train", "")  # no round started
    assert mtimes(out) == before

    other = compare(*[a.replace("max_seeds=4", "max_seeds=6") for a in args], cwd=tmp_path)  # another plan there
    assert other.returncode == 2 and "holds a comparison with other settings (max_seeds differ" in other.stderr

    folders = compare("A=out/A", "B=out/B", "metric=final", "dir=again", cwd=tmp_path)
    assert folders.returncode == 0, folders.stderr[-3000:]
    assert folders.stdout.startswith("undecided after 4 paired seeds: final return")
    assert "paired sign-flip p = " in folders.stdout and "(level 0.05; the test decides" in folders.stdout
    assert mtimes(out) == before
    assert (tmp_path / "again" / "compare.md").exists()


@pytest.mark.slow  # ~60 s on two cores
def test_an_interrupted_comparison_continues_where_it_stopped(tmp_path):
    """Stopped by SIGTERM while arm A's second round trains: it checkpoints, the comparison exits 75 with
    the command to rerun; the rerun reads round 1 as it is, resumes A's round 2 and trains B's."""
    args = ["A=", "B=algo=mdqn", "seeds=2", "max_seeds=4", "total_steps=30000", "checkpoint.every=2000", "dir=out"]
    out = tmp_path / "out"
    proc = subprocess.Popen([*COMMAND, *args], cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)  # fmt: skip
    deadline = time.monotonic() + 240
    while not (out / "A" / "seeds2-3" / "checkpoint.pt").exists():
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()[1][-3000:]
        time.sleep(0.05)
    round_one = mtimes(out)
    assert len(round_one) == 6  # both arms' round 1: the run's summary and its two agents'
    os.kill(proc.pid, signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 75, err[-3000:]
    assert (
        "rlrun.compare: stopped by SIGTERM; rerun the same command to continue (it resumes the round's run "
        "itself): python -m rlrun.compare A=" in err
    )
    assert not (out / "A" / "seeds2-3" / "summary.json").exists() and not (out / "B" / "seeds2-3").exists()

    again = compare(*args, cwd=tmp_path)
    assert again.returncode == 0, again.stderr[-3000:]
    assert f"arm A, seeds 0-1: finished in {out / 'A' / 'seeds0-1'}".replace(str(tmp_path) + "/", "") in again.stderr
    assert "arm A, seeds 2-3: python -m rlrun.resume out/A/seeds2-3" in again.stderr
    assert "arm B, seeds 2-3: python -m rlrun.train algo=mdqn" in again.stderr
    assert {p: t for p, t in mtimes(out).items() if p in round_one} == round_one  # round 1 not retrained
    assert again.stdout.startswith("undecided after 4 paired seeds (the budget)") or " better than " in again.stdout
    assert len((out / "compare.csv").read_text().splitlines()) == 5


def test_a_verdict_written_to_a_full_disk_fails_the_command(tmp_path):
    """`> /dev/full`: the verdict, the command's answer, cannot be shown: exit 4 and one line on stderr (before:
    exit 0, the verdict dropped). The report is written all the same."""
    a, b = fake_runs(tmp_path / "a", [10.0, 11.0]), fake_runs(tmp_path / "b", [12.0, 13.0])
    with open("/dev/full", "w") as full:
        proc = subprocess.run([*COMMAND, f"A={a}", f"B={b}", "metric=final", f"dir={tmp_path / 'out'}"],
                              cwd=tmp_path, stdout=full, stderr=subprocess.PIPE, text=True)  # fmt: skip
    assert proc.returncode == 4, proc.stderr
    assert "rlrun.compare: cannot write the verdict to stdout (No space left on device); it heads " in proc.stderr
    assert "Traceback" not in proc.stderr and (tmp_path / "out" / "compare.md").is_file()


def test_the_arms_compose_with_presets_and_experiments_before_anything_is_written(tmp_path, monkeypatch):
    """`prepare` composes and checks both arms as `rlrun.train` would, normalises what the run's
    overrides.yaml will record (1e4 -> 10000), names the folder after the env and the arms, writes nothing."""
    from rlrun.compare.args import BadInput
    from rlrun.compare.run import prepare

    monkeypatch.chdir(tmp_path)
    own = {"A": "+experiment=rainbow", "B": "+experiment=rainbow optimizer.lr=1e-3", "seeds": "4",
           "max_seeds": "8", "seed": "7000"}  # fmt: skip
    job = prepare(own, ["env=acrobot", "total_steps=1e4"], "final", 0.05, "python -m rlrun.compare ...")
    assert job.plan.a == ["+experiment=rainbow"] and job.plan.b == ["+experiment=rainbow", "optimizer.lr=1e-3"]
    assert job.plan.common == ["env=acrobot", "total_steps=10000"]
    assert job.plan.rounds() == [(7000, 4), (7004, 4)] and job.threshold == -100.0  # Acrobot-v1's
    assert job.root == Path(
        "outputs/compare/Acrobot-v1__+experiment-rainbow__vs__+experiment-rainbow_optimizer.lr-1e-3"
    )
    assert not any(tmp_path.iterdir())
    with pytest.raises(BadInput, match="env is set both by B and by the shared overrides"):
        prepare({**own, "B": "env=cartpole"}, ["env=acrobot"], "final", 0.05, "")
    with pytest.raises(BadInput, match="different envs"):
        prepare({**own, "A": "env=acrobot", "B": "env=cartpole"}, [], "final", 0.05, "")
    with pytest.raises(BadInput, match="metric=solved needs a reward threshold, and Pendulum-v1 has none"):
        prepare({**own, "A": "", "B": ""}, ["env=pendulum", "env.reward_threshold=null"], "solved", 0.05, "")
    with pytest.raises(BadInput, match="A and B compose the same config"):  # algo.double=true is the default
        prepare({**own, "A": "", "B": "algo.double=true"}, [], "final", 0.05, "")
    # the last round's seeds too (before: the first round's only, so that a later round failed after training)
    with pytest.raises(BadInput, match=r"seed=4294967290: at most 4294967288 with max_seeds=8"):
        prepare({**own, "seed": "4294967290"}, [], "final", 0.05, "")
    assert not any(tmp_path.iterdir())
