"""hydra/launcher=batched on each backend (issue 27): local, submitit (local and Slurm executors), Ray.

Fast: the generated Slurm submission (submitit writes it; a stand-in `sbatch` records it), the grouping rule
for clusters, what a lost group leaves and how a rerun finds it. Slow (real sweeps, a minute or more each on
a loaded 2-core machine): each job's files equal across backends, and a group SIGKILLed mid-run reported as
failed jobs while the other group finishes, then continued from its checkpoint by the resume switch to the
files of an uninterrupted sweep.
"""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from launch import run_module
from omegaconf import OmegaConf

from rlrun.errors import ConfigError
from rlrun.sweeps import batching

SWEEP = [
    "optimizer.lr=1e-3,3e-3",
    "seed=0,1",
    "device=cpu",
    "algo.learning_starts=200",
    "eval.interval=0",
    "log.plot=false",
    "network.hidden_sizes=[32]",
    "hydra/launcher=batched",
    "hydra.launcher.max_agents=2",  # 4 jobs -> 2 groups: jobs0-1, jobs2-3
]
RAY = ["hydra.launcher.ray.address=local", "+hydra.launcher.ray.init.num_cpus=2"]
BACKENDS = {
    "local": [],
    "local_processes": ["hydra.launcher.n_jobs=2"],  # a spawned process per group, two at a time
    "submitit": ["hydra.launcher.backend=submitit"],
    "ray": ["hydra.launcher.backend=ray", *RAY],
}
VOLATILE = ("wall_time_s", "sps", "logged_to")  # what differs between two runs of the same job


# --- the Slurm submission, without a cluster ------------------------------------------------------------


