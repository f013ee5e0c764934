"""A trained agent, loaded and exported (issue 26): `rlrun.load(run)` acts as the trained network for every
head kind, `python -m rlrun.export` writes a TorchScript file that acts as the policy, a saved `module:` env
id imports nothing on this path either, bad input is one line, and the README's notebook example runs.

Each kind's run is trained once, in this process (a few hundred steps), when a test first asks for it."""

import importlib.util
import re
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from test_saved_configs import HELPERS, MODULE_ID

import rlrun
from rlrun import export
from rlrun.config.saved import from_saved
from rlrun.errors import ConfigError
from rlrun.policy import BatchedRunError
from rlrun.storage import checkpoint as ckpt
from rlrun.training.build import make_network

TINY = ["total_steps=300", "algo.learning_starts=100", "eval.interval=0", "log.plot=false"]
TINY += ["log.progress_bar=false", "logger=[]"]
PIXELS = ["env=atari", "env.id=ALE/Pong-v5", "env.max_episode_steps=200", "env.num_envs=2", "buffer.capacity=64"]
PIXELS += ["algo.batch_size=4", "network.hidden_sizes=[16]", "total_steps=40", "algo.learning_starts=20"]
# overrides, the observation shape and the action count the network is built for (by hand, below)
KINDS = {
    "mlp": ([], (4,), 2),
    "dueling": (["network=dueling"], (4,), 2),
    "c51": (["network=c51"], (4,), 2),
    "qrdqn": (["network=qrdqn"], (4,), 2),
    "iqn": (["network=iqn"], (4,), 2),
    "noisy": (["network=noisy"], (4,), 2),
    "pixels": (PIXELS, (4, 84, 84), 6),
    "seeds": (["seeds=2"], (4,), 2),
}
NO_ALE = pytest.mark.skipif(importlib.util.find_spec("ale_py") is None, reason="needs the atari extra")
HEADS = [*(k for k in KINDS if k not in ("pixels", "seeds")), pytest.param("pixels", marks=NO_ALE)]


def compose(*overrides):
    from hydra import compose as hydra_compose, initialize_config_module

    with initialize_config_module(config_module="rlrun.conf", version_base="1.3"):
        return hydra_compose(config_name="config", overrides=list(overrides))


class Runs:
    """One finished run of each kind, trained in this process when a test first asks for it (`runs / "c51"`)."""

    def __init__(self, root):
        self.root = root

    def __truediv__(self, kind):
        path = self.root / kind
        if not path.exists():
            from rlrun.run import train

            overrides = KINDS[kind][0]
            train(compose(*TINY, *overrides), path)
        return path


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    return Runs(tmp_path_factory.mktemp("policy"))


def observations(kind, n=100, seed=0):
    rng = np.random.default_rng(seed)
    shape = KINDS[kind][1]
    if kind == "pixels":
        return rng.integers(0, 256, (n, *shape), dtype=np.uint8)
    return (rng.standard_normal((n, *shape)) * [1.0, 1.0, 0.1, 1.0]).astype(np.float32)


def trained_network(run, kind):
    """The run's network put together by hand from its files: its checkpoint's config and its model.pt."""
    cfg = from_saved(torch.load(run / ckpt.LATEST, weights_only=True)["config"])
    _, shape, n_actions = KINDS[kind]
    net = make_network(cfg, shape, n_actions, torch.device("cpu"))
    net.load_state_dict(torch.load(run / "model.pt", weights_only=True))
    return net.eval()


@pytest.mark.parametrize("kind", HEADS)
def test_a_loaded_policy_acts_as_the_trained_network(runs, kind):
    run = runs / kind
    policy = rlrun.load(run)
    obs = observations(kind)
    with torch.no_grad():
        q = trained_network(run, kind)(torch.as_tensor(obs))
    actions = policy(obs)
    assert actions.dtype == np.int64 and actions.shape == (100,)
    np.testing.assert_array_equal(actions, q.argmax(dim=-1).numpy())
    assert policy.q_values(obs).shape == (100, KINDS[kind][2])
    np.testing.assert_allclose(policy.q_values(obs), q.numpy(), rtol=1e-5, atol=1e-5)
    # one observation, torch observations, a model.pt or checkpoint path: the same actions
    assert policy(obs[3]) == actions[3] and isinstance(policy(obs[3]), np.int64)
    assert policy.q_values(obs[3]).shape == (KINDS[kind][2],)
    np.testing.assert_array_equal(policy(torch.as_tensor(obs)), actions)
    np.testing.assert_array_equal(rlrun.load(run / ckpt.LATEST)(obs), actions)
    assert policy.device == torch.device("cpu") and policy.to("cpu") is policy
    assert policy.config.network == from_saved(torch.load(run / ckpt.LATEST, weights_only=True)["config"]).network
    with pytest.raises(ValueError, match="observations of shape"):
        policy(obs[:, :1])


