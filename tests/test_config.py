"""Every option of every group composes and builds; no dead keys; bad values fail early and clearly."""

import ast
import inspect
from pathlib import Path

import pytest
import torch
from hydra.utils import get_class, instantiate
from omegaconf import OmegaConf

import rlrun
from rlrun.build import make_replay
from rlrun.validate import ConfigError, validate

CONF = Path(rlrun.__file__).parent / "conf"
GROUPS = {g: sorted(p.stem for p in (CONF / g).glob("*.yaml")) for g in
          ["network", "buffer", "optimizer", "device", "env"]}
INSTANTIATED = ["network", "buffer", "optimizer"]


def test_groups_have_the_promised_options():
    assert GROUPS["network"] == ["c51", "cnn", "dueling", "mlp", "noisy"]
    assert GROUPS["buffer"] == ["per", "uniform"]
    assert GROUPS["optimizer"] == ["adam", "rmsprop", "sgd"]
    assert GROUPS["device"] == ["auto", "cpu", "cuda"]
    assert {"cartpole", "acrobot", "mountaincar"} <= set(GROUPS["env"])


@pytest.mark.parametrize("group,option", [(g, o) for g, opts in GROUPS.items() for o in opts])
def test_every_option_composes_validates_and_builds(compose, group, option):
    pixels = (group, option) in (("network", "cnn"), ("env", "atari"))  # these two go together
    cfg = compose(f"{group}={option}", *(["env=atari", "network=cnn"] if pixels else []))
    if group == "device" and option == "cuda" and not torch.cuda.is_available():
        validate(cfg)  # types and ranges are fine; resolve_device refuses it (tested below)
        return
    validate(cfg)
    obs_shape = [4, 84, 84] if pixels else [4]
    net = instantiate(cfg.network, obs_dim=4, n_actions=2, obs_shape=obs_shape)
    assert net(torch.zeros(3, *obs_shape)).shape == (3, 2)
    opt = instantiate(cfg.optimizer)(net.parameters())
    assert opt.param_groups[0]["lr"] == cfg.optimizer.lr
    buf = make_replay(cfg, [0], (4,), torch.float32, [torch.Generator()], "cpu")
    assert buf.capacity == cfg.buffer.capacity


def _names_read_by_code() -> set[str]:
    """Attribute names and dotted string keys that rlrun's code reads."""
    names = set()
    for path in Path(rlrun.__file__).parent.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Attribute):
                names.add(node.attr)
            elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                names.update(node.value.split("."))
    return names


def _leaf_keys(node, prefix=""):
    for k, v in node.items():
        if isinstance(v, dict):
            yield from _leaf_keys(v, f"{prefix}{k}.")
        else:
            yield f"{prefix}{k}"


@pytest.mark.parametrize("group,option", [(g, o) for g, opts in GROUPS.items() for o in opts])
def test_no_dead_keys(compose, group, option):
    """Each key is a constructor argument of its `_target_`, or read by name in rlrun's code."""
    cfg = OmegaConf.to_container(compose(f"{group}={option}"))
    if cfg["env"].get("atari") is not None:
        cfg["env"].update(cfg["env"].pop("atari"))  # nested keys: noop_max, frame_skip, ...
    read = _names_read_by_code()
    for g in INSTANTIATED:
        node = cfg.pop(g)
        target = get_class(node["_target_"])
        params = inspect.signature(target.__init__).parameters
        for key in node:
            assert key in ("_target_", "_partial_") or key in params, f"{g}.{key} is not an argument of {target}"
    for key in _leaf_keys(cfg):
        assert key.split(".")[-1] in read, f"config key {key} is never read by rlrun"


