"""The container as written (Dockerfile, compose.yaml), checked without Docker: what the image installs, who
its services run as, and that a `docker compose run --rm train <overrides>` keeps `device=cuda`."""

import re
import subprocess
import sys
from importlib.metadata import metadata
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
# Extras for developing rlrun, not for running it: the image leaves them out.
DEV_EXTRAS = {"test", "bench"}


def dockerfile() -> str:
    return (ROOT / "Dockerfile").read_text()


def image_install() -> list[str]:
    """The arguments of the Dockerfile's `pip install` (continuation lines joined, up to the first `&&`)."""
    text = dockerfile().replace("\\\n", " ")
    line = next(ln for ln in text.splitlines() if "pip install" in ln)
    args = line.split("pip install", 1)[1].split("&&", 1)[0].split()
    return [a.strip('"') for a in args if not a.startswith("--")]


def image_extras() -> set[str]:
    project = next(a for a in image_install() if a.startswith(".["))
    return set(project[2:-1].split(","))


def compose() -> dict:
    return yaml.safe_load((ROOT / "compose.yaml").read_text())


def test_image_installs_every_runtime_extra():
    extras = set(metadata("rlrun").get_all("Provides-Extra") or ())  # pyproject's optional-dependencies
    assert image_extras() == extras - DEV_EXTRAS
    assert "torch==2.13.0" in image_install()  # the release the tests run on, as the README's pin


def test_image_home_and_workdir_are_writable_by_the_services_uid():
    text = dockerfile()
    workdir = re.search(r"^WORKDIR (\S+)", text, re.M)
    assert workdir is not None and workdir.group(1).startswith("/home/rlrun/")
    assert "chown -R rlrun:rlrun /home/rlrun" in text  # WORKDIR creates its directory as root
    assert "chmod -R a+rwX /home/rlrun" in text  # any uid (RLRUN_UID) can write there: Jupyter's files
    assert re.search(r"^USER 1000:1000$", text, re.M)


def test_services_run_as_the_host_user_on_the_outputs_volume():
    services = compose()["services"]
    assert set(services) == {"train", "train-cpu", "jupyter", "tensorboard"}
    for name, service in services.items():
        assert service["user"] == "${RLRUN_UID:-1000}:${RLRUN_GID:-1000}", name
        assert "./outputs:/home/rlrun/app/outputs" in service["volumes"], name
    # the directory ships with the repository, so Docker never creates it as root on the host
    tracked = subprocess.run(["git", "ls-files", "outputs"], cwd=ROOT, capture_output=True, text=True).stdout
    assert tracked.split() == ["outputs/.gitkeep"]


def test_train_service_keeps_the_gpu_whatever_the_overrides():
    train = compose()["services"]["train"]
    assert train["entrypoint"] == ["python", "-m", "rlrun.train", "device=cuda"]
    assert train["command"] == []  # `docker compose run --rm train -m seed=0,1` appends to the entrypoint
    devices = train["deploy"]["resources"]["reservations"]["devices"]
    assert devices[0]["capabilities"] == ["gpu"]


def test_a_host_without_a_gpu_has_a_train_service_that_reserves_none():
    train_cpu = compose()["services"]["train-cpu"]
    assert train_cpu["entrypoint"] == ["python", "-m", "rlrun.train"] and train_cpu["command"] == []
    assert "deploy" not in train_cpu  # no GPU reservation, which a host without NVIDIA's runtime refuses


@pytest.mark.slow
def test_image_install_resolves():
    """The Dockerfile's install line resolves against the package index (pip's dry run: nothing installed)."""
    args = [a if not a.startswith(".[") else str(ROOT) + a[1:] for a in image_install()]
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--dry-run", "--quiet", "--ignore-installed", *args],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
