"""A plain (non-editable) `pip install .` ships every package: pyproject.toml lists packages by hand (the
configs come in through the rlrun/conf symlink), so a new folder must be listed there too."""

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_every_folder_with_code_or_configs_is_a_listed_package():
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    on_disk = {"hydra_plugins"}  # the namespace package, without files of its own (Hydra's plugin discovery)
    for top in ("rlrun", "hydra_plugins"):
        for folder, _, files in os.walk(ROOT / top, followlinks=True):  # into the rlrun/conf symlink
            if "__pycache__" not in folder and any(f.endswith((".py", ".yaml")) for f in files):
                on_disk.add(".".join(Path(folder).relative_to(ROOT).parts))
    assert on_disk - listed == set(), "add these to [tool.setuptools] packages in pyproject.toml"
    assert listed - on_disk == set(), "listed packages that do not exist"


def test_every_command_module_has_its_console_script():
    """`python -m rlrun.X` and `rlrun-X` are the same command for every module a user runs."""
    from importlib.metadata import entry_points

    scripts = {ep.name: ep.value for ep in entry_points(group="console_scripts") if ep.name.startswith("rlrun-")}
    assert scripts == {
        "rlrun-train": "rlrun.cli:main",
        "rlrun-resume": "rlrun.resume:main",
        "rlrun-evaluate": "rlrun.evaluate:main",
        "rlrun-report": "rlrun.report:main",
        "rlrun-doctor": "rlrun.doctor:main",
    }
