"""The command line as Hydra's app will read it: Hydra's flags before the overrides, integral floats of
integer keys as integers. `rlrun.cli.main` hands it on to the preflight (`rlrun.config.preflight`) and Hydra."""

from __future__ import annotations

from argparse import ArgumentParser, Namespace
from typing import NoReturn

from rlrun.config.appconfig import ConfigSource
from rlrun.config.hydra_adapter import args_parser
from rlrun.config.overrides import may_be_integral
from rlrun.config.preflight import integral_overrides


class _ArgvError(Exception):
    """argparse's usage error, raised instead of printed: Hydra's app prints it, once."""


def _quiet_parser() -> ArgumentParser:
    """Hydra's parser, raising _ArgvError where it would print its usage and exit."""
    parser = args_parser()

    def refuse(message: str) -> NoReturn:
        raise _ArgvError(message)

    parser.error = refuse  # type: ignore[method-assign]
    return parser


def given_overrides(argv: list[str]) -> list[str]:
    """The overrides of a command line; none where argparse refuses it (Hydra's app reports that)."""
    try:
        return list(_quiet_parser().parse_intermixed_args(argv).overrides)
    except (_ArgvError, SystemExit):
        return []


def _parsed(argv: list[str]) -> tuple[Namespace, list[str]] | None:
    """(Hydra's parse of `argv`, `argv` grouped: see grouped_argv), or None where argparse refuses it."""
    parser = _quiet_parser()
    try:
        args = parser.parse_intermixed_args(argv)
    except (_ArgvError, SystemExit):
        return None
    flags: list[str] = []
    for action in parser._actions:
        value = getattr(args, action.dest, None)
        if not action.option_strings or value is None or value == action.default:
            continue
        flags += [action.option_strings[0]] if action.nargs == 0 else [action.option_strings[0], str(value)]
    return args, flags + list(args.overrides)


def grouped_argv(argv: list[str]) -> list[str]:
    """`argv` as Hydra's parser reads it: its flags (`-m`, `--cfg job`, `-cn name`, ...) first, then every
    override in its order. Hydra's argparse reads the overrides as one block, so `a=1 -m b=2` (compose's
    `train` service puts `device=cuda` before the user's `-m ...`) and an override the preflight appends
    after a trailing `-m` would be refused; read intermixed, flags may stand anywhere. A line argparse refuses
    is returned as it is, for Hydra to report (once: nothing is printed here)."""
    parsed = _parsed(argv)
    return argv if parsed is None else parsed[1]


def normalized_argv(argv: list[str]) -> list[str]:
    """A command line with its integral float literals of integer keys as integers (`total_steps=1e5`),
    for Hydra's app, which reads the command line itself; its flags before its overrides (`grouped_argv`)."""
    parsed = _parsed(argv)
    if parsed is None:
        return argv
    args, grouped = parsed
    if not any(may_be_integral(o) for o in args.overrides):
        return grouped
    fixed = dict(zip(args.overrides, integral_overrides(args.overrides, ConfigSource.from_args(args))))
    return [fixed.get(a, a) for a in grouped]
