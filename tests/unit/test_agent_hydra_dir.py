"""An agent's `.hydra/overrides.yaml`: the run's overrides less those the agent sets itself."""

import yaml

from rlrun.training.population import write_agent_hydra_dir


def test_an_agents_overrides_drop_the_keys_it_sets_however_they_are_spelled(tmp_path):
    overrides = ["+seed=3", "seeds=4", "~agents", "algo.gamma=0.9", "optimizer.lr=0.01", "hydra/launcher=batched"]
    write_agent_hydra_dir(tmp_path, "seed: 5\n", {"seed": 5, "optimizer.lr": 0.001}, overrides)
    written = yaml.safe_load((tmp_path / ".hydra" / "overrides.yaml").read_text())
    assert written == ["algo.gamma=0.9", "hydra/launcher=batched", "seed=5", "optimizer.lr=0.001"]
    assert (tmp_path / ".hydra" / "config.yaml").read_text() == "seed: 5\n"
