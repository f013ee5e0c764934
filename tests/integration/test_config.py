"""Every option of every group composes and builds; no dead keys; bad values fail early and clearly."""

import inspect
import sys
from pathlib import Path

import pytest
import torch
from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf

import rlrun
import rlrun.config.validate
from rlrun.config.validate import validate
from rlrun.errors import ConfigError
from rlrun.training.build import make_replay

CONF = Path(rlrun.__file__).parent / "conf"
GROUPS = {
    g: sorted(p.stem for p in (CONF / g).glob("*.yaml")) for g in ["network", "buffer", "optimizer", "device", "env"]
}


def test_groups_have_the_promised_options():
    assert GROUPS["network"] == ["c51", "cnn", "der", "dueling", "iqn", "minatar", "mlp", "noisy", "qrdqn"]
    assert GROUPS["buffer"] == ["per", "uniform"]
    assert GROUPS["optimizer"] == ["adam", "rmsprop", "sgd"]
    assert GROUPS["device"] == ["auto", "cpu", "cuda"]
    assert {"cartpole", "acrobot", "mountaincar"} <= set(GROUPS["env"])


@pytest.mark.parametrize("group,option", [(g, o) for g, opts in GROUPS.items() for o in opts])
def test_every_option_composes_validates_and_builds(compose, group, option):
    pixels = (group, option) in (("network", "cnn"), ("network", "der"), ("env", "atari"))  # these go together
    cfg = compose(*_option_overrides(group, option))
    if group == "device" and option == "cuda" and not torch.cuda.is_available():
        validate(cfg)  # types and ranges are fine; resolve_device refuses it (tested below)
        return
    validate(cfg)
    grid = (group, option) in (("network", "minatar"), ("env", "minatar"))  # MinAtar's (C, 10, 10) grids
    obs_shape = [4, 84, 84] if pixels else [4, 10, 10] if grid else [4]
    net = instantiate(cfg.network, obs_dim=4, n_actions=2, obs_shape=obs_shape)
    assert net(torch.zeros(3, *obs_shape)).shape == (3, 2)
    opt = instantiate(cfg.optimizer)(net.parameters())
    assert opt.param_groups[0]["lr"] == cfg.optimizer.lr
    buf = make_replay(cfg, [0], (4,), torch.float32, [torch.Generator()], "cpu")
    assert buf.capacity == cfg.buffer.capacity


# --- no dead keys: every key path of every option is read by a run ------------------------------------

# Keys that a run legitimately never reads, each with the reason. (`hydra.*` is not in a composed config.)
READ_OUTSIDE_TRAIN = {
    "resume": "read by the command line (rlrun.cli, rlrun.config.preflight), which hands train() the loaded checkpoint",
    "network._target_": "for hydra.utils.instantiate (tests, notebooks); validate checks that it names QNetwork, "
    "which build makes directly",
    "objective": "read by the sweep's task function (rlrun.cli.hydra_main, rlrun.sweeps.batching.run_chunk) from the "
    "summary train() returns",
    "optimizer._partial_": "for hydra.utils.instantiate (the optimizer needs the parameters); build calls the class "
    "that optimizer._target_ names",
}
# Keys that one option makes a run ignore.
UNREAD_WITH = {
    "network=noisy": {
        "exploration.start": "noisy nets explore through their weights: epsilon-greedy is off",
        "exploration.end": "noisy nets explore through their weights: epsilon-greedy is off",
    },
}
# The smallest run that still reaches every part: evaluation, logging and checkpoints each happen once.
TINY_RUN = [
    "total_steps=200",
    "algo.learning_starts=100",
    "eval.interval=100",
    "eval.episodes=1",
    "log.interval=100",
    "checkpoint.every=100",
    "buffer.capacity=1000",
    "env.max_episode_steps=100",
]
VALIDATE_FILE = Path(inspect.getfile(rlrun.config.validate))


def _leaf_keys(node, prefix=""):
    """Every key path of a plain config; a list (hidden_sizes) or a null is a leaf."""
    for k, v in node.items():
        if isinstance(v, dict) and v:
            yield from _leaf_keys(v, f"{prefix}{k}.")
        else:
            yield f"{prefix}{k}"


