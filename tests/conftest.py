"""Shared fixtures (compose, test envs) and the test tiers.

Test tiers: `pytest -m "not train"` is the fast tier, unit tests only (under a minute on one core); plain
`pytest` runs everything but the `slow` learning bars. A test is marked `train` here, by reading its code,
its fixtures' and the test-suite helpers it calls (`pytest_collection_modifyitems`), when it
  - calls a training entry point (ENTRY_POINTS: `rlrun.train.train`, a `Trainer`, the CLI's main or
    `rlrun.resume`), resolved through the module's and the function's own imports, so `rt.train(cfg, d)`
    counts and `net.train()` does not;
  - starts a Python subprocess (`sys.executable`: every rlrun command, sweeps included) or names an rlrun
    command (COMMAND);
  - is marked `slow`.
A session that deselects `train` also guards the rest: a test that still runs a `Trainer` or an rlrun
command fails, naming the fix (mark it `@pytest.mark.train`), so the fast tier never trains.
"""

import ast
import contextlib
import importlib
import inspect
import os
import re
import shlex
import subprocess
import sys
import textwrap
import types
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces


class CountingEnv(gym.Env):
    """obs = [t] (steps taken this episode); reward = 1 per step; terminates after `terminate_at` steps
    (if set). With gymnasium's TimeLimit on top it truncates instead. Every value is known by hand."""

    def __init__(self, terminate_at=None):
        self.observation_space = spaces.Box(0, 1000, shape=(1,), dtype=np.float32)
        self.action_space = spaces.Discrete(2)
        self.terminate_at = terminate_at
        self.t = 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return np.array([0.0], dtype=np.float32), {}

    def step(self, action):
        self.t += 1
        terminated = self.terminate_at is not None and self.t >= self.terminate_at
        return np.array([float(self.t)], dtype=np.float32), 1.0, terminated, False, {}


gym.register("rlrun_tests/Terminating-v0", entry_point=CountingEnv, kwargs={"terminate_at": 3})
gym.register("rlrun_tests/TimeLimited-v0", entry_point=CountingEnv, max_episode_steps=4)


@pytest.fixture
def compose():
    """Compose the real config with overrides through Hydra's compose API (no output dir, no chdir)."""
    from hydra import compose as hydra_compose, initialize_config_module

    import rlrun.train  # noqa: F401  registers the schemas and resolvers

    def _compose(*overrides):
        with initialize_config_module(config_module="rlrun.conf", version_base="1.3"):
            return hydra_compose(config_name="config", overrides=list(overrides))

    return _compose


class ExplodingEnv(CountingEnv):
    """Rewards become infinite after 100 steps: the learner's loss turns non-finite."""

    def __init__(self):
        super().__init__(terminate_at=10)
        self.total = 0

    def step(self, action):
        self.total += 1
        obs, _, terminated, truncated, info = super().step(action)
        return obs, (np.inf if self.total > 100 else 1.0), terminated, truncated, info


gym.register("rlrun_tests/Exploding-v0", entry_point=ExplodingEnv)


# --- test tiers -------------------------------------------------------------------------------------

ENTRY_POINTS = [
    ("rlrun.train", "train"),
    ("rlrun.run", "train"),
    ("rlrun.loop", "Trainer"),
    ("rlrun.cli", "main"),
    ("rlrun.cli", "hydra_main"),
    ("rlrun.resume", "resume"),
    ("rlrun.resume", "main"),
]
# An rlrun command: `python -m rlrun.train ...` or a console script (`rlrun-train`).
COMMAND = re.compile(r"^rlrun[.-](train|resume|evaluate|report|doctor)$")
TESTS = Path(__file__).resolve().parent
GUARD = "_fast_tier_never_trains"


def _entry_points() -> list:
    found = []
    for module, name in ENTRY_POINTS:  # a renamed one is skipped: the guard still catches what it misses
        with contextlib.suppress(ImportError, AttributeError):
            found.append(getattr(importlib.import_module(module), name))
    return found


def _in_tests(func) -> bool:
    code = getattr(func, "__code__", None)
    return code is not None and Path(code.co_filename).resolve().is_relative_to(TESTS)


