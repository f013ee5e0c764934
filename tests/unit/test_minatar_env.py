"""MinAtar (issue 40): rlrun's own registration of the five games, observations and actions checked by hand
against the games' rules, seeding, the MinAtar network's shapes, its stacked (grouped-convolution) form,
and the checks that keep a grid from the wrong encoder."""

import gymnasium as gym
import numpy as np
import pytest
import torch

pytest.importorskip("minatar")

from rlrun.config.replay_memory import replay_bytes, stored_obs_itemsize  # noqa: E402
from rlrun.envs import minatar  # noqa: E402
from rlrun.envs.pixels import check_image_obs  # noqa: E402
from rlrun.envs.spec import env_spec  # noqa: E402
from rlrun.errors import ConfigError  # noqa: E402
from rlrun.nets.networks import QNetwork  # noqa: E402
from rlrun.nets.stacked import StackedQNetwork, stack_networks  # noqa: E402

CHANNELS = {"Asterix": 4, "Breakout": 4, "Freeway": 7, "Seaquest": 10, "SpaceInvaders": 6}
MINIMAL = {"Asterix": 5, "Breakout": 3, "Freeway": 3, "Seaquest": 6, "SpaceInvaders": 4}


def make(env_id, **kwargs):
    env_spec(env_id)  # rlrun registers the MinAtar ids on first use
    return gym.make(env_id, **kwargs).unwrapped


@pytest.mark.parametrize("name", sorted(CHANNELS))
def test_every_game_is_registered_to_rlrun_code_with_both_action_sets(name):
    full, minimal = env_spec(f"MinAtar/{name}-v0"), env_spec(f"MinAtar/{name}-v1")
    assert full.entry_point == minimal.entry_point == "rlrun.envs.minatar:MinAtarEnv"
    assert isinstance(make(f"MinAtar/{name}-v1"), minatar.MinAtarEnv)
    env = make(f"MinAtar/{name}-v0")
    assert env.observation_space == gym.spaces.Box(0, 1, (CHANNELS[name], 10, 10), np.uint8)
    assert env.action_space.n == 6 and make(f"MinAtar/{name}-v1").action_space.n == MINIMAL[name]
    obs, _ = env.reset(seed=0)
    assert obs.dtype == np.uint8 and obs.shape == (CHANNELS[name], 10, 10) and set(np.unique(obs)) <= {0, 1}


def test_breakouts_first_grid_by_hand():
    """Breakout's reset: paddle (channel 0) at row 9, column 4; the ball (1) and its trail (2) on one cell of
    row 3 at column 0 or 9; bricks (3) fill rows 1-3."""
    obs, _ = make("MinAtar/Breakout-v0").reset(seed=0)
    assert np.argwhere(obs[0]).tolist() == [[9, 4]]
    ball = np.argwhere(obs[1]).tolist()
    assert ball in ([[3, 0]], [[3, 9]]) and np.argwhere(obs[2]).tolist() == ball
    bricks = np.zeros((10, 10), np.uint8)
    bricks[1:4] = 1
    assert (obs[3] == bricks).all()


def test_actions_map_to_the_game_and_sticky_actions_repeat_the_last_one():
    """v1's minimal set for Breakout is (n, l, r): its action 2 is the game's 'r' (3). With stickiness 1
    every step repeats the previous action (no-op after a reset), so the paddle never moves."""
    paddle = lambda obs: int(np.argwhere(obs[0])[0][1])  # noqa: E731
    v1 = make("MinAtar/Breakout-v1", sticky_action_prob=0.0)
    v1.reset(seed=0)
    assert paddle(v1.step(2)[0]) == 5 and paddle(v1.step(1)[0]) == 4
    v0 = make("MinAtar/Breakout-v0", sticky_action_prob=0.0)
    v0.reset(seed=0)
    assert paddle(v0.step(3)[0]) == 5 and paddle(v0.step(1)[0]) == 4
    stuck = make("MinAtar/Breakout-v0", sticky_action_prob=1.0)
    stuck.reset(seed=0)
    assert [paddle(stuck.step(a)[0]) for a in (1, 3, 1, 1)] == [4, 4, 4, 4]


def play(env_id, seed, steps=300):
    env = make(env_id)
    obs, _ = env.reset(seed=seed)
    rng = np.random.default_rng(123)
    seen, ends = [obs], 0
    for _ in range(steps):
        obs, reward, terminated, truncated, _ = env.step(int(rng.integers(env.action_space.n)))
        assert not truncated and isinstance(reward, float)
        seen.append(obs)
        if terminated:
            ends += 1
            obs, _ = env.reset()
            seen.append(obs)
    return np.stack(seen), ends


