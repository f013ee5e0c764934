"""Sweeps refused by the pre-flight check (rlrun.config.preflight) in one line, before anything is written: a
launcher whose extra is not installed, a sweeper's search space that sets Hydra's own config."""

import importlib.util

import pytest

from rlrun.config import preflight
from rlrun.errors import ConfigError


@pytest.mark.parametrize(
    "launcher, says",
    [
        (["hydra/launcher=batched", "hydra.launcher.backend=ray"],
         "hydra.launcher.backend='ray': allowed a backend whose package is installed: Ray is not; "
         "pip install -e \".[ray]\""),
        (["hydra/launcher=ray_cluster"],
         "hydra/launcher='ray_cluster': allowed a launcher whose package is installed: Ray is not; "
         "pip install -e \".[ray]\""),
        (["hydra/launcher=batched", "hydra.launcher.backend=submitit"],
         "hydra.launcher.backend='submitit': allowed a backend whose package is installed: submitit is not; "
         "pip install -e \".[sweep]\""),
    ],
)  # fmt: skip
def test_a_launcher_whose_extra_is_missing_is_refused_naming_the_extra(tmp_path, monkeypatch, launcher, says):
    """Before: Hydra's traceback ending in ModuleNotFoundError: No module named 'ray', after the sweep's
    directory was made."""
    find_spec = importlib.util.find_spec
    missing = ("ray", "submitit")  # whether or not this machine has them
    monkeypatch.setattr(importlib.util, "find_spec", lambda n, *a: None if n in missing else find_spec(n, *a))
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError) as refused:
        preflight.plan(["-m", *launcher, "seed=0,1", "total_steps=100"])
    assert str(refused.value) == f"Invalid config value {says}."
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    "override, says",
    [
        ("hydra.sweeper.params.optimizer.lr=choice(1e15)",
         "Invalid config value hydra.sweeper.params.optimizer.lr='choice(1e15)': allowed one value (Hydra's own "
         "config is not swept); a search space is given as an override of its key: 'optimizer.lr=choice(1e15)'."),
        ("hydra.verbose=true,false",
         "Invalid config value hydra.verbose='true,false': allowed one value (Hydra's own config is not swept)."),
    ],
)  # fmt: skip
def test_a_sweep_of_hydras_own_config_is_refused_in_one_line(tmp_path, monkeypatch, override, says):
    """Before: Hydra's two lines ("Sweeping over Hydra's configuration is not supported", the HYDRA_FULL_ERROR
    hint) and exit 1."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError) as refused:
        preflight.plan(["-m", "+hparams_search=robust", override])
    assert str(refused.value) == says
    assert list(tmp_path.iterdir()) == []
