"""The benchmark scripts' own logic (scripts/): what they hand to the processes they time, and their maths."""

import json
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))

from benchlib import atari  # noqa: E402


def test_the_atari_env_alone_child_keeps_the_callers_pythonpath(monkeypatch, tmp_path):
    """An offline GPU machine carries gymnasium and ale-py on PYTHONPATH: the child must still see them."""
    seen = {}

    def fake_run(cmd, **kwargs):
        seen.update(kwargs["env"])
        out = json.dumps({"wall": 1.0, "sps": 8.0, "cpu_sps": 8.0})
        return subprocess.CompletedProcess(cmd, 0, stdout=out + "\n", stderr="")

    monkeypatch.setenv("PYTHONPATH", "/carried/site")
    monkeypatch.setattr(atari.subprocess, "run", fake_run)
    run = atari.env_alone(tmp_path, 8, 10, {})
    assert seen["PYTHONPATH"].split(":") == [str(tmp_path), "/carried/site"]
    assert run.wall == 1.0


def test_a_failing_env_alone_child_shows_its_error(monkeypatch, tmp_path):
    def fake_run(cmd, **kwargs):
        return subprocess.CompletedProcess(cmd, 1, stdout="", stderr="ModuleNotFoundError: No module named 'ale_py'")

    monkeypatch.setattr(atari.subprocess, "run", fake_run)
    try:
        atari.env_alone(tmp_path, 8, 10, {})
    except SystemExit as stop:
        assert "No module named 'ale_py'" in str(stop)
    else:
        raise AssertionError("a failed child must stop the bench")


def test_pbt_bench_curves_are_each_agents_100_episode_mean_at_the_grid(tmp_path):
    import math

    import pbt_bench

    agent = tmp_path / "run" / "seed=0"
    agent.mkdir(parents=True)
    rows = [(10 * (i + 1), float(i)) for i in range(150)]  # episode i ends at step 10(i+1) with return i
    agent.joinpath("episodes.csv").write_text(
        "env_step,episode,return,length\n" + "".join(f"{s},{i + 1},{r},10\n" for i, (s, r) in enumerate(rows))
    )
    [curve] = pbt_bench.curves(tmp_path / "run", [5, 10, 25, 1000, 1500, 99999])
    assert math.isnan(curve[0])  # before the first episode
    assert curve[1:3] == [0.0, 0.5]  # returns 0 and 0, 1
    assert curve[3] == sum(range(100)) / 100  # the first 100 episodes: 49.5
    assert curve[4] == curve[5] == sum(range(50, 150)) / 100  # the last 100: 99.5


def test_minatar_scores_are_normalised_by_the_paper_dqns_5m_value_per_game(tmp_path):
    import minatar_bench

    def agent(label, game, seed, returns, every):
        d = tmp_path / f"{label}__{game}__seeds2" / f"seed={seed}"
        d.mkdir(parents=True)
        lines = "".join(f"{every * (i + 1)},{i + 1},{r},{every}\n" for i, r in enumerate(returns))
        d.joinpath("episodes.csv").write_text("env_step,episode,return,length\n" + lines)

    agent("x", "Breakout", 0, [10.0] * 100 + [20.0] * 100, 5000)  # 1M frames: the last 100 returns are 20
    agent("x", "Breakout", 1, [5.0] * 200, 5000)
    agent("x", "SpaceInvaders", 0, [43.0] * 40, 24000)  # its last game ends at 960,000: within 5% of 1M
    agent("x", "SpaceInvaders", 1, [86.0] * 30, 24000)  # ends at 720,000: no value at 1M
    (tmp_path / "x__Breakout__seeds2").rename(tmp_path / "x__Breakout__seeds2.stopped-1")  # set aside by `learn`
    agent("x", "Breakout", 0, [10.0] * 100 + [20.0] * 100, 5000)  # 1M frames: the last 100 returns are 20
    agent("x", "Breakout", 1, [5.0] * 200, 5000)
    scores = minatar_bench.normalised_scores(tmp_path, 1_000_000)
    assert scores["x"]["Breakout"] == [20.0 / 10.0, 5.0 / 10.0]  # the paper DQN's 5M Breakout value: 10
    assert scores["x"]["SpaceInvaders"] == [43.0 / 43.0, None]


