"""An error raised by the env's own code, told apart from a bug of rlrun's.

An env a user registers can raise anywhere in its `step()`. The training loop turns what it raises into
`EnvError`: one line naming the env and its error, exit code 5 (`rlrun.training.jobs`). The run keeps its last
checkpoint (resume continues from it), or, with none yet, its directory is removed.
"""

from __future__ import annotations


class EnvError(Exception):
    """The env `env_id` raised `error` in `method` (its cause is kept for error.txt in a sweep)."""

    def __init__(self, env_id: str, method: str, error: BaseException):
        detail = " ".join(str(error).split())
        super().__init__(
            f"the env {env_id} raised in {method}(): {type(error).__name__}" + (f": {detail}" if detail else "")
        )
