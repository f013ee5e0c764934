"""Runs named after what differs from the defaults, sweep jobs after the swept keys, and `rlrun.report` on
any folder of runs: labels by the keys that differ, a warning for seeds pooled across sweeps, curves from
episodes.csv and scalars.csv, no matplotlib warnings."""

import json
import os
import warnings

import numpy as np
import pandas as pd
import pytest
import yaml
from hydra import compose, initialize_config_module
from launch import run_module
from omegaconf import OmegaConf

from rlrun.config.runnames import MAX_CHARS, job_subdir, run_part
from rlrun.config.schemas import register_configs
from rlrun.logs.sinks import run_name
from rlrun.report import load_sweep, write_report
from rlrun.report.tables import pooled

TINY = ["total_steps=300", "algo.learning_starts=100", "eval.interval=0", "log.plot=false", "log.progress_bar=false"]


def run_dir_name(*overrides):
    register_configs()
    with initialize_config_module(config_module="rlrun.conf", version_base="1.3"):
        cfg = compose(config_name="config", overrides=list(overrides), return_hydra_config=True)
    return os.path.basename(str(cfg.hydra.run.dir))


def test_a_run_is_named_after_its_overrides_less_the_quiet_keys():
    name = run_dir_name("optimizer.lr=1e-3", "network=dueling", "seed=3", "log.interval=50", "device.threads=2")
    assert name.startswith("CartPole-v1__dqn__network=dueling,optimizer.lr=1e-3__seed3__")
    assert run_dir_name().startswith("CartPole-v1__dqn__seed0__")  # the defaults: no overrides part
    assert run_dir_name("logger=csv", "checkpoint.every=0", "seed=1").startswith("CartPole-v1__dqn__seed1__")
    assert run_dir_name("exp_name=lr_test", "+experiment=rainbow").startswith(
        "CartPole-v1__lr_test__experiment=rainbow__"
    )
    # exp_name unset: the algorithm's name, not dqn's (and once: `algo=pqn` is what `pqn` says)
    assert run_dir_name("algo=pqn").startswith("CartPole-v1__pqn__seed0__")
    assert run_dir_name("algo=mdqn", "+experiment=rainbow").startswith("CartPole-v1__rainbow__algo=mdqn__seed0__")


@pytest.mark.parametrize(
    "overrides, start",
    [  # the env id and exp_name say the env option and the experiment: the overrides part does not repeat them
        (["+experiment=rainbow", "total_steps=5000"], "CartPole-v1__rainbow__total_steps=5000__seed0__"),
        (["env=acrobot"], "Acrobot-v1__dqn__seed0__"),
        (["env=minatar", "env.id=MinAtar/SpaceInvaders-v0"], "MinAtar-SpaceInvaders-v0__dqn_minatar__seed0__"),
        (["+experiment=rainbow_minatar"], "MinAtar-Breakout-v0__rainbow_minatar__seed0__"),
        (["+experiment=pqn_atari"], "ALE-Pong-v5__pqn_atari__seed0__"),
        (["env=atari", "env.id=ALE/Breakout-v5", "seed=2"], "ALE-Breakout-v5__dqn_atari__seed2__"),
        # what the name does not say stays: an env option the id does not name, an experiment renamed
        (["env=cartpole", "env.id=Acrobot-v1"], "Acrobot-v1__dqn__env=cartpole__seed0__"),
        (["exp_name=mine", "+experiment=rainbow"], "CartPole-v1__mine__experiment=rainbow__seed0__"),
    ],
)
def test_a_name_says_the_env_option_and_the_experiment_once(overrides, start):
    assert run_dir_name(*overrides).startswith(start), run_dir_name(*overrides)


def test_a_long_or_odd_name_is_capped_and_filesystem_safe():
    many = [f"exploration.duration={10_000 + i}" for i in range(1)] + [
        "algo.gamma=0.97",
        "algo.batch_size=64",
        "buffer.capacity=5000",
        "network.hidden_sizes=[64,64]",
        "optimizer.eps=0.0001",
    ]
    part = run_part(many)
    assert len(part) <= MAX_CHARS + 2 and part.startswith("__algo.batch_size=64,algo.gamma=0.97")
    assert "/" not in part and "[" not in part and " " not in part
    assert run_part([*many[:-1], "optimizer.eps=0.001"]) != part  # what was cut is in the hash
    assert run_part(["env.id=ALE/Pong-v5"]) == ""  # the name starts with the env id
    assert run_part(["seed=2", "log.plot=false"]) == ""


def test_a_name_leads_with_the_env_id_once_and_keeps_the_group_choices_when_cut():
    name = run_dir_name("env=minatar", "env.id=MinAtar/Breakout-v0", "exp_name=dqn_minatar", "seed=1")
    assert name.startswith("MinAtar-Breakout-v0__dqn_minatar__seed1__"), name
    atari = ["env=atari", "env.id=ALE/Breakout-v5", "network=dueling", "optimizer.lr=0.0001", "buffer=per"]
    atari += ["buffer.capacity=100000", "algo.gamma=0.99", "env.num_envs=8", "exploration.duration=250000"]
    part = run_part(atari)
    assert part.startswith("__buffer=per,network=dueling,") and len(part) <= MAX_CHARS + 2, part
    assert run_part([*atari[:-1], "exploration.duration=100000"]) != part  # a dropped item is in the hash


