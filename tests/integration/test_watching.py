"""Watching a run where no bar shows (nohup, Slurm, `docker logs`, CI, or log.progress_bar=false): the line
that names the run directory and device, plain progress lines for the whole batch, episodes.csv readable
while the run goes on, and the step a resumed run continues from."""

import logging
import re

import numpy as np
from omegaconf import OmegaConf

from rlrun.logs.logger import RunLogger
from rlrun.resume import resume
from rlrun.run import train
from rlrun.training.build import config_record
from rlrun.training.population import Population, ProgressLines

# CartPole's 16 envs: every step count here is a whole number of vector steps (400 = 25 of them).
QUIET = [
    "device=cpu",
    "log.progress_bar=false",
    "log.progress_interval=0",  # a line at every log.interval
    "log.interval=400",
    "log.plot=false",
    "eval.interval=800",
    "eval.episodes=2",
    "algo.learning_starts=400",
    "checkpoint.every=0",
]
LINE = re.compile(
    r"rlrun: step (?P<step>[\d,]+)/(?P<total>[\d,]+) \(\d+%\), "
    r"(?P<episodes>[\d,]+) episodes(?P<agents> \(\d agents\))?, "
    r"ret100 (?P<ret>-|[\d.]+(?: \([\d.]+\.\.[\d.]+\))?), eval (?P<eval>-|[\d.]+(?: \([\d.]+\.\.[\d.]+\))?), "
    r"[\d,]+ step/s, ETA \d+:\d\d:\d\d$"
)


def number(text):
    return int(text.replace(",", ""))


def progress_lines(records):
    return [m for r in records if (m := LINE.match(r.getMessage()))]


class CsvRows(logging.Handler):
    """At each progress line, the training episodes episodes.csv holds (read while the run goes on)."""

    def __init__(self, path):
        super().__init__()
        self.path, self.seen = path, []

    def emit(self, record):
        if LINE.match(record.getMessage()):
            self.seen.append(len(self.path.read_text().splitlines()) - 1)


def test_a_run_without_a_bar_names_its_directory_and_prints_progress_lines(compose, tmp_path, caplog):
    run = tmp_path / "run"
    rows = CsvRows(run / "episodes.csv")
    logging.getLogger("rlrun.training.population").addHandler(rows)
    caplog.set_level(logging.INFO, logger="rlrun")
    try:
        summary = train(compose(*QUIET, "total_steps=1600"), run)
    finally:
        logging.getLogger("rlrun.training.population").removeHandler(rows)
    messages = [r.getMessage() for r in caplog.records]
    assert messages[0] == f"rlrun: run {run} on cpu (1 thread)"
    lines = progress_lines(caplog.records)
    assert [number(m["step"]) for m in lines] == [400, 800, 1200, 1600]
    assert all(number(m["total"]) == 1600 and m["agents"] is None for m in lines)
    assert lines[-1]["ret"] == f"{summary['final_mean_return_100']:.1f}"
    assert lines[0]["eval"] == "-" and lines[2]["eval"] != "-"  # the greedy eval at step 800, shown from then on
    # episodes.csv holds every episode a line counts, while the run is going on (not only at a checkpoint)
    episodes = [number(m["episodes"]) for m in lines]
    assert rows.seen == episodes and episodes[0] > 0 and episodes[-1] == summary["episodes"]


def test_a_batch_of_agents_prints_one_line_per_log(compose, tmp_path, caplog):
    run = tmp_path / "run"
    caplog.set_level(logging.INFO, logger="rlrun")
    summary = train(compose(*QUIET, "total_steps=800", "seeds=3"), run)
    assert caplog.records[0].getMessage() == f"rlrun: run {run} (3 agents) on cpu (1 thread)"
    lines = progress_lines(caplog.records)
    assert [number(m["step"]) for m in lines] == [400, 800]  # not one per agent
    # each agent's 100-episode mean as the line computes it (summary.json's are rounded to 2 decimals)
    returns = [
        np.mean(np.loadtxt(run / f"seed={k}" / "episodes.csv", delimiter=",", skiprows=1)[-100:, 2]) for k in range(3)
    ]
    assert [round(r, 2) for r in returns] == [a["final_mean_return_100"] for a in summary["agents"].values()]
    last = lines[-1]
    assert last["agents"] == " (3 agents)"
    assert number(last["episodes"]) == sum(a["episodes"] for a in summary["agents"].values())
    assert last["ret"] == f"{sum(returns) / 3:.1f} ({min(returns):.1f}..{max(returns):.1f})"


