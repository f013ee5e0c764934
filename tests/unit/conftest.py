"""The unit tier never trains: a unit test that runs a Trainer, starts a subprocess or a multiprocessing
process fails, naming what it did. Such a test belongs in tests/integration."""

import multiprocessing
import subprocess

# matplotlib builds its font cache on its first import on a machine (a fresh CI runner, a new user's
# checkout) by running `fc-list`: imported here, before the guard below, that library start-up is not
# counted as a unit test starting a subprocess.
import matplotlib.font_manager  # noqa: F401
import pytest

import rlrun.training.loop


@pytest.fixture(autouse=True)
def _unit_tests_never_train(request, monkeypatch):
    def refuse(what):
        def refused(*args, **kwargs):
            pytest.fail(f"{request.node.nodeid} {what}: move it to tests/integration", pytrace=False)

        return refused

    monkeypatch.setattr(rlrun.training.loop.Trainer, "run", refuse("runs a Trainer"))
    monkeypatch.setattr(subprocess.Popen, "__init__", refuse("starts a subprocess"))
    monkeypatch.setattr(multiprocessing.process.BaseProcess, "start", refuse("starts a process"))
