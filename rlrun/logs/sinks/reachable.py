"""Whether the logging backends a run chose can take its data, asked before anything is written.

The backends are opened only once Hydra has made the run directory, and MLflow retries a server that does
not answer for minutes (7 retries with backoff, `MLFLOW_HTTP_REQUEST_MAX_RETRIES`) before its traceback.
So the pre-flight (`rlrun.config.preflight.check_job`) asks each chosen backend here, once per command and with
a short timeout, and a backend that cannot answer refuses the command with one line naming the key or
environment variable. The default stores under the run directory need no question; local stores
elsewhere are checked on disk without being created.
"""

from __future__ import annotations

import os
import re
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import unquote, urlparse

from rlrun.errors import ConfigError
from rlrun.logs.sinks.wandb import resolve_mode

if TYPE_CHECKING:
    from omegaconf import DictConfig

PROBE_SECONDS = 5  # how long a server may take to answer the pre-flight's one request


class BackendError(ConfigError):
    """A logging backend that cannot take the run's data (exit 2, like any refused setting)."""

    def __init__(self, key: str, value: str, why: str, allowed: str):
        super().__init__(key, value, allowed, f"{key}={value!r}: {why}; use {allowed}")


def check_backends(logger: DictConfig | None, probed: dict) -> None:
    """Refuse (BackendError) a chosen backend that cannot be reached; `probed` remembers the answers."""
    if not logger:
        return
    if logger.get("mlflow") is not None:
        check_mlflow(logger["mlflow"].get("tracking_uri"), probed)
    if logger.get("wandb") is not None:
        check_wandb(logger["wandb"].get("mode"), probed)


# --- MLflow -----------------------------------------------------------------------------------------

MLFLOW_ALLOWED = (
    "a reachable MLflow server, a sqlite:///<path>.db in a writable directory, or leave it unset for a "
    "store in the run directory"
)


def check_mlflow(tracking_uri: str | None, probed: dict) -> None:
    key, uri = "logger.mlflow.tracking_uri", tracking_uri
    if not uri:
        key, uri = "MLFLOW_TRACKING_URI", os.environ.get("MLFLOW_TRACKING_URI")
    if not uri or ("mlflow", uri) in probed:  # unset: the run's own store under its directory
        return
    why = mlflow_problem(uri)
    if why:
        raise BackendError(key, uri, why, MLFLOW_ALLOWED)
    probed["mlflow", uri] = True


def mlflow_problem(uri: str) -> str | None:
    """Why MLflow cannot log to `uri`, or None. Local stores are checked on disk, servers asked once."""
    parsed = urlparse(uri)
    scheme = parsed.scheme.lower()
    if scheme == "sqlite":
        path = uri[len("sqlite:///") :] if uri.startswith("sqlite:///") else ""
        return _writable(Path(unquote(path)), file=True) if path else None  # "sqlite://": in memory
    if scheme in ("", "file"):
        from mlflow import environment_variables  # the mlflow extra: imported only when logger=mlflow

        allow = getattr(environment_variables, "MLFLOW_ALLOW_FILE_STORE", None)  # MLflow 3.7+; older allow them
        if allow is not None and not allow.get():
            return "MLflow 3 refuses file stores unless MLFLOW_ALLOW_FILE_STORE=true"
        return _writable(Path(unquote(parsed.path) if scheme else uri), file=False)
    return _ask_server(uri)


def _writable(path: Path, file: bool) -> str | None:
    """Why `path` (a database file or a store directory, made if missing) cannot be written, or None."""
    if path.exists():
        if file and not path.is_file():
            return f"{path} is not a file"
        if not file and not path.is_dir():
            return f"{path} is not a directory"
        return None if os.access(path, os.W_OK) else f"{path} is not writable"
    parent = path.parent
    if file and not parent.is_dir():  # SQLite makes the file, not its directory
        return f"{parent} is not a directory"
    while not parent.exists():
        parent = parent.parent
    try:  # what the store would make first, made and removed at once (permissions alone miss /proc, root)
        os.rmdir(tempfile.mkdtemp(prefix=".rlrun-probe-", dir=parent))
    except OSError as e:
        return f"{path} cannot be created ({parent}: {e.strerror})"
    return None


def _ask_server(uri: str) -> str | None:
    """One request to the store (`search_experiments`), without MLflow's retries, within PROBE_SECONDS."""
    from mlflow import MlflowClient  # before the clock starts: importing MLflow takes seconds

    saved = {k: os.environ.get(k) for k in ("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "MLFLOW_HTTP_REQUEST_TIMEOUT")}
    os.environ.update(MLFLOW_HTTP_REQUEST_MAX_RETRIES="0", MLFLOW_HTTP_REQUEST_TIMEOUT=str(PROBE_SECONDS))
    try:
        return _within(lambda: MlflowClient(tracking_uri=uri).search_experiments(max_results=1))
    finally:
        for k, v in saved.items():  # the run itself keeps MLflow's retries
            if v is None:
                del os.environ[k]
            else:
                os.environ[k] = v


def _within(request: Callable[[], object]) -> str | None:
    """Why `request` failed or did not return within PROBE_SECONDS, or None. It runs in a thread because a
    name lookup is not bound by a request's timeout (left behind if it hangs: the command is refused)."""
    answer: list[BaseException | None] = []

    def ask() -> None:
        try:
            request()
            answer.append(None)
        except Exception as e:  # every way a backend can fail: a bad scheme, a driver, the network, auth
            answer.append(e)

    thread = threading.Thread(target=ask, daemon=True)
    thread.start()
    thread.join(PROBE_SECONDS + 1)
    if not answer:
        return f"no answer within {PROBE_SECONDS} s"
    return None if answer[0] is None else _reason(answer[0])


def _reason(error: BaseException) -> str:
    """The part of a backend's error message that says what is wrong, on one line."""
    text = " ".join(str(error).split())
    if m := re.search(r"Supported URI schemes are: (\[[^\]]*\])", text):
        return f"not a scheme MLflow knows (it knows {m.group(1)})"
    if re.search(r"timed out|Timeout", text):
        return f"no answer within {PROBE_SECONDS} s"
    if m := re.search(r"\[Errno -?\d+\] ([^'\"()]+)", text):
        return f"cannot connect ({m.group(1).strip()})"
    text = re.sub(r"\s*See https?://\S+.*", "", text) or type(error).__name__
    return text if len(text) <= 240 else text[:237] + "..."


# --- W&B --------------------------------------------------------------------------------------------


def check_wandb(mode: str | None, probed: dict) -> None:
    """Online mode needs W&B's server (`wandb.init` retries it for minutes); offline and disabled do not."""
    if resolve_mode(mode) != "online":
        return
    from_env = mode is None and os.environ.get("WANDB_MODE")
    key, value = ("WANDB_MODE", "online") if from_env else ("logger.wandb.mode", mode)
    why = "" if value else "online because W&B credentials are set, but "
    url = os.environ.get("WANDB_BASE_URL", "https://api.wandb.ai")
    if ("wandb", url) in probed:
        return
    # only to reach a remote tracking server
    import requests

    problem = _within(lambda: requests.head(url, timeout=PROBE_SECONDS))
    if problem:
        raise BackendError(
            key,
            value or "null",
            f"{why}W&B's server {url} does not answer ({problem})",
            "logger.wandb.mode=offline (upload later with `wandb sync`) or a W&B server that answers",
        )
    probed["wandb", url] = True