@pytest.fixture
def fake_sbatch(tmp_path, monkeypatch):
    """An `sbatch` (and `srun`) on PATH: sbatch accepts the file submitit writes and answers as Slurm does."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "sbatch").write_text(  # job ids 4242, 4243, ...
        '#!/bin/sh\nn=$(cat "$0.n" 2>/dev/null || echo 4241); n=$((n + 1)); echo $n > "$0.n"\n'
        'echo "Submitted batch job $n"\n'
    )
    (bin_dir / "srun").write_text("#!/bin/sh\nexit 1\n")  # submitit looks for it to tell it is on Slurm
    for tool in ("sbatch", "srun"):
        (bin_dir / tool).chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")


def slurm_settings(**changes):
    from hydra_plugins.rlrun_batched_launcher.batched_launcher import BatchedLauncherConf

    settings = BatchedLauncherConf().submitit
    return {**settings, "executor": "slurm", "partition": "gpu", **changes}


@pytest.mark.parametrize("device", ["cuda", "cpu"])
def test_a_sweep_is_one_slurm_array_with_a_task_per_group(tmp_path, fake_sbatch, device):
    from hydra_plugins.rlrun_batched_launcher.backends import submit_submitit

    pytest.importorskip("submitit")
    work = [([{}], [str(tmp_path / f"job{g}")], str(tmp_path / f"jobs{g}")) for g in range(4)]
    jobs = submit_submitit(print, work, [device == "cuda"] * 4, slurm_settings(), tmp_path / ".submitit" / "%j")
    assert [j.job_id for j in jobs] == [f"4242_{g}" for g in range(4)]  # one array, one task per group
    script = submission(tmp_path, "4242")
    assert " -u -m submitit.core._submit" in script  # each task runs its group's pickled call (python or python3)
    sbatch = sorted(line for line in script.splitlines() if line.startswith("#SBATCH"))
    for wanted in ("--array=0-3%4", "--cpus-per-task=2", "--mem=8GB", "--time=240", "--partition=gpu", "--nodes=1"):
        assert f"#SBATCH {wanted}" in sbatch, (wanted, sbatch)
    assert "#SBATCH --ntasks-per-node=1" in sbatch
    assert [line for line in sbatch if "--gpus-per-node" in line] == (
        ["#SBATCH --gpus-per-node=1"] if device == "cuda" else []
    )
    assert len(list((tmp_path / ".submitit").glob("4242_*/4242_*_submitted.pkl"))) == 4  # each group's call


def test_cpu_and_gpu_groups_go_in_one_array_each(tmp_path, fake_sbatch):
    from hydra_plugins.rlrun_batched_launcher.backends import submit_submitit

    pytest.importorskip("submitit")
    work = [([{}], [str(tmp_path / f"job{g}")], str(tmp_path / f"jobs{g}")) for g in range(3)]
    jobs = submit_submitit(print, work, [False, True, False], slurm_settings(), tmp_path / ".submitit" / "%j")
    assert [j.job_id for j in jobs] == ["4242_0", "4243", "4242_1"]  # the CPU array, then the GPU job (one)
    cpu, gpu = submission(tmp_path, "4242"), submission(tmp_path, "4243")
    assert "#SBATCH --array=0-1%2" in cpu and "--gpus-per-node" not in cpu
    assert "--array" not in gpu and "#SBATCH --gpus-per-node=1" in gpu


def submission(tmp_path, job_id):
    return (tmp_path / ".submitit" / job_id / f"{job_id}_submission.sh").read_text()


# --- settings and group sizing ---------------------------------------------------------------------------


def test_the_backend_settings_compose_and_bad_ones_are_refused():
    from rlrun.config.preflight import compose

    cfg = compose(["hydra/launcher=batched", "hydra.launcher.backend=submitit", "hydra.launcher.resume=true"])
    launcher = cfg.hydra.launcher
    assert launcher.submitit.executor == "local" and launcher.submitit.timeout_min == 240
    assert launcher.ray.remote == {"num_cpus": 1, "max_retries": 0}
    batching.check_launcher(launcher)
    assert batching.resumes_sweep(launcher)
    for key, value in (("backend", "slurm"), ("submitit.executor", "pbs")):
        bad = OmegaConf.to_container(launcher)
        OmegaConf.update(bad := OmegaConf.create(bad), key, value)
        with pytest.raises(ConfigError, match=f"hydra.launcher.{key}"):
            batching.check_launcher(bad)


def test_a_cluster_sweep_is_cut_into_equal_groups_one_per_gpu_at_least(compose):
    """40 jobs of one configuration (lr x seed batch): max_agents=10 gives 4 groups of 10; n_jobs=8 (GPUs or
    nodes) 8 groups of 5; n_jobs=6, 6 groups of 6 or 7 (not halves of halves)."""
    base = compose("network.hidden_sizes=[32]")
    cfgs = []
    for lr in (1e-3, 2e-3, 3e-3, 5e-3):
        for seed in range(10):
            cfg = base.copy()
            cfg.optimizer.lr, cfg.seed = lr, seed
            cfgs.append(cfg)
    assert [len(c) for c in batching.plan_chunks(cfgs, max_agents=10, n_jobs=1)] == [10] * 4
    assert [len(c) for c in batching.plan_chunks(cfgs, max_agents=10, n_jobs=8)] == [5] * 8
    assert sorted(len(c) for c in batching.plan_chunks(cfgs, max_agents=64, n_jobs=6)) == [6, 6, 7, 7, 7, 7]
    assert batching.plan_chunks(cfgs[:3], max_agents=64, n_jobs=8) == [[0], [1], [2]]


# --- a lost group, on disk -------------------------------------------------------------------------------


def test_a_lost_group_is_failed_jobs_and_a_rerun_finds_what_is_left(tmp_path):
    jobs = [tmp_path / "lr=1" / f"seed={s}" for s in (0, 1)]
    group = tmp_path / ".batched" / "jobs0-1"
    for d in jobs:
        (d / ".hydra").mkdir(parents=True)
        (d / ".hydra" / "config.yaml").write_text("seed: 0\n")
        (d / "episodes.csv").write_text("env_step,episode,return,length\n")
    (jobs[1] / "summary.json").write_text(json.dumps({"status": "failed", "error": "non-finite loss"}))
    batching.record_lost([str(d) for d in jobs], "UncompletedJobError('job 12 has not produced any output')", tmp_path)
    first = json.loads((jobs[0] / "summary.json").read_text())
    assert first["status"] == "failed" and first["error"].startswith(batching.LOST)
    assert "has not produced any output" in first["error"] and "hydra.launcher.resume=true" in first["error"]
    assert json.loads((jobs[1] / "summary.json").read_text())["error"] == "non-finite loss"  # its own, kept
    assert not batching.finished(jobs)
    group.mkdir(parents=True)
    (group / "events.out.tfevents.1").write_text("")
    assert batching.continue_earlier_attempt(group, jobs) is None  # no checkpoint: start over, emptied
    assert not list(group.iterdir())  # the whole group trains again: its own failure included
    assert [sorted(p.name for p in d.iterdir()) for d in jobs] == [[".hydra"], [".hydra"]]


def test_the_resume_switch_passes_the_sweep_directory_check(tmp_path):
    """The rerun of a sweep command goes into its own, non-empty batched sweep directory; without the switch,
    or into a directory that holds no batched sweep, it is refused before anything is written."""
    from rlrun.config import preflight
    from rlrun.storage import rundir

    sweep = tmp_path / "sweep"
    (sweep / ".batched").mkdir(parents=True)
    argv = ["-m", *SWEEP, "total_steps=600", f"hydra.sweep.dir={sweep}"]
    assert str(sweep) in preflight.plan([*argv, "hydra.launcher.resume=true"]).hydra_argv[-1]
    with pytest.raises(rundir.RunDirError, match="is not empty"):
        preflight.plan(argv)
    other = tmp_path / "other"
    other.mkdir()
    (other / "notes.txt").write_text("mine")
    with pytest.raises(rundir.RunDirError, match="holds no batched sweep"):
        preflight.plan(["-m", *SWEEP, "total_steps=600", "hydra.launcher.resume=true", f"hydra.sweep.dir={other}"])


# --- real sweeps on every backend (slow) -----------------------------------------------------------------


def sweep(where: Path, *args: str, rc: int = 0, resume: bool = False) -> subprocess.CompletedProcess:
    argv = ["-m", *SWEEP, *args, f"hydra.sweep.dir={where}"]
    if resume:  # the Hydra app itself, as rlrun.cli hands a checked command over (see the test above)
        code = (
            "import sys; from rlrun.training import signals; from rlrun.config.schemas import register_configs; "
            "from rlrun.cli import hydra_main; signals.stop_on_signal(); signals.in_sweep = True; "
            f"sys.argv[1:] = {[*argv, 'hydra.launcher.resume=true']!r}; register_configs(); hydra_main()"
        )
    env = {**os.environ, "PYTHONWARNINGS": "ignore", "RAY_ADDRESS": ""}
    if resume:
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=900, env=env)
    else:
        proc = run_module("rlrun.train", *argv, env=env, timeout=900)
    assert proc.returncode == rc, proc.stderr[-3000:]
    return proc


def job_files(sweep_dir: Path) -> dict[str, Path]:
    return {
        str(p.relative_to(sweep_dir)): p
        for p in sorted(sweep_dir.rglob("*"))
        if p.name in ("episodes.csv", "model.pt", "summary.json", "config.yaml", "overrides.yaml")
        and ".submitit" not in p.parts
        and "resume_" not in str(p)
    }


def same_results(a: Path, b: Path) -> None:
    """Every job's (and group's) files equal, bit for bit; summaries apart from their wall times."""
    files, other = job_files(a), job_files(b)
    assert sorted(files) == sorted(other)
    for name, path in files.items():
        if path.name == "summary.json":
            assert volatile_free(json.loads(path.read_text())) == volatile_free(json.loads(other[name].read_text()))
        else:
            assert path.read_bytes() == other[name].read_bytes(), name


def volatile_free(summary):
    if isinstance(summary, dict):
        return {k: volatile_free(v) for k, v in summary.items() if k not in VOLATILE}
    return summary


def needs(backend: str) -> None:
    pytest.importorskip({"submitit": "submitit", "ray": "ray"}.get(backend, "hydra"))


@pytest.mark.slow
def test_each_backend_gives_each_job_the_local_backends_files(tmp_path):
    import pandas as pd

    reference = tmp_path / "local"
    out = sweep(reference, "total_steps=600").stdout
    assert "4 jobs -> 2 groups of up to 2 agents, on backend local" in out
    for backend in ("submitit", "ray"):
        if backend == "ray" and not _has("ray"):
            continue
        out = sweep(tmp_path / backend, "total_steps=600", *BACKENDS[backend]).stdout
        assert f"4 jobs -> 2 groups of up to 2 agents, on backend {backend}" in out
        same_results(reference, tmp_path / backend)
        reports = [
            pd.read_csv(d / "report.csv").drop(columns="wall_time_s_mean") for d in (reference, tmp_path / backend)
        ]
        pd.testing.assert_frame_equal(*reports)


def _has(module: str) -> bool:
    try:
        __import__(module)
    except ImportError:
        return False
    return True


def holder(lock: Path) -> int | None:
    """The process that holds `lock` open (the group's process holds its run directory's lock)."""
    for fd_dir in Path("/proc").glob("[0-9]*/fd"):
        try:
            if any(os.readlink(fd) == str(lock) for fd in fd_dir.iterdir()):
                return int(fd_dir.parent.name)
        except OSError:
            continue
    return None


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["submitit", "ray", "local_processes"])
def test_a_killed_group_fails_alone_and_the_resume_switch_completes_it(tmp_path, backend):
    needs(backend)
    longer = ["total_steps=3000", "checkpoint.every=1000"]
    reference = tmp_path / "uninterrupted"
    sweep(reference, *longer)
    where = tmp_path / backend
    env = {**os.environ, "PYTHONWARNINGS": "ignore", "RAY_ADDRESS": ""}
    argv = ["-m", *SWEEP, *longer, *BACKENDS[backend], f"hydra.sweep.dir={where}"]
    proc = subprocess.Popen([sys.executable, "-m", "rlrun.train", *argv], env=env, stdout=subprocess.PIPE, text=True)
    group = where / ".batched" / "jobs0-1"
    deadline = time.monotonic() + 600
    while not (group / "checkpoint.pt").exists():  # killed once it has a checkpoint, before it finishes
        assert time.monotonic() < deadline and proc.poll() is None
        time.sleep(0.2)
    pid = holder((group / ".rlrun.lock").resolve())
    assert pid is not None and not (group / "summary.json").exists()
    os.kill(pid, signal.SIGKILL)
    out, _ = proc.communicate(timeout=900)
    assert proc.returncode == 0, out[-3000:]
    summaries = [json.loads(p.read_text()) for p in where.rglob("seed=*/summary.json")]
    lost = [s for s in summaries if s["status"] == "failed"]
    assert len(summaries) == 4 and len(lost) == 2, summaries
    assert all(s["error"].startswith(batching.LOST) and "hydra.launcher.resume=true" in s["error"] for s in lost)
    assert (where / ".batched" / "jobs2-3" / "summary.json").exists()  # the other group finished
    assert "Failed jobs" in (where / "report.md").read_text()
    out = sweep(where, *longer, *BACKENDS[backend], resume=True).stdout
    assert "[jobs2-3, finished]" in out
    same_results(reference, where)
