"""Every file read from a run directory is read within bounds (rlrun.storage.bounded, docs/reliability.md): a
crafted config, checkpoint, summary or table is refused with one line, quickly and without gigabytes of
memory, by the entry points that read it (`rlrun.load`, evaluate and export through `policy.read_saved`,
resume through `checkpoint.load`, the report through `jobtable`). Checked on crafted files, without a run;
the same refusals on real runs: tests/integration/test_reliability.py."""

import errno
import logging
import os
import zipfile
from pathlib import Path

import pytest
import torch
import yaml
from entrypoints import in_process
from omegaconf import OmegaConf
from test_report import make_run

from rlrun import policy
from rlrun.config import preflight
from rlrun.errors import ConfigError
from rlrun.report import write_report
from rlrun.storage import checkpoint as ckpt, rundir, summary

WEIGHTS = {"layer.weight": torch.zeros(2, 2)}


def alias_bomb() -> str:
    """9 levels of 10 aliases: 10^9 values once expanded, from a few hundred bytes."""
    lines = ['a0: &a0 ["x","x","x","x","x","x","x","x","x","x"]']
    lines += [f"a{i}: &a{i} [" + ",".join([f"*a{i - 1}"] * 10) + "]" for i in range(1, 10)]
    return "\n".join(lines) + "\n"


def shared_list(levels: int):
    """A list of 10^levels leaves made of shared references (what a pickle's memo makes from a few bytes)."""
    node: list = ["x"] * 10
    for _ in range(levels - 1):
        node = [node] * 10
    return node


