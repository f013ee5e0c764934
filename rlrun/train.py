"""`python -m rlrun.train [overrides]`: train DQN agents as the composed config says (rlrun.cli).

`rlrun.train.train(cfg, out_dir)` is `rlrun.run.train`, the plain function behind the command. Run as a
command, this module hands over to the command line before importing anything heavy (torch is imported
only once a run starts, so `--help` and refused commands return quickly).
"""

from __future__ import annotations

if __name__ == "__main__":  # `python -m rlrun.train`: a signal during the imports below gets one line too
    from rlrun.training import signals

    signals.stop_on_signal()
    from rlrun.cli import main
    from rlrun.process_exit import run_then_exit

    run_then_exit(main)
else:
    from rlrun.errors import NonFiniteError
    from rlrun.run import train
    from rlrun.training.loop import Preempted

    __all__ = ["NonFiniteError", "Preempted", "train"]
