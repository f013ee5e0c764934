"""What rlrun.config.hydra_adapter relies on in Hydra's private modules, pinned: a Hydra release that changes
one of these fails here first. And no other module of rlrun reaches into `hydra._internal`."""

import inspect
from pathlib import Path

from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.types import RunMode

import rlrun
from rlrun.config import hydra_adapter


def test_only_the_adapter_names_hydras_private_modules():
    package = Path(rlrun.__file__).parent
    found = sorted(str(p.relative_to(package)) for p in package.rglob("*.py") if "hydra._internal" in p.read_text())
    assert found == ["config/hydra_adapter.py"]


def test_the_args_parser_reads_hydras_flags_and_overrides():
    args = hydra_adapter.args_parser().parse_args(["-m", "--config-name", "x", "--config-dir", "d", "a=1", "+b=2"])
    assert (args.multirun, args.config_name, args.config_dir, args.overrides) == (True, "x", "d", ["a=1", "+b=2"])
    assert args.cfg is None and args.info is None and not args.run


def test_the_app_search_path_starts_at_the_app_config_and_ends_at_hydras_own():
    path = hydra_adapter.app_search_path("rlrun.cli", "pkg://rlrun.conf").get_path()
    assert [(p.provider, p.path) for p in path if p.provider in ("main", "hydra")] == [
        ("hydra", "pkg://hydra.conf"),
        ("main", "pkg://rlrun.conf"),
    ]


def test_a_global_hydra_composes_on_the_search_path():
    from hydra import compose
    from hydra.initialize import get_gh_backup, restore_gh_from_backup

    from rlrun.config.schemas import register_configs

    register_configs()
    backup = get_gh_backup()
    try:
        hydra_adapter.create_global_hydra("train", hydra_adapter.app_search_path("rlrun.cli", "pkg://rlrun.conf"))
        cfg = compose("config", ["seed=3"])
        assert cfg.seed == 3 and "env" in cfg
    finally:
        restore_gh_from_backup(backup)


def test_the_basic_sweeper_makes_the_cartesian_product_of_the_sweeps():
    parsed = OverridesParser.create().parse_overrides(["a=1,2", "b=x", "c=3,4"])
    assert hydra_adapter.sweep_jobs(parsed) == [
        ["a=1", "b=x", "c=3"],
        ["a=1", "b=x", "c=4"],
        ["a=2", "b=x", "c=3"],
        ["a=2", "b=x", "c=4"],
    ]


def test_the_basic_sweeper_is_named_as_hydras_default_config_names_it():
    from hydra._internal.core_plugins.basic_sweeper import BasicSweeper

    assert f"{BasicSweeper.__module__}.{BasicSweeper.__qualname__}" == hydra_adapter.BASIC_SWEEPER


def test_hydras_app_reads_the_mode_through_get_mode_which_mode_known_answers():
    from hydra._internal import utils
    from hydra._internal.hydra import Hydra

    assert "hydra.get_mode(config_name=config_name, overrides=overrides)" in inspect.getsource(utils._run_hydra)
    assert list(inspect.signature(Hydra.get_mode).parameters) == ["self", "config_name", "overrides"]
    read = Hydra.get_mode
    with hydra_adapter.mode_known(RunMode.MULTIRUN):
        assert Hydra.get_mode(object(), config_name="config", overrides=[]) == RunMode.MULTIRUN  # type: ignore[arg-type]
    assert Hydra.get_mode is read
