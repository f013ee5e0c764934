"""What the report's figures draw (rlrun.report.plots, rlrun.report.search), read from their matplotlib
artists, on made-up curves and run directories."""

import numpy as np
import pandas as pd
import pytest

from rlrun.report import plot_curves, plots as report_plots


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
