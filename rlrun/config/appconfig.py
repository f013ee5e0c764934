"""Where the Hydra app finds its config: the config name and search path a command line chooses.

`python -m rlrun.train` is one Hydra app (`rlrun.cli.hydra_main`, configured by the constants below).
`--config-name`, `--config-path` and `--config-dir` change what it composes, so the pre-flight composes with
the search path Hydra's app builds from the same flags (`rlrun.config.hydra_adapter`): it checks, and claims
the directory of, the job Hydra will run, whichever flags chose its config.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import os
from collections.abc import Callable, Hashable, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

from hydra import version
from hydra.core.config_search_path import ConfigSearchPath, SearchPathQuery
from hydra.core.utils import validate_config_path
from hydra.initialize import get_gh_backup, restore_gh_from_backup

from rlrun.config.hydra_adapter import app_search_path, create_global_hydra

APP_MODULE = "rlrun.cli"  # the module of the @hydra.main task function: a relative --config-path starts there
APP_CONFIG_PATH, APP_CONFIG_NAME = "pkg://rlrun.conf", "config"


@dataclass(frozen=True)
class ConfigSource:
    """What a command line composes: a config name, the app's config path and an extra config directory."""

    config_name: str = APP_CONFIG_NAME
    config_path: str = APP_CONFIG_PATH
    config_dir: str | None = None

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> ConfigSource:
        """From Hydra's parsed command line (`--config-name`, `--config-path`, `--config-dir`)."""
        return cls(
            args.config_name if args.config_name is not None else APP_CONFIG_NAME,
            args.config_path if args.config_path is not None else APP_CONFIG_PATH,
            args.config_dir,
        )

    def search_path(self) -> ConfigSearchPath:
        """The search path exactly as Hydra's `_run_hydra` builds it. ValueError if a flag cannot be used."""
        validate_config_path(self.config_path)
        search_path = app_search_path(APP_MODULE, self.config_path)
        if self.config_dir is not None:
            config_dir = os.path.abspath(self.config_dir)
            if not os.path.isdir(config_dir):
                raise ValueError(f"--config-dir {config_dir} is not a directory")
            search_path.prepend("command-line", f"file://{config_dir}", anchor=SearchPathQuery(provider="schema"))
        return search_path


T = TypeVar("T")

RLRUN_CONFIG = ConfigSource()  # rlrun's own config, as a plain command line composes it


@contextlib.contextmanager
def initialized(source: ConfigSource) -> Iterator[None]:
    """Hydra's global state set up for `source` (as `hydra.initialize_config_module` does for a module)."""
    search_path = source.search_path()
    backup = get_gh_backup()
    try:
        version.setbase("1.3")
        create_global_hydra("train", search_path)
        yield
    finally:
        restore_gh_from_backup(backup)


_composed: dict[Hashable, Any] | None = None  # one command's compositions, within `composed_once`


@contextlib.contextmanager
def composed_once() -> Iterator[None]:
    """Within (one command's checks: its config files do not change meanwhile), each command line is
    composed once however often it is read (a composition costs 0.1-0.3 s); outside, every time."""
    global _composed
    _composed = {}
    try:
        yield
    finally:
        _composed = None


def memoized(key: Hashable, compose: Callable[[], T]) -> T:
    """`compose()`, or within `composed_once` a copy of its first result for `key`."""
    if _composed is None:
        return compose()
    if key not in _composed:
        _composed[key] = compose()
    return copy.deepcopy(_composed[key])
