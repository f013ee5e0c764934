"""rlrun.storage.runstate: the owner probe and a run directory's state, as compare's rounds and the
benchmark scripts read them."""

import json

from filelock import FileLock

from rlrun.storage import runstate
from rlrun.storage.rundir import LOCK_NAME


def test_the_probe_sees_a_held_lock_and_creates_none(tmp_path):
    assert not runstate.in_use(tmp_path / "absent") and not runstate.in_use(tmp_path)
    assert not (tmp_path / LOCK_NAME).exists()
    with FileLock(str(tmp_path / LOCK_NAME)):
        assert runstate.in_use(tmp_path)
    assert not runstate.in_use(tmp_path) and not runstate.wait_for_owner(tmp_path)


def test_each_state_of_a_run_directory(tmp_path):
    def run(name, status=None, checkpoint=False):
        d = tmp_path / name
        d.mkdir()
        if status is not None:
            (d / "summary.json").write_text(json.dumps({"status": status}))
        if checkpoint:
            (d / "checkpoint.pt").write_bytes(b"")
        return d

    assert runstate.state(tmp_path / "absent") == runstate.NEW
    assert runstate.state(run("finished", "finished", checkpoint=True)) == runstate.DONE
    assert runstate.state(run("solved", "solved")) == runstate.DONE
    assert runstate.state(run("failed", "failed")) == runstate.FAILED
    assert runstate.state(run("failed_after_a_checkpoint", "failed", checkpoint=True)) == runstate.STOPPED
    assert runstate.state(run("stopped", checkpoint=True)) == runstate.STOPPED
    assert runstate.state(run("unstarted")) == runstate.UNSTARTED
