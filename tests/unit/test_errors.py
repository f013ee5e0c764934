"""Every command's exit codes and its one way to stop (rlrun.errors): the table docs/guarantees.md gives."""

import ast
from pathlib import Path

import pytest

import rlrun
from rlrun.errors import Exit, fail


def test_the_exit_codes_are_the_documented_ones():
    assert {e.name: int(e) for e in Exit} == {
        "OK": 0,
        "FAILED": 1,
        "BAD_INPUT": 2,
        "NONFINITE": 3,
        "CANNOT_WRITE": 4,
        "ENV_FAILED": 5,
        "STOPPED": 75,
    }
    table = (Path(rlrun.__file__).parents[1] / "docs" / "guarantees.md").read_text()
    for code in (2, 3, 4, 5, 75):
        assert f"| {code} |" in table


def test_fail_is_one_line_led_by_the_command_and_its_code(capsys):
    with pytest.raises(SystemExit) as stop:
        fail("no such run", Exit.BAD_INPUT, command="rlrun.export")
    assert stop.value.code == 2 and type(stop.value.code) is int
    assert capsys.readouterr().err == "rlrun.export: no such run\n"
    with pytest.raises(SystemExit) as stop:
        fail("cannot write")
    assert stop.value.code == 2 and capsys.readouterr().err == "rlrun: cannot write\n"


def test_one_fail_and_no_other_exit_code_table():
    """Commands stop through rlrun.errors.fail; no module defines fail() or an EXIT_* constant of its own."""
    package = Path(rlrun.__file__).parent
    found = []
    for path in package.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef) and node.name == "fail" and path.name != "errors.py":
                found.append(f"{path.relative_to(package)}: def fail")
            targets = node.targets if isinstance(node, ast.Assign) else []
            names = [n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)]
            found += [f"{path.relative_to(package)}: {n}" for n in names if n.startswith("EXIT_")]
    assert found == []
