"""What the report's figures draw (rlrun.report.plots, rlrun.report.search), read from their matplotlib
artists, and where the report may write (never through a link), on made-up curves and run directories."""

import json

import numpy as np
import pandas as pd
import pytest
import yaml

import rlrun.report
from rlrun.report import load_runs, plot_curves, plots as report_plots, write_report


@pytest.fixture
def figures(monkeypatch):
    """The figures the report draws, kept open for their artists instead of saved."""
    drawn = []

    def keep(fig, path):
        drawn.append(fig)
        path.write_bytes(b"\x89PNG")
        return path

    monkeypatch.setattr(report_plots, "_save", keep)
    yield drawn
    report_plots._pyplot().close("all")


def curves(steps_by_job, value=lambda job, k, step: 10.0 * k + job, config=lambda job: "lr=0.001"):
    rows = [
        {"job": f"j{job}", "configuration": config(job), "env": "CartPole-v1", "step": s, "value": value(job, k, s)}
        for job, steps in enumerate(steps_by_job)
        for k, s in enumerate(steps)
    ]
    return pd.DataFrame(rows)


def drawn_lines(ax):
    return [line for line in ax.get_lines() if line.get_linestyle() != "--"]  # not the threshold


def test_one_evaluation_per_run_is_drawn_as_markers_with_their_interval(tmp_path, figures):
    """Every run of a short sweep evaluates once: each configuration is a visible marker, side by side
    (a line through one point, or 100 copies of it, draws nothing)."""
    train = curves([range(100, 1100, 100)] * 6, config=lambda job: f"lr={job % 2}")
    evals = curves([[1008]] * 6, value=lambda job, k, s: 20.0 + job, config=lambda job: f"lr={job % 2}")
    plot_curves(train, tmp_path / "curves.png", {"CartPole-v1": 475.0}, 100, evals)
    [fig] = figures
    eval_ax = fig.axes[1]
    points = [line for line in drawn_lines(eval_ax) if line.get_marker() == "o"]
    assert len(points) == 2  # one per configuration
    assert all(len(p.get_xdata()) == 1 and np.isfinite(p.get_ydata()).all() for p in points)
    assert points[0].get_xdata()[0] != points[1].get_xdata()[0]  # side by side, not one over the other
    assert list(eval_ax.get_xticks()) == [1008]  # the step itself is the one tick
    assert len(eval_ax.collections) == 2  # each with its 95% interval as an error bar


def test_evaluation_bands_exist_only_at_evaluation_steps(tmp_path, figures):
    """A PBT population's agents evaluate at 2,000, 4,000 and 6,000 with crossing returns: the IQM and
    its band are drawn at those steps only, nothing interpolated between them."""
    steps = [2000, 4000, 6000]
    crossing = [[10, 400, 120], [300, 50, 470], [100, 200, 300], [450, 470, 20]]
    evals = curves([steps] * 4, value=lambda job, k, s: float(crossing[job][k]))
    plot_curves(curves([range(100, 6100, 100)] * 4), tmp_path / "curves.png", None, 100, evals)
    [fig] = figures
    eval_ax = fig.axes[1]
    [line] = drawn_lines(eval_ax)
    assert line.get_xdata().tolist() == steps and line.get_marker() == "o"
    [band] = eval_ax.collections
    assert set(np.unique(band.get_paths()[0].vertices[:, 0])) == set(steps)
    assert len(drawn_lines(fig.axes[0])[0].get_xdata()) == 100  # the training return stays a dense curve


def test_evaluation_points_align_the_kth_evaluation_of_every_seed():
    from rlrun.report.plots import evaluation_points

    g = curves([[1000, 2000, 3000], [1000, 2000, 2000, 3000, 4000], [1000, 2000, 3000]])
    g.loc[(g.job == "j1") & (g.step == 2000), "value"] = [-1.0, 7.0]  # a step logged twice (resumed): its last
    steps, per_seed = evaluation_points(g)
    assert steps.tolist() == [1000, 2000, 3000]  # the evaluations every seed has
    assert per_seed.tolist() == [[0.0, 10.0, 20.0], [1.0, 7.0, 31.0], [2.0, 12.0, 22.0]]


