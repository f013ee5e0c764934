"""A plain (non-editable) `pip install .` ships every package: pyproject.toml has setuptools discover them
([tool.setuptools.packages.find], following the rlrun/conf symlink into conf/), so a new folder of code or
configs (a new config group) is shipped without editing pyproject.toml."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def discovered(root: Path) -> set[str]:
    """The packages setuptools finds under `root` with pyproject.toml's [tool.setuptools.packages.find]."""
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    from setuptools import find_namespace_packages

    find = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]["find"]
    assert find["namespaces"] is True, "the conf folders and hydra_plugins have no __init__.py"
    return set(find_namespace_packages(str(root), include=find["include"], exclude=find.get("exclude", ())))


def shipped_folders(root: Path) -> set[str]:
    """Every folder under rlrun/ and hydra_plugins/ that holds code or configs, as a package name."""
    folders = {"hydra_plugins"}  # the namespace package, without files of its own (Hydra's plugin discovery)
    for top in ("rlrun", "hydra_plugins"):
        for folder, _, files in os.walk(root / top, followlinks=True):  # into the rlrun/conf symlink
            if "__pycache__" not in folder and any(f.endswith((".py", ".yaml")) for f in files):
                folders.add(".".join(Path(folder).relative_to(root).parts))
    return folders


def test_every_folder_with_code_or_configs_is_a_discovered_package():
    found = discovered(ROOT)
    assert shipped_folders(ROOT) - found == set(), "not shipped: see [tool.setuptools.packages.find] in pyproject.toml"
    assert {"rlrun.conf.algo", "rlrun.conf.hydra.launcher", "hydra_plugins.rlrun_batched_launcher"} <= found


def test_a_new_config_group_and_a_bytecode_cache_need_no_pyproject_edit(tmp_path):
    """A layout like the repository's, with a config group folder pyproject.toml has never heard of: it is
    discovered; __pycache__ folders, tests and scripts are not."""
    for path in [
        "rlrun/__init__.py",
        "rlrun/__pycache__/run.cpython-311.pyc",
        "rlrun/algos/__init__.py",
        "conf/__init__.py",
        "conf/config.yaml",
        "conf/algo/mdqn.yaml",
        "conf/newgroup/option.yaml",
        "conf/hydra/launcher/batched.yaml",
        "hydra_plugins/rlrun_new_launcher/__init__.py",
        "tests/unit/test_x.py",
        "scripts/bench.py",
    ]:
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text("")
    (tmp_path / "rlrun" / "conf").symlink_to(Path("..") / "conf")
    found = discovered(tmp_path)
    assert found == shipped_folders(tmp_path) | {"rlrun.conf.hydra"}  # hydra/ holds only the launcher folder
    assert {"rlrun.conf.newgroup", "rlrun.conf.algo", "hydra_plugins.rlrun_new_launcher"} <= found


def test_every_command_module_has_its_console_script():
    """`python -m rlrun.X` and `rlrun-X` are the same command for every module a user runs."""
    from importlib.metadata import entry_points

    scripts = {ep.name: ep.value for ep in entry_points(group="console_scripts") if ep.name.startswith("rlrun-")}
    assert scripts == {
        "rlrun-train": "rlrun.entrypoints:train",  # main, then the process ends (rlrun.process_exit)
        "rlrun-resume": "rlrun.entrypoints:resume",
        "rlrun-evaluate": "rlrun.evaluate:main",
        "rlrun-report": "rlrun.report:main",
        "rlrun-doctor": "rlrun.doctor:main",
        "rlrun-export": "rlrun.export:main",
        "rlrun-compare": "rlrun.compare.cli:main",
    }


def test_every_console_script_returns_an_exit_status():
    """A console script exits with what its main returns: None or an int, never a result (rlrun-evaluate once
    returned its results dict, so a successful evaluation printed it to stderr and exited 1)."""
    import typing
    from importlib import import_module
    from importlib.metadata import entry_points

    for ep in entry_points(group="console_scripts"):
        if ep.name.startswith("rlrun-"):
            module, _, name = ep.value.partition(":")
            returns = typing.get_type_hints(getattr(import_module(module), name)).get("return")
            assert returns in (int, type(None)), f"{ep.name}: main returns {returns}"


def test_the_wheel_holds_every_config_and_both_launchers(tmp_path):
    """`pip wheel .` of a copy of the working tree (no build files left in the checkout): every conf/ YAML is
    package data of rlrun.conf, and both of rlrun's Hydra launchers are in hydra_plugins."""
    import shutil
    import subprocess
    import sys
    import zipfile

    src = tmp_path / "src"
    skip = shutil.ignore_patterns(".git", ".venv", "outputs", "multirun", "build", "dist", "*.egg-info", "__pycache__")
    shutil.copytree(ROOT, src, symlinks=True, ignore=skip)
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", tmp_path, src],
        check=True,
    )
    (wheel,) = tmp_path.glob("rlrun-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    configs = {f"rlrun/{p.relative_to(src).as_posix()}" for p in (src / "conf").rglob("*.yaml")}
    assert configs and configs - names == set()
    for launcher in ("rlrun_batched_launcher/batched_launcher.py", "rlrun_ray_launcher/ray_launcher.py"):
        assert f"hydra_plugins/{launcher}" in names
    assert "rlrun/report/__main__.py" in names and not any(n.startswith(("tests/", "scripts/")) for n in names)


def test_a_single_run_imports_none_of_the_report_extra():
    modules = "rlrun.cli, rlrun.run, rlrun.training.build, rlrun.training.loop, rlrun.sweeps.callbacks"
    code = f"import sys, {modules}; print(sorted(set(sys.modules) & {{'pandas', 'scipy', 'rliable', 'tabulate'}}))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
