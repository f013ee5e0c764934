"""rlrun: a config-driven experiment runner for deep Q-learning.

`rlrun.load(path)` is `rlrun.policy.load`: a trained run's greedy policy. It is imported on first use, so
`import rlrun` stays cheap (no torch, not even `typing`) for the commands that only need the version.
"""

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing; type checkers take it as true
if TYPE_CHECKING:
    from rlrun.policy import load

__version__ = "0.1.0"
__all__ = ["__version__", "load"]


def __getattr__(name: str) -> object:
    if name == "load":
        # `import rlrun` stays light: torch only when rlrun.load is called
        from rlrun.policy import load

        return load
    raise AttributeError(f"module 'rlrun' has no attribute {name!r}")