def write(path: Path, kind: str) -> Path:
    """A crafted file of `kind` at `path`."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if kind == "alias bomb":
        path.write_text(alias_bomb())
    elif kind == "recursive alias":
        path.write_text("seed: &a [1, *a]\n")
    elif kind == "FIFO":
        os.mkfifo(path)
    elif kind == "/dev/zero link":
        path.symlink_to("/dev/zero")
    elif kind == "directory":
        path.mkdir()
    elif kind == "not UTF-8":
        path.write_bytes(b"seed: 0\nexp_name: caf\xe9\n")
    elif kind == "20000-deep YAML":
        path.write_text("a: " + "[" * 20000 + "]" * 20000 + "\n")
    elif kind == "100000-deep JSON":
        path.write_text("[" * 100000 + "]" * 100000)
    elif kind == "too large":
        with open(path, "wb") as f:  # sparse: no disk used
            f.truncate(16 * 2**20 + 1)  # rlrun.storage.bounded.TEXT_LIMIT + 1
    else:
        raise AssertionError(kind)
    return path


CRAFTED = {  # kind -> what the one line says
    "alias bomb": "expands to more than",
    "recursive alias": "holds a recursive alias",
    "FIFO": "is a FIFO, not a regular file",
    "/dev/zero link": "is a device, not a regular file",
    "directory": "is a directory, not a regular file",
    "not UTF-8": "is not YAML (byte 0xe9 at offset 21 is not UTF-8)",
    "20000-deep YAML": "is nested deeper than",
    "too large": "is larger than 16 MiB",
}


@pytest.mark.timeout(30)  # before the bounds: the FIFO and the alias bomb hung
@pytest.mark.parametrize("kind", CRAFTED)
def test_a_crafted_config_next_to_model_pt_is_refused_in_one_line(tmp_path, kind):
    run = tmp_path / "run"
    run.mkdir()
    torch.save(WEIGHTS, run / "model.pt")
    write(run / ".hydra" / "config.yaml", kind)
    for target in (run, run / "model.pt"):
        with pytest.raises(ckpt.CheckpointError) as refused:
            policy.read_saved(target)
        assert CRAFTED[kind] in str(refused.value) and "\n" not in str(refused.value)
    proc = in_process("rlrun.export", run)  # a read refused is exit 2, never "cannot write" (4)
    assert proc.returncode == 2 and CRAFTED[kind] in proc.stderr, proc.stderr
    assert not (run / "export").exists()


def test_the_bounded_loaders_refuse_each_crafted_file(tmp_path):
    from rlrun.storage import bounded

    for kind, says in {**CRAFTED, "100000-deep JSON": "is nested deeper than"}.items():
        path = write(tmp_path / kind.replace("/", "-"), kind)
        load = bounded.load_json if "JSON" in kind else bounded.load_yaml
        with pytest.raises(bounded.FileRefused, match=says.replace("(", r"\(").replace(")", r"\)")):
            load(path)


def test_aliases_within_the_bounds_are_read(tmp_path):
    from rlrun.storage import bounded

    path = tmp_path / "config.yaml"
    path.write_text("base: &b {lr: 0.001, seeds: [1, 2]}\nagent: *b\n")
    assert bounded.load_yaml(path) == {"base": {"lr": 0.001, "seeds": [1, 2]}, "agent": {"lr": 0.001, "seeds": [1, 2]}}


def checkpoint(config, learner=None, **extra):
    return {"format": 1, "config": config, "step": 0, "learner": learner or {"online": WEIGHTS}, "buffer": {}, **extra}


def deflated(path: Path, inflated: int) -> Path:
    """A torch.save file whose tensor record is stored compressed: `inflated` bytes of zeros in ~inflated/1000."""
    plain = path.with_suffix(".plain")
    torch.save({"w": torch.zeros(4)}, plain)
    with zipfile.ZipFile(plain) as src, zipfile.ZipFile(path, "w") as out:
        for info in src.infolist():
            if info.filename.endswith("/data/0"):
                compressed = zipfile.ZipInfo(info.filename)
                compressed.compress_type = zipfile.ZIP_DEFLATED
                with out.open(compressed, "w", force_zip64=True) as record:
                    for _ in range(inflated // 2**20):  # streamed: the test itself never holds it
                        record.write(bytes(2**20))
            else:
                out.writestr(info, src.read(info.filename))
    return path


@pytest.mark.timeout(30)  # before the bounds: the shared-reference config hung every reader
@pytest.mark.parametrize(
    "craft, says",
    [
        (lambda p: torch.save(checkpoint({"exp_name": shared_list(9)}), p), "holds more than 10000000 values"),
        (lambda p: deflated(p, 50 * 2**20), "compressed records, which torch.save never writes"),
        (lambda p: torch.save(checkpoint([1, 2]), p), "its config is a list, not a mapping"),
        (lambda p: torch.save(checkpoint({}, "x"), p), "its learner is a str, not a mapping"),
        (lambda p: torch.save(checkpoint({}, {"online": [1, 2]}), p), "its learner.online is not a network's weights"),
        (lambda p: p.write_bytes(b"not a zip archive"), "not written by torch.save (not a zip archive)"),
        (lambda p: p.symlink_to("/dev/zero"), "is a device, not a regular file"),
        (lambda p: os.mkfifo(p), "is a FIFO, not a regular file"),
    ],
    ids=["shared references", "compressed record", "config list", "learner str", "online list", "not zip", "dev zero",
         "FIFO"],
)  # fmt: skip
def test_a_crafted_checkpoint_is_refused_in_one_line_by_every_reader(tmp_path, craft, says):
    run = tmp_path / "run"
    run.mkdir()
    craft(run / ckpt.LATEST)
    for read in (lambda: ckpt.load(run), lambda: policy.read_saved(run), lambda: policy.read_saved(run / ckpt.LATEST)):
        with pytest.raises(ckpt.CheckpointError) as refused:  # rlrun.load's error, never a TypeError
            read()
        assert says in str(refused.value) and "\n" not in str(refused.value)


def test_a_checkpoint_whose_agents_are_not_mappings_is_refused_naming_them(tmp_path, compose):
    config = OmegaConf.to_container(compose())
    config["agents"] = ["x", "y"]
    torch.save(checkpoint(config), tmp_path / ckpt.LATEST)
    with pytest.raises(ConfigError, match=r"agents\[0\]='x': allowed a mapping"):
        policy.read_saved(tmp_path)


def test_a_compressed_model_pt_is_refused_before_it_is_inflated(tmp_path):
    """3 GB from 3 MB in the attack; here 200 MB from 200 kB: refused before torch allocates a byte of it."""
    import resource

    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with pytest.raises(ckpt.CheckpointError, match="compressed records, which torch.save never writes"):
        ckpt.read(deflated(tmp_path / "model.pt", 200 * 2**20))
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 100 * 2**10  # KiB: under 100 MiB more


@pytest.mark.timeout(60)  # before the bounds: RecursionError, or a hang
@pytest.mark.parametrize(
    "file, kind", [("summary.json", "100000-deep JSON"), (".hydra/config.yaml", "20000-deep YAML"),
                   (".hydra/config.yaml", "alias bomb"), ("summary.json", "FIFO")]
)  # fmt: skip
def test_the_report_skips_a_crafted_job_and_names_it(tmp_path, capsys, file, kind):
    for seed in range(2):
        make_run(tmp_path, 0.001, seed, 100.0 + seed, 50.0, None)
    bad = tmp_path / "optimizer.lr=0.001" / "seed=1"
    (bad / file).unlink()
    write(bad / file, kind)
    text = write_report(tmp_path, reps=50)
    assert f"- `{bad}`: {Path(file).name} " in text
    assert f"skipped the damaged job {bad}" in capsys.readouterr().err


@pytest.mark.timeout(60)  # before the bounds: TensorBoard's reader and pandas waited on the FIFOs
def test_the_report_reads_no_curve_from_a_fifo(tmp_path):
    for seed in range(2):
        make_run(tmp_path, 0.001, seed, 100.0 + seed, 50.0, None)
        job = tmp_path / "optimizer.lr=0.001" / f"seed={seed}"
        os.mkfifo(job / "events.out.tfevents.1.host.1.0")
        os.mkfifo(job / "episodes.csv")
    text = write_report(tmp_path, reps=50)
    assert "2 jobs (2 finished)" in text and "Damaged" not in text


def test_the_report_shows_a_job_dir_whose_name_is_not_utf8(tmp_path):
    for seed in range(2):
        make_run(tmp_path, 0.001, seed, 100.0 + seed, 50.0, None)
    odd = Path(os.fsdecode(bytes(tmp_path) + b"/optimizer.lr=0.001/seed=\xff"))
    (tmp_path / "optimizer.lr=0.001" / "seed=1").rename(odd)
    summary.write(odd, summary.of_failure("boom"))  # a failed job: its directory is named in report.md
    text = write_report(tmp_path, reps=50)
    assert "seed=\\xff" in text and (tmp_path / "report.md").read_text() == text


def test_the_report_says_in_one_line_where_it_cannot_write(tmp_path, monkeypatch):
    sweep = tmp_path / "sweep"
    for seed in range(2):
        make_run(sweep, 0.001, seed, 100.0 + seed, 50.0, None)
    (sweep / "report.csv").mkdir()
    proc = in_process("rlrun.report", sweep)
    assert proc.returncode == 4 and proc.stderr.strip().splitlines() == [
        f"rlrun.report: cannot write the report: {sweep / 'report.csv'}: Is a directory; "
        "write it elsewhere with --out DIR"
    ]
    assert sorted(p.name for p in sweep.iterdir()) == ["optimizer.lr=0.001", "report.csv"]  # no temporary file left
    (sweep / "report.csv").rmdir()

    def read_only(path, text):  # what a folder the user cannot write gives (the tests may run as root)
        raise PermissionError(errno.EACCES, "Permission denied", f"{path}.1a2b3c4d.tmp")

    monkeypatch.setattr(rundir, "write_text", read_only)
    proc = in_process("rlrun.report", sweep)
    assert proc.returncode == 4 and f"cannot write the report: {sweep}: Permission denied" in proc.stderr
    monkeypatch.undo()
    proc = in_process("rlrun.report", sweep, "--out", tmp_path / "elsewhere")
    assert proc.returncode == 0 and (tmp_path / "elsewhere" / "report.md").is_file()
    assert not (sweep / "report.md").exists()


@pytest.mark.parametrize(
    "args",
    [["-m", "hydra/launcher=batched", "seed=0,1", "hydra.sweep.dir=out/" + "a" * 400], ["hydra.run.dir=" + "a" * 400]],
)
def test_a_run_name_too_long_for_the_file_system_is_refused_before_running(tmp_path, monkeypatch, args):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(rundir.RunDirError, match="is 400 bytes, and a name may have 255; shorten") as refused:
        preflight.plan(args)
    assert "\n" not in str(refused.value)
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(ConfigError):  # a long exp_name: refused by its own rule
        preflight.plan(["-m", "hydra/launcher=batched", "seed=0,1", "exp_name=" + "a" * 400])


def test_only_torchs_profiler_note_of_a_compiled_step_is_dropped(caplog):
    import rlrun.algos.update  # noqa: F401  installs the filter

    dynamo = logging.getLogger("torch._dynamo.variables.ctx_manager")
    with caplog.at_level(logging.WARNING):
        dynamo.warning("Profiler record function %s will be ignored", "<class 'record_function'>")
        dynamo.warning("Graph break: something else")
    assert [r.getMessage() for r in caplog.records] == ["Graph break: something else"]


def test_a_saved_yaml_that_rlrun_wrote_reads_back(tmp_path, compose):
    """The bounds leave every file rlrun writes readable: a full config."""
    from rlrun.storage import bounded

    path = tmp_path / "config.yaml"
    path.write_text(OmegaConf.to_yaml(compose("seeds=3")))
    assert bounded.load_yaml(path) == yaml.safe_load(path.read_text())


@pytest.mark.timeout(30)  # before the bounds: the FIFO summary hung the comparison
def test_a_comparison_refuses_a_crafted_round_in_one_line(tmp_path):
    from rlrun.compare.rounds import RoundError, saved_plan, state

    overrides = ["total_steps=1000", "seed=0", "seeds=2"]
    (tmp_path / "round" / ".hydra").mkdir(parents=True)
    (tmp_path / "round" / ".hydra" / "overrides.yaml").write_text(yaml.safe_dump(overrides))
    write(tmp_path / "round" / "summary.json", "FIFO")
    with pytest.raises(RoundError, match="summary.json is a FIFO") as refused:
        state(tmp_path / "round", overrides)
    assert refused.value.code == 2
    write(tmp_path / "plan.json", "100000-deep JSON")
    with pytest.raises(RoundError, match="is nested deeper than 100 levels"):
        saved_plan(tmp_path)


@pytest.mark.parametrize("task", [["optimizer.lr=0.001", "x=["], "not a list", [["a"], {"b": 1}]])
def test_the_report_reads_past_a_crafted_multirun_yaml(tmp_path, task):
    """Its command line is read for the settings every job shares: one Hydra's grammar refuses (or that is no
    list of overrides) adds no line, instead of an OverrideParseException traceback."""
    for seed in range(2):
        make_run(tmp_path, 0.001, seed, 100.0 + seed, 50.0, None)
    (tmp_path / "multirun.yaml").write_text(yaml.safe_dump({"hydra": {"overrides": {"task": task}}}))
    text = write_report(tmp_path, reps=50)
    assert "2 jobs (2 finished)" in text and "Every job of the sweep" not in text


@pytest.mark.parametrize("network", [{"encoder": "mlp", "num_atoms": "x"}, {"encoder": "mlp", "num_quantiles": [1]},
                                     {"encoder": "mlp", "tau_embedding_dim": "8"}])  # fmt: skip
def test_the_report_labels_a_job_whose_network_values_are_not_numbers(tmp_path, network):
    """The network label is read from the composed config: a crafted value there is no head feature, not a
    TypeError traceback."""
    for seed in range(2):
        make_run(tmp_path, 0.001, seed, 100.0 + seed, 50.0, None)
    config = tmp_path / "optimizer.lr=0.001" / "seed=1" / ".hydra" / "config.yaml"
    config.write_text(yaml.safe_dump({**yaml.safe_load(config.read_text()), "network": network}))
    text = write_report(tmp_path, reps=50)
    assert "2 jobs (2 finished)" in text


def test_a_comparison_reuses_no_round_whose_overrides_it_cannot_read(tmp_path):
    """The round's overrides.yaml says which arm and seeds it trained: one refused by the bounded reader
    (here a FIFO) is a refusal, not a round taken as this arm's (its finished summary was reused before)."""
    from rlrun.compare.rounds import RoundError, state

    (tmp_path / "round" / ".hydra").mkdir(parents=True)
    write(tmp_path / "round" / ".hydra" / "overrides.yaml", "FIFO")
    summary.write(tmp_path / "round", {"status": "finished"})
    with pytest.raises(RoundError, match="overrides.yaml is a FIFO") as refused:
        state(tmp_path / "round", ["total_steps=1000", "seed=0", "seeds=2"])
    assert refused.value.code == 2


@pytest.mark.parametrize("env_id", [5, [1]])
def test_the_report_groups_a_job_whose_env_id_is_no_string(tmp_path, env_id):
    """A crafted `env.id` (a number, a list) is shown as text, not a TypeError while the report sorts envs."""
    for seed in range(2):
        make_run(tmp_path, 0.001, seed, 100.0 + seed, 50.0, None)
    config = tmp_path / "optimizer.lr=0.001" / "seed=1" / ".hydra" / "config.yaml"
    config.write_text(yaml.safe_dump({**yaml.safe_load(config.read_text()), "env": {"id": env_id}}))
    text = write_report(tmp_path, reps=50)
    assert "2 jobs (2 finished)" in text and str(env_id) in text