def test_a_seed_repeats_the_game_and_another_seed_does_not():
    a, ends = play("MinAtar/Asterix-v0", 3)
    b, _ = play("MinAtar/Asterix-v0", 3)
    c, _ = play("MinAtar/Asterix-v0", 4)
    assert ends >= 1 and np.array_equal(a, b) and not np.array_equal(a, c)


def test_the_game_end_terminates_and_never_truncates():
    """Breakout with the no-op: the ball falls past the paddle within a few dozen steps."""
    env = make("MinAtar/Breakout-v0", sticky_action_prob=0.0)
    env.reset(seed=1)
    steps, terminated = 0, False
    while not terminated and steps < 200:
        _, _, terminated, truncated, _ = env.step(0)
        steps += 1
        assert not truncated
    assert terminated and steps < 50


def test_frames_render_as_rgb_images():
    env = make("MinAtar/Seaquest-v0", render_mode="rgb_array")
    env.reset(seed=0)
    frame = env.render()
    assert frame.shape == (160, 160, 3) and frame.dtype == np.uint8 and frame.max() > 0


def test_without_the_package_the_error_names_the_extra(monkeypatch):
    import sys

    monkeypatch.setattr(minatar, "_GAME_MODULES", {})
    monkeypatch.setitem(sys.modules, "minatar", None)  # find_spec now raises ImportError
    with pytest.raises(ConfigError, match=r"minatar extra"):
        minatar.register_minatar()


def test_the_games_load_without_the_packages_display_code(monkeypatch):
    """minatar/__init__ imports matplotlib and seaborn (seconds of start-up); rlrun loads only the games."""
    import sys

    monkeypatch.setattr(minatar, "_GAME_MODULES", {})
    for name in [m for m in sys.modules if m == "minatar" or m.startswith("minatar.")]:
        monkeypatch.delitem(sys.modules, name)
    module = minatar.game_module("seaquest")
    assert hasattr(module, "Env") and "minatar" not in sys.modules


# --- the network ------------------------------------------------------------------------------------------------


def minatar_net(channels=4, actions=6, **kwargs):
    return QNetwork(
        obs_dim=channels * 100,
        n_actions=actions,
        hidden_sizes=[128],
        layer_norm=False,
        encoder="minatar_cnn",
        obs_shape=[channels, 10, 10],
        **kwargs,
    )


def test_the_minatar_network_has_the_papers_shapes():
    """conv 16 filters 3x3 stride 1 over 10x10 -> 16 x 8 x 8 = 1024 features -> 128 -> actions:
    4*9*16 + 16 + 1024*128 + 128 + 128*6 + 6 = 132,566 parameters for Breakout."""
    net = minatar_net()
    conv = net.trunk[0][0]
    assert conv.weight.shape == (16, 4, 3, 3) and conv.stride == (1, 1) and net.trunk[1].in_features == 1024
    assert sum(p.numel() for p in net.parameters()) == 4 * 9 * 16 + 16 + 1024 * 128 + 128 + 128 * 6 + 6 == 132_566
    obs = torch.zeros(5, 4, 10, 10, dtype=torch.uint8)
    obs[:, 0, 9, 4] = 1
    q = net(obs)
    assert q.shape == (5, 6)
    assert torch.equal(q, net(obs.float())), "grids are 0/1: read as they are, never scaled like 0-255 frames"


