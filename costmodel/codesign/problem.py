"""A co-design problem: a die-area budget, a technology, a system and a weighted mix.

`make_problem` assembles one from workloads and constants; `build_problem` from
preset names, a mix file and plain numbers (what `costmodel optimize` and the main
job pass), with the co-design's own system-sizing rule (`design_system_chips`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

import equinox as eqx
import jax
import jax.numpy as jnp

from .._core.area import REFERENCE_DIE_AREA, Technology, chip_from_area, fixed_area
from .._core.chip import Chip
from .._core.cost import Cost, decode_cost
from .._core.economics import Economics, token_cost
from .._core.power import sustained_cost
from .._core.traffic import lower_traffic
from .._core.workload import AccessProfile, Workload
from ..evaluation import MAX_SYSTEM_CHIPS, resolve_profile
from ..io import InputError, chip_info, economics_preset, load_mix, load_model, make_scenario, tech_preset


OBJECTIVES = ("latency", "energy", "cost")


class Problem(eqx.Module):
    """A co-design problem: a die budget, a technology and a weighted workload mix.

    Attributes:
        workloads: the mix, stacked along a leading axis of `points`.
        weights: `[points]` share of decode steps at each point (sums to 1).
        tech: technology constants.
        budget: die area, m².
        n_stacks: HBM stacks per chip.
        tensor_parallel: chips per system (each a copy of the design).
        system: a reference chip whose system parameters the design shares: links,
            all-reduce and hop latency, per-layer kernel overhead, compute and
            memory efficiency, channel overlap and power cap.
        econ: prices and operating assumptions (for the cost objective).
        objective: one of `OBJECTIVES`.
        sustained: evaluate under the power cap (`sustained_cost`) instead of at
            full clock.
    """

    workloads: Workload
    weights: jax.Array
    tech: Technology
    budget: jax.Array
    n_stacks: jax.Array
    tensor_parallel: jax.Array
    system: Chip
    econ: Economics
    objective: str = eqx.field(static=True)
    sustained: bool = eqx.field(static=True)

    @property
    def n_points(self) -> int:
        return int(self.weights.shape[0])


def make_problem(
    workloads: Sequence[Workload],
    weights: Sequence[float],
    tech: Technology,
    *,
    budget: float,
    n_stacks: float = 5,
    tensor_parallel: float = 1,
    system: Chip,
    econ: Economics,
    objective: str = "latency",
    sustained: bool = False,
) -> Problem:
    if objective not in OBJECTIVES:
        raise ValueError(f"objective {objective!r}: expected one of {OBJECTIVES}")
    w = jnp.asarray(weights, dtype=float)
    f = lambda x: jnp.asarray(x, dtype=float)
    return Problem(
        workloads=jax.tree.map(lambda *xs: jnp.stack(xs), *workloads),
        weights=w / jnp.sum(w),
        tech=tech,
        budget=f(budget),
        n_stacks=f(n_stacks),
        tensor_parallel=f(tensor_parallel),
        system=system,
        econ=econ,
        objective=objective,
        sustained=sustained,
    )


def design_chip(problem: Problem, area_logits) -> Chip:
    """The chip an area split gives, in the problem's system."""
    ref = problem.system
    chip = chip_from_area(
        problem.budget,
        area_logits,
        problem.tech,
        n_stacks=problem.n_stacks,
        compute_efficiency=ref.compute_efficiency,
        kernel_overhead=ref.kernel_overhead,
        overlap=ref.overlap,
        power_cap=ref.power_cap,
    )
    return chip.replace(
        tensor_parallel=problem.tensor_parallel,
        link_bandwidth=ref.link_bandwidth,
        link_latency=ref.link_latency,
        hop_latency=ref.hop_latency,
        # The kernel efficiencies of the system's compute die (a calibrated chip's).
        attention_efficiency=ref.attention_efficiency,
        half_rate_rows=ref.half_rate_rows,
        small_kernel_bytes=ref.small_kernel_bytes,
        small_kernel_efficiency=ref.small_kernel_efficiency,
        small_kernel_knee=ref.small_kernel_knee,
        tiers=chip.tiers.replace(compute_feed=ref.tiers.compute_feed),
    )


