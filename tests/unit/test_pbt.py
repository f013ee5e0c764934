"""Population-based training's parts by hand: exploit copies an agent's slots bit for bit (weights, target,
optimizer state in per-agent param groups and in one group), explore stays in its range, the rules of the
`pbt` group, and pbt.csv's lineage."""

import pytest
import torch

from rlrun.config.pbt import check, flat_space
from rlrun.errors import ConfigError
from rlrun.nets.networks import QNetwork
from rlrun.nets.stacked import stack_networks
from rlrun.training.agents import agent_param_groups, link_view_grads
from rlrun.training.pbt import PBT, copy_agent, copy_optimizer_state

K = 4
SPACE = {
    "optimizer": {"lr": {"low": 1e-4, "high": 1e-2, "log": True}},
    "algo": {"tau": {"low": 0.01, "high": 0.5, "log": False}},
}
SETTINGS = {"interval": 100, "fraction": 0.25, "fitness": "auto", "perturb": [0.8, 1.2], "resample_probability": 0.25,
            "initial": "sample", "space": SPACE}  # fmt: skip


def trained_stack(per_agent_groups: bool):
    torch.manual_seed(0)
    nets = [QNetwork(4, 2, hidden_sizes=[8, 8], noisy=True) for _ in range(K)]
    stacked = stack_networks(nets)
    params = list(stacked.parameters())
    if per_agent_groups:
        opt = torch.optim.Adam(agent_param_groups(params, [1e-3] * K, [1.0] * K, split=True), lr=1e-3)
        link_view_grads(opt, params)
    else:
        opt = torch.optim.Adam(params, lr=1e-3)
    for _ in range(3):
        opt.zero_grad()
        stacked(torch.randn(K, 5, 4)).pow(2).mean().backward()
        opt.step()
    return stacked, opt


def state_rows(opt, agent):
    """Agent `agent`'s optimizer state, tensor by tensor (its row of each state tensor)."""
    rows = []
    for group in opt.param_groups:
        for i, p in enumerate(group["params"]):
            first, end = group["parts"][i][1:] if "parts" in group else (0, K)
            if first <= agent < end:
                rows += [v[agent - first].clone() for v in opt.state[p].values() if v.dim() > 0]
    return rows


@pytest.mark.parametrize("per_agent_groups", [True, False])
def test_exploit_copies_weights_and_optimizer_state_bit_for_bit(per_agent_groups):
    online, opt = trained_stack(per_agent_groups)
    target, _ = trained_stack(per_agent_groups)
    others = {k: online.agent_state_dict(k) for k in (0, 2)}
    assert not all(torch.equal(a, b) for a, b in zip(state_rows(opt, 1), state_rows(opt, 3)))
    for net in (online, target):
        copy_agent(net, 1, 3, K)
    copy_optimizer_state(opt, 1, 3, K)
    for net in (online, target):
        one, three = net.agent_state_dict(1), net.agent_state_dict(3)
        assert all(torch.equal(one[k], three[k]) for k in one)
    assert all(torch.equal(a, b) for a, b in zip(state_rows(opt, 1), state_rows(opt, 3)))
    for k, before in others.items():  # the other agents are untouched
        after = online.agent_state_dict(k)
        assert all(torch.equal(before[n], after[n]) for n in before)


def test_explore_and_sampling_stay_in_their_ranges():
    pbt = PBT(SETTINGS, seed=0, initial={"optimizer.lr": [1e-3] * K, "algo.tau": [0.05] * K}, labels=["a"] * K)
    for key, bounds in flat_space(SPACE).items():
        values = [pbt.sample(key) for _ in range(200)] + [pbt.explore(key, bounds["high"]) for _ in range(200)]
        values += [pbt.explore(key, bounds["low"]) for _ in range(200)]
        assert all(bounds["low"] <= v <= bounds["high"] for v in values)
    # a perturbation is one of the factors (0.8, 1.2) when it is not a resample
    pbt.resample_probability = 0.0
    assert {round(pbt.explore("algo.tau", 0.1), 12) for _ in range(50)} == {0.08, 0.12}
    # log sampling: the median of draws from [1e-4, 1e-2] is near 1e-3, not 5e-3
    draws = sorted(pbt.sample("optimizer.lr") for _ in range(401))
    assert 5e-4 < draws[200] < 2e-3