class _ReadDict(dict):
    """A config group handed out as a plain dict (OmegaConf.to_container of a group): a key counts as read
    when its value is taken (`d[k]`, `d.get(k)`, `**d`, items(), values()), not when it is popped."""

    def __init__(self, data, path, record):
        super().__init__(
            {k: _ReadDict(v, f"{path}{k}.", record) if isinstance(v, dict) else v for k, v in data.items()}
        )
        self._path, self._record = path, record

    def _read(self, key):
        self._record(f"{self._path}{key}")

    def __getitem__(self, key):
        self._read(key)
        return super().__getitem__(key)

    def get(self, key, default=None):
        if key in self:
            self._read(key)
        return super().get(key, default)

    def __iter__(self):  # defined, so that `**d` takes each value through __getitem__
        return iter(list(dict.keys(self)))

    def items(self):
        return [(k, self[k]) for k in self.keys()]

    def values(self):
        return [self[k] for k in self.keys()]


@pytest.fixture
def config_reads(monkeypatch):
    """The key paths (`algo.tau`) that the code reads from any DictConfig from now on: attribute and item
    reads, and a group turned into a plain dict (`plain(cfg.network)`) as its keys are taken. Not reads:
    rlrun.config.validate's checks, and dumps of the whole config (to_container/to_yaml of the root: the saved
    config, TensorBoard's hparams)."""
    reads = set()
    busy = []  # omegaconf calls itself: record the outermost read only

    def outside_validate():
        frame = sys._getframe(2)
        while frame is not None:
            if Path(frame.f_code.co_filename) == VALIDATE_FILE:
                return False
            frame = frame.f_back
        return True

    def recording(method):
        def read(self, key, *args, **kwargs):
            if busy:
                return method(self, key, *args, **kwargs)
            busy.append(key)
            try:
                value = method(self, key, *args, **kwargs)
                if isinstance(key, str) and not key.startswith("__") and outside_validate():
                    reads.add(self._get_full_key(key))
                return value
            finally:
                busy.pop()

        return read

    to_container = OmegaConf.to_container

    def group_to_container(cfg, *args, **kwargs):
        out = to_container(cfg, *args, **kwargs)
        if (
            isinstance(cfg, DictConfig)
            and cfg._get_parent() is not None
            and isinstance(out, dict)
            and outside_validate()
        ):
            return _ReadDict(out, cfg._get_full_key(None) + ".", reads.add)
        return out

    for name in ("__getattr__", "__getitem__", "get"):
        monkeypatch.setattr(DictConfig, name, recording(getattr(DictConfig, name)))
    monkeypatch.setattr(OmegaConf, "to_container", staticmethod(group_to_container))
    return reads


def test_the_read_recorder_counts_reads_not_validation_or_dumps(compose, config_reads):
    cfg = compose("env=atari", "network=cnn")
    config_reads.clear()  # Hydra's own, while composing
    validate(cfg)
    OmegaConf.to_yaml(cfg)
    OmegaConf.to_container(cfg, resolve=True)
    assert config_reads == set()
    assert cfg.algo.tau == 1.0 and cfg["env"].get("frame_stack") == 4
    assert OmegaConf.to_container(cfg.env.atari)["noop_max"] == 30
    assert config_reads == {"algo", "algo.tau", "env", "env.frame_stack", "env.atari", "env.atari.noop_max"}
    config_reads.clear()
    kwargs = OmegaConf.to_container(cfg.network, resolve=True)
    kwargs.pop("dueling")
    assert config_reads == {"network"}  # nothing taken yet, and `dueling` dropped
    dict(**kwargs)
    assert config_reads == {"network"} | {f"network.{k}" for k in kwargs}


def _option_overrides(group, option):
    pixels = (group, option) in (("network", "cnn"), ("network", "der"), ("env", "atari"))  # these go together
    grid = (group, option) == ("network", "minatar")  # MinAtar's network reads MinAtar's grids
    network = ["network=cnn"] if option != "der" else []
    return [f"{group}={option}", *(["env=atari", *network] if pixels else ["env=minatar"] if grid else [])]