def _cost(problem: Problem, workload: Workload, chip: Chip, placement) -> Cost:
    """A step's cost at full clock, or under the power cap for a sustained problem."""
    if problem.sustained:
        return sustained_cost(workload, chip, placement).cost
    return decode_cost(workload, chip, placement)


def _metric(problem: Problem, cost: Cost, chip: Chip):
    """Per-point figure of merit: s per step, J per token, or $ per token."""
    if problem.objective == "latency":
        return cost.seconds_per_step
    if problem.objective == "energy":
        return cost.joules_per_token
    return token_cost(cost, chip, problem.econ).usd_per_token


def evaluate_design(problem: Problem, area_logits, placements):
    """The mix objective of one design: weighted mean of the per-point metric.

    Returns:
        (objective, overflow, per-point costs), where overflow is what the placement
        asks of every tier beyond its capacity, as a fraction of the bytes stored
        (SRAM and PIM overflow spills to DRAM inside `decode_cost`, so it costs time
        there; counting the ask as well keeps a gradient on a placement that asks a
        slow, full tier for more than it holds).
    """
    chip = design_chip(problem, area_logits)
    costs = jax.vmap(lambda w, p: _cost(problem, w, chip, p))(problem.workloads, placements)
    metric = jax.vmap(lambda c: _metric(problem, c, chip))(costs)
    objective = jnp.sum(problem.weights * metric)
    stored = jax.vmap(lambda w: lower_traffic(w).stored_bytes)(problem.workloads)  # [points, classes]
    asked = jnp.einsum("pct,pc->pt", placements, stored) / chip.n_chips
    # SRAM is left out: asking it for more than it holds costs nothing (the rest
    # streams from DRAM) and is what gives its area a gradient. The capacity is held
    # constant here: the penalty steers the placement, and must not buy a tier area
    # only to make room for a placement's bad ask.
    capacity = jax.lax.stop_gradient(chip.tiers.capacity)
    over = jnp.sum(jnp.maximum(asked - capacity[None, :], 0.0)[:, 1:], axis=-1)
    overflow = jnp.sum(problem.weights * over / jnp.sum(stored, axis=-1))
    return objective, overflow, costs


# --- from names and plain numbers -------------------------------------------------------

DRAM_HEADROOM = 1.3
"""Default system size: the fewest chips whose HBM holds the largest mix point x 1.3."""


def mix_workloads(
    mix: str | Path | None = None,
    *,
    model: str = "llama-3-8b",
    batch: float = 1,
    context: float = 4096,
    prefix: float = 0,
    weights: str = "bf16",
    kv: str = "bf16",
    profile: str | AccessProfile = "dense",
) -> list[tuple[str, Workload, float]]:
    """(name, workload, weight) per mix point: those of a workload-mix TOML (`[[workloads]]`
    as `data/workloads.toml`), or, with `mix=None`, the one point `model` at the scenario;
    every point's KV history follows `profile` (checked against each point's context).

    Raises:
        InputError: for a mix file, model or number format that cannot be read.
    """
    if mix is not None:
        return [
            (
                pt.name,
                Workload(
                    load_model(pt.model),
                    make_scenario(
                        batch=pt.batch,
                        context=pt.context,
                        prefix=pt.prefix,
                        weights=pt.weights,
                        kv=pt.kv,
                        where=pt.name,
                    ),
                    resolve_profile(profile, pt.context)[1],
                ),
                pt.weight,
            )
            for pt in load_mix(mix)
        ]
    scenario = make_scenario(batch=batch, context=context, prefix=prefix, weights=weights, kv=kv)
    return [(model, Workload(load_model(model), scenario, resolve_profile(profile, context)[1]), 1.0)]


