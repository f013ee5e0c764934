"""rlrun.compare's parts on hand-made run directories: the rounds' plan and states, per-seed scores and their
pairing, a look and its verdict line."""

import json
from pathlib import Path

import pytest
import yaml

from rlrun.compare import arms, decide
from rlrun.compare.rounds import Plan, RoundError, check_plan, state, write_plan
from rlrun.errors import ConfigError


def fake_run(d: Path, seed: int, final: float, solved_step: int | None, status: str = "finished") -> Path:
    (d / ".hydra").mkdir(parents=True)
    cfg = {"seed": seed, "seeds": 1, "total_steps": 1000, "env": {"id": "CartPole-v1"}}
    (d / ".hydra" / "config.yaml").write_text(yaml.safe_dump(cfg))
    summary = {"status": status, "env_steps": 1000, "final_mean_return_100": final, "solved_step": solved_step,
               "reward_threshold": 475.0}  # fmt: skip
    (d / "summary.json").write_text(json.dumps(summary))
    return d


def plan(**changes) -> Plan:
    fields = dict(a=[], b=["algo=mdqn"], common=["total_steps=1000"], metric="solved", seeds=4, max_seeds=10,
                  alpha=0.05, first_seed=7000)  # fmt: skip
    return Plan(**{**fields, **changes})


def test_plan_rounds_and_their_commands(tmp_path):
    p = plan()
    assert p.rounds() == [(7000, 4), (7004, 4), (7008, 2)]  # the last round takes what is left of the budget
    assert p.overrides("B", 7004, 4) == ["algo=mdqn", "total_steps=1000", "seed=7004", "seeds=4"]
    assert p.round_dir(tmp_path, "A", 7008, 2) == tmp_path / "A" / "seeds7008-7009"
    command = p.train_command(Path("outputs/compare/x"), "A", 7000, 4)
    assert command == ["-m", "rlrun.train", "total_steps=1000", "seed=7000", "seeds=4",
                       "hydra.run.dir=outputs/compare/x/A/seeds7000-7003"]  # fmt: skip
    odd = p.train_command(Path("runs/lr=1e-3 x"), "A", 7000, 4)[-1]  # '=' and a space: quoted for Hydra
    assert odd == "hydra.run.dir='runs/lr=1e-3 x/A/seeds7000-7003'"


def test_a_rerun_with_another_plan_is_refused(tmp_path):
    root = tmp_path / "c"
    check_plan(root, plan())  # new: fine
    write_plan(root, plan())
    check_plan(root, plan())  # the same command again: fine
    with pytest.raises(RoundError, match=r"max_seeds differ: max_seeds=10") as e:
        check_plan(root, plan(max_seeds=20))
    assert e.value.code == 2
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "notes.txt").write_text("mine")
    with pytest.raises(RoundError, match="holds no comparison"):
        check_plan(tmp_path / "other", plan())


