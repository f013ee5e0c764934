"""What a careless or hostile user can do to rlrun, and what rlrun guarantees in return (docs/reliability.md):
nothing read from a run directory or checkpoint chooses which code runs, no run destroys
another, every failure is one line with the documented exit code, and a refused command writes nothing."""

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import pytest
import torch
import yaml
from entrypoints import in_process  # noqa: F401  (imported from here by the other modules)
from launch import overriding, run_module, start_module
from test_reliability_checks import BAD_CONFIGS

from rlrun.storage import checkpoint as ckpt, rundir

TINY = [
    "total_steps=640",
    "algo.learning_starts=160",
    "eval.interval=0",
    "log.plot=false",
    "log.progress_bar=false",
    "checkpoint.every=320",
]
ENV = {**os.environ, "PYTHONWARNINGS": "ignore"}


def cli(module, *args, cwd=None, rc=None):
    proc = run_module(module, *args, cwd=cwd, env=ENV)
    if rc is not None:
        assert proc.returncode == rc, proc.stderr[-3000:]
        assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    return proc


def train(*args, **kw):
    return cli("rlrun.train", *overriding(TINY, *args), **kw)


def digest(path):
    """The bytes of every file under `path` (but the empty lock file), to prove nothing was changed."""
    return {
        str(p.relative_to(path)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(Path(path).rglob("*"))
        if p.is_file() and p.name != rundir.LOCK_NAME
    }


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory):
    run = tmp_path_factory.mktemp("runs") / "run"
    train(f"hydra.run.dir={run}", rc=0)
    return run


def copy_run(src, dst):
    import shutil

    shutil.copytree(src, dst, ignore=shutil.ignore_patterns(rundir.LOCK_NAME))
    return dst


# --- 1. nothing read from a run directory or checkpoint chooses which code runs ------------------------


def hostile(sentinel):
    """A config node that, instantiated, would create `sentinel`."""
    return {"_target_": "builtins.open", "_args_": [str(sentinel), "w"]}


def craft(state, where, sentinel):
    config = state["config"]
    if where == "group":
        config["network"] = hostile(sentinel)
    elif where == "nested":
        config["network"]["hidden_sizes"] = [hostile(sentinel)]
    elif where == "extra key":
        config["env"]["wrapper"] = hostile(sentinel)
    elif where == "optimizer":
        config["optimizer"]["_target_"] = "builtins.open"
    return state


@pytest.mark.parametrize("where", ["group", "nested", "extra key", "optimizer"])
def test_a_crafted_checkpoint_config_is_refused_by_evaluate_and_resume(finished_run, tmp_path, where):
    run = copy_run(finished_run, tmp_path / "run")
    sentinel = tmp_path / "sentinel"
    for name in (ckpt.LATEST, ckpt.PREVIOUS):
        state = torch.load(run / name, weights_only=True)
        torch.save(craft(state, where, sentinel), run / name)
    before = digest(run)

    calls = [("rlrun.evaluate", run, "episodes=1"), ("rlrun.resume", run, "total_steps=1000")]
    if where == "group":  # the other entry points share the same check
        calls += [("rlrun.evaluate", run / ckpt.LATEST), ("rlrun.train", f"resume={run}", "total_steps=1000")]
    for call in calls:
        proc = in_process(*call, rc=2)
        assert "network" in proc.stderr or "optimizer" in proc.stderr or "env.wrapper" in proc.stderr
        assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert not sentinel.exists(), "code named by the checkpoint ran"
    assert digest(run) == before


def test_a_crafted_hydra_config_next_to_model_pt_is_refused(finished_run, tmp_path):
    run = tmp_path / "run"
    (run / ".hydra").mkdir(parents=True)
    (run / "model.pt").write_bytes((finished_run / "model.pt").read_bytes())
    config = yaml.safe_load((finished_run / ".hydra" / "config.yaml").read_text())
    sentinel = tmp_path / "sentinel"
    config["network"] = hostile(sentinel)
    (run / ".hydra" / "config.yaml").write_text(yaml.safe_dump(config))
    for target in (run, run / "model.pt"):
        proc = in_process("rlrun.evaluate", target, "episodes=1", rc=2)
        assert "network._target_" in proc.stderr
    assert not sentinel.exists()