def _local_imports(tree: ast.AST) -> dict:
    """Names bound by the function's own `import` statements (of rlrun or of already imported modules)."""
    names = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "rlrun" or alias.name in sys.modules:
                    try:
                        module = importlib.import_module(alias.name)
                    except ImportError:
                        continue
                    names[alias.asname or alias.name.split(".")[0]] = (
                        module if alias.asname else importlib.import_module(alias.name.split(".")[0])
                    )
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            if node.module.split(".")[0] != "rlrun" and node.module not in sys.modules:
                continue
            try:
                module = importlib.import_module(node.module)
            except ImportError:
                continue
            for alias in node.names:
                if hasattr(module, alias.name):
                    names[alias.asname or alias.name] = getattr(module, alias.name)
    return names


def _resolve(expr: ast.expr, scope: dict):
    """What a call's `f` or `a.b.f` names, through modules and classes only; None if unknown."""
    if isinstance(expr, ast.Name):
        return scope.get(expr.id)
    if isinstance(expr, ast.Attribute):
        base = _resolve(expr.value, scope)
        if isinstance(base, (types.ModuleType, type)):
            return getattr(base, expr.attr, None)
    return None


def _trains(func, entry_points: list, memo: dict) -> bool:
    """Whether `func` (a test, fixture or helper of the suite) trains or runs an rlrun command."""
    func = inspect.unwrap(func)
    code = getattr(func, "__code__", None)
    if code is None or not _in_tests(func):
        return False
    if code in memo:
        return memo[code]
    memo[code] = False  # while reading it: a recursive helper adds nothing
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(func)))
    except (OSError, TypeError, SyntaxError):
        return False
    scope = {**func.__globals__, **_local_imports(tree)}
    for node in ast.walk(tree):
        if _starts_a_command(node) or (isinstance(node, ast.Call) and _calls_training(node, scope, entry_points, memo)):
            memo[code] = True
            return True
    return False


def _starts_a_command(node: ast.AST) -> bool:
    """`sys.executable` (a Python subprocess) or a string naming an rlrun command."""
    if isinstance(node, ast.Attribute):
        return node.attr == "executable" and isinstance(node.value, ast.Name) and node.value.id == "sys"
    return isinstance(node, ast.Constant) and isinstance(node.value, str) and bool(COMMAND.match(node.value))


def _calls_training(call: ast.Call, scope: dict, entry_points: list, memo: dict) -> bool:
    target = _resolve(call.func, scope)
    return target is not None and (any(target is e for e in entry_points) or _trains(target, entry_points, memo))


def _item_trains(item: pytest.Item, entry_points: list, memo: dict) -> bool:
    if item.get_closest_marker("slow") or _trains(getattr(item, "obj", None), entry_points, memo):
        return True
    fixture_defs = getattr(getattr(item, "_fixtureinfo", None), "name2fixturedefs", {})
    return any(
        _trains(d.func, entry_points, memo)
        for name in getattr(item, "fixturenames", ())
        if name != GUARD
        for d in fixture_defs.get(name, ())
    )


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects by marker
def pytest_collection_modifyitems(config, items):
    entry_points, memo = _entry_points(), {}
    for item in items:
        if not item.get_closest_marker("train") and _item_trains(item, entry_points, memo):
            item.add_marker(pytest.mark.train)


@pytest.fixture(autouse=True)
def _fast_tier_never_trains(request, monkeypatch):
    """With `-m "not train"`: a test that runs a Trainer or an rlrun command fails (the reading above missed
    a way it trains)."""
    if "not train" not in (request.config.option.markexpr or "") or request.node.get_closest_marker("train"):
        yield
        return

    def refuse(what):
        pytest.fail(
            f"{request.node.nodeid} {what} but is not marked train: tests/conftest.py did not see it "
            "in its code; mark it @pytest.mark.train",
            pytrace=False,
        )

    for e in _entry_points():
        if isinstance(e, type) and hasattr(e, "run"):  # the Trainer: rlrun.train.train and the CLI run it
            monkeypatch.setattr(e, "run", lambda *a, **k: refuse("runs a Trainer"))
    popen_init = subprocess.Popen.__init__

    def checked_init(self, args, *a, **k):
        one = isinstance(args, (str, bytes, os.PathLike))  # a command line, or one program
        argv = shlex.split(os.fsdecode(args)) if one else [os.fsdecode(x) for x in args]
        if any(COMMAND.match(os.path.basename(x)) for x in argv):
            refuse(f"runs {' '.join(argv)}")
        popen_init(self, args, *a, **k)

    monkeypatch.setattr(subprocess.Popen, "__init__", checked_init)
    yield
