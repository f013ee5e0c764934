"""Configs and checkpoints read from disk (issue 28): a saved `module:` env id never imports anything, a
saved interpolation is never resolved, a saved config's logger options never choose where data goes, an
empty checkpoint falls back like a damaged one, and runs of several agents are named, not misread."""

import importlib.util
import shutil

import pytest
import torch
import yaml
from omegaconf import OmegaConf
from test_reliability import TINY, cli, copy_run, digest, in_process, train

from rlrun.config import saved
from rlrun.config.saved import from_saved
from rlrun.errors import ConfigError
from rlrun.storage import checkpoint as ckpt

MODULE_ID = "helpers:CartPole-v1"
# A module that, imported, leaves a file next to itself and in the directory it was imported from.
HELPERS = """import pathlib
for where in (pathlib.Path(__file__).parent, pathlib.Path.cwd()):
    (where / "SENTINEL").write_text("helpers.py ran")
"""


# How each kind of run whose config is read from disk is made (a tiny PQN: 4 envs x 32 steps per rollout).
KINDS = {
    "single": ["rlrun.train", *TINY],
    "seeds": ["rlrun.train", *TINY, "seeds=2"],
    "agents": ["rlrun.train", *TINY, "agents=[{seed:0,optimizer.lr:0.001},{seed:1,optimizer.lr:0.002}]"],
    "pqn": ["rlrun.train", "+experiment=pqn_cartpole", "total_steps=512", "algo.num_steps=32", "eval.interval=0"]
    + ["exploration.duration=256", "checkpoint.every=256", "log.plot=false", "log.progress_bar=false"],
    "sweep": ["rlrun.train", "-m", "hydra/launcher=batched", "seed=0,1", *TINY],
}


class Runs:
    """One finished run of each kind, made when a test first asks for it (`runs / "seeds"`)."""

    def __init__(self, root):
        self.root = root

    def __truediv__(self, kind):
        path = self.root / kind
        if not path.exists():
            where = "hydra.sweep.dir" if kind == "sweep" else "hydra.run.dir"
            cli(*KINDS[kind], f"{where}={path}", rc=0)
        return path


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    return Runs(tmp_path_factory.mktemp("saved"))


def copy(runs, name, tmp_path):
    return copy_run(runs / name, tmp_path / name)


def set_saved(run, value, key=("env", "id"), files=(ckpt.LATEST, ckpt.PREVIOUS), hydra_configs=()):
    """Write `value` at `key` into the config of these checkpoints and `.hydra/config.yaml` files."""

    def put(config):
        node = config
        for part in key[:-1]:
            node = node[part]
        node[key[-1]] = value

    for name in files:
        state = torch.load(run / name, weights_only=True)
        put(state["config"])
        torch.save(state, run / name)
    for path in hydra_configs:
        config = yaml.safe_load(path.read_text())
        put(config)
        path.write_text(yaml.safe_dump(config))


def refused(proc, *says):
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1, proc.stderr[-3000:]
    for text in says:
        assert text in lines[0], lines[0]
    return lines[0]


def no_sentinel(*dirs):
    for d in dirs:
        assert not (d / "SENTINEL").exists(), f"helpers.py ran ({d})"


# --- 1. an env id read from disk never imports anything ------------------------------------------------


def test_a_saved_module_env_id_is_refused_by_evaluate_and_resume_of_a_single_run(runs, tmp_path):
    run = copy(runs, "single", tmp_path)
    (run / "helpers.py").write_text(HELPERS)
    set_saved(run, MODULE_ID, hydra_configs=[run / ".hydra" / "config.yaml"])
    before = digest(run)
    for args in (
        ("rlrun.evaluate", ".", "episodes=1"),
        ("rlrun.evaluate", "model.pt", "episodes=1"),
        ("rlrun.evaluate", ckpt.LATEST, "episodes=1"),
        ("rlrun.resume", ".", "total_steps=960"),
        ("rlrun.train", f"resume={run}", "total_steps=960"),
    ):
        refused(in_process(*args, cwd=run), "env.id", "helpers", "module")
    no_sentinel(run)
    assert digest(run) == before
    # evaluate may not be pointed at another env; the same id, given again, is the user's choice
    refused(in_process("rlrun.evaluate", run, "episodes=1", "env.id=Acrobot-v1"), "env.id", "cannot change")
    in_process("rlrun.evaluate", ".", "episodes=1", f"env.id={MODULE_ID}", cwd=run, rc=0)
    assert (run / "SENTINEL").exists()