def test_minatar_pairs_are_the_games_and_seeds_both_settings_scored(tmp_path):
    import minatar_bench

    scores = {("a", "Breakout", 10): 1.0, ("b", "Breakout", 10): 1.5, ("a", "Breakout", 11): 2.0,
              ("b", "Breakout", 12): 9.0, ("a", "Asterix", 10): 0.5, ("b", "Asterix", 10): 0.25,
              ("a", "Seaquest", 10): None, ("b", "Seaquest", 10): 3.0, ("c", "Breakout", 11): 7.0}  # fmt: skip
    pairs = minatar_bench.paired_differences(scores, "a", "b")
    assert pairs == [("Asterix", 10, 0.5, 0.25), ("Breakout", 10, 1.0, 1.5)]  # in the games' order, then seeds


def test_preset_seeds_waits_for_the_process_that_owns_a_chunk(tmp_path, capsys):
    """Two preset_seeds filling one --keep folder: a chunk the other is training is waited for, not resumed
    beside it (which rlrun refuses as in use)."""
    import threading
    import time

    from filelock import FileLock
    from preset_seeds import wait_for_owner

    from rlrun.storage.rundir import LOCK_NAME

    wait_for_owner(tmp_path / "absent")  # nothing there: returns at once
    held, released = threading.Event(), []

    def own_for_a_while():  # another process's run, as a thread of this one
        with FileLock(str(tmp_path / LOCK_NAME)):
            held.set()
            time.sleep(0.3)
            released.append(time.monotonic())

    threading.Thread(target=own_for_a_while).start()
    held.wait()
    wait_for_owner(tmp_path)
    assert released and time.monotonic() >= released[0]
    assert "waiting for it to end" in capsys.readouterr().err
    wait_for_owner(tmp_path)  # free now: no wait, no message
    assert capsys.readouterr().err == ""


def test_preset_seeds_puts_a_single_chunk_in_its_chunk_folder(tmp_path, monkeypatch):
    """With --per-process, every process's agents go to root/<variant>/seeds<a>-<b>, a single chunk too: so
    `--seeds 10 --first 7090 --per-process 10` fills the top chunk of a folder that a `--seeds 100
    --per-process 10` run fills from the bottom (it trained in root/<variant> itself before, which rlrun
    refused as a run directory holding other runs). Without --per-process all agents run in root/<variant>."""
    import preset_seeds

    outs = []

    def fake_process(name, first, seeds, out):
        outs.append(out.relative_to(tmp_path).as_posix())
        return {"agents": {str(s): {} for s in range(first, first + seeds)}}, 1.0

    monkeypatch.setattr(preset_seeds, "run_process", fake_process)
    merged, wall = preset_seeds.run_preset("iqn", 7090, 10, tmp_path, 10)
    assert outs == ["iqn/seeds7090-7099"] and wall == 1.0
    assert merged["dirs"]["7090"] == tmp_path / "iqn" / "seeds7090-7099" / "seed=7090"
    preset_seeds.run_preset("iqn", 7000, 25, tmp_path, 10)
    assert outs[1:] == ["iqn/seeds7000-7009", "iqn/seeds7010-7019", "iqn/seeds7020-7024"]
    preset_seeds.run_preset("iqn", 7000, 25, tmp_path, None)
    assert outs[4:] == ["iqn"]


def test_minatar_learn_sets_aside_a_run_that_stopped_before_its_first_checkpoint(tmp_path, monkeypatch):
    import minatar_bench

    stopped = tmp_path / "rainbow__Seaquest__seeds3"
    (stopped / "seed=0").mkdir(parents=True)
    (stopped / "train.log").write_text("stopped at 30k frames\n")
    resumable = tmp_path / "rainbow__Breakout__seeds3"
    resumable.mkdir()
    (resumable / "checkpoint.pt").write_bytes(b"")
    commands = []
    monkeypatch.setattr(subprocess, "run", lambda cmd: commands.append(cmd) or SimpleNamespace(returncode=0))
    args = SimpleNamespace(
        root=str(tmp_path), games=["Seaquest", "Breakout"], setting="rainbow", seeds=3, first_seed=0, frames=1000
    )
    minatar_bench.learn(args)
    aside = tmp_path / "rainbow__Seaquest__seeds3.stopped-1"
    assert (aside / "train.log").read_text() == "stopped at 30k frames\n"
    assert not stopped.exists()
    assert "rlrun.train" in commands[0] and f"hydra.run.dir={stopped}" in commands[0]
    assert commands[1][-2:] == ["rlrun.resume", str(resumable)]


