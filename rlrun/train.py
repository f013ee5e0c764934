"""`python -m rlrun.train [overrides]`: train DQN agents as the composed config says (rlrun.cli).

`rlrun.train.train(cfg, out_dir)` is `rlrun.run.train`, the plain function behind the command.
"""

from __future__ import annotations

if __name__ == "__main__":  # `python -m rlrun.train`: a signal during the imports below gets one line too
    from rlrun import signals

    signals.stop_on_signal()

from rlrun.learner import NonFiniteError
from rlrun.loop import Preempted
from rlrun.run import train

__all__ = ["NonFiniteError", "Preempted", "train"]

if __name__ == "__main__":
    from rlrun.cli import main

    main()