@pytest.mark.slow  # a confirmation path (~20 s); refusals are in the default run
def test_a_module_env_id_given_on_the_command_line_trains_and_resumes_when_given_again(tmp_path):
    (tmp_path / "helpers.py").write_text(HELPERS)
    run = tmp_path / "run"
    train(f"hydra.run.dir={run}", f"env.id={MODULE_ID}", cwd=tmp_path, rc=0)  # the user's own choice
    assert (tmp_path / "SENTINEL").exists()
    (tmp_path / "SENTINEL").unlink()
    refused(in_process("rlrun.resume", run, "total_steps=960", cwd=tmp_path), "env.id", "module")
    refused(in_process("rlrun.evaluate", run, "episodes=1", cwd=tmp_path), "env.id", "module")
    no_sentinel(tmp_path)
    in_process("rlrun.resume", run, "total_steps=960", f"env.id={MODULE_ID}", cwd=tmp_path, rc=0)
    assert (tmp_path / "SENTINEL").exists() and torch.load(run / ckpt.LATEST, weights_only=True)["step"] == 960


@pytest.mark.slow  # four kinds of runs (~60 s); the single run's paths are in the default run
def test_a_saved_module_env_id_is_refused_for_seeds_agents_pqn_and_batched_groups(runs, tmp_path):
    seeds = copy(runs, "seeds", tmp_path)
    set_saved(seeds, MODULE_ID, hydra_configs=[seeds / "seed=0" / ".hydra" / "config.yaml"])
    pqn = copy(runs, "pqn", tmp_path)
    set_saved(pqn, MODULE_ID, hydra_configs=[pqn / ".hydra" / "config.yaml"])
    sweep = copy(runs, "sweep", tmp_path)
    group = sweep / ".batched" / "jobs0-1"
    set_saved(group, MODULE_ID)
    calls = [
        (seeds, "rlrun.evaluate", "seed=0/model.pt"),
        (seeds, "rlrun.resume", "."),
        (pqn, "rlrun.evaluate", "."),
        (pqn, "rlrun.evaluate", "model.pt"),
        (pqn, "rlrun.resume", "."),
        (group, "rlrun.evaluate", ckpt.LATEST),
        (group, "rlrun.resume", "."),
    ]
    for where in (seeds, seeds / "seed=0", pqn, group):
        (where / "helpers.py").write_text(HELPERS)
    before = {d: digest(d) for d in (seeds, pqn, sweep)}
    for where, *args in calls:
        refused(
            in_process(*args, "episodes=1" if args[0] == "rlrun.evaluate" else "total_steps=960", cwd=where), "module"
        )
    no_sentinel(seeds, seeds / "seed=0", pqn, group)
    assert {d: digest(d) for d in before} == before


def test_module_ids_are_refused_only_where_a_config_is_read_from_disk(compose):
    config = OmegaConf.to_container(compose())  # as a run's .hydra/config.yaml holds it
    config["env"]["id"] = MODULE_ID
    assert from_saved(config).env.id == MODULE_ID  # a command line's config (batching, the launcher)
    with pytest.raises(ConfigError, match="module"):
        saved.from_disk(config)
    assert saved.from_disk(config, MODULE_ID).env.id == MODULE_ID  # confirmed on the command line
    composed = OmegaConf.create({"env": {"id": MODULE_ID}})
    assert saved.command_line_env_id([f"env.id={MODULE_ID}"], composed) == MODULE_ID
    assert saved.command_line_env_id(["total_steps=5"], composed) is None


# --- 2. interpolations in saved configs are refused -----------------------------------------------


@pytest.mark.parametrize("value", ["${oc.env:RLRUN_TEST_SECRET}", "${oc.create:{a: 1}}"])
def test_an_interpolation_in_a_saved_config_is_refused_and_never_resolved(runs, tmp_path, monkeypatch, value):
    run = copy(runs, "single", tmp_path)
    set_saved(run, value, key=("exp_name",), hydra_configs=[run / ".hydra" / "config.yaml"])
    before = digest(run)
    monkeypatch.setenv("RLRUN_TEST_SECRET", "hunter2-secret")
    for args in (
        ("rlrun.resume", run, "total_steps=960"),
        ("rlrun.evaluate", run, "episodes=1"),
        ("rlrun.evaluate", run / "model.pt", "episodes=1"),
    ):
        refused(in_process(*args), "exp_name", "interpolation")
    assert digest(run) == before
    assert not any(b"hunter2" in p.read_bytes() for p in run.rglob("*") if p.is_file())