def test_a_linked_arm_or_round_folder_is_refused(tmp_path):
    """A round is never trained through a link (before: round A went into the link's target)."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    for linked in ("A", "B/seeds7004-7007"):
        root = tmp_path / linked.replace("/", "_")
        write_plan(root, plan())
        (root / linked).parent.mkdir(parents=True, exist_ok=True)
        (root / linked).symlink_to(elsewhere)
        with pytest.raises(RoundError, match="is a link to .*never writes through a link") as e:
            check_plan(root, plan())
        assert e.value.code == 2


def test_round_states(tmp_path):
    overrides = ["total_steps=1000", "seed=0", "seeds=2"]
    assert state(tmp_path / "none", overrides) == "new"
    done = tmp_path / "done"
    (done / ".hydra").mkdir(parents=True)
    (done / ".hydra" / "overrides.yaml").write_text(yaml.safe_dump(overrides))
    (done / "summary.json").write_text(json.dumps({"status": "finished", "agents": {}}))
    assert state(done, overrides) == "done"
    with pytest.raises(RoundError, match="other overrides"):
        state(done, ["total_steps=2000", "seed=0", "seeds=2"])
    stopped = tmp_path / "stopped"
    (stopped / ".hydra").mkdir(parents=True)
    (stopped / ".hydra" / "overrides.yaml").write_text(yaml.safe_dump(overrides))
    (stopped / "checkpoint.pt").write_bytes(b"")
    assert state(stopped, overrides) == "stopped"  # continued with python -m rlrun.resume
    (stopped / "checkpoint.pt").unlink()
    with pytest.raises(RoundError, match="no finished run and no checkpoint"):
        state(stopped, overrides)


def test_read_arm_pairs_by_the_seed_of_each_run(tmp_path):
    for seed, final, step in ((1, 480.0, 900), (2, 30.0, None), (3, 500.0, 700)):
        fake_run(tmp_path / "A" / f"seed={seed}", seed, final, step)
    for seed, final, step in ((2, 490.0, 800), (3, 20.0, None), (4, 500.0, 100)):
        fake_run(tmp_path / "B" / "sweep" / f"job{seed}", seed, final, step)
    fake_run(tmp_path / "B" / "stopped", 5, 0.0, None, status="incomplete")
    a, b = arms.read_arm("A", tmp_path / "A"), arms.read_arm("B", tmp_path / "B")
    assert list(a.index) == [1, 2, 3] and list(b.index) == [2, 3, 4]
    assert len(b.attrs["left_out"]) == 1 and "incomplete" in b.attrs["left_out"][0]
    both, missing = arms.paired(a, b, "final")
    assert list(both.index) == [2, 3] and missing == []
    assert both[["a_final", "b_final"]].values.tolist() == [[30.0, 490.0], [500.0, 20.0]]
    assert both[["a_solved", "b_solved"]].values.tolist() == [[False, True], [True, False]]
    fake_run(tmp_path / "A" / "again", 2, 1.0, None)
    with pytest.raises(ConfigError, match="seed 2"):  # which run pairs with B's seed 2 is ambiguous
        arms.read_arm("A", tmp_path / "A")


def test_a_seed_that_diverged_counts_against_its_arm(tmp_path):
    """An agent stopped by a non-finite update is a seed that did not solve, not a missing pair (before: left
    out, so that an arm that diverges on its hard seeds looked better); any other failure is left out."""
    for seed in (1, 2):
        fake_run(tmp_path / "A" / f"seed={seed}", seed, 480.0, 900)
    fake_run(tmp_path / "B" / "seed=1", 1, 500.0, 100)
    fake_run(tmp_path / "B" / "seed=2", 2, 12.0, None, status="failed")
    (tmp_path / "B" / "seed=2" / "nonfinite.pt").write_bytes(b"")
    fake_run(tmp_path / "B" / "seed=3", 3, 0.0, None, status="failed")  # a crash: no nonfinite.pt
    b = arms.read_arm("B", tmp_path / "B")
    assert list(b.index) == [1, 2] and "seed=3" in b.attrs["left_out"][0]
    assert b.loc[2, ["solved", "steps", "final"]].tolist() == [False, 1000.0, 12.0]  # at the budget for steps
    both, _ = arms.paired(arms.read_arm("A", tmp_path / "A"), b, "solved")
    assert both[["a_solved", "b_solved"]].values.tolist() == [[True, True], [True, False]]


def test_curve_area_is_the_mean_of_the_curve_over_its_steps():
    import pandas as pd

    assert arms.curve_area(pd.DataFrame({"step": [0, 10, 30], "value": [0.0, 10.0, 10.0]})) == pytest.approx(
        (5 * 10 + 10 * 20) / 30
    )
    assert arms.curve_area(pd.DataFrame({"step": [5], "value": [3.0]})) == 3.0


def both_solved(a: list[bool], b: list[bool]):
    import pandas as pd

    return pd.DataFrame({"a_solved": a, "b_solved": b}, index=range(len(a)))


def test_a_look_at_solved_seeds_and_its_verdict():
    # 8 seeds: B solved all, A solved 1: 7 discordant seeds, all B-only
    both = both_solved([True] + [False] * 7, [True] * 8)
    sequential_look = decide.look(both, "solved", 0.05, 0.05, 1, [])
    assert (sequential_look.only_a, sequential_look.only_b) == (0, 7)
    assert sequential_look.e_value == pytest.approx(26.8125)  # 2^7 * KT(7 heads)
    assert sequential_look.decided and sequential_look.better == "B"
    line = decide.verdict(sequential_look, "solved", 475.0, 2, 40)
    assert line.startswith("B better than A: 8/8 (B) against 1/8 (A) reached 475")
    assert "sequential (anytime-valid) p = 0.0373" in line and line.endswith("8 paired seeds, 2 rounds")
    # 6 discordant seeds all one way: McNemar's fixed-sample test would decide, the sequential rule does not
    six = decide.look(both_solved([False] * 6, [True] * 6), "solved", 0.05, 0.05, 1, [])
    assert not six.decided
    assert decide.verdict(six, "solved", 475.0, 1, 6).startswith("undecided after 6 paired seeds (the budget)")
    once = decide.look(both_solved([False] * 6, [True] * 6), "solved", 0.05, None, 0, [])  # existing runs: one look
    assert once.p == pytest.approx(2 / 64) and once.decided
    assert "McNemar exact p = 0.0312 (level 0.05)" in decide.verdict(once, "solved", 475.0, 0, None)
    # the anytime p-value remembers the best earlier look
    later = decide.look(both_solved([False] * 8, [True] * 6 + [False] * 2), "solved", 0.05, 0.05, 2, [30.0])
    assert later.p == pytest.approx(1 / 30) and later.decided


def test_a_look_at_final_returns_uses_its_level():
    import pandas as pd

    both = pd.DataFrame({"a_final": [100.0, 200.0, 300.0, 400.0], "b_final": [150.0, 260.0, 330.0, 480.0]})
    strict = decide.look(both, "final", 0.05, 0.001, 1, [])
    assert strict.p == pytest.approx(2 / 16)  # every difference positive: 2 of the 16 flips are as extreme
    assert not strict.decided and strict.b - strict.a == pytest.approx(55.0)
    loose = decide.look(both, "final", 0.5, None, 0, [])
    assert loose.decided and loose.better == "B"
    line = decide.verdict(loose, "final", None, 0, None)
    assert line.startswith("B better than A: final return (mean of the last 100 training episodes) 305.0 (B)")
    assert "difference B - A +55.0 [" in line and "paired sign-flip p = 0.125 (level 0.5)" in line
    # an early look's strict level: its interval's coverage is shown, not rounded to 100%
    early = decide.verdict(decide.look(both, "final", 0.05, 8.86e-05, 1, []), "final", None, 1, 40)
    assert "(99.99% paired bootstrap)" in early, early


def test_steps_to_the_threshold_count_a_seed_never_there_at_the_budget_and_fewer_win(tmp_path):
    """Seeds 0-7: B reaches 475 before A on every seed (A's seed 7 never: counted at the budget, 1,000);
    fewer steps are better, so B is; the sign-flip p is 2 / 2^8."""
    from entrypoints import in_process

    for seed in range(8):
        fake_run(tmp_path / "A" / f"seed={seed}", seed, 480.0, 600 + 10 * seed if seed < 7 else None)
        fake_run(tmp_path / "B" / f"seed={seed}", seed, 480.0, 400 + 10 * seed)
    a = arms.read_arm("A", tmp_path / "A")
    assert a["steps"].tolist() == [600.0, 610.0, 620.0, 630.0, 640.0, 650.0, 660.0, 1000.0]
    both, _ = arms.paired(a, arms.read_arm("B", tmp_path / "B"), "steps")
    lk = decide.look(both, "steps", 0.05, None, 0, [])
    assert lk.decided and lk.better == "B" and lk.p == pytest.approx(2 / 2**8)
    assert lk.b - lk.a == pytest.approx(-(7 * 200 + 530) / 8)
    assert lk.improvement[0] == 1.0  # P(B < A): every run of B took fewer steps than every run of A
    proc = in_process("rlrun.compare.cli", "A=A", "B=B", "metric=steps", "dir=out", cwd=tmp_path, rc=0)
    assert proc.stdout.startswith(
        "B better than A: env steps to the threshold (a seed that never reached it counted at the budget) 435 (B) "
        "against 676 (A), difference B - A -241 ["
    ), proc.stdout
    assert "P(B < A) = 1.00" in proc.stdout and "paired sign-flip p = 0.00781" in proc.stdout
    assert "difference_steps" in (tmp_path / "out" / "compare.csv").read_text()
    # a seed never solved counts at its budget: runs of another budget would not pair fairly
    cfg = tmp_path / "B" / "seed=0" / ".hydra" / "config.yaml"
    cfg.write_text(cfg.read_text().replace("total_steps: 1000", "total_steps: 2000"))
    refused = in_process("rlrun.compare.cli", "A=A", "B=B", "metric=steps", "dir=out", cwd=tmp_path, rc=2)
    assert "metric=steps needs one budget (total_steps) for every run; these have 1000, 2000" in refused.stderr


def test_a_round_another_process_trains_is_left_alone(tmp_path):
    from filelock import FileLock

    from rlrun.storage.rundir import LOCK_NAME

    busy = tmp_path / "busy"
    busy.mkdir()
    with FileLock(str(busy / LOCK_NAME)), pytest.raises(RoundError, match="in use by another rlrun process"):
        state(busy, [])  # the lock held, as a training process holds it
    with pytest.raises(RoundError, match="no finished run and no checkpoint"):  # free again
        state(busy, [])


def test_two_folders_of_runs_decided_without_training(tmp_path):
    """Seeds 0-9: B solved all, A only seeds 0-2 (7 discordant seeds, all B-only): McNemar's exact test at
    one look, p = 2 / 2^7. A seed that only A ran is left out and named."""
    from entrypoints import in_process

    for seed in range(10):
        fake_run(tmp_path / "A" / f"seed={seed}", seed, 100.0 + seed, 500 if seed < 3 else None)
        fake_run(tmp_path / "B" / f"seed={seed}", seed, 480.0, 400)
    fake_run(tmp_path / "A" / "seed=10", 10, 1.0, None)
    proc = in_process("rlrun.compare.cli", "A=A", "B=B", "dir=out", cwd=tmp_path, rc=0)
    assert proc.stdout.startswith("B better than A: 10/10 (B) against 3/10 (A) reached 475, discordant seeds 7 B-only")
    assert "McNemar exact p = 0.0156 (level 0.05); 10 paired seeds" in proc.stdout
    md = (tmp_path / "out" / "compare.md").read_text()
    assert "seeds run by one arm only, left out: [10]" in md
    assert len((tmp_path / "out" / "compare.csv").read_text().splitlines()) == 11
    final = in_process("rlrun.compare.cli", "A=A", "B=B", "metric=final", "dir=out", cwd=tmp_path, rc=0)
    assert final.stdout.startswith("B better than A: final return")  # rewrites its own report
    assert "paired sign-flip p = 0.00195 (level 0.05)" in final.stdout  # 2 / 2^10: every seed one way
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.md").write_text("mine")
    refused = in_process("rlrun.compare.cli", "A=A", "B=B", "dir=mine", cwd=tmp_path, rc=2)
    assert "holds files other than a comparison's report" in refused.stderr
    assert sorted(p.name for p in (tmp_path / "mine").iterdir()) == ["notes.md"]
    fake_run(tmp_path / "A" / "again" / "seed=4", 4, 1.0, None)
    twice = in_process("rlrun.compare.cli", "A=A", "B=B", "dir=out2", cwd=tmp_path, rc=2)
    assert "seed 4" in twice.stderr and not (tmp_path / "out2").exists()


def test_looks_of_stops_at_the_first_look_that_decides_and_asks_for_no_more_rounds():
    import numpy as np
    import pandas as pd

    from rlrun.compare.run import looks_of

    seeds = pd.RangeIndex(7000, 7040)
    a = pd.DataFrame({"final": np.linspace(100, 400, 40), "solved": False}, index=seeds)
    b = a.assign(final=a["final"] + 50)  # B ahead on every seed
    asked = []

    def scores_after(first, n):
        asked.append((first, n))
        return {"A": a, "B": b}

    looks = [lk for lk, _, _ in looks_of(plan(metric="final", seeds=10, max_seeds=40), scores_after)]
    # 10 seeds all one way: exact p = 2 / 2^10, above the first look's level (0.00009); 20 seeds decide (0.0055)
    assert [lk.seeds for lk in looks] == [10, 20] and looks[-1].decided and looks[-1].better == "B"
    assert looks[0].p == pytest.approx(2 / 1024) and not looks[0].decided
    assert asked == [(7000, 10), (7010, 10)]
    same = [lk for lk, _, _ in looks_of(plan(metric="final", seeds=10, max_seeds=40), lambda f, n: {"A": a, "B": a})]
    assert [lk.seeds for lk in same] == [10, 20, 30, 40] and not any(lk.decided for lk in same)


@pytest.mark.parametrize(
    "field, value, why",
    [
        ("final_mean_return_100", float("inf"), "final_mean_return_100 is inf"),
        ("final_mean_return_100", float("-inf"), "final_mean_return_100 is -inf"),
        ("final_mean_return_100", float("nan"), "final_mean_return_100 is nan"),
        ("final_mean_return_100", 1e308, "final_mean_return_100 is 1e+308"),
        ("solved_step", -500, "solved_step is -500"),
        ("solved_step", 5000, "solved_step is 5000"),  # beyond the run's own env steps (1000)
        ("solved_step", 1.5, "solved_step is 1.5"),
    ],
)
def test_a_number_that_cannot_be_a_score_is_left_out_and_listed(tmp_path, field, value, why):
    """A crafted summary.json (Infinity, NaN, 1e308, a negative or out-of-budget solved_step) is no score:
    its run is left out and named with the reason, never paired (before: inf was scored and gave p = 0)."""
    from entrypoints import in_process

    for seed in range(4):
        fake_run(tmp_path / "A" / f"seed={seed}", seed, 10.0 + seed, None)
        fake_run(tmp_path / "B" / f"seed={seed}", seed, 21.0 + seed, 500)
    summary = tmp_path / "A" / "seed=0" / "summary.json"
    crafted = {**json.loads(summary.read_text()), field: value}
    summary.write_text(json.dumps(crafted))  # json writes Infinity and NaN, as a crafted file may
    a = arms.read_arm("A", tmp_path / "A")
    assert list(a.index) == [1, 2, 3]
    assert a.attrs["left_out"] == [f"{tmp_path / 'A' / 'seed=0'}: summary.json: {why}, {arms.NOT_A_SCORE[field]}"]
    metric = "steps" if field == "solved_step" else "final"
    proc = in_process("rlrun.compare.cli", "A=A", "B=B", f"metric={metric}", "dir=out", cwd=tmp_path, rc=0)
    assert proc.stdout.startswith("undecided after 3 paired seeds"), proc.stdout
    assert "p = 0.25 (level 0.05; the test decides" in proc.stdout  # 2 / 2^3: every seed one way, too few
    assert f"left out 1 run (compare.md lists it): {Path('A', 'seed=0')}: summary.json: {why}" in proc.stderr
    assert why in (tmp_path / "out" / "compare.md").read_text()


def test_four_pairs_cannot_decide_at_five_percent():
    import pandas as pd

    both = pd.DataFrame({"a_final": [1.0, 2.0, 3.0, 4.0], "b_final": [1e30, 1e30, 1e30, 1e30]})
    lk = decide.look(both, "final", 0.05, None, 0, [])
    assert lk.p == pytest.approx(0.125) and not lk.decided


def test_a_curve_holding_a_value_that_is_no_return_leaves_its_run_out_of_auc(tmp_path):
    import pandas as pd

    for seed in (0, 1):
        fake_run(tmp_path / "A" / f"seed={seed}", seed, 10.0, None)
    a = arms.read_arm("A", tmp_path / "A")
    jobs = a["job"].tolist()
    values = [1.0, float("inf"), 2.0, 4.0]
    curves = pd.DataFrame({"step": [0, 10, 0, 10], "value": values, "job": jobs[:1] * 2 + jobs[1:] * 2})
    scored = arms.with_auc(a, curves)
    assert list(scored.index) == [1] and scored["auc"].tolist() == [3.0]
    assert scored.attrs["left_out"] == [f"{jobs[0]}: its curve holds inf, {arms.NOT_A_SCORE['auc']}"]


def test_auc_of_a_curve_that_is_no_number_leaves_its_run_out_and_names_the_file(tmp_path):
    """An episodes.csv row `10,1,abc,10` (before: a ValueError traceback from load_curve)."""
    from entrypoints import in_process

    for arm, base in (("A", 10), ("B", 20)):
        for seed in range(4):
            d = fake_run(tmp_path / arm / f"seed={seed}", seed, float(base), None)
            rows = [f"{10 * i},{i},{base + i},10" for i in range(1, 4)]
            (d / "episodes.csv").write_text("env_step,episode,return,length\n" + "\n".join(rows) + "\n")
    (tmp_path / "A" / "seed=0" / "episodes.csv").write_text("env_step,episode,return,length\n10,1,abc,10\n")
    proc = in_process("rlrun.compare.cli", "A=A", "B=B", "metric=auc", "dir=out", cwd=tmp_path, rc=0)
    assert proc.stdout.startswith("undecided after 3 paired seeds"), proc.stdout
    left = f"{Path('A', 'seed=0')}: episodes.csv row 1: return 'abc' is not a number"
    assert f"left out 1 run (compare.md lists it): {left}" in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr


def test_a_verdict_that_stdout_cannot_take_is_exit_4_with_one_line(tmp_path, monkeypatch, capsys):
    """`python -m rlrun.compare ... > /dev/full`: the verdict is the command's answer, so a stdout that cannot
    take it fails the command (before: the console guard dropped it and the exit was 0)."""
    import io

    from rlrun import console
    from rlrun.compare import run

    full = open("/dev/full", "w")  # noqa: SIM115 (closed below)
    monkeypatch.setattr("sys.stdout", console.Console(full, full.fileno()))  # as console.guard() wraps it
    try:
        with pytest.raises(SystemExit) as exit_:
            run.answer("B better than A: ...", tmp_path / "out" / "compare.md")
    finally:
        full.close()
    assert exit_.value.code == 4
    err = capsys.readouterr().err
    assert err == f"rlrun.compare: cannot write the verdict to stdout (No space left on device); it heads " \
        f"{tmp_path / 'out' / 'compare.md'}\n"  # fmt: skip
    monkeypatch.setattr("sys.stdout", io.StringIO())  # a captured stream takes it
    run.answer("B better than A: ...", None)


def test_an_undecided_line_says_the_test_decides_when_its_interval_excludes_zero():
    """Issue 66 item 15: `undecided ... difference B - A -3.5 [-7.9, -0.2] ... sign-flip p = 0.0938 (level
    0.0444 at this look)` read as a contradiction; the line now says which decides."""
    import pandas as pd

    both = pd.DataFrame({"a_final": [10.0, 12.0, 11.0, 13.0, 10.0, 12.0], "b_final": [6.0, 8.0, 9.0, 7.0, 9.0, 6.5]})
    lk = decide.look(both, "final", 0.05, 0.0044, 2, [])
    line = decide.verdict(lk, "final", None, 2, 40)
    assert not lk.decided and lk.interval[1] < 0, line  # the interval excludes 0, the test does not decide
    assert "(level 0.0044 at this look; the test decides, the interval only describes)" in line, line
    decided = decide.verdict(decide.look(both, "final", 0.5, None, 0, []), "final", None, 0, None)
    assert "the test decides" not in decided and "(level 0.5)" in decided


def test_the_threshold_is_the_one_a_run_takes_from_the_env_spec(tmp_path, monkeypatch):
    """A `module:Env` id's threshold, as a run reads it through rlrun.envs.spec (before: None, and
    metric=solved refused for an env whose runs count solves)."""
    from omegaconf import OmegaConf

    from rlrun.compare.run import threshold_of

    (tmp_path / "threshold_env.py").write_text(
        "import gymnasium as gym\n"
        "gym.register('ThresholdEnv-v0', entry_point='gymnasium.envs.classic_control:CartPoleEnv', "
        "reward_threshold=123.0)\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    task = lambda env_id, given=None: OmegaConf.create({"env": {"id": env_id, "reward_threshold": given}})  # noqa: E731
    assert threshold_of(task("threshold_env:ThresholdEnv-v0")) == 123.0
    assert threshold_of(task("CartPole-v1")) == 475.0
    assert threshold_of(task("CartPole-v1", 100)) == 100.0
    assert threshold_of(task("NoSuchEnv-v9")) is None