def make_trial(root, number, lr, tau, objective_return, env="CartPole-v1", direction="maximize", summary=True):
    """A trial of an Optuna search (`+hparams_search=optuna`) as rlrun and Hydra leave it."""
    run = root / f"algo.tau={tau}" / f"optimizer.lr={lr}"
    (run / ".hydra").mkdir(parents=True)
    cfg = {"seed": 0, "env": {"id": env}, "optimizer": {"lr": lr}, "algo": {"tau": tau}}
    cfg["objective"] = "final_mean_return_100"
    (run / ".hydra" / "config.yaml").write_text(yaml.safe_dump(cfg))
    overrides = [f"optimizer.lr={lr}", f"algo.tau={tau}", "+hparams_search=optuna"]
    (run / ".hydra" / "overrides.yaml").write_text(yaml.safe_dump(overrides))
    sweeper = {
        "_target_": "hydra_plugins.hydra_optuna_sweeper.optuna_sweeper.OptunaSweeper",
        "direction": direction,
        "params": {"optimizer.lr": "tag(log, interval(1e-4, 1e-2))", "algo.tau": "choice(0.05, 0.1, 0.5)"},
    }
    hydra = {"sweeper": sweeper, "overrides": {"task": overrides}, "job": {"num": number}, "runtime": {"choices": {}}}
    (run / ".hydra" / "hydra.yaml").write_text(yaml.safe_dump({"hydra": hydra}))
    if summary:
        summary = {"status": "finished", "final_eval_return": objective_return, "reward_threshold": 475.0}
        summary |= {"final_mean_return_100": objective_return, "solved_step": None, "wall_time_s": 1.0}
        (run / "summary.json").write_text(json.dumps(summary))
    return run


def test_an_optuna_search_is_one_panel_per_searched_key_with_trials_as_points(tmp_path, figures):
    trials = [(0, 0.0003, 0.1, 120.0), (1, 0.002, 0.05, 300.0), (2, 0.008, 0.1, 300.0), (3, 0.001, 0.5, 80.0)]
    for number, lr, tau, score in trials:
        make_trial(tmp_path, number, lr, tau, score)
    make_trial(tmp_path, 4, 0.0002, 0.5, None, summary=False)  # still running: no objective, not drawn

    text = write_report(tmp_path, reps=100)
    [search] = [f for f in figures if f._suptitle is not None]
    axes = [ax for ax in search.axes if ax.get_visible()]
    assert sorted(ax.get_xlabel() for ax in axes) == ["algo.tau", "optimizer.lr"]  # one axis per searched key
    lr_ax = next(ax for ax in axes if ax.get_xlabel() == "optimizer.lr")
    tau_ax = next(ax for ax in axes if ax.get_xlabel() == "algo.tau")
    assert lr_ax.get_xscale() == "log" and lr_ax.get_xlim() == pytest.approx((1e-4, 1e-2), rel=0.3)
    assert [t.get_text() for t in tau_ax.get_xticklabels()] == ["0.05", "0.1", "0.5"]  # every choice
    points, best = lr_ax.collections
    assert sorted(points.get_offsets()[:, 0]) == pytest.approx([0.0003, 0.001, 0.008])
    assert best.get_offsets().tolist() == [[0.002, 300.0]]  # trial 1: the first of the two at 300
    assert "objective: final 100-episode mean return" in lr_ax.get_ylabel()
    assert "![search](sensitivity.png)" in text and "#1 (300: `algo.tau=0.05`, `optimizer.lr=0.002`)" in text
    assert "1 trial without an objective (failed or unfinished) not drawn" in text