def test_interpolations_are_found_anywhere_and_named():
    with pytest.raises(ConfigError, match=r"agents\[1\]\.dir"):
        saved.check({"agents": [{"seed": 0}, {"seed": 1, "dir": "x/${oc.env:HOME}"}]})
    with pytest.raises(ConfigError, match=r"network\.hidden_sizes\[0\]"):
        saved.check({"network": {"hidden_sizes": ["${oc.create:[1]}"]}})


# --- 3. a checkpoint's logger settings never choose where data goes ---------------------------------


@pytest.mark.slow  # MLflow's import and store (~25 s)
@pytest.mark.skipif(importlib.util.find_spec("mlflow") is None, reason="the mlflow extra is not installed")
def test_a_saved_mlflow_tracking_uri_is_not_used_on_resume(tmp_path):
    run = tmp_path / "run"
    train(f"hydra.run.dir={run}", "logger=[tensorboard,mlflow]", rc=0)
    outside = tmp_path / "outside"
    outside.mkdir()
    set_saved(run, f"sqlite:///{outside / 'mlflow.db'}", key=("logger", "mlflow", "tracking_uri"))
    set_saved(run, "stolen", key=("logger", "mlflow", "experiment"))
    cli("rlrun.resume", run, "total_steps=960", rc=0)
    assert list(outside.iterdir()) == [], "the saved tracking URI chose where the resumed run logged"
    state = torch.load(run / ckpt.LATEST, weights_only=True)
    assert state["step"] == 960 and state["config"]["logger"]["mlflow"]["tracking_uri"] is None


# --- 4. empty checkpoint files ----------------------------------------------------------------------


def test_a_checkpoint_whose_env_state_does_not_fit_its_envs_is_refused(runs, tmp_path):
    """An edited config that makes other envs than the checkpoint's (here the sync vector env for a
    numpy CartPole run): one line, exit 2, the run unchanged (it was an AttributeError traceback)."""
    run = copy(runs, "single", tmp_path)
    set_saved(run, "sync", key=("env", "vectorization"))
    before = digest(run)
    proc = in_process("rlrun.resume", run, "total_steps=960", rc=2)
    assert proc.stderr.strip().endswith(
        "does not fit these envs (AttributeError: 'NoneType' object has no attribute 'bit_generator')"
    )
    after = digest(run)  # the refused resume's own record (.hydra/resume_<time>/) and events file aside
    assert {name: after.get(name) for name in before} == before


def test_an_empty_file_is_a_damaged_checkpoint(tmp_path):
    (tmp_path / ckpt.LATEST).write_bytes(b"")
    with pytest.raises(ckpt.CheckpointError, match="empty"):
        ckpt.read(tmp_path / ckpt.LATEST)


def test_an_empty_checkpoint_falls_back_and_an_empty_model_is_one_line(runs, tmp_path):
    run = copy(runs, "single", tmp_path)
    (run / ckpt.LATEST).write_bytes(b"")
    proc = in_process("rlrun.evaluate", run, "episodes=1", rc=0)
    assert "damaged; evaluating checkpoint.prev.pt" in proc.stderr
    proc = in_process("rlrun.resume", run, "total_steps=960", rc=0)
    assert "damaged; resuming from checkpoint.prev.pt" in proc.stderr
    (run / ckpt.LATEST).write_bytes(b"")
    (run / ckpt.PREVIOUS).write_bytes(b"")
    (run / "model.pt").write_bytes(b"")
    for args in (("rlrun.resume", run), ("rlrun.evaluate", run), ("rlrun.evaluate", run / "model.pt")):
        refused(in_process(*args), "empty")


# --- 5. runs of several agents are named -----------------------------------------------------------


def test_a_batched_job_dir_names_its_groups_resume_command(runs, tmp_path):
    sweep = copy(runs, "sweep", tmp_path)
    job = next(p.parent for p in sweep.rglob("summary.json") if "seed=1" in str(p) and ".batched" not in str(p))
    line = refused(in_process("rlrun.resume", job, "total_steps=960"))
    assert f"python -m rlrun.resume {sweep / '.batched' / 'jobs0-1'}" in line


def test_evaluate_on_an_agents_run_names_the_agent_dirs(runs, tmp_path):
    run = copy(runs, "agents", tmp_path)
    line = refused(in_process("rlrun.evaluate", run, "episodes=1"), "2 agents")
    for agent in ("optimizer.lr=0.001/seed=0", "optimizer.lr=0.002/seed=1"):
        assert str(run / agent) in line
    shutil.rmtree(run / ".hydra")  # the check reads the checkpoint's config, not the run's .hydra
    refused(in_process("rlrun.evaluate", run / ckpt.LATEST, "episodes=1"), "2 agents")
