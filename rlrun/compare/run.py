"""A comparison from its checked command line to its verdict: the rounds (or the existing folders), a look
after each, and the files written at the end."""

from __future__ import annotations

import os
import shlex
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from rlrun.compare import arms, decide, output, sequential
from rlrun.compare.args import COMMAND, BadInput, _int, arm_overrides, check_overrides, folder
from rlrun.compare.rounds import ARMS, Plan, RoundError, Runner, check_plan, run_round, write_plan
from rlrun.config.overrides import override_key
from rlrun.errors import ConfigError, Exit, fail

if TYPE_CHECKING:
    from omegaconf import DictConfig

OUTPUTS = ("compare.md", "compare.csv", "curves.png")  # what a comparison of existing folders writes, and rewrites


@dataclass
class Job:
    plan: Plan
    root: Path
    threshold: float | None
    command_line: str


def threshold_of(task: DictConfig) -> float | None:
    """The env's solve threshold, as a run takes it: env.reward_threshold, else its registered spec's
    (`rlrun.envs.spec.env_spec`: a `module:Env` id, ALE's and MinAtar's games registered as a run registers
    them); None where there is none."""
    if task.env.reward_threshold is not None:
        return float(task.env.reward_threshold)
    from rlrun.envs.spec import env_spec  # gymnasium: only once the comparison is checked this far

    try:
        threshold = env_spec(str(task.env.id)).reward_threshold
    except ConfigError:  # an id that cannot be made: composing the arm has said why
        return None
    return None if threshold is None else float(threshold)


def prepare(own: dict[str, str], common: list[str], metric: str, alpha: float, command_line: str) -> Job:
    """Check everything the comparison will run, as `python -m rlrun.train` would (BadInput: nothing is written)."""
    per_round, budget, first = _int(own, "seeds", 1), _int(own, "max_seeds", 1), _int(own, "seed", 0)
    if budget < per_round:
        raise BadInput(f"max_seeds={budget}: at least seeds={per_round}")
    if first + budget - 1 > 2**32 - 1:  # every round's seeds, not only the first round's (checked below)
        raise BadInput(f"seed={first}: at most {2**32 - budget} with max_seeds={budget} (every seed < 2**32)")
    overrides = _checked_overrides(own, common)
    tasks, common = _composed_arms(own, overrides, common, first, per_round)
    env_a, env_b = str(tasks["A"].env.id), str(tasks["B"].env.id)
    if env_a != env_b:
        raise BadInput(f"the arms train on different envs ({env_a}, {env_b}); a comparison pairs seeds of one env")
    steps_a, steps_b = tasks["A"].total_steps, tasks["B"].total_steps
    if metric == "steps" and steps_a != steps_b:  # a seed never solved counts at its budget
        raise BadInput(f"metric=steps needs one budget for both arms (total_steps {steps_a} and {steps_b})")
    threshold = threshold_of(tasks["A"])
    if metric in ("solved", "steps") and threshold is None:
        raise BadInput(
            f"metric={metric} needs a reward threshold, and {env_a} has none: set env.reward_threshold=..., or "
            "choose metric=final or metric=auc"
        )
    from rlrun.config.runnames import safe

    name = safe(f"{env_a}__{'_'.join(overrides['A']) or 'defaults'}__vs__{'_'.join(overrides['B']) or 'defaults'}")
    root = folder(own, name.replace("=", "-"))
    plan = Plan(overrides["A"], overrides["B"], common, metric, per_round, budget, alpha, first)
    try:
        check_plan(root, plan)
    except RoundError as e:
        raise BadInput(str(e)) from None
    if tasks["A"] == tasks["B"]:  # composed: `A='' B=algo.double=true` is the same run twice too
        raise BadInput(f"A and B compose the same config ({own['A'] or 'the defaults'}): give B what differs")
    return Job(plan, root, threshold, command_line)


def _checked_overrides(own: dict[str, str], common: list[str]) -> dict[str, list[str]]:
    """Each arm's overrides, checked, none setting a key the shared overrides set."""
    overrides = {arm: arm_overrides(arm, own[arm]) for arm in ARMS}
    for arm in ARMS:
        check_overrides(f"{arm}={own[arm]!r}", overrides[arm])
    check_overrides("shared overrides", common)
    shared_keys = {override_key(o) for o in common}
    for arm in ARMS:
        both = sorted(shared_keys & {override_key(o) for o in overrides[arm]})
        if both:
            raise BadInput(f"{both[0]} is set both by {arm} and by the shared overrides: set it in one place")
    return overrides


