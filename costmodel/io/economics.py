"""Loading the cost-per-token constants: `data/tech.toml` [cost] and [nodes.*], in SI.

Every constant can be overridden (from Python by keyword, from the CLI by flag); an
override is validated like the file's value and named in any error.
"""

from __future__ import annotations

import re

import jax.numpy as jnp

from .._core.economics import Economics
from .chips import chip_presets
from .errors import InputError
from .files import data_dir
from .schema import check_table
from .tech import tech_table


_COST_FIELDS = {
    "yield_alpha": "positive",
    "wafer_diameter_mm": "positive",
    "packaging_usd_per_die": "nonneg",
    "hbm_usd_per_GB": "nonneg",
    "pim_die_premium_usd": "nonneg",
    "electricity_usd_per_kwh": "nonneg",
    "lifetime_years": "positive",
    "utilization": "fraction",
}
_NODE_COST_FIELDS = {"wafer_cost_usd": "positive", "defect_density_per_cm2": "nonneg"}
OVERRIDES = {**_NODE_COST_FIELDS, **_COST_FIELDS}
"""Names of the constants one can override, in the units of `data/tech.toml`."""

SECONDS_PER_YEAR = 365.25 * 24 * 3600
JOULES_PER_KWH = 3.6e6


def economics_table(node: str) -> dict[str, float]:
    """The cost constants of a node, validated, in the file's units."""
    path = data_dir() / "tech.toml"
    data = tech_table()
    nodes = data.get("nodes", {})
    if node not in nodes:
        raise InputError(f"{path}: technology node {node!r}: unknown; expected one of {sorted(nodes)}")
    if "cost" not in data:
        raise InputError(f"{path}: missing table [cost]")
    cost = check_table(data["cost"], f"{path}: cost", _COST_FIELDS, strings=("source",), tables=("sources",))
    n = nodes[node]
    for key in _NODE_COST_FIELDS:
        if key not in n:
            raise InputError(f"{path}: nodes.{node}: missing field {key!r}")
    picked = check_table({k: n[k] for k in _NODE_COST_FIELDS}, f"{path}: nodes.{node}", _NODE_COST_FIELDS)
    return {**picked, **{k: v for k, v in cost.items() if k in _COST_FIELDS}}


def economics_preset(node: str = "N5", **overrides: float | None) -> Economics:
    """`Economics` of a process node from `data/tech.toml`, with optional overrides.

    Args:
        node: a key of `[nodes]` (`costmodel presets` lists them).
        **overrides: any of `OVERRIDES`, in the file's units (e.g.
            `electricity_usd_per_kwh=0.05`).

    Examples:
        >>> from costmodel.io import economics_preset
        >>> round(float(economics_preset("N5", utilization=0.5).utilization), 2)
        0.5
    """
    t = economics_table(node)
    unknown = sorted(set(overrides) - set(OVERRIDES))
    if unknown:
        raise InputError(f"economics override {unknown[0]!r}: unknown; expected one of {sorted(OVERRIDES)}")
    given = {k: v for k, v in overrides.items() if v is not None}
    t.update(check_table(given, "economics override", {}, {k: OVERRIDES[k] for k in given}))
    f = lambda x: jnp.asarray(x, dtype=float)
    return Economics(
        wafer_cost=f(t["wafer_cost_usd"]),
        defect_density=f(t["defect_density_per_cm2"] * 1e4),
        yield_alpha=f(t["yield_alpha"]),
        wafer_diameter=f(t["wafer_diameter_mm"] * 1e-3),
        packaging_cost=f(t["packaging_usd_per_die"]),
        dram_cost_per_byte=f(t["hbm_usd_per_GB"] / 1e9),
        pim_die_premium=f(t["pim_die_premium_usd"]),
        energy_price=f(t["electricity_usd_per_kwh"] / JOULES_PER_KWH),
        lifetime=f(t["lifetime_years"] * SECONDS_PER_YEAR),
        utilization=f(t["utilization"]),
    )


def node_for_process(process: str) -> str | None:
    """The `[nodes]` key for a chip's `process` string ("TSMC 4N" -> "N5"), or None.

    TSMC N6 is priced as N7 (same design rules), 4N/4NP as N5. A process with no node
    in the file (e.g. 14 nm) gives None.
    """
    text = process.upper()
    if re.search(r"\b(N3[A-Z]?|3\s*NM)\b", text):
        return "N3"
    if re.search(r"\b(4N[A-Z]?|N5[A-Z]?|N4[A-Z]?|5\s*NM|4\s*NM)\b", text):
        return "N5"
    if re.search(r"\b(N7[A-Z]?|N6|7\s*NM|6\s*NM)\b", text):
        return "N7"
    return None


def chip_node(chip_name: str) -> tuple[str, str]:
    """(node, note) for a chip preset: its process mapped to a node, else N7 or N5 with a note."""
    table = chip_presets().get(chip_name, {})
    process = table.get("process", "")
    node = node_for_process(process) if process else None
    if node is not None:
        return node, f"{process} priced as {node}"
    if process:
        m = re.search(r"(\d+)\s*nm", process, re.I)
        if m and int(m.group(1)) > 7:
            return "N7", f"{process} has no node in tech.toml; priced as N7, the oldest node there (an overestimate)"
        return "N5", f"{process!r} has no node in tech.toml; priced as N5"
    return "N5", "process unknown; priced as N5"