def test_the_nature_cnns_frames_are_still_divided_by_255():
    """Adding the grid encoder kept Atari's input bit for bit: x / 255, not x * (1 / 255) (126 of the 256
    byte values round differently), in the single and the stacked network."""
    frames = torch.arange(256, dtype=torch.uint8).repeat(4 * 36 * 36 // 256 * 4)[: 4 * 36 * 36].view(1, 4, 36, 36)
    kw = dict(obs_dim=4 * 36 * 36, n_actions=2, hidden_sizes=[8], encoder="nature_cnn", obs_shape=[4, 36, 36])
    net = QNetwork(**kw)
    assert torch.equal(net._input(frames), frames.float() / 255.0)
    stacked = StackedQNetwork.__new__(StackedQNetwork)  # only its input path
    stacked.pixels, stacked.input_divisor = net.pixels, net.input_divisor
    assert torch.equal(stacked._input(frames[None]), frames[None].float() / 255.0)


@pytest.mark.parametrize(
    "kind",
    [{}, {"dueling": True}, {"num_atoms": 11}, {"num_quantiles": 8}, {"tau_embedding_dim": 16}, {"noisy": True}],
    ids=["plain", "dueling", "c51", "qrdqn", "iqn", "noisy"],
)
def test_stacked_agents_compute_what_their_single_networks_compute(kind):
    torch.manual_seed(0)
    nets = [minatar_net(**kind) for _ in range(3)]
    stacked = stack_networks(nets)
    assert isinstance(stacked, StackedQNetwork), "MinAtar's conv is fused (grouped), not vmapped"
    stacked.eval()
    for net in nets:
        net.eval()
    obs = (torch.rand(3, 7, 4, 10, 10) < 0.2).to(torch.uint8)
    q = stacked(obs)
    for k, net in enumerate(nets):
        torch.testing.assert_close(q[k], net(obs[k]), rtol=1e-5, atol=1e-6)
        single = minatar_net(**kind)
        single.load_state_dict(stacked.agent_state_dict(k))
        single.eval()
        torch.testing.assert_close(single(obs[k]), net(obs[k]), rtol=0, atol=0)


def test_stacked_conv_gradients_are_each_agents_own():
    torch.manual_seed(1)
    nets = [minatar_net() for _ in range(2)]
    stacked = stack_networks(nets)
    obs = (torch.rand(2, 6, 4, 10, 10) < 0.2).to(torch.uint8)
    stacked(obs)[1].sum().backward()  # agent 1's outputs only
    conv = stacked.trunk[0]
    assert conv.weights[0].grad[0].abs().sum() == 0 and conv.weights[0].grad[1].abs().sum() > 0
    nets[1](obs[1]).sum().backward()
    torch.testing.assert_close(conv.weights[0].grad[1], nets[1].trunk[0][0].weight.grad, rtol=1e-4, atol=1e-6)


# --- checks -----------------------------------------------------------------------------------------------------


def test_a_grid_without_the_grid_encoder_is_refused_naming_network_minatar():
    space = gym.spaces.Box(0, 1, (4, 10, 10), np.uint8)
    with pytest.raises(ConfigError, match="network=minatar"):
        check_image_obs("MinAtar/Breakout-v0", space, 0, "mlp")
    check_image_obs("MinAtar/Breakout-v0", space, 0, "minatar_cnn")
    with pytest.raises(ConfigError, match="network.encoder"):
        check_image_obs("CartPole-v1", gym.spaces.Box(-1, 1, (4,), np.float32), 0, "minatar_cnn")


def test_uint8_grids_are_stored_as_bytes():
    """Replay keeps uint8 observations as they come: a quarter of float32's obs storage."""
    assert stored_obs_itemsize(np.uint8) == 1 and stored_obs_itemsize(np.float32) == 4
    obs_part = 100_000 * 2 * 4 * 100
    assert (
        replay_bytes(100_000, (4, 10, 10), 0, 1, obs_itemsize=1)
        - replay_bytes(100_000, (4, 10, 10), 0, 1, obs_itemsize=4)
        == obs_part - 4 * obs_part
    )


def test_a_saved_game_state_continues_the_same_game_and_refuses_foreign_keys():
    from rlrun.storage.checkpoint import CheckpointError, env_state, restore_env_state

    rng = np.random.default_rng(0)
    actions = rng.integers(6, size=250)
    env = make("MinAtar/Seaquest-v0")
    env.reset(seed=5)
    for a in actions[:150]:
        if env.step(int(a))[2]:
            env.reset()
    saved = env_state(env)

    def rest(e):
        out = []
        for a in actions[150:]:
            obs, reward, terminated, _, _ = e.step(int(a))
            out.append((obs.copy(), reward))
            if terminated:
                e.reset()
        return out

    expected = rest(env)
    other = make("MinAtar/Seaquest-v0")
    other.reset(seed=99)
    restore_env_state(other, saved)
    got = rest(other)
    assert all(np.array_equal(a[0], b[0]) and a[1] == b[1] for a, b in zip(got, expected, strict=True))
    saved["vector"][0]["own"]["game"]["__class__"] = 1
    with pytest.raises(CheckpointError, match="state attribute"):
        restore_env_state(other, saved)


class AlwaysNoop(torch.nn.Module):
    """A greedy policy that keeps Seaquest's sub at the surface, where nothing ever ends the game."""

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        q = torch.zeros(obs.shape[0], 6)
        q[:, 0] = 1.0  # action 0: no-op
        return q


@pytest.mark.timeout(60)  # without the preset's cap this evaluation never returned
def test_a_greedy_evaluation_of_a_game_that_never_ends_stops_at_the_presets_cap(compose):
    from rlrun.training.build import make_eval_envs
    from rlrun.training.evaluation import evaluate

    cfg = compose("env=minatar", "env.id=MinAtar/Seaquest-v0")
    assert cfg.env.max_episode_steps == 27_000  # Dopamine's max_steps_per_episode
    envs = make_eval_envs(cfg, 1)
    try:
        assert evaluate(AlwaysNoop(), envs, [0], torch.device("cpu")).tolist() == [[0.0]]
    finally:
        envs.close()