def test_lineage_follows_each_copy_back():
    pbt = PBT({**SETTINGS, "space": {"optimizer": {"lr": SPACE["optimizer"]["lr"]}}}, 0,
              {"optimizer.lr": [1e-3] * 3}, ["s0", "s1", "s2"])  # fmt: skip
    pbt.events = [[0, "s0", "s0", "", "", 1e-3], [0, "s1", "s1", "", "", 2e-3], [0, "s2", "s2", "", "", 3e-3],
                  [100, "s0", "s1", 1.0, 5.0, 2.4e-3], [200, "s2", "s0", 2.0, 9.0, 1.92e-3]]  # fmt: skip
    assert pbt.lineage(2) == [(0, "s1", {"optimizer.lr": 2e-3}), (100, "s1", {"optimizer.lr": 2.4e-3}),
                              (200, "s0", {"optimizer.lr": 1.92e-3})]  # fmt: skip
    assert pbt.lineage(1) == [(0, "s1", {"optimizer.lr": 2e-3})]


@pytest.mark.parametrize(
    "change, agents, key",
    [
        ({}, 1, "seeds"),
        ({"interval": 0}, 4, "pbt.interval"),
        ({"fraction": 0.75}, 4, "pbt.fraction"),
        ({"fitness": "best"}, 4, "pbt.fitness"),
        ({"perturb": []}, 4, "pbt.perturb"),
        ({"resample_probability": 1.5}, 4, "pbt.resample_probability"),
        ({"space": {"optimizer": {"lr": {"low": 1e-2, "high": 1e-4, "log": True}}}}, 4, "pbt.space.optimizer.lr"),
        ({"space": {"optimizer": {"lr": {"low": 0.0, "high": 1e-2, "log": True}}}}, 4, "pbt.space.optimizer.lr"),
        ({"space": {"optimizer": {"lr": {"low": None, "high": None, "log": True}}}}, 4, "pbt.space"),
        ({"space": {"algo": {"gamma": {"low": 0.9, "high": 0.99, "log": False}}}}, 4, "pbt.space.algo.gamma"),
    ],
)
def test_the_rules_name_the_broken_key(change, agents, key):
    batchable = ("optimizer.lr", "algo.tau", "exploration.end")
    with pytest.raises(ConfigError) as e:
        check({**SETTINGS, **change}, agents, "dqn", batchable, evaluates=True, cuda_graphs=False)
    assert e.value.key == key


def test_the_rules_accept_the_preset_and_refuse_eval_fitness_without_evaluations():
    batchable = ("optimizer.lr", "algo.tau", "exploration.end")
    check(SETTINGS, 4, "dqn", batchable, evaluates=False, cuda_graphs=False)
    with pytest.raises(ConfigError, match="eval.interval"):
        check({**SETTINGS, "fitness": "eval"}, 4, "dqn", batchable, evaluates=False, cuda_graphs=False)


def test_training_fitness_counts_only_episodes_since_the_copy():
    from collections import deque
    from types import SimpleNamespace

    pbt = PBT({**SETTINGS, "fitness": "train"}, 0, {"optimizer.lr": [1e-3] * K, "algo.tau": [0.05] * K}, ["a"] * K)
    logger = SimpleNamespace(episode=10, window=deque([10.0] * 8 + [100.0, 200.0], maxlen=100))
    assert pbt.training_fitness(0, logger) == 38.0  # all 10 episodes
    pbt.copied_at_episode[0], pbt.inherited[0] = 8, 480.0
    assert pbt.training_fitness(0, logger) == 150.0  # the two since the copy
    pbt.copied_at_episode[0] = 10
    assert pbt.training_fitness(0, logger) == 480.0  # none since: the fitness of the agent it copied