def test_a_sweep_job_is_named_after_the_swept_keys_only(tmp_path):
    saved = {"hydra": {"overrides": {"task": ["optimizer.lr=1e-3,2e-3", "total_steps=1600", "seed=range(0,3)"]}}}
    (tmp_path / "multirun.yaml").write_text(yaml.safe_dump(saved))
    task = ["optimizer.lr=0.001", "total_steps=1600", "seed=2", "log.interval=10"]
    job = {"num": 5, "config": {"override_dirname": {"exclude_keys": ["log.interval"]}}}
    root = OmegaConf.create({"hydra": {"sweep": {"dir": str(tmp_path), "params": None}, "overrides": {"task": task}}})
    root.hydra.job = job
    assert job_subdir(root) == "optimizer.lr=0.001/seed=2"
    (tmp_path / "multirun.yaml").write_text(yaml.safe_dump({"hydra": {"overrides": {"task": task}}}))
    assert job_subdir(root) == "optimizer.lr=0.001/seed=2/total_steps=1600"  # `-m` without a sweep: one job
    (tmp_path / "multirun.yaml").unlink()  # sweep unknown (no multirun.yaml): every override but the quiet keys
    assert job_subdir(root) == "optimizer.lr=0.001/seed=2/total_steps=1600"
    # Optuna writes no multirun.yaml and samples command-line sweeps its params do not list (seed here): its
    # jobs are named after every override but the quiet keys (after its params alone, trials differing only
    # in seed shared one directory)
    root.hydra.sweeper = {"params": {"optimizer.lr": "tag(log, interval(1e-4, 1e-2))"}}
    assert job_subdir(root) == "optimizer.lr=0.001/seed=2/total_steps=1600"
    root.hydra.overrides.task = ["optimizer.lr=0.001", "total_steps=1600", "seed=1", "log.interval=10"]
    assert job_subdir(root) == "optimizer.lr=0.001/seed=1/total_steps=1600"


