"""The real entrypoint in a subprocess: what a user types, what a run leaves behind; how bad input reads (the
command's `main` in this process: a subprocess adds seconds of imports to each refusal)."""

import json
import os
import re
import shlex
import subprocess
import sys

import pytest
import torch
from launch import run_module
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from test_reliability import in_process

REQUIRED_TAGS = {
    "charts/episodic_return",
    "charts/episodic_length",
    "charts/mean_return_100",
    "charts/epsilon",
    "charts/learning_rate",
    "charts/SPS",
    "charts/updates",
    "losses/td_loss",
    "losses/q_mean",
    "losses/q_var",
    "losses/grad_norm",
    "replay/size",
    "replay/sample_age",
    "replay/unique_fraction",
    "per/beta",
    "per/priority_max",
    "per/priority_mean",
    "per/ess_fraction",
    "eval/mean_return",
    "eval/std_return",
    "hparams/best_mean_return_100",
}
# CartPole's defaults step 16 envs at a time: every step count here is a whole number of vector steps.
TINY = [
    "total_steps=4000",
    "algo.learning_starts=2500",
    "log.interval=400",
    "eval.interval=800",
    "eval.episodes=2",
    "env.reward_threshold=10",
]


def run_train(*args, cwd=None):
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    return run_module("rlrun.train", *args, cwd=cwd, env=env, timeout=300)


def test_dueling_per_run_leaves_everything_behind(tmp_path):
    run_dir = tmp_path / "run"
    proc = run_train("network=dueling", "buffer=per", *TINY, f"hydra.run.dir={run_dir}")
    assert proc.returncode == 0, proc.stderr
    assert "solved at step" in proc.stdout + proc.stderr  # threshold 10 is reached by random play
    # the run ends with its figures and where to look next
    assert "rlrun: finished after 4,000 env steps" in proc.stdout and "solved: 1/1 (at step" in proc.stdout
    assert f"tensorboard --logdir {run_dir}" in proc.stdout

    events = list(run_dir.glob("events.out.tfevents.*"))
    assert len(events) == 1
    acc = EventAccumulator(str(events[0]), size_guidance={"scalars": 0})
    acc.Reload()
    tags = set(acc.Tags()["scalars"])
    assert tags >= REQUIRED_TAGS, REQUIRED_TAGS - tags
    epsilon = dict((e.step, e.value) for e in acc.Scalars("charts/epsilon"))
    assert epsilon[400] == 1.0  # uniform-random play before learning starts (2500)
    assert epsilon[3200] == pytest.approx(1 - (1 - 0.01) * 3200 / 10_000)  # linear 1 -> 0.01 over 10k (env=cartpole)
    assert 0 < acc.Scalars("replay/unique_fraction")[-1].value <= 1
    for e in acc.Scalars("per/beta"):  # the schedule at the logged step: 0.4 -> 1 over the run's 4,000 steps
        assert e.value == pytest.approx(0.4 + 0.6 * e.step / 4000, rel=1e-6)
    assert "config/text_summary" in acc.Tags()["tensors"]  # the config as text

    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["env_steps"] == 4000 and summary["status"] == "finished"
    assert summary["solved_step"] is not None and summary["reward_threshold"] == 10
    # one gradient step per vector step (16 env steps, algo.train_freq=16), from the first step at or
    # after learning_starts (2,512) to 4,000, both included
    assert summary["gradient_updates"] == (4000 - 2512) // 16 + 1
    lines = (run_dir / "episodes.csv").read_text().splitlines()
    assert lines[0] == "env_step,episode,return,length"
    assert len(lines) - 1 == summary["episodes"]
    total_len = sum(int(line.split(",")[3]) for line in lines[1:])
    assert total_len <= 4000 and int(lines[-1].split(",")[0]) <= 4000
    assert (run_dir / "returns.png").read_bytes()[:4] == b"\x89PNG"
    assert (run_dir / ".hydra" / "config.yaml").exists()
    state = torch.load(run_dir / "model.pt", weights_only=True)
    assert "value.weight" in state and "advantage.weight" in state


