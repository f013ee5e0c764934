"""A run's curve read back (rlrun.sweeps.jobtable.load_curve) from crafted files: a value that is no number is a
DamagedJob naming the file and row, never a ValueError traceback; a run folder whose name is not UTF-8 is read."""

import os

import pandas as pd
import pytest

from rlrun.storage.summary import DamagedJob
from rlrun.sweeps import jobtable


def episodes(d, rows):
    d.mkdir(parents=True, exist_ok=True)
    (d / "episodes.csv").write_text("env_step,episode,return,length\n" + "".join(f"{r}\n" for r in rows))
    return d


def test_a_non_numeric_return_in_episodes_csv_names_the_file_and_row(tmp_path):
    run = episodes(tmp_path / "run", ["5,0,9,5", "10,1,abc,10"])
    with pytest.raises(DamagedJob, match=r"episodes\.csv row 2: return 'abc' is not a number"):
        jobtable.load_curve(run)
    episodes(tmp_path / "steps", ["x5,0,9,5"])
    with pytest.raises(DamagedJob, match=r"episodes\.csv row 1: env_step 'x5' is not a number"):
        jobtable.load_curve(tmp_path / "steps")
    good = jobtable.load_curve(episodes(tmp_path / "good", ["5,0,9,5", "10,1,11,10"]))
    assert good["value"].tolist() == [9.0, 10.0]


def test_a_non_numeric_value_in_scalars_csv_names_the_file_and_row(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / "scalars.csv").write_text("env_step,tag,value\n5,charts/mean_return_100,1\n10,charts/mean_return_100,xyz\n")
    with pytest.raises(DamagedJob, match=r"scalars\.csv row 2: value 'xyz' is not a number"):
        jobtable.load_curve(run)


def test_curves_of_leaves_a_damaged_curve_out_and_names_it(tmp_path):
    bad = episodes(tmp_path / "bad", ["10,1,abc,10"])
    good = episodes(tmp_path / "good", ["10,1,3,10"])
    runs = pd.DataFrame(
        {"job": [str(bad), str(good)], "status": ["finished"] * 2, "configuration": ["x"] * 2, "env": ["E"] * 2}
    )
    curves = jobtable.curves_of(runs)
    assert set(curves["job"]) == {str(good)}
    assert curves.attrs["damaged"] == [(str(bad), "episodes.csv row 1: return 'abc' is not a number")]


def test_a_run_folder_whose_name_is_not_utf8_has_its_events_read(tmp_path):
    """TensorBoard's reader cannot take a path that is not UTF-8 (UnicodeEncodeError): it reads the run through
    a link of a UTF-8 name instead."""
    from torch.utils.tensorboard import SummaryWriter

    run = tmp_path / os.fsdecode(b"seed=\xff\xfe")
    run.mkdir()
    with SummaryWriter(str(tmp_path / "w")) as w:  # written where TensorBoard can, then moved under the name
        for step in (10, 20):
            w.add_scalar(jobtable.CURVE_TAG, step / 10, step)
    for f in (tmp_path / "w").iterdir():
        f.rename(run / f.name)
    curve = jobtable.load_curve(run)
    assert curve["step"].tolist() == [10, 20] and curve["value"].tolist() == [1.0, 2.0]
