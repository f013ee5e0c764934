"""RunLogger's episode bookkeeping, with hand-made episodes."""

import pytest
from omegaconf import OmegaConf
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from rlrun.logs.logger import RunLogger
from rlrun.training.build import config_record


def test_episodes_ending_at_one_vector_step_give_one_mean_return_point(tmp_path):
    log = RunLogger(
        tmp_path,
        config_record(OmegaConf.create({"seed": 0})),
        total_steps=64,
        reward_threshold=2.5,
        progress_bar=False,
        window=2,
    )
    assert log.episodes_end(16, [(16, 1.0, 5)]) is False
    # two envs end at step 32: the window becomes [2, 3] after the second, whose mean 2.5 solves
    assert log.episodes_end(32, [(31, 2.0, 7), (32, 3.0, 9)]) is True
    assert log.episodes_end(48, []) is False
    summary = log.close(64)
    assert log.solved == {"step": 32, "episode": 3}
    assert summary["episodes"] == 3 and summary["final_mean_return_100"] == 2.5

    acc = EventAccumulator(str(tmp_path), size_guidance={"scalars": 0})
    acc.Reload()
    mean = [(e.step, e.value) for e in acc.Scalars("charts/mean_return_100")]
    assert mean == [(16, 1.0), (32, 2.5)]  # one point per step, after all of its episodes
    assert [(e.step, e.value) for e in acc.Scalars("charts/episodic_return")] == [(16, 1.0), (31, 2.0), (32, 3.0)]
    rows = (tmp_path / "episodes.csv").read_text().splitlines()
    assert rows[1:] == ["16,1,1.0,5", "31,2,2.0,7", "32,3,3.0,9"]


def test_returns_png_shows_each_evaluation_and_a_resumed_run_keeps_them(tmp_path, monkeypatch):
    """Before: the figure showed training episodes only, not the evaluations the summary reports."""
    import matplotlib.axes

    drawn = []
    plot = matplotlib.axes.Axes.plot
    monkeypatch.setattr(matplotlib.axes.Axes, "plot", lambda ax, *a, **k: drawn.append((a, k)) or plot(ax, *a, **k))
    log = RunLogger(tmp_path, config_record(OmegaConf.create({"seed": 0})), 64, None, progress_bar=False, window=2)
    log.episodes_end(16, [(16, 1.0, 5)])
    log.scalars(16, {"eval/mean_return": 1.5, "eval/std_return": 0.5})
    state = log.state_dict()
    log.close(32)
    resumed = RunLogger(
        tmp_path, config_record(OmegaConf.create({"seed": 0})), 64, None, progress_bar=False, window=2, resume_step=16
    )
    resumed.load_state_dict(state)
    resumed.episodes_end(32, [(32, 2.0, 5)])
    resumed.scalars(32, {"eval/mean_return": 2.5})
    resumed.close(32)
    assert resumed.plot("title") == tmp_path / "returns.png"
    evals = [a for a, k in drawn if k.get("label") == "evaluation (mean return)"]
    assert [tuple(map(list, a[:2])) for a in evals] == [([16, 32], [1.5, 2.5])]


# --- logging backends (rlrun.logs.sinks) ------------------------------------------------------------------


def read_wandb_records(path):
    """The records of a W&B offline run file (`run-<id>.wandb`): W&B's LevelDB-style log of protobufs
    (7-byte file header; 32 KiB blocks of chunks, each with a 7-byte header: crc, length, type)."""
    import struct

    from wandb.proto import wandb_internal_pb2 as pb

    data, pos, block, records, buf = path.read_bytes(), 7, 32768, [], b""
    assert data[:4] == b":W&B"
    while pos + 7 <= len(data):
        if block - pos % block < 7:  # a block's tail too short for a header is padding
            pos += block - pos % block
            continue
        _, length, kind = struct.unpack("<IHB", data[pos : pos + 7])
        buf += data[pos + 7 : pos + 7 + length]
        pos += 7 + length
        if kind in (1, 4):  # FULL or LAST chunk: a whole record
            record = pb.Record()
            record.ParseFromString(buf)
            records.append(record)
            buf = b""
    return records


