"""The package's shape: no import cycle between rlrun's modules (function-level imports included, which
would otherwise hide one), no module over 500 lines and no function over 60. Complexity itself (branches,
statements, McCabe's count per function) is ruff's gate: C901, PLR0912 and PLR0915 in pyproject.toml."""

import ast
from pathlib import Path

import pytest

import rlrun

PACKAGE = Path(rlrun.__file__).resolve().parent
MAX_LINES = 500  # a ceiling for what is truly one job; complexity is measured per function
MAX_FUNCTION_LINES = 60


def modules() -> dict[str, Path]:
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        if "conf" in path.relative_to(PACKAGE).parts:
            continue
        parts = ("rlrun", *path.relative_to(PACKAGE).with_suffix("").parts)
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def imports(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    """The rlrun modules `name` imports anywhere in its code (a `from pkg import mod` names the module)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*up, base] if base else up)
            # `from pkg import mod` depends on the submodule (Python runs every package's __init__ on the way to
            # any of its modules, so that edge would make each package with a registry a cycle); `from mod
            # import name` depends on mod.
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names]
        else:
            continue
        for target in targets:
            while target and target not in known:
                target = target.rpartition(".")[0]
            if target and target != name:
                out.add(target)
    return out


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in graph:
        if v not in index:
            visit(v)
    return found


def test_no_import_cycle():
    known = modules()
    graph = {name: imports(name, path, known) for name, path in known.items()}
    assert cycles(graph) == []


def test_the_cycle_finder_finds_one():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


@pytest.mark.parametrize("name", sorted(modules()))
def test_no_module_over_500_lines(name):
    lines = len(modules()[name].read_text().splitlines())
    assert lines <= MAX_LINES, f"{name}: {lines} lines"


def function_lengths(module: str, source: str) -> dict[str, int]:
    """Each function's (and method's) lines, from its `def` to its last line, by qualified name."""
    found = {}

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                name = f"{prefix}.{child.name}"
                if not isinstance(child, ast.ClassDef):
                    found[name] = (child.end_lineno or child.lineno) - child.lineno + 1
                visit(child, name)

    visit(ast.parse(source), module)
    return found


def test_no_function_over_60_lines():
    lengths = {}
    for name, path in modules().items():
        lengths.update(function_lengths(name, path.read_text()))
    over = {name: n for name, n in lengths.items() if n > MAX_FUNCTION_LINES}
    assert over == {}, f"functions over {MAX_FUNCTION_LINES} lines: {over}"


def test_function_lengths_name_methods_and_nested_functions():
    source = "class A:\n    def f(self):\n        def g():\n            pass\n\n        return g\n"
    assert function_lengths("m", source) == {"m.A.f": 5, "m.A.f.g": 2}


# The modules that handle the run config (a DictConfig), each with its reason. The rest get plain values or
# typed settings from rlrun.training.build, or pass the config along untouched (naming its type only for
# type checkers). At most 12.
CONFIG_HANDLERS = {
    "rlrun.cli": "Hydra's task function receives the composed config; --help lists it with the schemas' notes",
    "rlrun.config.preflight": "checks a command line's composed config before Hydra runs it",
    "rlrun.config.overrides": "reads a command line's overrides against the default config",
    "rlrun.config.validate": "the rules every run config passes before anything is built",
    "rlrun.config.checks": "the value checks those rules (and each algorithm's) are written with",
    "rlrun.config.saved": "a saved config onto today's schemas; a resumed run's and a played run's config",
    "rlrun.training.build": "the one place the config becomes objects: envs, network, replay, learner, loggers",
    "rlrun.training.agents": "each agent's config and per-agent values in a batched run",
    "rlrun.algos.dqn": "an algorithm reads its own node: its rules, learner and schedule",
    "rlrun.algos.mdqn": "an algorithm reads its own node: its rules, learner and schedule",
    "rlrun.algos.pqn": "an algorithm reads its own node: its rules, learner and schedule",
    "rlrun.sweeps.batching": "the batched launcher groups a sweep's composed job configs into batched runs",
}


def runtime_config_imports(path: Path) -> bool:
    """Whether the module imports omegaconf's DictConfig outside an `if TYPE_CHECKING:` block."""

    def walk(node: ast.AST) -> bool:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                continue
            names = [a.name for a in child.names] if isinstance(child, ast.ImportFrom) else []
            if (
                isinstance(child, ast.ImportFrom)
                and (child.module or "").startswith("omegaconf")
                and "DictConfig" in names
            ):
                return True
            if walk(child):
                return True
        return False

    return walk(ast.parse(path.read_text()))


def test_only_the_listed_modules_handle_the_config():
    handlers = {name for name, path in modules().items() if runtime_config_imports(path)}
    assert handlers <= set(CONFIG_HANDLERS), (
        f"new modules handle a DictConfig: {sorted(handlers - set(CONFIG_HANDLERS))}"
    )
    assert len(CONFIG_HANDLERS) <= 12


def test_the_handler_finder_sees_through_type_checking_only_imports(tmp_path):
    runtime = tmp_path / "a.py"
    runtime.write_text("def f():\n    from omegaconf import DictConfig\n")
    typing_only = tmp_path / "b.py"
    typing_only.write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from omegaconf import DictConfig\n"
    )
    assert runtime_config_imports(runtime) and not runtime_config_imports(typing_only)
