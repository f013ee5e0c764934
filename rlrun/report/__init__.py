"""Sweep reports: load runs into pandas, aggregate seeds per configuration with rliable, write tables and plots.

    python -m rlrun.report outputs/multirun/<sweep> [more folders ...] [--out DIR]

Every run under the folders counts (links to run directories are followed for reading, never written
through: the report is written into the one folder given unless it is a link, or into --out; stderr's last
line says where). A configuration is the settings that differ between the
jobs, without `seed` (config groups and seeds read from each run's composed config); a PBT population is
labelled as one. Runs of the same configuration and seed count once: the latest finished one is kept, and
the report names the jobs left out. The aggregates are those of Agarwal et al. (2021, "Deep
RL at the Edge of the Statistical Precipice"), computed by their `rliable` library: per configuration the
interquartile mean (IQM: the mean of the middle 50% of the seeds) with a 95% stratified bootstrap confidence
interval, of the greedy evaluation return (`final_eval_return`) and of the training return (the mean of the
last 100 training episodes, exploration included); steps to the env's solve threshold (median over the seeds
that reached it, and how many did); mean wall time. For two or more configurations of one env, the
probability that the best one (by greedy-eval IQM) beats each other one, and a performance profile (the
fraction of runs scoring above each return); for each swept numeric key (lr on a log axis), the final IQM
return with its interval at each of its settings, one line per setting of the other swept keys (the
sensitivity figure; for a sampled search (Optuna) one panel per searched key instead, each trial a point
at its value against the objective it returned, the best a star). Fewer than 5 seeds get a warning: the
intervals are then wide and unreliable. Written: report.md, report.csv, curves.png, profile.png and
sensitivity.png; a report that cannot be written is one line naming where, exit 4.
"""

from __future__ import annotations

# The package: jobtable reads the jobs (rlrun.sweeps.jobtable), aggregate computes the statistics (rliable),
# plots draws the figures, tables writes the report; this module is its command line and its API. They need
# the report extra (pandas, scipy, rliable, tabulate; `pip install "rlrun[report]"`, which the sweep extra
# includes): a single run needs none of it, so the API below is imported when first used.
import argparse
import importlib
import importlib.util
import sys
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rlrun import console
from rlrun.errors import Exit, fail

# ruff: noqa: F401  (the API's imports below are for type checkers; `__all__` names them from `_API`)
if TYPE_CHECKING:
    from rlrun.report.aggregate import (
        BOOTSTRAP_REPS,
        improvement_probability,
        improvement_table,
        iqm_ci,
        left_out,
        score_column,
        sensitivity,
        summarize,
        trimmed_mean,
    )
    from rlrun.report.destination import LinkedFolderError
    from rlrun.report.plots import CURVE_BOOTSTRAP_REPS, plot_curves, plot_profile, plot_sensitivity
    from rlrun.report.search import plot_search, search_trials
    from rlrun.report.tables import MIN_SEEDS, NoRunsError, markdown_table, write_report
    from rlrun.sweeps.jobtable import (
        CURVE_TAG,
        EVAL,
        FINISHED,
        TRAIN,
        curves_of,
        latest_per_seed,
        load_curve,
        load_curves,
        load_run,
        load_runs,
        load_sweep,
        quiet,
        run_dirs,
    )

REPORT_EXTRA = ("pandas", "scipy", "rliable", "tabulate")  # the report extra's packages (pyproject.toml)
_API_BY_MODULE = {  # the package's API, by the module that defines it (imported on first use)
    "rlrun.sweeps.jobtable": "CURVE_TAG EVAL FINISHED TRAIN curves_of load_curve load_curves load_run load_runs "
    "load_sweep latest_per_seed quiet run_dirs",
    "rlrun.report.aggregate": "BOOTSTRAP_REPS improvement_probability improvement_table iqm_ci left_out "
    "score_column sensitivity summarize trimmed_mean",
    "rlrun.report.plots": "CURVE_BOOTSTRAP_REPS plot_curves plot_profile plot_sensitivity",
    "rlrun.report.search": "plot_search search_trials",
    "rlrun.report.destination": "LinkedFolderError",
    "rlrun.report.tables": "MIN_SEEDS NoRunsError markdown_table write_report",
}
_API = {name: module for module, names in _API_BY_MODULE.items() for name in names.split()}


class ReportExtraMissing(ImportError):
    """The report extra is not installed."""


def require_report_extra() -> None:
    """Raise `ReportExtraMissing` with the line to install what is missing."""
    missing = [m for m in REPORT_EXTRA if importlib.util.find_spec(m) is None]
    if missing:
        raise ReportExtraMissing(
            f'the sweep report needs the report extra: pip install "rlrun[report]" (or -e ".[report]" in a '
            f"clone; the sweep extra includes it): {', '.join(missing)} missing"
        )


def __getattr__(name: str) -> Any:
    if name not in _API:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    require_report_extra()
    return getattr(importlib.import_module(_API[name]), name)


__all__ = sorted([*_API, "main"])


COMMAND = "rlrun.report"  # leads each line of `fail`


def main(argv: list[str] | None = None) -> None:
    console.guard()  # `| head -1`, a full or closed stdout: the report is written all the same
    p = argparse.ArgumentParser(
        prog="python -m rlrun.report", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument(
        "folders", type=Path, nargs="+", metavar="folder", help="a sweep, a folder of runs or of links to runs"
    )
    p.add_argument(
        "--out",
        type=Path,
        metavar="DIR",
        help="the folder to write the report into (made if missing); by default the one folder given, and "
        "for several folders a new outputs/reports/<time> under the current directory",
    )
    args = p.parse_args(argv)
    for folder in args.folders:
        if not folder.is_dir():
            p.error(f"{folder} is not a directory")
    try:
        # as any user imports it: ReportExtraMissing without the extra
        from rlrun.report import LinkedFolderError, NoRunsError, write_report
    except ReportExtraMissing as e:
        fail(str(e), Exit.BAD_INPUT, command=COMMAND)
    out = args.out
    if out is None and len(args.folders) > 1:
        out = Path("outputs", "reports", datetime.now().strftime("%Y-%m-%d_%H-%M-%S-%f"))
    try:
        if out is not None and not out.is_symlink():
            out.mkdir(parents=True, exist_ok=True)
        text = write_report(args.folders, out=out)
    except (NoRunsError, LinkedFolderError) as e:
        fail(str(e), Exit.BAD_INPUT, command=COMMAND)
    except OSError as e:  # a read-only folder, a report.md that is a directory, a full disk
        where = Path(e.filename2 or e.filename or out or args.folders[0])
        where = where.parent if where.name.endswith(".tmp") else where  # a new temporary file: its folder
        fail(
            f"cannot write the report: {where}: {e.strerror or e}; write it elsewhere with --out DIR",
            Exit.CANNOT_WRITE,
            command=COMMAND,
        )
    print(text)
    print(f"rlrun.report: written into {out or args.folders[0]}", file=sys.stderr)