def test_minatar_learn_skips_a_game_another_process_is_training(tmp_path, monkeypatch):
    import minatar_bench
    from filelock import FileLock

    from rlrun.storage.rundir import LOCK_NAME

    live = tmp_path / "mdqn__Seaquest__seeds3"
    live.mkdir()
    commands = []
    monkeypatch.setattr(subprocess, "run", lambda cmd: commands.append(cmd) or SimpleNamespace(returncode=0))
    args = SimpleNamespace(root=str(tmp_path), games=["Seaquest"], setting="mdqn", seeds=3, first_seed=0, frames=1000)
    with FileLock(str(live / LOCK_NAME), timeout=0):  # as the training process holds it
        minatar_bench.learn(args)
    assert commands == [] and live.is_dir() and not list(tmp_path.glob("*.stopped-*"))
    minatar_bench.learn(args)  # once it is free: set aside (no checkpoint) and started anew
    assert len(commands) == 1 and (tmp_path / "mdqn__Seaquest__seeds3.stopped-1").is_dir()


def test_minatar_learn_keeps_another_set_of_seeds_in_its_own_folder(tmp_path, monkeypatch):
    import minatar_bench

    finished = tmp_path / "preset__Breakout__seeds3"  # seeds 0-2, finished
    finished.mkdir()
    (finished / "summary.json").write_text("{}")
    commands = []
    monkeypatch.setattr(subprocess, "run", lambda cmd: commands.append(cmd) or SimpleNamespace(returncode=0))
    args = SimpleNamespace(
        root=str(tmp_path), games=["Breakout"], setting="preset", seeds=3, first_seed=10, frames=1000
    )
    minatar_bench.learn(args)  # seeds 10-12 are not the finished run of seeds 0-2
    assert len(commands) == 1 and "seed=10" in commands[0]
    assert f"hydra.run.dir={tmp_path / 'preset__Breakout__seeds3from10'}" in commands[0]
    (tmp_path / "preset__Breakout__seeds3from10" / "seed=11").mkdir(parents=True)
    (tmp_path / "preset__Breakout__seeds3from10" / "seed=11" / "episodes.csv").write_text("env_step,episode,return\n")
    assert [(label, game, seed) for label, game, seed, _ in minatar_bench.agent_runs(tmp_path)] == [
        ("preset", "Breakout", 11)
    ]


def test_minatar_cost_reads_the_rates_logged_after_the_resume_less_its_first_line():
    import minatar_bench

    line = (
        "[t][rlrun.training.population][INFO] - rlrun: step {:,}/1,020,000 (99%), 4 episodes, ret100 1.0, {:,} step/s\n"
    )
    log = line.format(1_000_000, 250) + "[t][rlrun.run][INFO] - rlrun: resuming /r (3 agents) from env step ...\n"
    log += "".join(line.format(1_000_000 + 4000 * i, rate) for i, rate in enumerate([90, 260, 1270, 240], 1))
    assert minatar_bench.resumed_rates(log) == [260.0, 1270.0, 240.0]  # 1,270 has a thousands comma


def test_minatar_bench_refuses_a_fifo_in_a_run_instead_of_waiting_on_it(tmp_path):
    """The bench reads run files within bounds, as rlrun does: a FIFO at episodes.csv (nobody writes it) is
    refused at once; an unbounded read would block forever."""
    import os

    import minatar_bench
    import pytest

    from rlrun.storage.bounded import FileRefused

    agent = tmp_path / "x__Breakout__seeds2" / "seed=0"
    agent.mkdir(parents=True)
    os.mkfifo(agent / "episodes.csv")
    with pytest.raises(FileRefused, match="not a regular file"):
        minatar_bench.normalised_scores(tmp_path, 1_000_000)


