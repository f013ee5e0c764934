"""`python -m rlrun.compare A='<overrides>' B='<overrides>' [key=value ...]`: is B better than A?

Both arms train on the same seeds, a round of `seeds` seeds at a time (one batched run per arm and round),
until a look at the evidence decides at level `alpha` or `max_seeds` paired seeds are spent; or, with
A=<folder> B=<folder>, existing runs are paired by seed and decided without training. docs/compare.md
explains the test; `rlrun.compare.sequential` implements it.
"""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

from rlrun import console
from rlrun.compare.args import COMMAND, BadInput, folder, parse, settings
from rlrun.errors import Exit, fail

USAGE = """usage: python -m rlrun.compare A='<overrides>' B='<overrides>' [metric=solved|steps|final|auc] [seeds=N]
                            [max_seeds=M] [seed=FIRST] [alpha=0.05] [name=NAME] [dir=FOLDER] [overrides of both ...]
       python -m rlrun.compare A=<folder of runs> B=<folder of runs> [metric=...] [alpha=...] [name=...] [dir=...]

  A, B       each arm's overrides (A='' for the defaults), or a folder of finished runs (a sweep, batched runs)
  metric     solved (reached the env's threshold within the budget; default), steps (env steps to the
             threshold, a seed never there counted at the budget), final (mean return of the last 100
             training episodes), auc (mean 100-episode return over the run)
  seeds      paired seeds per round (default 10); max_seeds: the seed budget (default 100)
  seed       the first seed (default 0); rounds take seeds seed, seed+1, ...
  alpha      the chance of declaring a winner when there is no difference (default 0.05)
  name, dir  the comparison's folder: dir, else outputs/compare/<name> (name: from the env and the arms)
  other key=value: overrides given to both arms (env=..., total_steps=..., +experiment=...)
Rerunning the same command continues a stopped comparison; docs/compare.md explains the verdict."""


def main(argv: list[str] | None = None) -> None:
    console.guard()  # `--help | head -1`, a full or closed console: no traceback, the comparison goes on
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] in ("-h", "--help"):
        print(USAGE, file=sys.stdout if argv else sys.stderr)
        sys.exit(Exit.OK if argv else Exit.BAD_INPUT)
    command_line = shlex.join(["python", "-m", "rlrun.compare", *argv])
    from rlrun.training import signals

    signals.stop_on_signal()  # a Ctrl-C while the arms are checked: one line (the rounds pass it to their run)
    from rlrun.report import ReportExtraMissing, require_report_extra

    try:
        require_report_extra()
        own, common = parse(argv)
        metric, alpha = settings(own)
        a, b = Path(own["A"]), Path(own["B"])
        if own["A"] and own["B"] and a.is_dir() and b.is_dir():
            if common or {a.partition("=")[0] for a in argv} & {"seeds", "max_seeds", "seed"}:
                raise BadInput(
                    "A and B are folders of runs: nothing to train (no seeds=, max_seeds=, seed= or overrides)"
                )
            from rlrun.compare.run import decide_folders

            decide_folders(a, b, metric, alpha, folder(own, f"{a.name}_vs_{b.name}"), command_line)
            return
        if own["A"] and a.is_dir() or own["B"] and b.is_dir():
            folder_arm, other = ("A", "B") if own["A"] and a.is_dir() else ("B", "A")
            if own[other] and "=" not in own[other]:  # not the defaults, no override: a folder not there
                raise BadInput(f"{other}={own[other]}: no such folder ({folder_arm} is a folder of runs)")
            raise BadInput("A and B are both folders of runs or both overrides, not one of each")
        from rlrun.compare.run import prepare, run_rounds

        job = prepare(own, common, metric, alpha, command_line)
    except (BadInput, ReportExtraMissing) as e:
        fail(str(e), Exit.BAD_INPUT, command=COMMAND)
    run_rounds(job)