def wandb_history(path):
    import json

    rows = []
    for r in read_wandb_records(path):
        if r.WhichOneof("record_type") == "history":
            rows.append({(i.key or "/".join(i.nested_key)): json.loads(i.value_json) for i in r.history.item})
    return rows


def hand_made_run(log):
    log.episodes_end(16, [(16, 1.0, 5)])
    log.episodes_end(32, [(31, 2.0, 7), (32, 3.0, 9)])
    log.scalars(32, {"losses/td_loss": 0.5, "eval/mean_return": 7.0})
    return log.close(64)


def test_every_backend_gets_the_same_scalars_params_and_summary(tmp_path, monkeypatch):
    mlflow = pytest.importorskip("mlflow")
    pytest.importorskip("wandb")
    from rlrun.logs.sinks import SinkRun, make_sinks

    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.setenv("WANDB_MODE", "offline")
    outputs, tmp_path = tmp_path, tmp_path / "run"  # the run in an outputs folder, which holds the MLflow store
    tmp_path.mkdir()
    cfg = OmegaConf.create({"seed": 3, "algo": {"gamma": 0.9}})
    backends = {"tensorboard": {}, "csv": {}, "mlflow": {"tracking_uri": None, "experiment": None}, "wandb": {}}
    run = SinkRun(tmp_path, tmp_path, "run-a", "unit")
    log = RunLogger(
        tmp_path, config_record(cfg), 64, 2.5, progress_bar=False, window=2, sinks=make_sinks(backends, run)
    )
    summary = hand_made_run(log)
    expected = {
        "charts/episodic_return": [(16, 1.0), (31, 2.0), (32, 3.0)],
        "charts/mean_return_100": [(16, 1.0), (32, 2.5)],
    }

    # MLflow, read back through its own client, from the store shared by the outputs folder's runs
    uri = summary["logged_to"]["mlflow"]["tracking_uri"]
    assert uri == f"sqlite:///{outputs / 'mlruns' / 'mlflow.db'}"
    mlflow.set_tracking_uri(uri)
    runs = mlflow.search_runs(experiment_names=["unit"])
    assert len(runs) == 1 and runs.loc[0, "tags.mlflow.runName"] == "run-a" and runs.loc[0, "status"] == "FINISHED"
    assert runs.loc[0, "params.seed"] == "3" and runs.loc[0, "params.algo.gamma"] == "0.9"
    assert runs.loc[0, "metrics.summary/final_eval_return"] == 7.0 and runs.loc[0, "metrics.losses/td_loss"] == 0.5
    client = mlflow.MlflowClient(uri)
    for tag, points in expected.items():
        assert [(m.step, m.value) for m in client.get_metric_history(runs.loc[0, "run_id"], tag)] == points

    # W&B, from its offline run file: one history row per env step, against the env_step axis
    (wandb_file,) = (tmp_path / "wandb").glob("offline-run-*/run-*.wandb")
    history = wandb_history(wandb_file)
    for tag, points in expected.items():
        assert [(row["env_step"], row[tag]) for row in history if tag in row] == points
    assert [row["env_step"] for row in history] == [16, 31, 32, 64]  # 64: hparams/best_mean_return_100

    # CSV rows and TensorBoard events carry the same points
    rows = [r.split(",") for r in (tmp_path / "scalars.csv").read_text().splitlines()[1:]]
    assert [(int(s), float(v)) for s, t, v in rows if t == "charts/episodic_return"] == expected[
        "charts/episodic_return"
    ]
    acc = EventAccumulator(str(tmp_path), size_guidance={"scalars": 0})
    acc.Reload()
    assert [(e.step, e.value) for e in acc.Scalars("charts/mean_return_100")] == expected["charts/mean_return_100"]
    assert not (tmp_path / "mlruns").exists() and not (outputs.parent / "mlruns").exists()

    # a resumed run continues the same MLflow run and W&B id
    ids = summary["logged_to"]["mlflow"]["run_id"], summary["logged_to"]["wandb"]["id"]
    resumed = SinkRun(tmp_path, tmp_path, "run-a", "unit", resume_step=32)
    log = RunLogger(
        tmp_path,
        config_record(cfg),
        64,
        2.5,
        progress_bar=False,
        window=2,
        resume_step=32,
        sinks=make_sinks(backends, resumed),
    )
    log.scalars(48, {"losses/td_loss": 0.25})
    again = log.close(64)
    assert (again["logged_to"]["mlflow"]["run_id"], again["logged_to"]["wandb"]["id"]) == ids
    assert len(mlflow.search_runs(experiment_names=["unit"])) == 1
    assert [m.value for m in client.get_metric_history(ids[0], "losses/td_loss")] == [0.5, 0.25]


