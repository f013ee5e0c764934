"""`python -m rlrun.train [overrides]`: train DQN agents as the composed config says (rlrun.cli).

Imported, `from rlrun import train` gives this module, and it trains when called: `train(cfg, out_dir)` is
`rlrun.run.train`, the plain function behind the command (also `rlrun.train.train`). A package's submodule
takes its name in the package once imported, so the module itself is the callable, whichever is imported
first. Run as a command, this module hands over to the command line before importing anything heavy (torch
is imported only once a run starts, so `--help` and refused commands return quickly).
"""

from __future__ import annotations

if __name__ == "__main__":  # `python -m rlrun.train`: a signal during the imports below gets one line too
    from rlrun import process_exit

    process_exit.register()  # before any module registers its atexit handler: this one runs after them all
    from rlrun.training import signals

    signals.stop_on_signal()
    from rlrun.cli import main

    process_exit.run_then_exit(main)
else:
    import inspect
    import sys
    import types
    from typing import Any

    from rlrun.errors import NonFiniteError
    from rlrun.run import train
    from rlrun.training.loop import Preempted

    __all__ = ["NonFiniteError", "Preempted", "train"]
    __signature__ = inspect.signature(train)  # what help() and a notebook show for `train(`

    class _TrainModule(types.ModuleType):
        """This module, called: `rlrun.run.train` (the module's `train` at call time)."""

        def __call__(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
            return self.train(*args, **kwargs)

    sys.modules[__name__].__class__ = _TrainModule
