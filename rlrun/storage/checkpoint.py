"""Checkpoints: atomic writes, a kept previous copy, safe loading, and the state that plain objects hold.

A checkpoint is a dict of tensors, numbers, strings, lists and dicts only, loaded with
`torch.load(weights_only=True)`: loading one never runs code. numpy arrays travel as
`{"__ndarray__": tensor}` and come back as arrays of the same dtype.
"""

from __future__ import annotations

import os
import pickle
import random
from pathlib import Path
from typing import Any, TypeGuard

import gymnasium as gym
import numpy as np
import torch

from rlrun.storage import bounded
from rlrun.storage.rundir import open_atomic

LATEST, PREVIOUS = "checkpoint.pt", "checkpoint.prev.pt"


class CheckpointError(RuntimeError):
    pass


# What every checkpoint of a run holds; a file that loads but lacks these (a copied model.pt, say) is
# treated like a damaged one.
REQUIRED = ("format", "config", "step", "learner", "buffer")


def to_safe(obj: object) -> object:
    if isinstance(obj, np.ndarray):
        return {"__ndarray__": torch.from_numpy(np.ascontiguousarray(obj).copy())}
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, dict):
        return {k: to_safe(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(to_safe(v) for v in obj)
    return obj


def from_safe(obj: Any) -> Any:
    if isinstance(obj, dict):
        if set(obj) == {"__ndarray__"}:
            return obj["__ndarray__"].numpy()
        return {k: from_safe(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(from_safe(v) for v in obj)
    return obj


def save(run_dir: Path, state: dict[str, Any]) -> Path:
    """Write `checkpoint.pt` atomically; the one it replaces survives as `checkpoint.prev.pt`.

    At every instant at least one complete checkpoint exists: the new one is written to a temporary
    file and fsynced, the old one is renamed to `.prev`, then the new one is renamed into place.
    """
    run_dir = Path(run_dir)
    tmp = run_dir / (LATEST + ".new")
    with open_atomic(tmp) as f:
        torch.save(state, f)
    latest = run_dir / LATEST
    if latest.exists():
        os.replace(latest, run_dir / PREVIOUS)
    os.replace(tmp, latest)
    return latest


def read(path: Path, map_location: str | torch.device = "cpu") -> Any:
    """A file written by `torch.save`, loaded without running code (`weights_only=True`) and within bounds
    (rlrun.storage.bounded: a regular file, records no larger than the file, values nested and shared within
    limits). Raises `CheckpointError` with a one-line reason otherwise."""
    try:
        with bounded.open_checkpoint(path) as f:
            state = torch.load(f, map_location=map_location, weights_only=True)
        bounded.check_values(state, path)
        return state
    except bounded.FileRefused as e:
        raise CheckpointError(str(e)) from None
    except Exception as e:  # truncated, corrupt, unreadable, or holding Python objects
        if isinstance(e, pickle.UnpicklingError) and "Unsupported global" in str(e):
            # torch's message advises loading with weights_only=False: never pass that on
            raise CheckpointError(
                f"{path}: not an rlrun checkpoint (it holds Python objects, which rlrun never loads)"
            ) from None
        first = (str(e).splitlines() or ["no message"])[0]
        reason = "" if isinstance(e, pickle.UnpicklingError) else f" ({type(e).__name__}: {first})"
        raise CheckpointError(f"{path}: unreadable, damaged or not written by torch.save{reason}") from None


def load_file(path: Path, map_location: str | torch.device = "cpu") -> dict[str, Any]:
    """One checkpoint file, loaded without running code and checked to be an rlrun checkpoint: it holds the
    `REQUIRED` keys, and the parts that every reader uses (its config, its online network's weights) are of
    the right kind."""
    state = read(path, map_location)
    missing = [k for k in REQUIRED if not isinstance(state, dict) or k not in state]
    if missing:
        raise CheckpointError(f"{path}: not an rlrun checkpoint (no {', '.join(missing)})")
    learner = state["learner"]
    if not isinstance(state["config"], dict):
        wrong = f"its config is a {type(state['config']).__name__}, not a mapping"
    elif not isinstance(learner, dict):
        wrong = f"its learner is a {type(learner).__name__}, not a mapping"
    elif not is_weights(learner.get("online")):
        wrong = "its learner.online is not a network's weights, a mapping of names to tensors"
    else:
        return state
    raise CheckpointError(f"{path}: not an rlrun checkpoint ({wrong})")


def is_weights(value: object) -> TypeGuard[dict[str, torch.Tensor]]:
    """A network's state dict: a non-empty mapping of names to tensors (a model.pt holds one)."""
    return (
        isinstance(value, dict)
        and bool(value)
        and all(isinstance(k, str) and isinstance(v, torch.Tensor) for k, v in value.items())
    )


def load(run_dir: Path, map_location: str | torch.device = "cpu") -> tuple[dict[str, Any], Path]:
    """The newest loadable checkpoint of a run, falling back to the previous one if the newest is damaged
    (the caller says so to the user: the returned path is then `PREVIOUS`)."""
    errors = []
    for name in (LATEST, PREVIOUS):
        path = Path(run_dir) / name
        if not path.exists():
            continue
        try:
            return load_file(path, map_location), path
        except CheckpointError as e:
            errors.append(str(e))
    if errors:
        raise CheckpointError("no loadable checkpoint in " + str(run_dir) + ": " + "; ".join(errors))
    raise CheckpointError(f"{run_dir} has no checkpoint ({LATEST})")


def rng_state(generator: np.random.Generator, torch_generator: torch.Generator) -> dict[str, Any]:
    return {
        "python": random.getstate(),
        "numpy_global": to_safe(np.random.get_state(legacy=False)),
        "numpy": generator.bit_generator.state,
        "torch": torch.get_rng_state(),
        "torch_buffer": torch_generator.get_state(),
    }


def restore_rng(state: dict[str, Any], generator: np.random.Generator, torch_generator: torch.Generator) -> None:
    random.setstate(tuple(v if not isinstance(v, list) else tuple(v) for v in state["python"]))
    np.random.set_state(from_safe(state["numpy_global"]))
    generator.bit_generator.state = state["numpy"]
    torch.set_rng_state(state["torch"])
    torch_generator.set_state(state["torch_buffer"])


# Attributes that carry an env's dynamic state, wherever they appear in the wrapper chain
# (classic-control physics, TimeLimit's counter, episode statistics, reward normalisation; rlrun.envs.cartpole's
# step counts).
ENV_ATTRS = (
    "state",
    "steps",
    "steps_beyond_terminated",
    "_elapsed_steps",
    "episode_returns",
    "episode_lengths",
    "episode_count",
    "accumulated_reward",
)


def _chain(env: object) -> list[Any]:
    """`env` and the envs it wraps, outermost first: each is read by the attributes it has (`_capture`)."""
    out = [env]
    while hasattr(env, "env"):
        env = env.env
        out.append(env)
    return out


def _capture(obj: Any) -> dict[str, Any]:
    state = {
        a: to_safe(getattr(obj, a))
        for a in ENV_ATTRS
        if a in vars(obj) and isinstance(getattr(obj, a), (np.ndarray, int, float, type(None), tuple, list))
    }
    if "return_rms" in vars(obj):
        rms = obj.return_rms
        state["return_rms"] = to_safe({"mean": rms.mean, "var": rms.var, "count": rms.count})
    if "_np_random" in vars(obj) and obj._np_random is not None:
        state["np_random"] = obj._np_random.bit_generator.state
    if "_generators" in vars(obj):  # rlrun.envs.cartpole: one stream per sub-env
        state["generators"] = [None if g is None else g.bit_generator.state for g in obj._generators]
    if callable(getattr(type(obj), "rlrun_env_state", None)):  # rlrun's own envs (MinAtar): their game state
        state["own"] = to_safe(obj.rlrun_env_state())
    return state


def _apply(obj: Any, state: dict[str, Any]) -> None:
    for k, v in from_safe(state).items():
        if k == "return_rms":
            obj.return_rms.mean, obj.return_rms.var, obj.return_rms.count = v["mean"], v["var"], v["count"]
        elif k == "np_random":
            obj._np_random.bit_generator.state = v
        elif k == "own":
            obj.load_rlrun_env_state(v)
        elif k == "generators":
            for g, g_state in zip(obj._generators, v):
                if g is not None and g_state is not None:
                    g.bit_generator.state = g_state
        else:
            setattr(obj, k, v)


def env_state(envs: gym.vector.VectorEnv) -> dict[str, Any]:
    """Vector-wrapper state and, for a sync vector env, each sub-env's wrapper chain."""
    vector_chain = _chain(envs)
    subs = getattr(vector_chain[-1], "envs", [])
    return {"vector": [_capture(w) for w in vector_chain], "subenvs": [[_capture(w) for w in _chain(e)] for e in subs]}


def restore_env_state(envs: gym.vector.VectorEnv, state: dict[str, Any]) -> None:
    """Put `env_state`'s values back; `CheckpointError` when they do not fit these envs (another env or
    vectorization than the checkpoint's: a crafted or edited config)."""
    vector_chain = _chain(envs)
    try:
        for w, s in zip(vector_chain, state["vector"]):
            _apply(w, s)
        for sub, chain_state in zip(getattr(vector_chain[-1], "envs", []), state["subenvs"]):
            for w, s in zip(_chain(sub), chain_state):
                _apply(w, s)
    except (AttributeError, KeyError, TypeError, ValueError, IndexError) as e:
        raise CheckpointError(
            f"the checkpoint's env state does not fit these envs ({type(e).__name__}: {str(e)[:200]})"
        ) from None
