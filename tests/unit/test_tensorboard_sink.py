"""The TensorBoard sink's files, read back as TensorBoard reads them."""

import socket
import time

from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from rlrun.logs.sinks.tensorboard import TensorBoardSink


def test_a_resume_in_the_same_second_as_the_dead_process_is_read_after_it(tmp_path):
    # The dead process's file, opened this second by a pid that sorts after any real one.
    dead = tmp_path / f"events.out.tfevents.{int(time.time()):010d}.{socket.gethostname()}.99999999.0"
    first = TensorBoardSink(tmp_path)
    for step in (200, 400, 600):
        first.scalar("charts/epsilon", 1.0, step)
    first.writer.close()
    next(tmp_path.glob("events.out.tfevents.*")).rename(dead)

    resumed = TensorBoardSink(tmp_path, resume_step=400)  # the dead one's 600 is purged
    for step in (600, 800):
        resumed.scalar("charts/epsilon", 1.0, step)
    resumed.writer.close()

    acc = EventAccumulator(str(tmp_path))
    acc.Reload()
    assert [e.step for e in acc.Scalars("charts/epsilon")] == [200, 400, 600, 800]
