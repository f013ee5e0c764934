"""A PBT run names its best agent when it ends; `rlrun.load` and `rlrun.evaluate` on the run point to it
(rlrun.policy.BatchedRunError), on a made-up run directory."""

from rlrun.policy import BatchedRunError

BEST = (
    "[2026-12-06 10:00:00,000][rlrun.training.loop][INFO] - rlrun: PBT best agent {} (fitness 50.0); its schedule: 0: x"
)


def test_the_refusal_of_a_pbt_run_names_its_best_agent_the_last_one_logged(tmp_path):
    dirs = [str(tmp_path / f"seed={k}") for k in range(4)]
    (tmp_path / "train.log").write_text("\n".join([BEST.format("seed=2"), "resumed", BEST.format("seed=1"), ""]))
    e = BatchedRunError(tmp_path, dirs)
    assert e.best_agent == dirs[1]
    assert f"is a batched run of 4 agents; PBT's best agent: {dirs[1]}; give one agent's directory: " in str(e)


def test_a_batched_run_without_pbt_names_no_best_agent(tmp_path):
    dirs = [str(tmp_path / f"seed={k}") for k in range(2)]
    (tmp_path / "train.log").write_text("rlrun: run ... on cpu\n")
    assert BatchedRunError(tmp_path, dirs).best_agent is None
    assert BatchedRunError(tmp_path / "missing", dirs).best_agent is None
    (tmp_path / "train.log").write_text(BEST.format("seed=9"))  # no such agent: nothing named
    assert BatchedRunError(tmp_path, dirs).best_agent is None