def test_help_lists_groups_and_describes_every_key_without_importing_torch():
    proc = run_train("--help")
    assert proc.returncode == 0, proc.stderr
    for line in [
        "buffer: per, uniform",
        "optimizer: adam, rmsprop, sgd",
        "device: auto, cpu, cuda",
        "logger: csv, mlflow, tensorboard, wandb",
        "hparams_search: optuna",
    ]:
        assert line in proc.stdout
    assert re.search(r"^  gamma: 0.99 +# discount factor$", proc.stdout, re.M)
    assert re.search(r"^  tensorboard: \{\} +# logger=tensorboard", proc.stdout, re.M)
    # device.cuda_graphs records update phases (rlrun.training.graphs); torch.compile's reduce-overhead no
    # longer backs it
    assert re.search(r"^  cuda_graphs: false +# CUDA only: record each update phase", proc.stdout, re.M)
    keys = [line for line in proc.stdout.split("== Config (")[1].splitlines()[1:] if not line.endswith(":")]
    assert keys and all("  # " in line for line in keys), [line for line in keys if "  # " not in line]
    # the command line and --help never import torch (python -m rlrun.train --help stays under ~1 s)
    probe = (
        "import runpy, sys; sys.argv = ['rlrun.train', '--help']; "
        "runpy.run_module('rlrun.train', run_name='__main__'); "
        "assert 'torch' not in sys.modules, 'torch imported'"
    )
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    proc = in_process("rlrun.train", "network=dueling", "--cfg", "job")
    assert proc.returncode == 0 and "dueling: true" in proc.stdout


BAD_INPUT = [
    (["network=foo"], "network", "allowed one of c51, cnn, der, dueling"),
    (["optimizer.lr=-1"], "optimizer.lr", "a number > 0"),
    (["algo.gamma=abc"], "algo.gamma", "abc"),
    (["algo.nonsense=1"], "algo.nonsense", "the keys of algo are batch_size"),
    (["env.id=NoSuchEnv-v0"], "env.id", "registered gymnasium id"),
    (["env.id=Pendulum-v1"], "env.id", "Discrete action space"),
]


@pytest.mark.parametrize("args,key,hint", BAD_INPUT)
def test_bad_input_is_one_clear_message(tmp_path, args, key, hint):
    proc = in_process("rlrun.train", *args, f"hydra.run.dir={tmp_path / 'run'}")
    assert proc.returncode != 0
    assert key in proc.stderr and hint in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr
    assert not list((tmp_path).rglob("events.out.tfevents.*"))


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_cuda_on_cpu_machine(tmp_path):
    proc = in_process("rlrun.train", "device=cuda", f"hydra.run.dir={tmp_path / 'run'}")
    assert proc.returncode == 2 and "device.type='cuda'" in proc.stderr and "Traceback" not in proc.stderr


def test_plain_install_finds_configs_outside_the_checkout(tmp_path):
    """The configs are package data: the entrypoint works from any working directory."""
    proc = in_process("rlrun.train", "--cfg", "job", cwd=tmp_path)
    assert proc.returncode == 0 and "CartPole-v1" in proc.stdout