def crafted_minatar_root(tmp_path, craft: str) -> Path:
    """A runs folder of `minatar_bench` holding one crafted agent."""
    import os

    agent = tmp_path / "x__Breakout__seeds2" / "seed=0"
    agent.mkdir(parents=True)
    episodes = agent / "episodes.csv"
    if craft == "fifo":
        os.mkfifo(episodes)
    elif craft == "sparse":
        with open(episodes, "wb") as f:
            f.truncate(3 * 2**30)  # 3 GiB of nothing on disk
    elif craft == "not a number":
        episodes.write_text("env_step,episode,return,length\n5,1,3,5\n10,2,abc,5\n")
    elif craft == "inf":
        episodes.write_text("env_step,episode,return,length\n5,1,inf,5\n")
    elif craft == "unknown game":
        episodes.write_text("env_step,episode,return,length\n5,1,3,5\n")
        (tmp_path / "x__Breakout__seeds2").rename(tmp_path / "x__Nonesuch__seeds2")
    elif craft == "config to /dev/zero":  # a single run: its seed is read from its config
        run = agent.parent
        agent.rmdir()
        (run / "episodes.csv").write_text("env_step,episode,return,length\n5,1,3,5\n")
        (run / ".hydra").mkdir()
        (run / ".hydra" / "config.yaml").symlink_to("/dev/zero")
    return tmp_path


@pytest.mark.parametrize(
    "craft, says",
    [
        ("fifo", "episodes.csv is a FIFO, not a regular file"),
        ("sparse", "episodes.csv is larger than"),
        ("not a number", "episodes.csv row 2: return 'abc' is not a finite number"),
        ("inf", "episodes.csv row 1: return 'inf' is not a finite number"),
        ("unknown game", "x__Nonesuch__seeds2: game 'Nonesuch' in its name is not one of Asterix"),
        ("config to /dev/zero", "config.yaml is a device, not a regular file"),
    ],
)
@pytest.mark.parametrize("command", ["plot", "aggregate"])
def test_minatar_bench_refuses_a_crafted_run_in_one_line(tmp_path, monkeypatch, capsys, craft, says, command):
    """Before: FileRefused, ValueError or KeyError tracebacks."""
    import minatar_bench

    root = crafted_minatar_root(tmp_path, craft)
    monkeypatch.setattr(sys, "argv", ["minatar_bench.py", command, "--root", str(root)])
    with pytest.raises(SystemExit) as stop:
        minatar_bench.main()
    err = capsys.readouterr().err
    assert stop.value.code == 2 and says in err and err.startswith("minatar_bench.py: "), err
    assert len(err.strip().splitlines()) == 1, err


def test_the_bench_scripts_read_summary_json_within_bounds(tmp_path, monkeypatch, capsys):
    """preset_seeds.py, pbt_bench.py and benchlib.common read summary.json as rlrun does: a FIFO there is
    refused at once (an unbounded read would block), a summary without agents named, each in one line."""
    import os

    import pbt_bench
    import preset_seeds
    from benchlib import common

    from rlrun.storage.bounded import FileRefused

    os.mkfifo(tmp_path / "summary.json")
    with pytest.raises(FileRefused, match="not a regular file"):
        pbt_bench.run([], tmp_path)  # a finished run is reused: its summary read
    (tmp_path / "summary.json").unlink()
    (tmp_path / "summary.json").write_text('{"status": "finished"}')
    with pytest.raises(common.Refused, match="has no agents"):
        common.read_summary(tmp_path, agents=True)
    assert common.read_summary(tmp_path) == {"status": "finished"}
    monkeypatch.setattr(sys, "argv", ["preset_seeds.py"])

    def refused():
        raise common.Refused(f"{tmp_path / 'summary.json'} has no agents")

    with pytest.raises(SystemExit) as stop:
        common.refusing(refused)
    assert (
        stop.value.code == 2 and capsys.readouterr().err == f"preset_seeds.py: {tmp_path}/summary.json has no agents\n"
    )
    (tmp_path / "scalars.csv").write_text("env_step,tag,value\n5,eval/mean_return,xyz\n")
    with pytest.raises(common.Refused, match=r"scalars\.csv row 1: value 'xyz' is not a finite number"):
        preset_seeds.first_eval_at(tmp_path, 475.0)
