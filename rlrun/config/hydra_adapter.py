"""All that rlrun takes from Hydra's private modules (`hydra._internal`), in one place. Hydra 1.3 offers no
public way to do these; tests/unit/test_hydra_adapter.py pins each behaviour relied on, so that a Hydra
release that changes one fails there, not in a user's command. The private modules are imported inside
the functions: importing this module (for `BASIC_SWEEPER`) costs nothing.

- `args_parser`: `@hydra.main`'s own command-line parser (`hydra._internal.utils.get_args_parser`), so the
  pre-flight reads `-m`, `--cfg`, `--config-name`, `--config-dir` and the overrides as Hydra's app will.
- `app_search_path` and `create_global_hydra`: the config search path Hydra's app builds from the app's
  module and `--config-path` (`create_automatic_config_search_path`), and the global Hydra made on it
  (`Hydra.create_main_hydra2`), so the pre-flight composes what the app will. The public
  `initialize_config_module` / `initialize_config_dir` set up one source each; they cannot put a
  `--config-dir` in front of the app's config, as the app does.
- `sweep_jobs`: the jobs Hydra's basic sweeper makes of a command line's sweeps
  (`BasicSweeper.split_arguments`), so each job is checked before the sweep starts.
- `mode_known`: Hydra's app composes the whole config once only to read `hydra.mode` (`Hydra.get_mode`),
  then again to run it: about 0.2 s of every command. The pre-flight has read the mode from the same
  command line; within `mode_known`, `Hydra.get_mode` answers it (the one patch of Hydra, undone on exit).
- `BASIC_SWEEPER`: the basic sweeper's class path, compared with a saved `hydra.yaml`'s, never imported.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import argparse

    from hydra.core.config_search_path import ConfigSearchPath
    from hydra.types import RunMode

BASIC_SWEEPER = "hydra._internal.core_plugins.basic_sweeper.BasicSweeper"


def args_parser() -> argparse.ArgumentParser:
    """The parser `@hydra.main` reads its command line with."""
    from hydra._internal.utils import get_args_parser

    return get_args_parser()


def app_search_path(module: str, config_path: str) -> ConfigSearchPath:
    """The search path of an app whose task function is in `module`, for its `config_path`."""
    from hydra._internal.utils import create_automatic_config_search_path

    return create_automatic_config_search_path(None, module, config_path)


def create_global_hydra(task_name: str, search_path: ConfigSearchPath) -> None:
    """Hydra's global state set up on `search_path`, as the app sets it up (restore it with
    `hydra.initialize`'s public `get_gh_backup` / `restore_gh_from_backup`)."""
    from hydra._internal.hydra import Hydra

    Hydra.create_main_hydra2(task_name=task_name, config_search_path=search_path)


def sweep_jobs(parsed: list[Any]) -> list[list[str]]:
    """Each job's overrides as Hydra's basic sweeper launches them, from `OverridesParser`'s overrides."""
    from hydra._internal.core_plugins.basic_sweeper import BasicSweeper

    return [job for batch in BasicSweeper.split_arguments(parsed, None) for job in batch]


@contextlib.contextmanager
def mode_known(mode: RunMode | None) -> Iterator[None]:
    """Within: Hydra's app takes `mode` as the command's `hydra.mode` instead of composing the config to read
    it (None: Hydra reads it, as without this)."""
    from hydra._internal.hydra import Hydra

    read = Hydra.get_mode
    Hydra.get_mode = lambda self, config_name, overrides: mode  # type: ignore[method-assign]
    try:
        yield
    finally:
        Hydra.get_mode = read  # type: ignore[method-assign]