def _composed_arms(
    own: dict[str, str], overrides: dict[str, list[str]], common: list[str], first: int, per_round: int
) -> tuple[dict[str, Any], list[str]]:
    """Each arm's composed and checked run config (as its first round would run), and the shared overrides;
    the arms' and the shared overrides are made integral (`preflight.integral_overrides`) in place."""
    from rlrun.config import preflight
    from rlrun.config.runnames import check_exp_name

    tasks: dict[str, Any] = {}
    probed: dict[Any, Any] = {}
    shared = common
    for arm in ARMS:
        try:
            whole = preflight.integral_overrides([*overrides[arm], *common], preflight.RLRUN_CONFIG)
            overrides[arm], shared = whole[: len(overrides[arm])], whole[len(overrides[arm]) :]
            task = preflight.task_config(preflight.compose([*whole, f"seed={first}", f"seeds={per_round}"]))
            preflight.check_job(task, probed)
            check_exp_name(task.exp_name)  # each round's run refuses a typed one that is no folder name
        except ConfigError as e:
            raise BadInput(f"arm {arm} ({own[arm] or 'the defaults'}): {e}") from None
        if task.get("pbt") is not None:  # from the overrides, or an experiment file that sets it
            raise BadInput(
                f"arm {arm} ({own[arm] or 'the defaults'}): population-based training (+pbt) copies weights "
                "between a run's agents, so its seeds are no independent pairs; compare settings without +pbt"
            )
        tasks[arm] = task
    return tasks, shared


def looks_of(
    plan: Plan, scores_after: Callable[[int, int], dict[str, pd.DataFrame]]
) -> Iterator[tuple[decide.Look, pd.DataFrame, dict[str, pd.DataFrame]]]:
    """The comparison's looks, one after each round of `plan`, until one decides or the budget is spent:
    `scores_after(first, n)` makes the round of seeds first..first+n-1 available (trains it) and returns each
    arm's per-seed scores (`rlrun.compare.arms.read_arm`). Yields each look, the paired scores it tested and
    the arms' tables of the seeds so far. `scripts/compare_null_real.py` runs the same looks on a pool of runs."""
    rounds = plan.rounds()
    looks_at = [sum(n for _, n in rounds[: i + 1]) for i in range(len(rounds))]
    levels = sequential.look_levels(looks_at, plan.max_seeds, plan.alpha)
    looks: list[decide.Look] = []
    for i, (first, n) in enumerate(rounds):
        seeds_so_far = range(plan.first_seed, first + n)  # this look sees its rounds only, on a rerun too
        tables = {arm: t[t.index.isin(seeds_so_far)] for arm, t in scores_after(first, n).items()}
        if plan.metric == "auc":
            tables = {arm: t if "auc" in t else arms.with_auc(t, arms.curves(t, arm)) for arm, t in tables.items()}
        both, _ = arms.paired(tables["A"], tables["B"], plan.metric)
        level = plan.alpha if plan.metric == "solved" else levels[i]  # solved: the e-process needs no plan
        looks.append(decide.look(both, plan.metric, plan.alpha, level, i + 1, [lk.e_value for lk in looks]))
        yield looks[-1], both, tables
        if looks[-1].decided:
            return


def run_rounds(job: Job) -> None:
    """Train round after round until a look decides or the budget is spent; then write the files."""
    plan, root = job.plan, job.root
    try:
        write_plan(root, plan)
    except OSError as e:  # a folder under /proc, a read-only one, a file on the way
        fail(
            f"cannot write the comparison into {root}: {e.strerror or e}; choose another dir=",
            Exit.CANNOT_WRITE,
            command=COMMAND,
        )
    runner = Runner(job.command_line)
    runner.install()

    def train_round(first: int, n: int) -> dict[str, pd.DataFrame]:
        try:
            for arm in ARMS:
                run_round(runner, root, plan, arm, first, n)
        except RoundError as e:
            fail(str(e), e.code, command=COMMAND)
        return {arm: arms.read_arm(arm, root / arm) for arm in ARMS}

    looks: list[decide.Look] = []
    for seen in looks_of(plan, train_round):
        lk, both, tables = seen  # after the loop: the last look's, for the files
        looks.append(lk)
        verdict = decide.verdict(lk, plan.metric, job.threshold, lk.round, None)
        print(f"rlrun.compare: round {lk.round}: {verdict}", file=sys.stderr, flush=True)
    commands = [job.command_line, "", "# each round, as the comparison ran it:"] + [
        shlex.join(["python", *plan.train_command(root, arm, first, n)])
        for first, n in plan.rounds()[: len(looks)]
        for arm in ARMS
    ]
    names = {arm: " ".join(plan.arm(arm)) or "(the defaults)" for arm in ARMS}
    settings = [
        f"shared overrides: {' '.join(plan.common) or '(none)'}",
        f"metric: {plan.metric}; alpha {plan.alpha:g}; {plan.seeds} paired seeds a round from seed "
        f"{plan.first_seed}, at most {plan.max_seeds}",
    ]
    finish(root, looks, both, tables, plan.metric, job.threshold, plan.max_seeds, names, settings, commands)