def test_search_trials_mark_the_lowest_objective_best_when_the_search_minimizes(tmp_path):
    for number, lr, score in [(0, 0.001, 50.0), (1, 0.003, 20.0)]:
        make_trial(tmp_path, number, lr, 0.1, score, direction="minimize")
    trials = rlrun.report.search_trials(load_runs([tmp_path]))
    assert set(trials["key"]) == {"optimizer.lr", "algo.tau"}
    assert sorted(trials[trials.best]["value"]) == ["0.003", "0.1"]
    assert trials[trials.key == "optimizer.lr"]["log"].all() and not trials[trials.key == "algo.tau"]["log"].any()


def test_a_grid_sweep_has_no_search_trials(tmp_path):
    run = tmp_path / "seed=0"
    (run / ".hydra").mkdir(parents=True)
    (run / ".hydra" / "config.yaml").write_text(yaml.safe_dump({"seed": 0, "env": {"id": "CartPole-v1"}}))
    sweeper = {"_target_": "hydra._internal.core_plugins.basic_sweeper.BasicSweeper", "params": None}
    (run / ".hydra" / "hydra.yaml").write_text(yaml.safe_dump({"hydra": {"sweeper": sweeper}}))
    (run / "summary.json").write_text(json.dumps({"status": "finished", "final_mean_return_100": 1.0}))
    assert rlrun.report.search_trials(load_runs([tmp_path])).empty


def test_a_report_of_a_linked_folder_is_refused_and_writes_nothing_through_it(tmp_path, capsys):
    """`python -m rlrun.report links/runA`, a link to a sweep's job: read through the link, never written
    through it (the job's directory is its own process's)."""
    job = make_trial(tmp_path / "sweep", 0, 0.001, 0.1, 100.0)
    before = sorted(p.name for p in job.iterdir())
    (tmp_path / "links").mkdir()
    (tmp_path / "links" / "runA").symlink_to(job)
    with pytest.raises(SystemExit) as exit_:
        rlrun.report.main([str(tmp_path / "links" / "runA")])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "links/runA is a link (to " in err and "--out DIR" in err
    assert sorted(p.name for p in job.iterdir()) == before
    with pytest.raises(rlrun.report.LinkedFolderError):
        write_report(tmp_path / "links" / "runA", reps=10)
    with pytest.raises(SystemExit):  # --out naming a link: the same
        rlrun.report.main([str(tmp_path / "sweep"), "--out", str(tmp_path / "links" / "runA")])
    assert sorted(p.name for p in job.iterdir()) == before

    rlrun.report.main([str(tmp_path / "links"), "--out", str(tmp_path / "beside")])  # read through it: fine
    assert (tmp_path / "beside" / "report.md").is_file()
    assert f"rlrun.report: written into {tmp_path / 'beside'}" in capsys.readouterr().err


def test_a_report_of_one_folder_says_where_it_wrote(tmp_path, capsys):
    make_trial(tmp_path, 0, 0.001, 0.1, 100.0)
    rlrun.report.main([str(tmp_path)])
    assert capsys.readouterr().err.strip().endswith(f"rlrun.report: written into {tmp_path}")


@pytest.mark.parametrize(
    "step, label",
    [(0, "0"), (1008, "1,008"), (9999, "9,999"), (25_000, "25k"), (800_000, "800k"), (1_500_000, "1.5M")],
)
def test_step_ticks_are_short_labels(step, label):
    assert report_plots.step_label(step) == label


def test_step_ticks_of_a_long_run_do_not_run_into_each_other(tmp_path, figures):
    """A 1.5M-step curve: every x tick label is short ('800,0001,000,000' was drawn before)."""
    plot_curves(curves([range(0, 1_500_001, 50_000)] * 3), tmp_path / "curves.png", {}, 100)
    [fig] = figures
    fig.canvas.draw()
    labels = [t.get_text() for t in fig.axes[0].get_xticklabels() if t.get_text()]
    assert len(labels) >= 3 and all(len(t) <= 5 for t in labels), labels