def test_a_sweep_with_csv_logging_gets_its_swept_dirs_and_curves(tmp_path):
    args = ["-m", "seed=0,1", "logger=csv", *TINY, f"hydra.sweep.dir={tmp_path}"]
    proc = run_module("rlrun.train", *args, env={**os.environ, "PYTHONWARNINGS": "ignore"}, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    jobs = sorted(p.parent.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("summary.json"))
    assert jobs == ["seed=0", "seed=1"]
    assert "total_steps=300" in (tmp_path / "multirun.yaml").read_text()  # the constants live there,
    report = (tmp_path / "report.md").read_text()
    assert f"Every job of the sweep `{tmp_path}` has `logger=csv` `total_steps=300`" in report  # and in the report
    assert not list(tmp_path.rglob("events.out.tfevents.*"))
    assert (tmp_path / "curves.png").read_bytes()[:4] == b"\x89PNG"  # from episodes.csv


def make_run(job, overrides, cfg, returns, evals=()):
    (job / ".hydra").mkdir(parents=True)
    (job / ".hydra" / "config.yaml").write_text(yaml.safe_dump({"env": {"id": "CartPole-v1"}, **cfg}))
    (job / ".hydra" / "overrides.yaml").write_text(yaml.safe_dump(overrides))
    summary = {"status": "finished", "final_mean_return_100": float(np.mean(returns)), "reward_threshold": 475.0}
    summary |= {"final_eval_return": None, "solved_step": None, "wall_time_s": 1.0}
    (job / "summary.json").write_text(json.dumps(summary))
    steps = np.arange(1, len(returns) + 1) * 20
    rows = pd.DataFrame({"env_step": steps, "episode": range(len(returns)), "return": returns, "length": 20})
    rows.to_csv(job / "episodes.csv", index=False)
    if evals:
        scalars = pd.DataFrame({"env_step": [100 * (i + 1) for i in range(len(evals))], "tag": "eval/mean_return"})
        scalars.assign(value=list(evals)).to_csv(job / "scalars.csv", index=False)


def test_report_labels_by_differing_keys_and_warns_of_pooled_sweeps(tmp_path):
    for sweep, steps, seeds in (("a", 300, (0, 1)), ("b", 300, (2, 3))):  # the same seed twice would count once
        (tmp_path / sweep).mkdir()
        (tmp_path / sweep / "multirun.yaml").write_text("hydra: {}\n")
        for seed in seeds:
            for lr in ("0.001", "0.30000000000000004"):
                over = [f"optimizer.lr={lr}", f"seed={seed}", f"total_steps={steps}", "log.plot=false"]
                cfg = {"optimizer": {"lr": float(lr)}, "seed": seed, "total_steps": steps}
                make_run(tmp_path / sweep / f"optimizer.lr={lr}" / f"seed={seed}", over, cfg, [10.0, 20.0, 30.0 + seed])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        text = write_report(tmp_path, reps=100)
    table = pd.read_csv(tmp_path / "report.csv")
    assert list(table.configuration) == ["optimizer.lr=0.001", "optimizer.lr=0.3"]  # no total_steps, no log.plot
    assert list(table.seeds) == [4, 4]
    assert "**Warning:** the seeds of optimizer.lr=0.001 come from 2 sweeps (`a`, `b`)" in text
    assert (tmp_path / "curves.png").exists()  # no TensorBoard events: the curves of episodes.csv
    assert pooled(load_sweep(tmp_path / "a")) == []  # one sweep: no warning


def test_report_draws_greedy_eval_curves_next_to_training_returns(tmp_path):
    for seed in (0, 1):
        for net in ("mlp", "dueling"):
            job = tmp_path / f"run_{net}_{seed}"
            make_run(job, [f"network={net}", f"seed={seed}"], {"seed": seed}, [10.0, 20.0], evals=(50.0, 90.0 + seed))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        write_report(tmp_path, reps=100)
    import matplotlib.image

    height, width = matplotlib.image.imread(tmp_path / "curves.png").shape[:2]
    assert width > 1.5 * height  # two panels side by side: training returns and greedy evaluations
    assert pd.read_csv(tmp_path / "report.csv").configuration.tolist() == ["network=dueling", "network=mlp"]


@pytest.mark.parametrize(
    ("key", "values", "cfg"),
    [
        ("optimizer.lr", ["1e-3", "0.001"], {"optimizer": {"lr": 0.001}}),
        ("algo.double", ["false", "False"], {"algo": {"double": False}}),
    ],
)
def test_one_value_written_two_ways_is_one_configuration(tmp_path, key, values, cfg):
    for seed, value in enumerate(values):
        make_run(tmp_path / f"run{seed}", [f"{key}={value}", f"seed={seed}"], {"seed": seed, **cfg}, [10.0])
    write_report(tmp_path, reps=100)
    assert pd.read_csv(tmp_path / "report.csv").configuration.tolist() == ["(all jobs)"]


@pytest.mark.slow  # MLflow's and W&B's imports and a store (~15 s); CI has neither package
def test_a_sweeps_runs_share_one_mlflow_store_and_one_wandb_group(tmp_path, monkeypatch):
    mlflow = pytest.importorskip("mlflow")
    from rlrun.logs.sinks import SinkRun, make_sinks

    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    sweep = tmp_path / "multirun" / "CartPole-v1__dqn__t0"
    sweep.mkdir(parents=True)
    (sweep / "multirun.yaml").write_text("hydra: {}\n")
    for seed in (0, 1):
        job = sweep / "optimizer.lr=0.001" / f"seed={seed}"
        job.mkdir(parents=True)
        (sink,) = make_sinks({"mlflow": {}}, SinkRun(job, job, run_name(job), "dqn"))
        sink.start({"seed": seed}, "seed: 0\n")
        sink.close({"env_steps": 10, "status": "finished", "final_mean_return_100": float(seed)})
    single = tmp_path / "outputs" / "CartPole-v1__dqn__seed0__t1"
    single.mkdir(parents=True)
    make_sinks({"mlflow": {}}, SinkRun(single, single, run_name(single), "dqn"))[0].close(
        {"env_steps": 10, "status": "finished"}
    )
    assert sorted(p.name for p in sweep.iterdir()) == [
        "mlruns",
        "multirun.yaml",
        "optimizer.lr=0.001",
    ]
    mlflow.set_tracking_uri(f"sqlite:///{sweep / 'mlruns' / 'mlflow.db'}")
    runs = mlflow.search_runs(experiment_names=["dqn"])
    names = sorted(runs["tags.mlflow.runName"])
    assert names == [f"CartPole-v1__dqn__t0/optimizer.lr=0.001/seed={s}" for s in (0, 1)]
    assert (tmp_path / "outputs" / "mlruns" / "mlflow.db").is_file()  # a single run: next to it, in outputs/
    assert not (single / "mlruns").exists()

    wandb = pytest.importorskip("wandb")
    from rlrun.logs.sinks.wandb import WandbSink

    seen = {}

    def init(**kwargs):  # W&B's own service outlives the test in this process: only what it is given
        seen.update(kwargs)
        raise RuntimeError("stop here")

    monkeypatch.setattr(wandb, "init", init)
    monkeypatch.setenv("WANDB_CACHE_DIR", str(tmp_path / "wandb-cache"))  # the sink sets it if unset
    job = sweep / "optimizer.lr=0.001" / "seed=0"
    with pytest.raises(RuntimeError, match="stop here"):
        WandbSink(SinkRun(job, job, run_name(job), "dqn"), mode="offline")
    assert seen["group"] == "CartPole-v1__dqn__t0" and seen["name"] == names[0]