def finish(
    root: Path,
    looks: list[decide.Look],
    both: pd.DataFrame,
    tables: dict[str, pd.DataFrame],
    metric: str,
    threshold: float | None,
    budget: int | None,
    arm_names: dict[str, str],
    settings: list[str],
    commands: list[str],
) -> None:
    line = decide.verdict(looks[-1], metric, threshold, looks[-1].round, budget)  # round 0: existing runs
    curves = pd.concat([arms.curves(t, f"{arm}: {arm_names[arm]}") for arm, t in tables.items()], ignore_index=True)
    left = [x for t in tables.values() for x in t.attrs.get("left_out", [])]
    try:
        written = output.write(
            root,
            verdict=line,
            looks=looks,
            both=both,
            metric=metric,
            arms=arm_names,
            settings=settings,
            commands=commands,
            left_out=left,
            curves=curves,
            threshold=threshold,
        )
    except OSError as e:  # the verdict is still shown; the runs compared are untouched
        answer(line, None)
        fail(
            f"cannot write the comparison's report into {root}: {e.strerror or e}; choose another dir=",
            Exit.CANNOT_WRITE,
            command=COMMAND,
        )
    answer(line, root / "compare.md")
    if left:  # runs not scored (unfinished, damaged, a number no run writes): named, never silently dropped
        some = "1 run (compare.md lists it)" if len(left) == 1 else f"{len(left)} runs (compare.md lists them), first"
        print(f"rlrun.compare: left out {some}: {left[0]}", file=sys.stderr)
    print(f"rlrun.compare: wrote {', '.join(str(p) for p in written)}", file=sys.stderr)


def answer(line: str, report: Path | None) -> None:
    """The verdict on stdout. It is the command's answer, so a stdout that cannot take it (a full disk, a
    reader gone) is exit 4 with one line on stderr (naming the `report` that holds it, where one was
    written), where the console guard (rlrun.console) would drop it."""
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):  # a captured stream (a test, a notebook): it takes it
        print(line)
        return
    sys.stdout.flush()  # nothing else is pending: the progress lines go to stderr
    data = (line + "\n").encode(sys.stdout.encoding or "utf-8", "backslashreplace")
    try:
        while data:
            data = data[os.write(fd, data) :]
    except OSError as e:
        where = f"; it heads {report}" if report is not None else ""
        fail(f"cannot write the verdict to stdout ({e.strerror or e}){where}", Exit.CANNOT_WRITE, command=COMMAND)


def decide_folders(a: Path, b: Path, metric: str, alpha: float, root: Path, command_line: str) -> None:
    """Pair two folders of finished runs by seed and decide with one fixed-sample look (nothing is trained)."""
    try:
        tables = {"A": arms.read_arm("A", a), "B": arms.read_arm("B", b)}
    except ConfigError as e:
        raise BadInput(str(e)) from None
    for arm, t in tables.items():
        if t.empty:
            raise BadInput(f"{arm}={a if arm == 'A' else b}: no finished run there")
    envs = {env for t in tables.values() for env in t["env"]}
    if len(envs) > 1:
        raise BadInput(f"the folders hold runs of several envs ({', '.join(sorted(envs))})")
    thresholds = {float(x) for t in tables.values() for x in t["threshold"].dropna()}
    threshold = min(thresholds) if thresholds else None
    if metric in ("solved", "steps") and len(thresholds) > 1:
        raise BadInput(
            f"the runs have different reward thresholds ({sorted(thresholds)}): compare them with metric=final"
        )
    if metric in ("solved", "steps") and threshold is None:
        raise BadInput(
            f"metric={metric} needs the runs' reward threshold, and they have none: choose metric=final or auc"
        )
    all_budgets = sorted({str(b) for t in tables.values() for b in t["budget"]})
    if metric == "steps" and len(all_budgets) > 1:  # a seed never solved counts at its budget: one for all
        raise BadInput(
            f"metric=steps needs one budget (total_steps) for every run; these have {', '.join(all_budgets)}"
        )
    if metric == "auc":
        tables = {arm: arms.with_auc(t, arms.curves(t, arm)) for arm, t in tables.items()}
    both, missing = arms.paired(tables["A"], tables["B"], metric)
    if both.empty:
        seeds = {arm: sorted(t.index)[:10] for arm, t in tables.items()}
        raise BadInput(f"the folders share no seed with a {metric} score in both (A: {seeds['A']}, B: {seeds['B']})")
    if root.is_dir() and any(p.name not in OUTPUTS for p in root.iterdir()):
        raise BadInput(
            f"{root} holds files other than a comparison's report ({', '.join(OUTPUTS)}); choose another dir="
        )
    budgets = {arm: sorted({int(x) for x in t["budget"].dropna()}) for arm, t in tables.items()}
    look = decide.look(both, metric, alpha, None, 0, [])
    unpaired = sorted(set(tables["A"].index) ^ set(tables["B"].index))
    settings = [
        f"metric: {metric}; alpha {alpha:g}; one fixed-sample look at existing runs",
        f"budgets (total_steps): A {budgets['A']}, B {budgets['B']}",
        *([f"seeds run by one arm only, left out: {unpaired}"] if unpaired else []),
        *([f"seeds without a {metric} score in one arm, left out: {missing}"] if missing else []),
    ]
    finish(root, [look], both, tables, metric, threshold, None, {"A": str(a), "B": str(b)}, settings, [command_line])
