"""What a co-design run returns: the design, how the run ended, and what it cost to find."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from .._core.chip import TIERS
from .._core.placement import class_placement
from .._core.traffic import CLASSES, lower_traffic
from .._core.workload import BITS16
from .problem import Problem, design_chip, design_of


class DesignStatus(eqx.Enumeration):
    """How a co-design run ended (`Result.status`), reported rather than raised, so a
    caller that runs many problems is not stopped by one."""

    successful = "a hard design that fits every mix point"
    infeasible_capacity = "no design tried fits: the model and KV cache overflow DRAM at some mix point"
    infeasible_target = (
        "no design tried serves a batch that fits within the TPOT target at some mix point (no batch may fit at "
        "all: the serving objective does not tell the two apart; the CLI's message does)"
    )


@dataclasses.dataclass(frozen=True)
class Result:
    """A design and what it cost to find."""

    area_logits: np.ndarray  # [5] design vector (`DESIGN_VARIABLES`)
    placements: np.ndarray  # [points, rows, tiers], hard
    objective: float  # of the hard design
    soft_objective: float  # before hardening
    status: DesignStatus  # an item of `DesignStatus` (as equinox annotates them)
    evaluations: int
    seconds: float
    history: np.ndarray  # [steps] best restart's soft objective along the run
    rounded_objective: float | None = None  # the rounded soft placement's, before polishing
    polished_by: str | None = None  # the policy whose placement beat the rounded one

    @property
    def feasible(self) -> bool:
        """Whether the design fits every mix point (`status` is `successful`)."""
        return bool(self.status == DesignStatus.successful)


def status_of(feasible: bool, problem: Problem | None = None) -> DesignStatus:
    """`DesignStatus.successful` if `feasible`, else why not: `infeasible_target` for the
    serving objective (no batch that fits meets the TPOT target), `infeasible_capacity`
    otherwise."""
    if feasible:
        return DesignStatus.successful
    if problem is not None and problem.objective == "serving":
        return DesignStatus.infeasible_target
    return DesignStatus.infeasible_capacity


def describe(problem: Problem, result: Result, names: Sequence[str]) -> dict:
    """A JSON-ready description of a design an architect can read.

    Returns:
        `logic_die_mm2` (compute, SRAM, I/O and PHYs, total: logic-process mm²),
        `dram` (stacks, dies per stack, PIM dies per stack and the PIM share, PIM and
        DRAM capacity, the PIM logic in DRAM-process mm², never on the logic die),
        `price_usd` per good chip (logic die, stacks with the PIM premium, packaging,
        chip), the 16-bit peak, the tiers and the placement per mix point (SI units
        elsewhere).
    """
    x = jnp.asarray(result.area_logits)
    d = design_of(problem, x)
    chip = design_chip(problem, x, d)
    tiers = {
        tier: {
            "capacity_bytes": float(chip.tiers.capacity[i]),
            "bandwidth_bytes_per_second": float(chip.tiers.bandwidth[i]),
        }
        for i, tier in enumerate(TIERS)
    }
    tiers["pim"]["internal_bandwidth_bytes_per_second"] = float(chip.pim_bandwidth)
    tiers["pim"]["flops"] = float(chip.pim_flops)
    dies = float(problem.tech.dies_per_stack)
    return {
        "logic_die_mm2": {
            "compute": float(d.compute_area) * 1e6,
            "sram": float(d.sram_area) * 1e6,
            "io_and_phys": float(d.fixed_area) * 1e6,
            "total": float(d.logic_area) * 1e6,
        },
        "dram": {
            "stacks": float(d.stacks),
            "dies_per_stack": dies,
            "pim_share": float(d.pim_share),
            "pim_dies_per_stack": float(d.pim_share) * dies,
            "pim_capacity_bytes": float(chip.tiers.capacity[1]),
            "dram_capacity_bytes": float(chip.tiers.capacity[2]),
            "pim_logic_mm2_dram_process": float(d.pim_logic_area) * 1e6,
        },
        "price_usd": {
            "logic_die": float(d.die_usd),
            "stacks": float(d.stacks_usd),
            "packaging": float(d.packaging_usd),
            "chip": float(d.chip_usd),
        },
        "peak_flops_16bit": float(chip.peak_flops[BITS16]),
        "tiers": tiers,
        "placement": {name: _class_placement(problem, result, k) for k, name in enumerate(names)},
    }


def _class_placement(problem: Problem, result: Result, k: int) -> dict:
    """Mix point `k`'s hard placement per class (heat buckets summed by their bytes)."""
    workload = jax.tree.map(lambda x: x[k], problem.workloads)
    by_class = class_placement(jnp.asarray(result.placements[k]), lower_traffic(workload))
    return {cls: {tier: float(by_class[i, j]) for j, tier in enumerate(TIERS)} for i, cls in enumerate(CLASSES)}