def test_progress_lines_come_every_interval_seconds_and_at_the_end(tmp_path):
    logger = RunLogger(tmp_path, config_record(OmegaConf.create({})), 1000, None, progress_bar=False, sinks=[])
    logger.episodes_end(16, [(16, 9.0, 16)])
    lines = ProgressLines(1000, 0, 3600.0)
    assert lines.line(500, [logger]) is None  # an hour has not passed
    assert lines.line(1000, [logger]).startswith("rlrun: step 1,000/1,000 (100%), 1 episodes, ret100 9.0, eval -")
    assert ProgressLines(1000, 0, 0.0).line(500, [logger]) is not None
    # 16 envs: the last vector step ends at 1,008, which is the run's total (was "1,008/1,000")
    assert ProgressLines(1000, 0, 0.0, vector=16).line(1008, [logger]).startswith("rlrun: step 1,008/1,008 (100%)")
    assert ProgressLines(1000, 0, 0.0, vector=16).line(992, [logger]).startswith("rlrun: step 992/1,008 (98%)")
    logger.close(1000)


def test_progress_lines_come_on_their_clock_between_logs(tmp_path, monkeypatch):
    """A run whose log.interval is long (env=minatar: 10,000) printed nothing between its start and 100%."""
    import rlrun.training.population as population

    clock = [0.0]
    monkeypatch.setattr(population.time, "perf_counter", lambda: clock[0])
    logger = RunLogger(tmp_path, config_record(OmegaConf.create({})), 1000, None, progress_bar=False, sinks=[])
    lines = ProgressLines(1000, 0, 30.0)
    assert not lines.due()
    clock[0] = 31.0
    assert lines.due() and lines.line(400, [logger]).startswith("rlrun: step 400/1,000 (40%)")
    assert not lines.due()  # the next one 30 s on
    assert not ProgressLines(1000, 0, 0.0).due()  # 0: a line at every log, none between them
    logger.close(400)


def test_a_run_with_a_long_log_interval_prints_lines_on_the_progress_interval(compose, tmp_path, caplog, monkeypatch):
    import rlrun.training.population as population
    from rlrun.run import train

    ticks = iter(range(0, 10**9, 7))  # each reading of the lines' clock 7 s later: a line at every 5th
    monkeypatch.setattr(population.time, "perf_counter", lambda: float(next(ticks)))
    caplog.set_level(logging.INFO, logger="rlrun")
    quiet = [o for o in QUIET if not o.startswith(("log.interval", "log.progress_interval"))]
    train(compose(*quiet, "log.interval=10000", "log.progress_interval=30", "total_steps=640"), tmp_path / "run")
    lines = progress_lines(caplog.records)
    assert len(lines) >= 3 and lines[-1]["step"] == "640", [m.string for m in lines]


def test_lines_only_where_the_bar_does_not_show(tmp_path):
    (tmp_path / "bar").mkdir()
    (tmp_path / "plain").mkdir()
    shown = RunLogger(tmp_path / "bar", config_record(OmegaConf.create({})), 100, None, progress_bar=True, sinks=[])
    hidden = RunLogger(tmp_path / "plain", config_record(OmegaConf.create({})), 100, None, progress_bar=False, sinks=[])
    for logger in (shown, hidden):
        population = Population(logger.out_dir, [0], 1, [logger])
        population.watch(100, 0, 30.0)
        assert (population.lines is None) == (logger is shown)
        logger.close(0)


def test_episodes_csv_is_flushed_at_every_log(tmp_path):
    logger = RunLogger(tmp_path, config_record(OmegaConf.create({})), 100, None, progress_bar=False, sinks=[])
    logger.episodes_end(16, [(15, 1.0, 15), (16, 2.0, 16)])
    logger.progress(16, 100.0)
    assert (tmp_path / "episodes.csv").read_text().splitlines()[1:] == ["15,1,1.0,15", "16,2,2.0,16"]
    logger.close(16)


def test_resume_says_which_step_it_continues_from(compose, tmp_path, capsys):
    run = tmp_path / "run"
    train(compose(*QUIET, "total_steps=800"), run)
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    try:  # `python -m rlrun.resume <run> total_steps=1200 log.progress_interval=0`, in this process
        resume(run, ["total_steps=1200", "log.progress_interval=0"])
    finally:
        for handler in set(root.handlers) - set(handlers):  # the resume's console and train.log handlers
            root.removeHandler(handler)
            handler.close()
        root.setLevel(level)
    out = capsys.readouterr().out
    start = f"rlrun: resuming {run} from env step 800 of 1,200 on cpu (1 thread)"
    log_file = (run / "train.log").read_text()
    for text in (out, log_file):  # the console and train.log
        assert start in text
        assert "rlrun: step 1,200/1,200 (100%)" in text
