"""Command-line flags for the cost-per-token constants (`--node`, `--wafer-cost`, ...)."""

from __future__ import annotations

import argparse
import math
from typing import Any

from .._core.economics import Economics
from ..io.economics import chip_node, economics_preset


_FLAGS = {
    "wafer_cost_usd": ("--wafer-cost", "wafer price, USD"),
    "defect_density_per_cm2": ("--defect-density", "defect density D0, per cm²"),
    "yield_alpha": ("--yield-alpha", "negative-binomial clustering parameter"),
    "wafer_diameter_mm": ("--wafer-diameter", "wafer diameter, mm"),
    "packaging_usd_per_die": ("--packaging-cost", "package price per chip, USD"),
    "hbm_usd_per_GB": ("--dram-price", "DRAM/HBM price, USD per GB"),
    "electricity_usd_per_kwh": ("--electricity", "electricity price, USD per kWh"),
    "lifetime_years": ("--lifetime", "service life, years"),
    "utilization": ("--utilization", "fraction of the life spent decoding, (0, 1]"),
}


def _number(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected a number") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"{text!r}: expected a finite number")
    return value


def add_economics_args(p: argparse.ArgumentParser) -> None:
    """Adds `--node` and one flag per cost constant (defaults from data/tech.toml)."""
    g = p.add_argument_group("cost per token (defaults: data/tech.toml [cost] and the node's wafer price and D0)")
    g.add_argument("--node", default=None, help="process node for die cost (default: from the chip's process)")
    for key, (flag, text) in _FLAGS.items():
        g.add_argument(flag, dest=key, type=_number, default=None, help=text)


def economics_from_args(args: Any, chip_name: str) -> tuple[Economics, str, str]:
    """(economics, node, note) from parsed CLI args for a chip (preset name or path)."""
    if args.node is not None:
        node, note = args.node, f"priced as {args.node} (--node)"
    else:
        node, note = chip_node(chip_name)
    overrides = {k: getattr(args, k, None) for k in _FLAGS}
    return economics_preset(node, **overrides), node, note
