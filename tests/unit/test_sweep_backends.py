"""A sweep ends by saying where its jobs were logged, as a single run does: `tensorboard --logdir <sweep>`
and the `mlflow ui ...` command of the store its jobs share."""

import json

from omegaconf import OmegaConf

from rlrun.sweeps.callbacks import ReportCallback


def job(path, logged_to):
    path.mkdir(parents=True)
    summary = {"status": "finished", "env_steps": 100, "final_mean_return_100": 10.0, "logged_to": logged_to}
    (path / "summary.json").write_text(json.dumps(summary))


def test_a_sweep_prints_the_mlflow_ui_line_of_its_jobs(tmp_path, capsys, caplog):
    uri = f"sqlite:///{tmp_path}/mlruns/mlflow.db"
    for seed in (0, 1):
        job(tmp_path / f"seed={seed}", {"tensorboard": {}, "mlflow": {"tracking_uri": uri, "run_id": str(seed)}})
    (tmp_path / "seed=2").mkdir()  # a job that failed before writing anything
    ReportCallback().on_multirun_end(OmegaConf.create({"hydra": {"sweep": {"dir": str(tmp_path)}}}))
    out = capsys.readouterr().out.splitlines()
    assert f"  tensorboard --logdir {tmp_path}" in out
    assert f"  mlflow ui --backend-store-uri {uri}" in out


def test_a_sweep_that_logged_nowhere_prints_no_backend_line(tmp_path, capsys, caplog):
    ReportCallback().on_multirun_end(OmegaConf.create({"hydra": {"sweep": {"dir": str(tmp_path)}}}))
    assert "mlflow" not in capsys.readouterr().out
