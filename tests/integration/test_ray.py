"""hydra/launcher=ray_cluster (rlrun's Ray launcher plugin): found by Hydra, and real sweeps on a Ray started
for the sweep and on a running cluster given by its address (the `ray` extra; slow: Ray starts in ~10 s)."""

import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from rlrun.report import load_sweep

TINY = ["total_steps=600", "algo.learning_starts=200", "log.interval=200", "eval.interval=0", "log.plot=false"]


def test_the_launcher_plugin_is_found_and_composes():
    from hydra.core.plugins import Plugins
    from hydra.plugins.launcher import Launcher

    from rlrun.config.preflight import compose

    launchers = {cls.__module__ + "." + cls.__name__ for cls in Plugins.instance().discover(Launcher)}
    assert "hydra_plugins.rlrun_ray_launcher.ray_launcher.RayLauncher" in launchers
    cfg = compose(["hydra/launcher=ray_cluster", "hydra.launcher.address=auto", "+hydra.launcher.init.num_cpus=3"])
    assert cfg.hydra.launcher._target_ == "hydra_plugins.rlrun_ray_launcher.ray_launcher.RayLauncher"
    assert cfg.hydra.launcher.address == "auto"
    assert cfg.hydra.launcher.init == {"num_cpus": 3}
    assert cfg.hydra.launcher.remote == {"num_cpus": 1, "num_gpus": 0}


def ray_sweep(cwd, *args, env=None):
    """A 2-job sweep into `cwd`/sweep, run from `cwd` with a relative sweep dir: the jobs must write where
    the driver's working directory says, not where a Ray worker starts."""
    pytest.importorskip("ray")
    proc = subprocess.run(
        [sys.executable, "-m", "rlrun.train", "-m", "hydra/launcher=ray_cluster", "seed=0,1", *args, *TINY]
        + ["hydra.sweep.dir=sweep"],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=cwd,
        env={**os.environ, "PYTHONWARNINGS": "ignore", "RAY_ADDRESS": "", **(env or {})},
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    runs = load_sweep(cwd / "sweep")
    assert sorted(runs["cfg.seed"]) == [0, 1] and set(runs.status) == {"finished"}
    for job in runs.job:
        assert json.loads((cwd / job / "summary.json").read_text())["env_steps"] >= 600
    assert "Sweep report" in proc.stdout and (cwd / "sweep" / "report.md").exists()


@pytest.mark.slow
def test_two_job_sweep_on_a_ray_started_for_the_sweep(tmp_path):
    ray_sweep(tmp_path, "hydra.launcher.address=local", "+hydra.launcher.init.num_cpus=2")


@pytest.mark.slow
def test_two_job_sweep_on_a_running_cluster(tmp_path):
    """A cluster as users start one (`ray start --head`), reached by its address."""
    pytest.importorskip("ray")
    with socket.socket() as s:
        s.bind(("", 0))
        port = s.getsockname()[1]
    log = tmp_path / "ray_start.log"
    head = subprocess.Popen(
        [os.path.join(os.path.dirname(sys.executable), "ray"), "start", "--head", f"--port={port}"]
        + ["--num-cpus=2", "--include-dashboard=false", "--block"],
        stdout=log.open("w"),
        stderr=subprocess.STDOUT,
    )
    address = None
    try:
        deadline = time.monotonic() + 120
        while not (found := re.search(r"ray start --address='([^']+)'", log.read_text())):
            assert head.poll() is None and time.monotonic() < deadline, log.read_text()[-2000:]
            time.sleep(1)
        address = found.group(1)
        # Ray 2.60: a driver given a token-protected cluster's address must be told to send the token
        ray_sweep(tmp_path, f"hydra.launcher.address={address}", env={"RAY_AUTH_MODE": "token"})
    finally:
        head.terminate()  # `ray start --block` stops the processes it started
        head.wait(timeout=120)
        # `ray stop` would also forget this cluster; a terminated head stays the "latest" one
        latest = Path(tempfile.gettempdir()) / "ray" / "ray_current_cluster"
        if address and latest.exists() and latest.read_text().strip() == address:
            latest.unlink()
