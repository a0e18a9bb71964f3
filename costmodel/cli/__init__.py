"""The `costmodel` command line: argparse and printing only (layer 5).

One module per command group, each with `add_commands(subparsers)`:
`evaluate` (`presets`, `evaluate`), `run` (the main job), `codesign` (`optimize`),
`explain`, `validate`, `sweep` (`sweep`, `pareto`) and `calibration` (`bench`,
`calibrate`, `import-trace`); `args` and `economics` hold the shared argument types.
This package is the one place that imports `calibration`, and nothing outside it
imports it.

Every failure the user can cause ends in one line on stderr naming the file, field,
value and expectation, and exit status 2; never a traceback.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Callable, Sequence

from ..io import InputError
from .args import add_scenario_args as add_scenario_args, whole_number as whole_number


EXIT_BAD_INPUT = 2

COMMAND_MODULES = (
    "costmodel.cli.evaluate",
    "costmodel.cli.serve",
    "costmodel.cli.run",
    "costmodel.cli.calibration",
    "costmodel.cli.codesign",
    "costmodel.cli.sweep",
    "costmodel.cli.validate",
    "costmodel.cli.explain",
)
"""Modules that add subcommands, in `--help` order: each has `add_commands(subparsers)`,
which adds its parsers with `set_defaults(func=...)`; a func returns the exit status and
raises `InputError` for bad input. Heavy imports belong inside the funcs, not at the top."""


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # argparse's own errors: one line, exit 2
        raise InputError(f"{self.prog}: {message}")


def build_parser() -> argparse.ArgumentParser:
    """The `costmodel` parser, with every subcommand of `COMMAND_MODULES`."""
    parser = _Parser(prog="costmodel", description="What it costs a chip to decode one token of an LLM.")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    for name in COMMAND_MODULES:
        importlib.import_module(name).add_commands(sub)
    return parser


_LINE_BREAKS = {ord(c): repr(c)[1:-1] for c in "\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029"}
"""What `str.splitlines` breaks at, mapped to its escape."""


def _one_line(text: str) -> str:
    """A message with line breaks a user typed (in a value it quotes) escaped: one line."""
    return text.translate(_LINE_BREAKS)


def main(argv: Sequence[str] | None = None) -> int:
    """Runs `costmodel` with `argv` (default `sys.argv[1:]`); returns the exit status."""
    try:
        args = build_parser().parse_args(argv)
        func: Callable[..., int] = args.func
        return func(args)
    except InputError as e:
        print(f"costmodel: error: {_one_line(str(e))}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        print("costmodel: interrupted", file=sys.stderr)
        return 130
    except OSError as e:  # a path the user gave cannot be read or written
        if e.filename is None or os.environ.get("COSTMODEL_DEBUG"):
            raise
        print(f"costmodel: error: {e.filename}: {e.strerror or e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except Exception as e:  # noqa: BLE001 - the CLI never shows a bare traceback
        if os.environ.get("COSTMODEL_DEBUG"):
            raise
        print(
            f"costmodel: internal error: {type(e).__name__}: {e} (set COSTMODEL_DEBUG=1 for a traceback)",
            file=sys.stderr,
        )
        return 1
