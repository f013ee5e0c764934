"""The unit tier never trains: a unit test that runs a Trainer, starts a subprocess or a multiprocessing
process fails, naming what it did. Such a test belongs in tests/integration."""

import multiprocessing
import subprocess

import pytest

import rlrun.loop


@pytest.fixture(autouse=True)
def _unit_tests_never_train(request, monkeypatch):
    def refuse(what):
        def refused(*args, **kwargs):
            pytest.fail(f"{request.node.nodeid} {what}: move it to tests/integration", pytrace=False)

        return refused

    monkeypatch.setattr(rlrun.loop.Trainer, "run", refuse("runs a Trainer"))
    monkeypatch.setattr(subprocess.Popen, "__init__", refuse("starts a subprocess"))
    monkeypatch.setattr(multiprocessing.process.BaseProcess, "start", refuse("starts a process"))