def test_hostile_overrides_in_the_run_directory_are_never_read_as_code(finished_run, tmp_path):
    run = copy_run(finished_run, tmp_path / "run")
    sentinel = tmp_path / "sentinel"
    (run / ".hydra" / "overrides.yaml").write_text(
        yaml.safe_dump(["+network.x._target_=builtins.open", f"+network.x._args_=[{sentinel},w]"])
    )
    in_process("rlrun.resume", run, "total_steps=960", rc=0)
    in_process("rlrun.evaluate", run, "episodes=1", rc=0)
    assert not sentinel.exists()


def test_a_checkpoint_holding_python_objects_is_refused_without_torch_advice(finished_run, tmp_path):
    run = copy_run(finished_run, tmp_path / "run")
    state = torch.load(run / ckpt.LATEST, weights_only=True)
    state["step"] = Path("not/a/plain/value")  # pickled as a Python object: weights-only loading refuses it
    torch.save(state, run / ckpt.LATEST)
    proc = in_process("rlrun.evaluate", run / ckpt.LATEST, rc=2)
    assert "weights_only" not in proc.stderr and "not an rlrun checkpoint" in proc.stderr


def shared_leaves(levels):
    """10^levels leaves from a few hundred pickled bytes: each level is ten references to the one below."""
    node = ["x"] * 10
    for _ in range(levels - 1):
        node = [node] * 10
    return node


def crafted_checkpoints(run, change):
    for name in (ckpt.LATEST, ckpt.PREVIOUS):
        state = torch.load(run / name, weights_only=True)
        change(state)
        torch.save(state, run / name)


CRAFTED_RUNS = {  # a real run's file crafted -> what the one line of resume and evaluate says
    "a config of 10^9 shared leaves": (
        lambda run: crafted_checkpoints(run, lambda s: s["config"].__setitem__("exp_name", shared_leaves(9))),
        "holds more than 10000000 values",
    ),
    "learner.online a list": (
        lambda run: crafted_checkpoints(run, lambda s: s["learner"].__setitem__("online", [1, 2])),
        "its learner.online is not a network's weights",
    ),
    "episodes.csv a FIFO": (
        lambda run: ((run / "episodes.csv").unlink(), os.mkfifo(run / "episodes.csv")),
        "episodes.csv is a FIFO, not a regular file",
    ),
}


@pytest.mark.timeout(120)  # before the bounds: the shared leaves and the FIFO hung resume
@pytest.mark.parametrize("case", CRAFTED_RUNS)
def test_a_crafted_file_of_a_real_run_is_refused_in_one_line(finished_run, tmp_path, case):
    run = copy_run(finished_run, tmp_path / "run")
    craft, says = CRAFTED_RUNS[case]
    craft(run)
    before = digest(run)
    calls = [("rlrun.resume", run, "total_steps=960")]
    calls += [] if "FIFO" in case else [("rlrun.evaluate", run, "episodes=1"), ("rlrun.export", run)]
    for call in calls:
        proc = in_process(*call, rc=2)
        assert says in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert digest(run) == before


# --- 2. runs never destroy other runs -------------------------------------------------------------


def test_a_new_run_never_reuses_a_run_directory(finished_run, tmp_path):
    run = copy_run(finished_run, tmp_path / "run")
    before = digest(run)
    proc = in_process("rlrun.train", *TINY, f"hydra.run.dir={run}", rc=2)
    assert "already holds a run" in proc.stderr and "rlrun.resume" in proc.stderr
    assert digest(run) == before


def test_a_new_run_never_writes_into_a_directory_with_other_files(tmp_path):
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "model.pt").write_text("a user's own file")
    proc = in_process("rlrun.train", *TINY, f"hydra.run.dir={mine}", rc=2)
    assert "not empty" in proc.stderr
    assert (mine / "model.pt").read_text() == "a user's own file" and len(list(mine.iterdir())) == 1
    empty = tmp_path / "empty"
    empty.mkdir()
    train(f"hydra.run.dir={empty}", rc=0)
    assert (empty / "summary.json").exists()


def test_a_sweep_never_reuses_a_sweep_directory(tmp_path):
    sweep = tmp_path / "sweep"
    sweep.mkdir()
    (sweep / "notes.txt").write_text("mine")
    proc = in_process("rlrun.train", "-m", *TINY, "seed=0,1", f"hydra.sweep.dir={sweep}", rc=2)
    assert "not empty" in proc.stderr and [p.name for p in sweep.iterdir()] == ["notes.txt"]


