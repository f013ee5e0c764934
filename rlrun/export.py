"""A trained agent's Q-network as a file that runs without rlrun.

    python -m rlrun.export <run dir, model.pt or checkpoint.pt> [--format torchscript|onnx] [--out PATH]
        [--env-id ID]

Writes a module that maps a float observation batch (B, *obs_shape) to Q-values (B, A), any B, the network
in eval mode (noisy layers at their mean weights; C51, QR-DQN and IQN as their expected returns; pixel
frames as 0-255 values, scaled inside). TorchScript (the default, `torch.jit.load(path)`) goes to
`<run>/export/model.ts`, ONNX (input `obs`, output `q_values`; needs the `export` extra) to
`<run>/export/model.onnx`, or to `--out`; it prints where. The file is written whole (a temporary file
renamed over its name) and never through a link; a run directory holding a link out of it, or an `export`
link, is refused. The run is loaded as `rlrun.load` loads it: `--env-id` confirms a saved `module:` env id.
"""

from __future__ import annotations

import argparse
import importlib.util
import io
import sys
import warnings
from pathlib import Path
from typing import NoReturn

import torch

from rlrun import console
from rlrun.errors import ConfigError, Exit, fail
from rlrun.policy import Policy, load
from rlrun.storage import checkpoint as ckpt, rundir

FILES = {"torchscript": "model.ts", "onnx": "model.onnx"}
USAGE = (
    "python -m rlrun.export <run dir, model.pt or checkpoint.pt> [--format torchscript|onnx] [--out PATH]"
    " [--env-id <the run's id, to confirm a module:id>]"
)


COMMAND = "rlrun.export"  # leads each line of `fail`


def refuse(message: str, code: int = Exit.BAD_INPUT) -> NoReturn:
    """`fail` as this command: one line on stderr, led by its name, and exit `code`."""
    fail(message, code, command=COMMAND)


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # one line, exit 2 (argparse prints the usage first)
        refuse(f"{message}; usage: {USAGE}")


def parse(argv: list[str]) -> argparse.Namespace:
    parser = _Parser(prog="python -m rlrun.export", usage=USAGE, description="A trained agent's Q-network as a file.")
    parser.add_argument("run", type=Path, help="a run directory, its model.pt or a checkpoint.pt")
    parser.add_argument("--format", choices=sorted(FILES), default="torchscript")
    parser.add_argument("--out", type=Path, metavar="PATH", help="default: <run>/export/model.ts or .onnx")
    parser.add_argument("--env-id", metavar="ID", help="the run's saved env id, repeated to confirm a module:id")
    return parser.parse_args(argv)


def example(policy: Policy) -> torch.Tensor:
    """A float batch of two observations (two, so that no size-1 axis is taken for a broadcast)."""
    return torch.zeros(2, *policy.observation_space.shape, device=policy.device)


def torchscript(policy: Policy) -> bytes:
    """The network traced on an example batch: the batch size stays free (tested up to 100)."""
    buffer = io.BytesIO()
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore", DeprecationWarning)  # torch 2.13 calls TorchScript deprecated; it works
        torch.jit.save(torch.jit.trace(policy.network, example(policy), check_trace=False), buffer)
    return buffer.getvalue()


def onnx(policy: Policy) -> bytes:
    """ONNX through torch's TorchScript-based exporter (the default one needs onnxscript too), batch axis free."""
    buffer = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the exporter's deprecation and tracer notes
        torch.onnx.export(
            policy.network,
            (example(policy),),
            buffer,  # type: ignore[arg-type]  # the TorchScript-based exporter writes to a file object too
            dynamo=False,
            input_names=["obs"],
            output_names=["q_values"],
            dynamic_axes={"obs": {0: "batch"}, "q_values": {0: "batch"}},
        )
    return buffer.getvalue()


def destination(run_dir: Path, fmt: str, out: Path | None) -> Path:
    """`out`, or `<run>/export/<file>`: that folder is made inside the run, never through a link."""
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        return out
    rundir.check_links(run_dir)
    folder = run_dir / "export"
    if folder.is_symlink():
        raise rundir.RunDirError(f"{folder} is a link; rlrun writes into the run, never through a link")
    folder.mkdir(exist_ok=True)
    return folder / FILES[fmt]


def export(path: Path, fmt: str = "torchscript", out: Path | None = None, env_id: str | None = None) -> Path:
    """Write the run's network at `path` in `fmt`; returns where."""
    policy = load(path, device="cpu", env_id=env_id)
    data = torchscript(policy) if fmt == "torchscript" else onnx(policy)
    target = destination(policy.run_dir, fmt, out)
    with rundir.open_atomic(target) as f:  # a link at `target` is replaced, its target untouched
        f.write(data)
    return target


def main(argv: list[str] | None = None) -> None:
    console.guard()  # `| head -1`, a full or closed stdout: the export is written all the same
    args = parse(sys.argv[1:] if argv is None else argv)
    if args.format == "onnx" and importlib.util.find_spec("onnx") is None:
        refuse("--format onnx needs the export extra (pip install -e '.[export]'): onnx is not installed")
    try:
        target = export(args.run, args.format, args.out, args.env_id)
    except (ConfigError, ckpt.CheckpointError, rundir.RunDirError) as e:
        refuse(str(e))
    except OSError as e:
        refuse(f"cannot write the export: {e.strerror or e} ({e.filename or args.out or args.run})", Exit.CANNOT_WRITE)
    print(f"wrote {target} ({args.format}: float observations (B, *obs_shape) -> Q-values (B, A))")


if __name__ == "__main__":
    main()