@pytest.mark.filterwarnings("ignore:`torch.jit.load` is deprecated:DeprecationWarning")
@pytest.mark.parametrize("kind", HEADS)
def test_the_torchscript_export_acts_as_the_policy(runs, kind, capsys):
    run = runs / kind
    export.main([str(run)])
    path = run / "export" / "model.ts"
    assert capsys.readouterr().out.startswith(f"wrote {path} (torchscript")
    module = torch.jit.load(str(path))
    obs = observations(kind, seed=1)
    with torch.no_grad():
        q = module(torch.as_tensor(obs, dtype=torch.float32))
    np.testing.assert_array_equal(q.argmax(dim=-1).numpy(), rlrun.load(run)(obs))


def test_onnx_without_its_extra_is_one_line(runs, capsys, monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "onnx" else real(name, *a))
    with pytest.raises(SystemExit) as stop:
        export.main([str(runs / "mlp"), "--format", "onnx"])
    err = capsys.readouterr().err
    assert stop.value.code == 2 and err.count("\n") == 1 and "'.[export]'" in err, err
    assert not (runs / "mlp" / "export" / "model.onnx").exists()


def test_onnx_export_acts_as_the_policy(runs, tmp_path):
    onnx = pytest.importorskip("onnx")
    from onnx.reference import ReferenceEvaluator

    out = tmp_path / "agent.onnx"
    export.main([str(runs / "iqn"), "--format", "onnx", "--out", str(out)])
    obs = observations("iqn", seed=2)
    q = ReferenceEvaluator(onnx.load(str(out))).run(None, {"obs": obs})[0]
    np.testing.assert_allclose(q, rlrun.load(runs / "iqn").q_values(obs), rtol=1e-4, atol=1e-5)


def test_export_never_writes_through_a_linked_export_folder(runs, tmp_path, capsys):
    run = tmp_path / "run"
    shutil.copytree(runs / "mlp", run, ignore=shutil.ignore_patterns("export"))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (run / "export").symlink_to(elsewhere)
    with pytest.raises(SystemExit) as stop:
        export.main([str(run)])
    assert stop.value.code == 2 and capsys.readouterr().err.count("\n") == 1
    assert list(elsewhere.iterdir()) == []


@pytest.mark.parametrize("argv", [["no/such/run"], ["empty"], ["run", "--format", "pickle"], []])
def test_bad_input_is_one_line_and_exit_2(tmp_path, capsys, argv):
    (tmp_path / "empty").mkdir()
    with pytest.raises(SystemExit) as stop:
        export.main([str(tmp_path / a) if i == 0 else a for i, a in enumerate(argv)])
    err = capsys.readouterr().err
    assert stop.value.code == 2 and err.count("\n") == 1 and err.startswith("rlrun.export: "), err
    if argv == ["no/such/run"]:
        assert "does not exist: give a run directory, its checkpoint.pt or its model.pt" in err


def test_a_saved_module_env_id_imports_nothing_unless_confirmed(runs, tmp_path, monkeypatch, capsys):
    run = tmp_path / "run"
    shutil.copytree(runs / "mlp", run)
    for name in (ckpt.LATEST, ckpt.PREVIOUS):
        if (run / name).exists():
            state = torch.load(run / name, weights_only=True)
            state["config"]["env"]["id"] = MODULE_ID
            torch.save(state, run / name)
    (run / "helpers.py").write_text(HELPERS)
    monkeypatch.chdir(run)
    monkeypatch.syspath_prepend(str(run))
    with pytest.raises(ConfigError, match="env.id.*module 'helpers'"):
        rlrun.load(run)
    with pytest.raises(SystemExit) as stop:
        export.main([str(run)])
    assert stop.value.code == 2 and "helpers" in capsys.readouterr().err
    assert "helpers" not in sys.modules and not (run / "SENTINEL").exists()
    try:  # the same id given again is the user's choice: the module is imported (the sentinel works)
        assert rlrun.load(run, env_id=MODULE_ID).config.env.id == MODULE_ID
        assert (run / "SENTINEL").exists()
    finally:
        sys.modules.pop("helpers", None)


def test_a_batched_run_names_its_agents_and_each_loads(runs):
    run = runs / "seeds"
    with pytest.raises(BatchedRunError, match="batched run of 2 agents") as refused:
        rlrun.load(run)
    assert refused.value.agent_dirs == [str(run / "seed=0"), str(run / "seed=1")]
    obs = observations("mlp")
    assert rlrun.load(refused.value.agent_dirs[1])(obs).shape == (100,)


def test_the_readme_notebook_example_runs(tmp_path, monkeypatch, capsys):
    """The README's "Train from a notebook" code, as written but for a tiny budget."""
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    section = readme.split("## Train from a notebook", 1)[1]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    assert "total_steps=30_000" in code
    monkeypatch.chdir(tmp_path)
    exec(compile(code.replace("total_steps=30_000", "total_steps=300"), "README.md", "exec"), {})
    out = capsys.readouterr().out
    assert re.search(r"greedy return \d+", out), out
    assert (tmp_path / "outputs" / "notebook" / ckpt.LATEST).exists()