def design_system_chips(stored: float, tech: Technology, n_stacks: int, chips: int | None = None) -> int:
    """Chips per co-designed system: `chips`, or by default the fewest whose HBM holds the
    largest mix point with `DRAM_HEADROOM` to spare.

    The all-compute design's DRAM must hold the largest point, with 30% headroom: PIM
    area displaces DRAM capacity, and the optimiser should be free to buy some.

    Args:
        stored: bytes the largest mix point stores (weights and KV cache), B.
        tech: the technology (its HBM stack capacity).
        n_stacks: HBM stacks per chip.
        chips: a fixed system size, or None.

    Raises:
        InputError: if the system would need more than `MAX_SYSTEM_CHIPS` chips, or
            `chips` chips cannot hold `stored`.
    """
    per_chip = n_stacks * float(tech.stack_capacity)
    chips = chips or math.ceil(stored / per_chip * DRAM_HEADROOM)
    if chips > MAX_SYSTEM_CHIPS or stored > chips * per_chip:
        raise InputError(
            f"model and KV cache: {stored / 1e9:.1f} GB fit nowhere: {chips} chips x {n_stacks} stacks x "
            f"{float(tech.stack_capacity) / 1e9:g} GB hold {chips * per_chip / 1e9:.1f} GB"
            + (f" (at most {MAX_SYSTEM_CHIPS} chips)" if chips > MAX_SYSTEM_CHIPS else "; use more --chips or --stacks")
        )
    return chips


def build_problem(
    model: str = "llama-3-8b",
    *,
    mix: str | Path | None = None,
    batch: float = 1,
    context: float = 4096,
    prefix: float = 0,
    weights: str = "bf16",
    kv: str = "bf16",
    area: float = REFERENCE_DIE_AREA,
    tech: str = "N5",
    n_stacks: int = 5,
    chips: int | None = None,
    system: str = "h100-sxm",
    objective: str = "latency",
    power_cap: float | None = None,
    profile: str | AccessProfile = "dense",
) -> tuple[Problem, list[str]]:
    """The co-design problem for a model (or a mix) on a die budget, from names and numbers.

    Args:
        model, batch, context, prefix, weights, kv: the one mix point, when `mix` is None
            (tokens; number formats by name).
        mix: a workload-mix TOML instead of one point.
        profile: the KV access profile of every point (a preset id, a TOML path or an
            `AccessProfile`), an input like the batch and the context.
        area: die area budget, m².
        tech: technology node (`data/tech.toml`); it also prices the cost objective.
        n_stacks: HBM stacks per chip.
        chips: chips per system; by default `design_system_chips` sizes it.
        system: chip preset whose links, overheads and efficiencies the design shares.
        objective: one of `OBJECTIVES`.
        power_cap: W per chip: optimise the sustained figures under it (None: at full clock).

    Returns:
        (problem, the mix points' names).

    Raises:
        InputError: an unknown preset or unreadable file, an area that does not cover the
            fixed I/O and PHYs, or a mix that no system of at most `MAX_SYSTEM_CHIPS` holds.
    """
    points = mix_workloads(
        mix, model=model, batch=batch, context=context, prefix=prefix, weights=weights, kv=kv, profile=profile
    )
    technology = tech_preset(tech)
    fixed = float(fixed_area(technology, n_stacks))
    if area <= fixed:
        raise InputError(
            f"--area-mm2 {area * 1e6:g}: expected more than the fixed I/O and {n_stacks} HBM PHYs "
            f"({fixed * 1e6:.1f} mm² at {tech})"
        )
    reference = chip_info(system).chip
    if power_cap is not None:
        reference = reference.replace(power_cap=power_cap)
    stored = max(float(jnp.sum(lower_traffic(w).stored_bytes)) for _, w, _ in points)
    problem = make_problem(
        [w for _, w, _ in points],
        [wt for _, _, wt in points],
        technology,
        budget=area,
        n_stacks=n_stacks,
        tensor_parallel=design_system_chips(stored, technology, n_stacks, chips),
        system=reference,
        econ=economics_preset(tech),
        objective=objective,
        sustained=power_cap is not None,
    )
    return problem, [name for name, _, _ in points]