def wait_for(predicate, proc, timeout=120):
    t0 = time.time()
    while not predicate():
        assert proc.poll() is None, proc.communicate()[1][-2000:]
        assert time.time() - t0 < timeout
        time.sleep(0.05)


def test_a_run_directory_is_owned_by_one_process_and_a_dead_owner_does_not_block(finished_run, tmp_path):
    run = copy_run(finished_run, tmp_path / "run")
    first = start_module("rlrun.resume", run, "total_steps=2000000", env=ENV)
    wait_for(lambda: len(list(run.glob("events.out.tfevents.*"))) > 1, first)  # resumed and writing
    rows = (run / "episodes.csv").read_text()
    for proc in (
        in_process("rlrun.resume", run, "total_steps=2000000", rc=2),
        in_process("rlrun.train", f"resume={run}", "total_steps=2000000", rc=2),
    ):
        assert "in use by another rlrun process" in proc.stderr
    assert not list((run / ".hydra").glob("resume_*"))[1:], "the refused resume left a record"
    first.send_signal(signal.SIGKILL)
    first.wait()
    assert (run / "episodes.csv").read_text().startswith(rows.splitlines()[0])
    # the dead owner's lock is gone with it: the resume gets past it (to say the run has its 960 steps)
    assert "is finished" in in_process("rlrun.resume", run, "total_steps=960", rc=2).stderr


# --- 3. one clear line and the right exit code (every refusal of the pre-flight: tests/unit) -----------


@pytest.mark.parametrize("args, says", BAD_CONFIGS[:2])
def test_a_bad_config_exits_2_with_one_line_and_writes_nothing(tmp_path, args, says):
    proc = cli("rlrun.train", *args, cwd=tmp_path, rc=2)
    assert says in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert list(tmp_path.iterdir()) == [], "a refused command left files behind"


def test_a_refused_resume_changes_nothing(finished_run, tmp_path):
    run = copy_run(finished_run, tmp_path / "run")
    before = digest(run)
    proc = in_process("rlrun.resume", run, "network.hidden_sizes=[32]", rc=2)
    assert "network.hidden_sizes" in proc.stderr
    in_process("rlrun.resume", tmp_path / "missing", rc=2)
    assert not (tmp_path / "missing").exists()
    assert digest(run) == before


def test_a_copied_model_pt_as_checkpoint_falls_back_to_the_previous_one(finished_run, tmp_path):
    run = copy_run(finished_run, tmp_path / "run")
    (run / ckpt.LATEST).write_bytes((run / "model.pt").read_bytes())
    state, path = ckpt.load(run)
    assert path.name == ckpt.PREVIOUS
    proc = in_process("rlrun.resume", run, "total_steps=960", rc=0)
    assert "damaged" in proc.stderr and ckpt.PREVIOUS in proc.stderr


def test_evaluate_turns_every_bad_input_into_one_line(finished_run, tmp_path):
    run = copy_run(finished_run, tmp_path / "run")
    out = in_process("rlrun.evaluate", run / "model.pt", "episodes=2", rc=0).stdout
    assert "mean return" in out
    assert "seed" in in_process("rlrun.evaluate", run, "seed=-1", rc=2).stderr
    if not torch.cuda.is_available():
        assert "device.type" in in_process("rlrun.evaluate", run, "device=cuda", rc=2).stderr
    (run / ckpt.LATEST).write_bytes(b"not a checkpoint")
    proc = in_process("rlrun.evaluate", run, "episodes=1", rc=0)
    assert "damaged" in proc.stderr and ckpt.PREVIOUS in proc.stderr  # the fallback is said
    proc = in_process("rlrun.evaluate", run / ckpt.LATEST, rc=2)
    assert "unreadable" in proc.stderr
    (run / ckpt.PREVIOUS).write_bytes((run / ckpt.PREVIOUS).read_bytes()[:100])
    (run / "model.pt").unlink()
    proc = in_process("rlrun.evaluate", run, rc=2)
    assert "no loadable checkpoint" in proc.stderr
    for proc in (in_process("rlrun.evaluate", run), in_process("rlrun.evaluate", run / ckpt.PREVIOUS)):
        assert "weights_only" not in proc.stderr and "Traceback" not in proc.stderr


