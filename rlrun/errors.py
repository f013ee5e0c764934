"""The errors every layer may raise, every command's exit codes (`Exit`) and its one way to stop on one
(`fail`), on the ground floor: this module imports nothing of rlrun, so any module can import it at the
top without making an import cycle."""

from __future__ import annotations

import difflib
import sys
from enum import IntEnum
from typing import NoReturn


class Exit(IntEnum):
    """The exit codes of every rlrun command (docs/guarantees.md lists them for users). A signal that stops
    a run before it started exits 128 + the signal's number, as a shell reports it."""

    OK = 0
    FAILED = 1  # what no code below names (a bug: Python's traceback; a compare round whose run failed)
    BAD_INPUT = 2  # refused before anything is written: a config, an argument, a directory, a file
    NONFINITE = 3  # a loss, gradient norm or Q-value became NaN or infinite
    CANNOT_WRITE = 4  # a directory or file that cannot be written, a full disk, a stdout that is gone
    ENV_FAILED = 5  # the env raised in step()
    STOPPED = 75  # EX_TEMPFAIL: stopped by a signal with what it ran kept; try again (resume)


def fail(message: str, code: int = Exit.BAD_INPUT, *, command: str = "rlrun") -> NoReturn:
    """Stop the command: `message` as one line on stderr, led by the command's name, and exit `code`."""
    print(f"{command}: {message}", file=sys.stderr)
    sys.exit(int(code))


class ConfigError(ValueError):
    """A config value is out of range or inconsistent; the message names the key and what is allowed
    (`message`: a subclass's own wording instead)."""

    def __init__(self, key: str, value: object, allowed: str, message: str | None = None):
        self.key, self.value, self.allowed = key, value, allowed
        super().__init__(message or f"Invalid config value {key}={value!r}: allowed {allowed}.")


class UnknownKeyError(ConfigError):
    """A key that no schema has (a typo such as `+algo.gama=0.5`, or anything a crafted file adds)."""

    def __init__(self, key: str, value: object, known: list[str]):
        parent, _, name = key.rpartition(".")
        near = difflib.get_close_matches(name, known, n=1)
        hint = (
            f"did you mean {parent + '.' if parent else ''}{near[0]}?"
            if near
            else f"the keys here are {', '.join(known)}"
        )
        super().__init__(key, value, ", ".join(known), f"Unknown config key {key} ({hint})")


class FinishedRunError(ConfigError):
    """A resume of a run that has trained its whole budget: it says so, and how to extend it."""

    def __init__(self, run_dir: str, step: int, total_steps: int, asked: bool = False):
        """`asked`: `total_steps` is the command line's, not the run's own budget."""
        trained = (
            f"it trained {step:,} env steps, {'more than' if step > total_steps else 'as many as'} the asked "
            f"total_steps={total_steps:,}; to train it further, name a larger total_steps"
            if asked
            else f"it trained {step:,} env steps of total_steps={total_steps:,}; to train it further, resume it "
            "with a budget above the steps trained"
        )
        example = f"python -m rlrun.resume {run_dir} total_steps={2 * max(step, total_steps)}"
        super().__init__(
            "total_steps", total_steps, f"more than {step}", f"{run_dir} is finished: {trained}, e.g. {example}"
        )


class SolvedRunError(ConfigError):
    """A resume of a run that `stop_on_solve` stopped: it says so, and how to train it on."""

    def __init__(self, run_dir: str, step: int):
        how = f"to train it further, resume it with python -m rlrun.resume {run_dir} stop_on_solve=false"
        super().__init__(
            "stop_on_solve",
            True,
            "false",
            f"{run_dir} is finished: stop_on_solve=true stopped it when solved, at env step {step:,}; {how}",
        )


class NonFiniteError(FloatingPointError):
    """A loss, gradient norm or Q-value became NaN or infinite."""
