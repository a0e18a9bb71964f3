"""Argument types and argument groups the subcommands share."""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable, Sequence
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


def token_count(lowest: int, what: str) -> Callable[[str], float]:
    """An argparse type for a count of sequences or tokens: a whole number >= `lowest`,
    written as an integer or in exponent form (`8`, `1e6`, `4096.0`), or a one-line error.

    The command line counts whole sequences and tokens: `--batch 1.5` is refused. The
    Python API (`costmodel.evaluate`, `Scenario`) still takes a fractional batch or
    context, where a soft model or a mean over a distribution needs one.
    """

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            value = math.nan
        if not (math.isfinite(value) and value.is_integer() and value >= lowest):
            raise argparse.ArgumentTypeError(f"{text!r}: expected {what}, a whole number >= {lowest}")
        return value  # a float, as the scenario holds it (a whole one)

    return parse


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


FRACTION_SUM_TOLERANCE = 1e-6
"""How far from 1 the entries of a fraction vector may sum (decimal rounding of typed shares)."""


def context_mix(text: str) -> tuple[tuple[float, ...], tuple[float, ...]] | str:
    """An argparse type: a histogram of context lengths, `TOKENS:SHARE,...` (`--context-mix
    1024:0.5,8192:0.4,65536:0.1`): each length a whole number of tokens >= 0, each share
    in [0, 1], the shares summing to 1 (the one check of a fraction vector's sum,
    `FRACTION_SUM_TOLERANCE`). Returns (lengths, shares); or the name of a distribution
    of `data/contexts.toml` (no `:` in it), returned as it is and checked on use."""
    if ":" not in text and "," not in text:
        return text
    expected = "TOKENS:SHARE pairs, comma-separated, tokens whole numbers >= 0, shares in [0, 1] summing to 1"
    lengths, shares = [], []
    for part in text.split(","):
        tokens, sep, share = part.partition(":")
        try:
            length, fraction = float(tokens), float(share)
        except ValueError:
            length = fraction = math.nan
        if not sep or not (math.isfinite(length) and length.is_integer() and length >= 0):
            raise argparse.ArgumentTypeError(f"{text!r}: bin {part!r}: expected {expected}")
        if not 0 <= fraction <= 1:
            raise argparse.ArgumentTypeError(
                f"{text!r}: bin {part!r}: share {share!r} outside [0, 1]; expected {expected}"
            )
        lengths.append(length)
        shares.append(fraction)
    total = math.fsum(shares)
    if not abs(total - 1) <= FRACTION_SUM_TOLERANCE:
        raise argparse.ArgumentTypeError(f"{text!r}: {len(shares)} shares summing to {total:g}; expected {expected}")
    if not any(length > 0 and fraction > 0 for length, fraction in zip(lengths, shares)):
        raise argparse.ArgumentTypeError(f"{text!r}: every sequence at context 0; expected some history")
    return tuple(lengths), tuple(shares)


def fraction_vector(names: Sequence[str], hint: str = "") -> Callable[[str], tuple[float, ...]]:
    """An argparse type: the one check of a fraction vector, comma-separated shares of a
    whole (`--split compute,sram`): `len(names)` numbers, each in [0, 1], summing to 1.

    Args:
        names: what each entry is a share of, in order (for the message).
        hint: a sentence added to the message when the count is wrong (e.g. where an
            old form went).

    The message gives the values, how many there were and their sum; argparse adds the
    option's name (`argument --split: '0.7,0.7': ...`).
    """
    expected = f"{len(names)} shares '{','.join(names)}', each in [0, 1], summing to 1"

    def parse(text: str) -> tuple[float, ...]:
        try:
            values = tuple(float(x) for x in text.split(","))
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r}: not numbers; expected {expected}") from None
        total = math.fsum(values)
        if (
            len(values) != len(names)
            or not all(0 <= v <= 1 for v in values)
            or not abs(total - 1) <= FRACTION_SUM_TOLERANCE
        ):
            got = f"{len(values)} number{'s' if len(values) != 1 else ''} summing to {total:g}"
            outside = [f"{v:g}" for v in values if not 0 <= v <= 1]
            if outside:
                got += f", {', '.join(outside)} outside [0, 1]"
            note = f" ({hint})" if hint and len(values) != len(names) else ""
            raise argparse.ArgumentTypeError(f"{text!r}: {got}; expected {expected}{note}")
        return values

    return parse


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


def add_inference_arg(p: argparse.ArgumentParser) -> None:
    """`--inference`: how the framework's engine runs (`costmodel.io.frameworks.INFERENCE_MODES`)."""
    from ..io.frameworks import INFERENCE_MODES

    p.add_argument(
        "--inference",
        default="online",
        choices=INFERENCE_MODES,
        help="how the --framework's engine runs: online, streaming each token to its client (default), or "
        "offline, the whole batch in the client's process (vLLM's LLM.generate: a profile may price its host "
        "time apart; offline needs --framework)",
    )


def check_inference(args: argparse.Namespace) -> None:
    """`--inference offline` needs a `--framework` whose profile prices its host time offline
    apart (`Framework.host_offline`): a chip alone, or another profile, has one host time,
    and the option would change nothing."""
    if args.inference != "offline":
        return
    from ..io import InputError
    from ..io.frameworks import OFFLINE_HOST, resolve_framework

    if args.framework is None:
        raise InputError(
            "--inference offline: expected with --framework (an engine's profile prices its host time "
            "offline; without one the chip's own host time stands and the option changes nothing)"
        )
    profile = resolve_framework(args.framework, args.chip)
    if profile.host_offline is None:
        raise InputError(
            f"--inference offline: framework {args.framework!r} (profile {profile.name!r}) has no {OFFLINE_HOST}: "
            "expected a profile that prices its host time offline (the option would change nothing)"
        )


def add_scenario_args(p: argparse.ArgumentParser) -> None:
    """`--batch`, `--context`, `--prefix`, `--weights`, `--kv` and `--profile`: one decode
    scenario and the access profile of its KV history."""
    p.add_argument(
        "--batch",
        type=token_count(1, "sequences per step"),
        default=1,
        help="sequences per step, a whole number >= 1 (default 1; the Python API also takes a fractional batch)",
    )
    p.add_argument(
        "--context",
        type=token_count(0, "tokens in each KV cache"),
        default=4096,
        help="tokens in each KV cache, a whole number >= 0 (default 4096; 0 is a first step with no history: "
        "the weights are still read)",
    )
    p.add_argument(
        "--prefix",
        type=token_count(0, "shared-prefix tokens"),
        default=0,
        help="shared-prefix tokens, read once per step, a whole number >= 0 and <= --context",
    )
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