@contextmanager
def small_filesystem(path, size="4m", read_only=False):
    """A tmpfs at `path` (root only; skipped where mounts are not allowed)."""
    path.mkdir(parents=True, exist_ok=True)
    if (
        subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)], capture_output=True
        ).returncode
        != 0
    ):
        pytest.skip("cannot mount a tmpfs here")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], capture_output=True)


def test_evaluate_prints_its_results_from_a_read_only_run_directory(finished_run, tmp_path):
    with small_filesystem(tmp_path / "ro") as mount:
        run = copy_run(finished_run, mount / "run")
        subprocess.run(["mount", "-o", "remount,ro", str(mount)], check=True)
        proc = in_process("rlrun.evaluate", run, "episodes=2", rc=4)
        assert "mean return" in proc.stdout and "not saved" in proc.stderr


def test_a_full_disk_exits_4_and_keeps_the_earlier_checkpoint(tmp_path):
    with small_filesystem(tmp_path / "full", size="1m") as mount:
        run = mount / "run"
        # checkpoints grow with the replay buffer (~50 bytes a step): two of them fill 1 MB within 20k steps
        proc = train(f"hydra.run.dir={run}", "total_steps=20000", "checkpoint.every=1000", rc=4)
        assert "cannot write" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
        state, path = ckpt.load(run)
        assert state["step"] > 0
        rows = (run / "episodes.csv").read_text()
        proc = in_process("rlrun.resume", run, "total_steps=40000", rc=4)  # still full
        assert "cannot write" in proc.stderr
        assert (run / "episodes.csv").read_text().startswith(rows[:200])
        assert ckpt.load(run)[0]["step"] >= state["step"]


