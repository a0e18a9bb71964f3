"""Turning costs into plain records (JSON-ready) and readable tables."""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np

from .._core.chip import TIERS
from .._core.cost import BOUNDS
from .._core.placement import class_placement
from .._core.traffic import CLASSES, lower_traffic
from ..evaluation import Evaluation


def cost_record(e: Evaluation) -> dict[str, Any]:
    """A JSON-ready record of one evaluation (SI units, names in keys)."""
    c = e.cost
    f = lambda x: float(np.asarray(x))
    breakdown = {
        "tiers": {
            tier: {
                "bytes": f(c.tier_bytes[i]),
                "seconds": f(c.tier_seconds[i]),
                "joules": f(c.tier_joules[i]),
                "stored_bytes_per_chip": f(c.stored_bytes[i]),
            }
            for i, tier in enumerate(TIERS)
        },
        "compute": {"flops": f(c.flops), "seconds": f(c.compute_seconds), "joules": f(c.compute_joules)},
        "serial_seconds": f(c.serial_seconds),
        "static_joules": f(c.static_joules),
    }
    by_class = class_placement(e.placement, lower_traffic(e.workload))
    placement = {cls: {tier: f(by_class[i, j]) for j, tier in enumerate(TIERS)} for i, cls in enumerate(CLASSES)}
    s = e.workload.scenario
    return {
        "model": e.model_name,
        "chip": e.info.name,
        "chips": e.tensor_parallel * e.pipeline_parallel,
        "tensor_parallel": e.tensor_parallel,
        "pipeline_parallel": e.pipeline_parallel,
        "batch": f(s.batch),
        "context": f(s.context),
        "prefix": f(s.prefix),
        "profile": e.profile_name,
        "seconds_per_step": f(c.seconds_per_step),
        "tokens_per_second": f(c.tokens_per_second),
        "tokens_per_second_per_sequence": f(c.tokens_per_second_per_sequence),
        "joules_per_token": f(c.joules_per_token),
        "power_watts_per_chip": f(c.power),
        "bound": BOUNDS[int(c.bound)],
        "feasible": bool(c.feasible),
        "overflow_bytes_per_chip": f(c.overflow_bytes),
        "placement_policy": e.info.placement,
        "placement": placement,
        "breakdown": breakdown,
    }


def si(x: float, unit: str) -> str:
    """Formats a number with an SI prefix: 1.2e-3, 's' -> '1.20 ms'."""
    if x == 0 or not math.isfinite(x):
        return f"{x:g} {unit}"
    prefixes = [
        (1e15, "P"),
        (1e12, "T"),
        (1e9, "G"),
        (1e6, "M"),
        (1e3, "k"),
        (1, ""),
        (1e-3, "m"),
        (1e-6, "µ"),
        (1e-9, "n"),
        (1e-12, "p"),
    ]
    for scale, p in prefixes:
        if abs(x) >= scale:
            return f"{x / scale:.3g} {p}{unit}"
    return f"{x:.3g} {unit}"


def headline(r: dict[str, Any], chip: str, *extra: str) -> str:
    """The first line `evaluate` and `explain` print: model, system, scenario, extras."""
    parts = [
        f"[bold]{r['model']}[/] on [bold]{chip}[/] x{r['chips']} (TP {r['tensor_parallel']}, "
        f"PP {r['pipeline_parallel']})",
        f"batch {r['batch']:g}",
        f"context {r['context']:g}",
        *extra,
    ]
    return ", ".join(parts)


def dumps(record: Any) -> str:
    return json.dumps(record, indent=2, sort_keys=False)
