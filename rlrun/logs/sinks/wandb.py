"""logger=wandb: one Weights & Biases run per agent (the `wandb` extra).

Offline by default: the run is written to `<agent dir>/wandb/offline-run-*` (`wandb sync` uploads it
later); once `wandb login` has stored a key (or `$WANDB_API_KEY` is set) runs go online. W&B's own
console output is off (the run's summary line says where the run is). A sweep's runs share a W&B group,
the sweep directory's name; a `seeds=K` run's agents the run's name; other runs the config's `exp_name`.
Scalars are logged against an `env_step` axis, so a resumed run may log a step again without W&B
dropping it; the id is kept in `wandb_run.json` in the agent's directory, and a resumed run continues the
same W&B run (online; offline runs resume as a new offline run with the same id, merged by `wandb sync`).
"""

from __future__ import annotations

import json
import netrc
import os
import secrets
import string
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from rlrun.logs.sinks.base import SinkRun, numeric, sweep_dir
from rlrun.storage import bounded, rundir

STATE_FILE = "wandb_run.json"
STEP_KEY = "env_step"


class _Service:
    cache_dir: str | None = None  # the cache dir rlrun chose for W&B's service
    open = 0  # its runs open in this process


def use_cache_dir(path: str) -> None:
    """W&B's service (one per process, started by the first `wandb.init`) writes its debug logs under
    `$WANDB_CACHE_DIR` (~/.cache/wandb): put them in the run that starts it, unless the user chose a cache
    dir. The service is torn down when its last run closes (`release_cache_dir`), so the next run of the
    process (a notebook, in-process runs) starts one logging into that run, not into a finished run."""
    if _Service.open == 0 and os.environ.get("WANDB_CACHE_DIR") in (None, _Service.cache_dir):
        os.environ["WANDB_CACHE_DIR"] = _Service.cache_dir = path
    _Service.open += 1


def release_cache_dir() -> None:
    # the wandb extra: imported (here and below) only when logger=wandb
    import wandb

    _Service.open -= 1
    if _Service.open == 0 and os.environ.get("WANDB_CACHE_DIR") == _Service.cache_dir:
        wandb.teardown()  # its logs closed: the next run's service writes into that run


def saved_id(state: Path) -> str:
    """The W&B run id a resumed run continues (its `wandb_run.json`); `FileRefused` if it holds none."""
    saved = bounded.load_json(state)
    if not isinstance(saved, dict) or not isinstance(saved.get("id"), str):
        raise bounded.FileRefused(state, "holds no W&B run id (a JSON object with an `id`): remove it for a new run")
    return saved["id"]


def new_id() -> str:
    """A W&B run id: 8 lowercase letters and digits, as W&B makes them."""
    return "".join(secrets.choice(string.ascii_lowercase + string.digits) for _ in range(8))


def logged_in() -> bool:
    """Whether W&B has credentials: `$WANDB_API_KEY`, or what `wandb login` writes to ~/.netrc."""
    if os.environ.get("WANDB_API_KEY"):
        return True
    host = urlparse(os.environ.get("WANDB_BASE_URL", "https://api.wandb.ai")).hostname
    try:
        return netrc.netrc(os.environ.get("NETRC")).authenticators(host or "") is not None
    except (OSError, netrc.NetrcParseError):
        return False


def resolve_mode(mode: str | None) -> str:
    if mode is not None:
        return mode
    return os.environ.get("WANDB_MODE") or ("online" if logged_in() else "offline")


class WandbSink:
    def __init__(self, run: SinkRun, mode: str | None = None, project: str = "rlrun", entity: str | None = None):
        import wandb

        use_cache_dir(str((run.root / "wandb" / "cache").resolve()))
        self.mode = resolve_mode(mode)
        state = run.dir / STATE_FILE
        resumed = run.resume_step is not None and state.exists()
        run_id = saved_id(state) if resumed else new_id()
        self.run = wandb.init(
            project=project,
            entity=entity,
            name=run.name,
            group=sweep.name if (sweep := sweep_dir(run.root)) is not None else run.group or run.experiment,
            id=run_id,
            dir=str(run.dir),
            mode=self.mode,  # type: ignore[arg-type,unused-ignore]
            resume="allow",
            reinit="create_new",  # a batched run's agents are runs of their own, open together
            settings=wandb.Settings(silent=True, console="off"),
        )
        self.run.define_metric(STEP_KEY)
        self.run.define_metric("*", step_metric=STEP_KEY)
        if not resumed:
            rundir.write_text(state, json.dumps({"id": run_id, "project": project}, indent=2) + "\n")
        self._row: dict[str, Any] = {}
        self._step: int | None = None

    def start(self, params: dict[str, Any], config_yaml: str) -> None:
        self.run.config.update(params)

    def scalar(self, tag: str, value: float, step: int) -> None:
        if step != self._step or tag in self._row:  # one history row per env step
            self.flush()
            self._step = step
        self._row[tag] = value

    def text(self, tag: str, text: str, step: int) -> None:
        self.run.summary[tag] = text

    def flush(self) -> None:
        if self._row:
            self.run.log({**self._row, STEP_KEY: self._step})
            self._row = {}

    def close(self, summary: dict[str, Any]) -> dict[str, Any]:
        self.flush()
        self.run.summary.update({f"summary/{k}": v for k, v in numeric(summary).items()})
        self.run.summary["summary/status"] = summary["status"]
        where = {"mode": self.mode, "id": self.run.id, "dir": str(self.run.dir).removesuffix("/files")}
        if self.mode == "online" and self.run.url:
            where["url"] = self.run.url
        self.run.finish()
        release_cache_dir()
        return where
