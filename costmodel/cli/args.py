"""Argument types and argument groups the subcommands share."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any


def whole_number(lowest: int) -> Callable[[str], int]:
    """An argparse type: a whole number >= `lowest`, or a one-line error."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r}: expected a whole number >= {lowest}") from None
        if value < lowest:
            raise argparse.ArgumentTypeError(f"{text!r}: expected a whole number >= {lowest}")
        return value

    return parse


positive_int = whole_number(1)
nonneg_int = whole_number(0)


def nonneg_number(text: str) -> float:
    """An argparse type: a finite number >= 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected a number >= 0") from None
    if not value >= 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"{text!r}: expected a finite number >= 0")
    return value


def positive_number(text: str) -> float:
    """An argparse type: a finite number > 0."""
    value = nonneg_number(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{text!r}: expected a number > 0")
    return value


def micro_batches_arg(text: str) -> float | str:
    """`--micro-batches`: a number >= 1, or "auto" (one group per pipeline stage)."""
    if text == "auto":
        return text
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected a number >= 1 or 'auto'") from None
    if not value >= 1:
        raise argparse.ArgumentTypeError(f"{text!r}: expected a number >= 1 or 'auto'")
    return value


def add_scenario_args(p: argparse.ArgumentParser) -> None:
    """`--batch`, `--context`, `--prefix`, `--weights`, `--kv` and `--profile`: one decode
    scenario and the access profile of its KV history."""
    p.add_argument("--batch", type=positive_number, default=1, help="sequences per step (default 1)")
    p.add_argument("--context", type=nonneg_number, default=4096, help="tokens in each KV cache (default 4096)")
    p.add_argument("--prefix", type=nonneg_number, default=0, help="shared-prefix tokens, read once per step")
    p.add_argument("--weights", default="bf16", help="weight format (see `costmodel presets`)")
    p.add_argument("--kv", default="bf16", help="KV-cache format")
    p.add_argument(
        "--profile",
        default="dense",
        help="KV access profile: a preset id (dense, window-sinks, topk, ...; `costmodel presets`) or a TOML path",
    )


SCENARIO_ARGS = ("batch", "context", "prefix", "weights", "kv", "profile")
"""The destinations `add_scenario_args` adds: keyword arguments of `evaluate` and `build_problem`."""


def scenario_kwargs(args: argparse.Namespace) -> dict[str, Any]:
    """The scenario of parsed arguments (`add_scenario_args`) as keyword arguments."""
    return {key: getattr(args, key) for key in SCENARIO_ARGS}


def add_model_arg(p: argparse.ArgumentParser) -> None:
    """`--model`: a model preset id or a `config.json` path."""
    p.add_argument("--model", default="llama-3-8b", help="model preset id or config.json path")
