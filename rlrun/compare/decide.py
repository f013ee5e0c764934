"""A look at the evidence: the paired scores of the seeds so far, tested by the rule of the metric
(`rlrun.compare.sequential`), and the verdict line that says what it found."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from rlrun.compare import sequential, stats

WHAT = {  # each metric as the verdict names it
    "steps": "env steps to the threshold (a seed that never reached it counted at the budget)",
    "final": "final return (mean of the last 100 training episodes)",
    "auc": "area under the learning curve (mean 100-episode return over the run)",
}


@dataclass
class Look:
    """What one look found. `p`: the p-value that decides (binary, sequential: the anytime-valid one; else the
    fixed-sample or sign-flip one); `level`: what `p` must reach at this look to decide."""

    round: int  # 1-based; 0: existing runs, one look
    seeds: int  # paired seeds
    a: float  # arm A's solved count, or its mean score
    b: float
    p: float
    level: float
    only_a: int = 0  # binary: discordant seeds
    only_b: int = 0
    e_value: float = float("nan")  # binary, sequential
    interval: tuple[float, float] = (float("nan"), float("nan"))  # mean difference b - a, paired bootstrap
    interval_level: float = 0.95
    improvement: tuple[float, float, float] = (float("nan"),) * 3  # P(B better) with its 95% interval (rliable)
    lower_better: bool = False  # steps: the fewer, the better

    @property
    def decided(self) -> bool:
        return self.seeds > 0 and self.p <= self.level and self.b != self.a

    @property
    def better(self) -> str | None:
        if not self.decided:
            return None
        return "B" if (self.b < self.a if self.lower_better else self.b > self.a) else "A"


def look(
    both: pd.DataFrame, metric: str, alpha: float, level: float | None, round_: int, e_before: list[float]
) -> Look:
    """Test the paired scores `both` (`rlrun.compare.arms.paired`). `level`: this look's share of alpha
    (continuous, sequential; alpha itself for the binary e-process), or None for a single fixed-sample look
    at `alpha` (McNemar's exact test, or the sign-flip test). `e_before`: the e-values of
    the earlier looks (binary, sequential: the anytime p-value is 1 / the largest so far)."""
    n = len(both)
    if metric == "solved":
        a, b = both["a_solved"].astype(bool).to_numpy(), both["b_solved"].astype(bool).to_numpy()
        only_a, only_b = int(np.sum(a & ~b)), int(np.sum(b & ~a))
        interval = stats.bootstrap_difference(a.tolist(), b.tolist()) if n else (np.nan, np.nan)
        if level is None:  # one look: McNemar's exact test
            p, e = stats.mcnemar_exact(only_a, only_b), float("nan")
        else:
            e = sequential.e_value(only_a, only_b)
            p = sequential.anytime_p([*e_before, e])
        return Look(round_, n, int(a.sum()), int(b.sum()), p, alpha, only_a, only_b, e, interval)
    x, y = both[f"a_{metric}"].to_numpy(float), both[f"b_{metric}"].to_numpy(float)
    at = alpha if level is None else level
    if n == 0:
        return Look(round_, 0, np.nan, np.nan, 1.0, at)
    # the report extra: rliable's P(X > Y) (unpaired: the chance a run of B scores above a run of A; for
    # steps, below)
    from rlrun.report import improvement_probability

    lower = metric == "steps"
    return Look(
        round_,
        n,
        float(x.mean()),
        float(y.mean()),
        stats.sign_flip_p(x, y),
        at,
        interval=stats.paired_bootstrap(x, y, level=1 - at),
        interval_level=1 - at,
        improvement=improvement_probability(*((x, y) if lower else (y, x))) if n >= 2 else (np.nan,) * 3,
        lower_better=lower,
    )


def verdict(last: Look, metric: str, threshold: float | None, rounds: int, budget: int | None) -> str:
    """One line: who is better, by how much, with what evidence, on how many paired seeds."""
    if last.decided:
        head = f"{last.better} better than {'A' if last.better == 'B' else 'B'}"
    elif budget is not None and last.seeds >= budget:
        head = f"undecided after {last.seeds} paired seeds (the budget)"
    else:
        head = f"undecided after {last.seeds} paired seeds"
    if metric == "solved":
        reached = f"reached {threshold:g}" if threshold is not None else "reached the threshold"
        what = f"{last.b:.0f}/{last.seeds} (B) against {last.a:.0f}/{last.seeds} (A) {reached}"
        what += f", discordant seeds {last.only_b} B-only and {last.only_a} A-only"
    else:
        low, high = last.interval
        f = number_format(metric)
        what = (
            f"{WHAT[metric]} {last.b:{f}} (B) against {last.a:{f}} (A), difference B - A {last.b - last.a:+{f}} "
            f"[{low:+{f}}, {high:+{f}}] ({percent(last.interval_level)}% paired bootstrap)"
        )
        if np.isfinite(last.improvement[0]):
            what += f", {better_chance(metric)} = {last.improvement[0]:.2f}"
    evidence = test_name(metric, last) + f" p = {last.p:.3g}"
    if metric != "solved" or last.round == 0:
        at = " at this look" if last.round and metric != "solved" else ""
        # undecided with an interval that may exclude 0: the line itself says which of the two decides
        why = "; the test decides, the interval only describes" if metric != "solved" and not last.decided else ""
        evidence += f" (level {last.level:.3g}{at}{why})"
    where = f"{last.seeds} paired seeds" + (f", {rounds} round{'s' if rounds != 1 else ''}" if rounds else "")
    return f"{head}: {what}; {evidence}; {where}"


def percent(level: float) -> str:
    """A coverage as a percentage with the digits that keep it below 100 (an early look's 1 - 8.86e-05 is
    99.99%, not 100%)."""
    for digits in range(3, 8):
        text = f"{100 * level:.{digits}g}"
        if float(text) < 100 or level >= 1:
            return text
    return text


def number_format(metric: str) -> str:
    """How the metric's values print: whole env steps with thousands separators, returns to one decimal."""
    return ",.0f" if metric == "steps" else ".1f"


def better_chance(metric: str) -> str:
    """rliable's probability of improvement, as the metric reads it."""
    return "P(B < A)" if metric == "steps" else "P(B > A)"


def test_name(metric: str, last: Look) -> str:
    if metric == "solved":
        return "McNemar exact" if last.round == 0 else "sequential (anytime-valid)"
    return "paired sign-flip"