def catches_sigterm(pid: int) -> bool:
    """Whether process `pid` has a SIGTERM handler installed (Linux: the SigCgt mask in /proc)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("SigCgt:"):
            return bool(int(line.split()[1], 16) >> (signal.SIGTERM - 1) & 1)
    return False


def test_a_signal_before_the_loop_starts_leaves_no_directory(tmp_path):
    # during the imports, and right after the run directory appears
    for delay in (0.05, None):
        proc = subprocess.Popen(
            [sys.executable, "-m", "rlrun.train", "total_steps=100000", "hydra.run.dir=run"],
            cwd=tmp_path,
            env=ENV,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        if delay is None:
            wait_for(lambda: (tmp_path / "run").exists(), proc)
        else:  # once rlrun's handler is installed (before its heavy imports), however loaded the machine
            wait_for(lambda p=proc: catches_sigterm(p.pid), proc)
            time.sleep(delay)
        proc.send_signal(signal.SIGTERM)
        err = proc.communicate(timeout=120)[1]
        assert "Traceback" not in err and "stopped by SIGTERM" in err, (delay, proc.returncode, err)
        if proc.returncode == 128 + signal.SIGTERM:
            assert not (tmp_path / "run").exists(), "a run that never started left a directory"
        else:  # the loop had started: it checkpointed
            assert proc.returncode == 75 and (tmp_path / "run" / ckpt.LATEST).exists()


def test_a_signal_during_the_imports_imports_nothing_from_its_handler():
    """A signal can land while a module is half imported (the flaky case of the test above: `filelock`
    meeting a half-made `logging`); the handler must not import anything then. Here any import of filelock
    fails, as it would mid-import, and rlrun.storage.rundir is not imported yet: one line, exit 143."""
    probe = (
        "import os, signal, sys; from rlrun.training import signals; signals.stop_on_signal(); "
        "assert 'rlrun.storage.rundir' not in sys.modules; sys.modules['filelock'] = None; "
        "os.kill(os.getpid(), signal.SIGTERM)"
    )
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=ENV, timeout=120)
    assert proc.returncode == 128 + signal.SIGTERM, proc.stderr
    assert proc.stderr == "rlrun: stopped by SIGTERM before the run started; nothing was written\n", proc.stderr


# --- 4. inputs that used to crash -------------------------------------------------------------------


def run_in_process(compose, tmp_path, *overrides):
    from rlrun.train import train as train_fn

    cfg = compose(*TINY, *overrides)
    return train_fn(cfg, tmp_path / "run")


@pytest.mark.parametrize(
    "overrides",
    [
        ["env.num_envs=512", "total_steps=2048"],
        ["algo.learning_starts=0", "buffer.n_step=3"],  # 16 envs: an update phase after every vector step
        ["algo.learning_starts=0", "buffer=per", "seeds=2"],
    ],
)
def test_updates_wait_until_a_batch_can_be_drawn(compose, tmp_path, overrides):
    summary = run_in_process(compose, tmp_path, *overrides)
    assert summary["status"] == "finished"


@pytest.mark.parametrize("env_id", ["FrozenLake-v1", "Taxi-v4"])
def test_discrete_observations_are_one_hot(compose, tmp_path, env_id):
    from rlrun.envs.vector import make_vector_env

    envs = make_vector_env(env_id, 2)
    obs, _ = envs.reset(seed=0)
    n = envs.single_observation_space.shape[0]
    assert obs.shape == (2, n) and (obs.sum(axis=1) == 1).all()
    envs.close()
    summary = run_in_process(compose, tmp_path, f"env.id={env_id}", "env.num_envs=4", "total_steps=1600")
    assert summary["status"] == "finished" and summary["episodes"] > 0


def test_every_directory_rlrun_makes_can_be_resumed(tmp_path):
    # a sweep job directory has '=' in its name
    cli("rlrun.train", "-m", *TINY, "optimizer.lr=0.001", "seed=0", "hydra.sweep.dir=sweep", cwd=tmp_path, rc=0)
    [summary] = (tmp_path / "sweep").rglob("summary.json")
    job = summary.parent
    assert "seed=0" in job.parts and "optimizer.lr=0.001" in job.parts
    proc = in_process("rlrun.train", f"resume={job}", cwd=tmp_path, rc=2)
    assert "rlrun.resume" in proc.stderr  # the grammar cannot spell it: the message says what can
    in_process("rlrun.resume", job, "total_steps=960", cwd=tmp_path, rc=0)
    assert json.loads((job / "summary.json").read_text())["env_steps"] == 960
    # spaces and non-ASCII, quoted for Hydra's grammar: the directory is named exactly that
    train("hydra.run.dir='runs/α β=1'", "total_steps=160", cwd=tmp_path, rc=0)
    assert [p.name for p in (tmp_path / "runs").iterdir()] == ["α β=1"]


# --- 5. what a run records -------------------------------------------------------------------------


def served_scalars(run_dir, tag):
    """The points of `tag` as TensorBoard's own data provider serves them to its charts."""
    from tensorboard import context
    from tensorboard.backend.event_processing import data_provider, plugin_event_multiplexer

    multiplexer = plugin_event_multiplexer.EventMultiplexer()
    multiplexer.AddRunsFromDirectory(str(run_dir))
    multiplexer.Reload()
    provider = data_provider.MultiplexerDataProvider(multiplexer, str(run_dir))
    runs = provider.read_scalars(
        context.RequestContext(), experiment_id="", plugin_name="scalars", downsample=100_000, run_tag_filter=None
    )
    return runs["."][tag]


def test_every_finished_episode_is_its_own_point_in_tensorboard(compose, tmp_path):
    run = tmp_path / "run"
    run_in_process(compose, tmp_path, "total_steps=4000")  # CartPole's 16 envs: episodes end together
    rows = [r.split(",") for r in (run / "episodes.csv").read_text().splitlines()[1:]]
    points = served_scalars(run, "charts/episodic_return")
    assert len(rows) > 50
    assert sorted((p.step, p.value) for p in points) == sorted((int(r[0]), float(r[2])) for r in rows)
    assert len({p.step for p in points}) == len(rows), "episodes share a step: the chart hides some"


def test_episodes_csv_has_one_line_ending_after_a_resume(finished_run, tmp_path):
    run = copy_run(finished_run, tmp_path / "run")
    in_process("rlrun.resume", run, "total_steps=1280", rc=0)
    data = (run / "episodes.csv").read_bytes()
    assert b"\r" not in data and data.endswith(b"\n")
    steps = [int(r.split(",")[0]) for r in data.decode().splitlines()[1:]]
    assert max(steps) > 640 and steps == sorted(steps)


def test_an_existing_read_only_run_directory_exits_4(tmp_path):
    with small_filesystem(tmp_path / "ro") as mount:
        subprocess.run(["mount", "-o", "remount,ro", str(mount)], check=True)
        proc = in_process("rlrun.train", *TINY, f"hydra.run.dir={mount}", rc=4)
        assert "cannot create the run directory" in proc.stderr and "Read-only" in proc.stderr