def test_logger_group_composes_several_backends_and_refuses_a_missing_package(compose, monkeypatch):
    import importlib.util

    from rlrun.config.validate import validate
    from rlrun.errors import ConfigError

    cfg = compose("logger=[tensorboard,mlflow]")
    assert cfg.logger.tensorboard is not None and cfg.logger.mlflow.tracking_uri is None
    assert cfg.logger.wandb is None and cfg.logger.csv is None
    assert compose().logger.tensorboard is not None and compose().logger.mlflow is None  # the default
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "mlflow" else real(name, *a))
    with pytest.raises(ConfigError, match=r"logger='mlflow'.*pip install -e '\.\[mlflow\]'"):
        validate(cfg)


@pytest.mark.slow  # ~9 s: a second MLflow store is created
def test_batched_agents_are_runs_of_their_own(compose, tmp_path, monkeypatch):
    mlflow = pytest.importorskip("mlflow")
    from rlrun.training import build

    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    cfg = compose("seeds=2", "seed=5", "logger=mlflow", "log.progress_bar=false")
    population = build.population(cfg, tmp_path / "run", None, None)
    for k, lg in enumerate(population.loggers):
        lg.episodes_end(16, [(16, float(k), 5)])
        lg.close(16)
    mlflow.set_tracking_uri(f"sqlite:///{(tmp_path / 'mlruns' / 'mlflow.db').resolve()}")  # next to the run
    runs = mlflow.search_runs(experiment_names=["dqn"]).sort_values(
        "tags.mlflow.runName"
    )  # exp_name null: the algorithm
    assert list(runs["tags.mlflow.runName"]) == ["run/seed=5", "run/seed=6"]
    assert list(runs["params.seed"]) == ["5", "6"] and list(runs["metrics.charts/episodic_return"]) == [0.0, 1.0]
    assert not list((tmp_path / "run").glob("events.out.tfevents.*"))  # logger=mlflow alone: no TensorBoard


def test_two_wandb_runs_in_one_process_keep_the_service_logs_in_their_own_dirs(tmp_path, monkeypatch):
    """W&B's service logs went into the first run's directory for every later run of the process."""
    pytest.importorskip("wandb")
    from rlrun.logs.sinks.base import SinkRun
    from rlrun.logs.sinks.wandb import WandbSink

    monkeypatch.delenv("WANDB_CACHE_DIR", raising=False)
    for name in ("a", "b"):
        run = tmp_path / name
        run.mkdir()
        sink = WandbSink(SinkRun(run, run, name, "dqn", None), mode="offline")
        sink.scalar("charts/epsilon", 1.0, 1)
        sink.close({"status": "finished", "env_steps": 1})
        assert list((run / "wandb" / "cache").rglob("core-debug-*.log")), name
    assert len(list((tmp_path / "a" / "wandb" / "cache").rglob("core-debug-*.log"))) == 1