@pytest.mark.parametrize("group,option", [(g, o) for g, opts in GROUPS.items() for o in opts])
def test_no_dead_keys(compose, config_reads, tmp_path, group, option):
    """Every key path of the composed config (`algo.tau`, `env.atari.noop_max`) is read by a run of it
    (rlrun.train.train on a tiny budget), or listed in READ_OUTSIDE_TRAIN with the reason."""
    import rlrun.train

    if group == "device" and option == "cuda" and not torch.cuda.is_available():
        pytest.skip("needs CUDA; its keys are device=auto's")
    if option == "atari":
        pytest.importorskip("ale_py")
    if option == "minatar":
        pytest.importorskip("minatar")
    if option == "lunarlander":
        pytest.importorskip("Box2D")
    cfg = compose(*_option_overrides(group, option), *TINY_RUN)
    keys = set(_leaf_keys(OmegaConf.to_container(cfg)))
    config_reads.clear()  # composing read some
    rlrun.train.train(cfg, tmp_path / "run")
    allowed = {**READ_OUTSIDE_TRAIN, **UNREAD_WITH.get(f"{group}={option}", {})}
    unread = sorted(keys - config_reads - set(allowed))
    assert not unread, f"config keys that a run never reads (use them, drop them, or allow-list them): {unread}"
    stale = sorted(k for k in allowed if k in config_reads)
    assert not stale, f"allow-listed keys that this run reads: take them off the allow-list: {stale}"


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
    ("log.progress_interval=-5", "log.progress_interval", ">= 0.0"),
]


@pytest.mark.parametrize("overrides,key,allowed", BAD_VALUES)
def test_bad_values_name_key_value_and_range(compose, overrides, key, allowed):
    with pytest.raises(ConfigError) as err:
        validate(compose(*overrides.split()))
    assert err.value.key == key
    assert key in str(err.value) and allowed in str(err.value)


def test_wrong_type_fails_at_composition_naming_the_key(compose):

    with pytest.raises(Exception) as err:
        compose("algo.batch_size=big")
    assert "batch_size" in str(err.value)
    with pytest.raises(Exception) as err:
        compose("buffer=per", "buffer.alpha=high")
    assert "alpha" in str(err.value)


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_cuda_without_cuda_is_a_clear_error():
    from rlrun.training.device import resolve_device

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


def test_noisy_nets_come_with_the_dueling_head_and_prioritized_replay_which_the_command_line_overrides(compose):
    """network=noisy is Rainbow's pairing (conf/network/noisy.yaml): on CartPole it took the seeds that fell
    short of 475 from 5 of 80 to 0 of 60. The buffer lives in the network option, so it holds on every env."""
    for env in ("cartpole", "acrobot"):
        cfg = compose(f"env={env}", "network=noisy")
        assert cfg.network.noisy and cfg.network.dueling
        assert cfg.buffer._target_ == "rlrun.replay.PrioritizedReplayBuffer"
        validate(cfg)
    plain = compose("network=noisy", "buffer=uniform", "network.dueling=false")
    assert plain.buffer._target_ == "rlrun.replay.ReplayBuffer" and not plain.network.dueling
    validate(plain)
    assert compose("network=mlp", "network.noisy=true").buffer._target_ == "rlrun.replay.ReplayBuffer"


@pytest.mark.parametrize(
    "network,expected",
    [
        ("qrdqn", {"optimizer.lr": 2.5e-3, "algo.train_freq": 4, "algo.tau": 0.05}),
        ("iqn", {"optimizer.lr": 3e-3, "algo.train_freq": 8, "algo.tau": 0.1}),
        ("noisy", {"optimizer.lr": 2.5e-3, "algo.train_freq": 4, "algo.tau": 0.02, "network.noisy_sigma0": 0.05}),
    ],
)
def test_cartpole_settings_per_network_apply_with_cartpole_only(compose, network, expected):
    """conf/env_network/cartpole_<network>.yaml: the tuned CartPole settings, and nothing of them elsewhere."""
    on_cartpole = compose(f"network={network}")
    assert {key: OmegaConf.select(on_cartpole, key) for key in expected} == expected
    on_acrobot = compose("env=acrobot", f"network={network}")
    assert OmegaConf.select(on_acrobot, "algo.tau") == OmegaConf.select(compose("env=acrobot"), "algo.tau")
    assert OmegaConf.select(on_acrobot, "optimizer.lr") == OmegaConf.select(compose("env=acrobot"), "optimizer.lr")