BAD_VALUES = [
    ("optimizer.lr=-0.1", "optimizer.lr", "> 0"),
    ("algo.gamma=1.5", "algo.gamma", "(0.0, 1.0]"),
    ("algo.gamma=0", "algo.gamma", "(0.0, 1.0]"),
    ("algo.batch_size=512 buffer.capacity=100", "algo.batch_size", "at most buffer.capacity=100"),
    ("buffer=per buffer.alpha=1.5", "buffer.alpha", "[0.0, 1.0]"),
    ("buffer=per buffer.beta_start=-1", "buffer.beta_start", "[0.0, 1.0]"),
    ("algo.loss=l1", "algo.loss", "one of huber, mse"),
    ("algo.tau=0", "algo.tau", "(0.0, 1.0]"),
    ("exploration.schedule=cosine", "exploration.schedule", "one of linear, exponential"),
    ("exploration.end=2", "exploration.end", "[0.0, 1.0]"),
    ("env.num_envs=0", "env.num_envs", "> 0"),
    ("network.activation=swish", "network.activation", "one of elu, gelu, relu, tanh"),
    ("total_steps=0", "total_steps", "> 0"),
]


@pytest.mark.parametrize("overrides,key,allowed", BAD_VALUES)
def test_bad_values_name_key_value_and_range(compose, overrides, key, allowed):
    with pytest.raises(ConfigError) as err:
        validate(compose(*overrides.split()))
    assert err.value.key == key
    assert key in str(err.value) and allowed in str(err.value)


def test_wrong_type_fails_at_composition_naming_the_key(compose):
    from omegaconf.errors import ValidationError

    with pytest.raises(Exception) as err:
        compose("algo.batch_size=big")
    assert "batch_size" in str(err.value)
    with pytest.raises(Exception) as err:
        compose("buffer=per", "buffer.alpha=high")
    assert "alpha" in str(err.value)


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_cuda_without_cuda_is_a_clear_error():
    from rlrun.device import resolve_device

    with pytest.raises(ConfigError, match="device.type='cuda'.*no CUDA device"):
        resolve_device("cuda")
    assert resolve_device("auto") == torch.device("cpu")


def test_rainbow_preset_turns_everything_on_and_parts_switch_off(compose):
    cfg = compose("+experiment=rainbow")
    validate(cfg)
    assert cfg.network.dueling and cfg.network.noisy and cfg.network.num_atoms == 51
    assert cfg.buffer._target_.endswith("PrioritizedReplayBuffer") and cfg.buffer.n_step == 3
    assert cfg.algo.double and cfg.algo.loss == "cross_entropy"
    net = instantiate(cfg.network, obs_dim=4, n_actions=2)
    assert net.dist_logits(torch.zeros(1, 4)).shape == (1, 2, 51)
    cfg = compose("+experiment=rainbow", "network.noisy=false", "buffer.n_step=1")
    validate(cfg)
    assert not cfg.network.noisy and cfg.buffer.n_step == 1


def test_nonsense_combinations_fail_at_start(compose):
    with pytest.raises(ConfigError, match="algo.loss='huber'.*cross_entropy"):
        validate(compose("network=c51", "algo.loss=huber"))
    with pytest.raises(ConfigError, match="algo.loss='cross_entropy'"):
        validate(compose("algo.loss=cross_entropy"))
    with pytest.raises(ConfigError, match="network.v_min"):
        validate(compose("network=c51", "network.v_min=5", "network.v_max=5"))


@pytest.mark.parametrize("init", ["xavier", "orthogonal"])
def test_initialisations(compose, init):
    net = instantiate(compose(f"network.init={init}").network, obs_dim=4, n_actions=2)
    first = net.trunk[0]
    assert first.bias.abs().sum() == 0
    if init == "orthogonal":
        w = first.weight  # (128, 4): orthonormal columns scaled by sqrt(2)
        torch.testing.assert_close(w.T @ w, 2 * torch.eye(4), atol=1e-5, rtol=0)


def test_pixels_need_the_cnn_and_the_cnn_needs_pixels(compose):
    with pytest.raises(ConfigError, match="network.encoder='mlp'.*network=cnn"):
        validate(compose("env=atari", "network.encoder=mlp"))
    validate(compose("env=atari"))  # env=atari brings the Nature CNN
    with pytest.raises(ConfigError, match="env.frame_stack=0"):
        validate(compose("network=cnn"))