def test_doctor_reports_versions():
    proc = subprocess.run([sys.executable, "-m", "rlrun.doctor"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for name in (
        "torch",
        "gymnasium",
        "hydra-core",
        "tensorboard",
        "filelock",
        "rliable",
        "gpus",
        "cpu bf16",
        "ale-py",
        "ray",
    ):
        assert re.search(rf"^{name} ", proc.stdout, re.M), name
    assert "(optional: the atari extra)" in proc.stdout and "(optional: the mlflow extra)" in proc.stdout
    starts = {
        re.match(r"^\S.*?\s{2,}(\S)", line).start(1)
        for line in proc.stdout.splitlines()[:-1]
        if not line.startswith(" ")
    }
    assert len(starts) == 1, "the values are not in one column"
    assert torch.__version__ in proc.stdout


@pytest.mark.parametrize(
    "override,line",
    [
        ("network=foo", "network='foo': allowed one of c51, cnn, der, dueling, iqn, minatar, mlp, noisy, qrdqn."),
        (
            "+experiment=foo",
            "experiment='foo': allowed one of atari_fast, der_atari100k, drq_eps_atari100k, minatar_paper, pqn_atari,",
        ),
    ],
)
def test_an_unknown_group_option_is_one_line_naming_the_options(tmp_path, override, line):
    proc = in_process("rlrun.train", override, f"hydra.run.dir={tmp_path / 'run'}", rc=2)
    assert proc.stderr.startswith(f"rlrun: Invalid config value {line}") and proc.stderr.count("\n") == 1, proc.stderr
    assert not (tmp_path / "run").exists()


def test_doctor_lists_every_extra_and_takes_flags_as_a_command_does(tmp_path):
    doctor = [sys.executable, "-m", "rlrun.doctor"]
    proc = subprocess.run([*doctor, "--help"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and proc.stdout.startswith("usage: ") and "torch" not in proc.stdout.split("\n")[0]
    proc = subprocess.run([*doctor, "--bogus"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "unrecognized arguments: --bogus" in proc.stderr
    proc = subprocess.run(doctor, capture_output=True, text=True, timeout=120)
    for extra, package in (("minatar", "minatar"), ("export", "onnx"), ("report", "rliable")):
        assert re.search(rf"^{package} .*\(optional: the {extra} extra\)$", proc.stdout, re.M), extra
    # a reader that stops after one line: no BrokenPipeError traceback
    piped = subprocess.run(f"{shlex.quote(sys.executable)} -m rlrun.doctor | head -1", shell=True,
                           capture_output=True, text=True, timeout=120)  # fmt: skip
    assert piped.stdout.startswith("python ") and piped.stderr == "", piped.stderr


def test_doctor_names_a_rlrun_folder_that_shadows_the_package(tmp_path, monkeypatch, capsys):
    from rlrun import doctor

    (tmp_path / "rlrun").mkdir()  # a clone of the repository, say, beside the user's script
    monkeypatch.chdir(tmp_path)
    assert doctor.main([]) == 1
    out = capsys.readouterr().out
    assert f"PROBLEM: {tmp_path / 'rlrun'} has no __init__.py" in out and "problems found" in out


@pytest.mark.parametrize("run_dir", ["/proc/rlrun_cannot_be_here", "/etc/hostname/sub"])
def test_unwritable_output_dir_is_one_clear_message(run_dir):
    proc = in_process("rlrun.train", f"hydra.run.dir={run_dir}", "total_steps=10")
    assert proc.returncode == 4
    assert "cannot create the run directory" in proc.stderr and "Traceback" not in proc.stderr


def test_help_into_a_closed_pipe_ends_quietly():
    """`python -m rlrun.train --help | head` must not end with a BrokenPipeError traceback."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "rlrun.train", "--help"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    proc.stdout.close()  # the reader is gone before the help is written
    err = proc.stderr.read()
    assert proc.wait(timeout=60) == 0 and "Traceback" not in err, err


def test_version_is_rlruns():
    proc = run_train("--version")
    assert proc.returncode == 0 and re.fullmatch(r"rlrun \d+\.\d+\.\d+ \(Hydra 1\.3\.\d+\)\n", proc.stdout), proc


def test_the_batched_launcher_counts_in_words():
    from hydra_plugins.rlrun_batched_launcher.batched_launcher import counted

    assert [counted(1, "process", "es"), counted(4, "process", "es"), counted(1, "job"), counted(20, "job")] == [
        "1 process",
        "4 processes",
        "1 job",
        "20 jobs",
    ]


# Each composition says so when it happens (an atexit handler registered this early would run after
# rlrun.process_exit's, which ends the process: rlrun.process_exit).
COUNT_COMPOSES = """
import sys
from hydra._internal.hydra import Hydra
compose = Hydra.compose_config
def counted(self, *args, **kwargs):
    print("composed", kwargs.get("run_mode"), file=sys.stderr, flush=True)
    return compose(self, *args, **kwargs)
Hydra.compose_config = counted
"""


@pytest.mark.parametrize(
    "sweep, floats", [(False, []), (False, ["algo.tau=1.0", "algo.lr_end_factor=1.0"]), (True, [])]
)
def test_a_command_composes_its_config_once_to_check_it_and_once_to_run_it(tmp_path, sweep, floats):
    """Hydra's app composes the whole config once just to read `hydra.mode` before composing it again to run
    it (~0.2 s of every command); the preflight has read it. A sweep: its base config and each job's checked by
    the preflight, then the base composed by Hydra's app (whose launcher composes each job its own way).
    Values such as `algo.tau=1.0` (a float literal that could be meant for an integer key) add no composition."""
    (tmp_path / "count_composes.py").write_text(COUNT_COMPOSES)
    where = ["-m", f"hydra.sweep.dir={tmp_path / 'sweep'}", "seed=0,1"] if sweep else [f"hydra.run.dir={tmp_path}/run"]
    proc = run_module("rlrun.train", *where, "total_steps=32", *floats, cwd=tmp_path, first="count_composes")
    assert proc.returncode == 0, proc.stderr
    composed = [line.split(" ", 1)[1] for line in proc.stderr.splitlines() if line.startswith("composed ")]
    run = "RunMode.RUN"
    if sweep:
        assert composed == [run, run, run, "RunMode.MULTIRUN"]
    else:
        assert composed == [run, run]
    saved = (tmp_path / ("sweep/seed=0" if sweep else "run") / ".hydra" / "hydra.yaml").read_text()
    assert ("- hydra.mode=MULTIRUN" if sweep else "- hydra.mode=RUN") in saved  # as Hydra's own reading left it


@pytest.mark.parametrize(
    "argv",
    [
        ["--cfg", "job", "seed=3", "total_steps=96"],
        ["seed=3", "--cfg", "job", "total_steps=96"],
        ["seed=3", "total_steps=96", "--cfg", "job"],
        ["seed=3", "-c", "job", "total_steps=96", "--resolve"],
    ],
)
def test_cfg_stands_anywhere_hydra_reads_it(tmp_path, argv):
    proc = run_train(*argv, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "seed: 3" in proc.stdout and "total_steps: 96" in proc.stdout
    assert not (tmp_path / "outputs").exists()


@pytest.mark.parametrize("argv", [["seed=3", "--info", "defaults"], ["--info", "defaults", "seed=3"]])
def test_info_stands_anywhere(tmp_path, argv):
    proc = run_train(*argv, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "Defaults List" in proc.stdout


@pytest.mark.parametrize(
    "argv", [["-m", "seed=0,1", "--cfg", "job"], ["seed=0,1", "--info", "-m"], ["-c", "job", "-r"]]
)
def test_flags_hydra_allows_one_of_are_refused_in_one_line(tmp_path, argv):
    """Hydra raises a ValueError for them after rlrun hands it the command: one line, exit 2 instead."""
    proc = in_process("rlrun.train", *argv, cwd=tmp_path)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert proc.stderr.strip().splitlines() == [
        "rlrun: Invalid config: only one of -m/--multirun, -r/--run, -c/--cfg, -i/--info and --shell-completion "
        "can be given"
    ]
    assert not (tmp_path / "outputs").exists()


def test_a_sweep_into_a_folder_that_holds_files_names_hydra_sweep_dir(tmp_path):
    (tmp_path / "sweep").mkdir()
    (tmp_path / "sweep" / "notes.txt").write_text("mine")
    proc = in_process("rlrun.train", "-m", "seed=0,1", f"hydra.sweep.dir={tmp_path / 'sweep'}", cwd=tmp_path)
    assert proc.returncode == 2 and "choose a new or empty hydra.sweep.dir" in proc.stderr, proc.stderr


def test_help_after_and_between_overrides(tmp_path):
    proc = run_train("network=dueling", "--help", "total_steps=96", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert re.search(r"total_steps: 96\b", proc.stdout) and "dueling" in proc.stdout


@pytest.mark.parametrize(
    "where",
    [
        ["seed=0,1", "total_steps=32", "-m"],  # users type it last
        ["device=cpu", "--multirun", "seed=0,1", "total_steps=32"],  # compose's `train` service: device first
        ["-m", "seed=0,1", "total_steps=32"],
    ],
)
def test_multirun_stands_anywhere(tmp_path, where):
    proc = run_train(*where, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    [sweep] = (tmp_path / "outputs" / "multirun").iterdir()
    assert sorted(p.name for p in sweep.glob("seed=*")) == ["seed=0", "seed=1"]
    assert all((d / "summary.json").is_file() for d in sweep.glob("seed=*"))
