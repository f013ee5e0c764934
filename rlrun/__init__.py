"""rlrun: a config-driven experiment runner for deep Q-learning.

`from rlrun import train`: `train(cfg, out_dir)` trains a composed config (`rlrun.run.train`; the name is the
`rlrun.train` module, which trains when called, since `python -m rlrun.train` is the command).
`rlrun.load(path)` is `rlrun.policy.load`: a trained run's greedy policy. Both are imported on first use, so
`import rlrun` stays cheap (no torch, not even `typing`) for the commands that only need the version.
"""

from rlrun.version import __version__

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing; type checkers take it as true
if TYPE_CHECKING:
    from rlrun.policy import load
    from rlrun.run import train

__all__ = ["__version__", "load", "train"]


def __getattr__(name: str) -> object:
    # `import rlrun` stays light: torch only when rlrun.load or rlrun.train is used
    if name == "load":
        from rlrun.policy import load

        return load
    if name == "train":  # `import rlrun; rlrun.train(...)`: importing the submodule binds it here
        import rlrun.train  # noqa: F401  (binds the submodule as the package's train)

        return globals()["train"]
    raise AttributeError(f"module 'rlrun' has no attribute {name!r}")
