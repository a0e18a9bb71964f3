"""A co-design problem: a logic die and DRAM stacks under an area or dollar budget,
a technology, a system and a weighted mix.

`make_problem` assembles one from workloads and constants; `build_problem` from
preset names, a mix file and plain numbers (what `costmodel optimize` and the main
job pass), with the co-design's own system-sizing rule (`design_system_chips`) and
one-line errors for budgets that cannot hold the workload.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

import equinox as eqx
import jax
import jax.numpy as jnp

from .._core.area import (
    MIN_FREE_AREA,
    REFERENCE_DIE_AREA,
    Design,
    Technology,
    chip_from_design,
    design_point,
    fixed_area,
)
from .._core.chip import DRAM, PIM, SRAM, Chip
from .._core.cost import Cost, decode_cost
from .._core.economics import RETICLE_AREA, Economics, die_cost, stack_cost, token_cost
from .._core.power import sustained_cost
from .._core.traffic import lower_traffic
from .._core.workload import AccessProfile, Workload
from ..evaluation import MAX_SYSTEM_CHIPS, resolve_profile
from ..io import InputError, chip_info, economics_preset, load_mix, load_model, make_scenario, tech_preset


OBJECTIVES = ("latency", "energy", "cost", "serving")
BUDGETS = ("area", "usd")
STACKS = ("fixed", "auto")

SERVING_BATCHES = tuple(sorted({float(round(2 ** (k / 2))) for k in range(25)}))
"""The batches the serving objective chooses among: the 24 whole half-octaves from 1 to
4,096."""

SERVING_SHARPNESS = 20.0
"""How sharply the serving objective's soft minimum picks the best batch (`serving_metric`):
the inverse temperature of a log-sum-exp over the batches' log figures."""

SERVING_PENALTY = 200.0
"""Weight of a batch's TPOT beyond the target, and of its memory overflow, in the soft
serving figure (`serving_metric`): 5 % over the target costs more than the next
half-octave of batch gains (0.35 in log)."""

SOFT_LOG_CEILING = 60.0
"""Largest log of the soft serving figure (exp(60) is far inside float32's range)."""

SERVING_KNEE = 0.1
"""Overshoot, in log(TPOT / target), beyond which the soft serving figure's penalty grows
linearly, not quadratically: an unreachable target keeps a finite figure and a gradient
towards faster designs."""

DEFAULT_STACKS = 5
"""Stacks that size the system under `--stacks auto` (`design_system_chips`), as on an
H100 SXM (5 HBM3 stacks)."""


class Problem(eqx.Module):
    """A co-design problem: budgets, a technology and a weighted workload mix.

    Attributes:
        workloads: the mix, stacked along a leading axis of `points`.
        weights: `[points]` share of decode steps at each point (sums to 1).
        tech: technology constants.
        logic_area: logic die area, m² (`budget="area"`).
        budget_usd: dollars per chip for logic die, stacks and package (`budget="usd"`).
        n_stacks: HBM stacks per chip (`stacks="fixed"`; under `"auto"` unused).
        tensor_parallel: chips per system (each a copy of the design).
        system: a reference chip whose system parameters the design shares: links,
            all-reduce and hop latency, per-layer kernel overhead, compute and
            memory efficiency, the kernels' efficiencies, channel overlap and power cap.
        econ: prices and operating assumptions (the design's price, the cost objective).
        objective: one of `OBJECTIVES`.
        sustained: evaluate under the power cap (`sustained_cost`) instead of at
            full clock.
        budget: one of `BUDGETS`: a logic-die area (and stacks), or one dollar budget.
        stacks: one of `STACKS`: `n_stacks`, or the stack count as a design variable.
        tpot_target: the serving objective's time-per-output-token target, s (0: none).
        batches: `[batches]` the serving objective chooses among (`SERVING_BATCHES`).
    """

    workloads: Workload
    weights: jax.Array
    tech: Technology
    logic_area: jax.Array
    budget_usd: jax.Array
    n_stacks: jax.Array
    tensor_parallel: jax.Array
    system: Chip
    econ: Economics
    tpot_target: jax.Array
    batches: jax.Array
    objective: str = eqx.field(static=True)
    sustained: bool = eqx.field(static=True)
    budget: str = eqx.field(static=True, default="area")
    stacks: str = eqx.field(static=True, default="fixed")

    @property
    def n_points(self) -> int:
        return int(self.weights.shape[0])


def make_problem(
    workloads: Sequence[Workload],
    weights: Sequence[float],
    tech: Technology,
    *,
    logic_area: float = REFERENCE_DIE_AREA,
    budget_usd: float | None = None,
    n_stacks: float | str = 5,
    tensor_parallel: float = 1,
    system: Chip,
    econ: Economics,
    objective: str = "latency",
    sustained: bool = False,
    tpot_target: float | None = None,
    batches: Sequence[float] = SERVING_BATCHES,
) -> Problem:
    """A `Problem` from workloads and constants.

    Args:
        workloads, weights: the mix points and their shares of decode steps.
        tech: technology constants.
        logic_area: logic die area, m² (ignored with `budget_usd`).
        budget_usd: one dollar budget per chip instead of `logic_area`.
        n_stacks: HBM stacks per chip, or `"auto"` for a design variable.
        tensor_parallel: chips per system.
        system: the reference chip (`Problem.system`).
        econ: prices.
        objective: one of `OBJECTIVES`.
        sustained: optimise under the power cap.
        tpot_target: the serving objective's TPOT target, s (required by it).
        batches: the batches the serving objective chooses among.
    """
    if objective not in OBJECTIVES:
        raise ValueError(f"objective {objective!r}: expected one of {OBJECTIVES}")
    if objective == "serving" and not (tpot_target is not None and tpot_target > 0):
        raise ValueError(f"objective 'serving': tpot_target = {tpot_target!r}: expected a target > 0 s")
    w = jnp.asarray(weights, dtype=float)
    f = lambda x: jnp.asarray(x, dtype=float)
    auto = n_stacks == "auto"
    return Problem(
        workloads=jax.tree.map(lambda *xs: jnp.stack(xs), *workloads),
        weights=w / jnp.sum(w),
        tech=tech,
        logic_area=f(logic_area),
        budget_usd=f(budget_usd or 0.0),
        n_stacks=f(tech.max_stacks if auto else n_stacks),
        tensor_parallel=f(tensor_parallel),
        system=system,
        econ=econ,
        tpot_target=f(tpot_target or 0.0),
        batches=f(batches),
        objective=objective,
        sustained=sustained,
        budget="usd" if budget_usd is not None else "area",
        stacks="auto" if auto else "fixed",
    )


def design_of(problem: Problem, x) -> Design:
    """The `Design` a design vector (`DESIGN_VARIABLES`) gives under the problem's budget."""
    return design_point(
        x,
        problem.tech,
        problem.econ,
        logic_area=problem.logic_area,
        budget_usd=problem.budget_usd,
        n_stacks=problem.n_stacks,
        budget=problem.budget,
        stacks=problem.stacks,
    )


def design_chip(problem: Problem, x, design: Design | None = None) -> Chip:
    """The chip a design vector gives, in the problem's system: the reference chip's
    links, overheads, efficiencies (compute, memory of SRAM and DRAM, the kernels',
    the KV stream's), overlap and power cap."""
    ref = problem.system
    design = design_of(problem, x) if design is None else design
    # SRAM and DRAM reach the reference's kernel efficiencies; the PIM units reach
    # their derated bank rate (`Technology.pim_derate`: power limit and refresh).
    efficiency = jnp.stack(
        [ref.tiers.efficiency[SRAM], jnp.ones_like(ref.tiers.efficiency[PIM]), ref.tiers.efficiency[DRAM]]
    )
    chip = chip_from_design(
        design,
        problem.tech,
        compute_efficiency=ref.compute_efficiency,
        memory_efficiency=efficiency,
        kernel_overhead=ref.kernel_overhead,
        overlap=ref.overlap,
        power_cap=ref.power_cap,
    )
    return chip.replace(
        tensor_parallel=problem.tensor_parallel,
        link_bandwidth=ref.link_bandwidth,
        link_knee=ref.link_knee,
        link_bandwidth_large=ref.link_bandwidth_large,
        link_latency=ref.link_latency,
        link_latency_small=ref.link_latency_small,
        link_bandwidth_small=ref.link_bandwidth_small,
        hop_latency=ref.hop_latency,
        host_step=ref.host_step,
        host_per_sequence=ref.host_per_sequence,
        host_per_sequence_tp=ref.host_per_sequence_tp,
        # The kernel efficiencies of the system's compute die (a calibrated chip's).
        attention_efficiency=ref.attention_efficiency,
        attention_stream_efficiency=ref.attention_stream_efficiency,
        half_rate_rows=ref.half_rate_rows,
        attention_half_rate_rows=ref.attention_half_rate_rows,
        attention_kv_rereads=ref.attention_kv_rereads,
        attention_heads_per_block=ref.attention_heads_per_block,
        attention_rereads_cached=ref.attention_rereads_cached,
        serial_kernels=ref.serial_kernels,
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


def _metric(problem: Problem, cost: Cost, chip: Chip, design: Design):
    """Per-point figure of merit: s per step, J per token, or $ per token (the design's
    price: good logic die, stacks with their PIM premium, package)."""
    if problem.objective == "latency":
        return cost.seconds_per_step
    if problem.objective == "energy":
        return cost.joules_per_token
    return token_cost(cost, chip, problem.econ, price=(design.chip_usd, design.die_usd)).usd_per_token


def point_metric(problem: Problem, workload: Workload, chip: Chip, placement, design: Design, soft: bool = False):
    """One mix point's figure of merit on a design: (metric, feasible, cost).

    For the step objectives, `_metric` of the point's step. For `serving`, the point is
    served at every batch of `Problem.batches` (the point's own batch still sizes the
    system and is where `evaluate_design` checks the placement's asks against the
    capacities) and the figure is chip-seconds per token, `chips x TPOT / (batch x tokens per step)` (1 / tokens per second per chip),
    at the best batch that fits and meets the TPOT target (`serving_metric`); the cost
    is that batch's, feasible when some batch fits and meets the target.
    """
    if problem.objective != "serving":
        cost = _cost(problem, workload, chip, placement)
        return _metric(problem, cost, chip, design), cost.feasible, cost
    costs = batch_costs(problem, workload, chip, placement)
    metric, best = serving_metric(
        costs.seconds_per_step,
        problem.batches * workload.profile.accepted,
        chip.n_chips,
        costs.feasible,
        costs.overflow_bytes / jnp.sum(costs.stored_bytes, axis=-1),
        problem.tpot_target,
        soft,
    )
    # Feasible: some batch fits and meets the target (the chosen batch's cost says so).
    meets = jnp.any(costs.feasible & (costs.seconds_per_step <= problem.tpot_target))
    cost = eqx.tree_at(lambda c: c.feasible, jax.tree.map(lambda x: x[best], costs), meets)
    return metric, meets, cost


def batch_costs(problem: Problem, workload: Workload, chip: Chip, placement) -> Cost:
    """A mix point's steps at every batch of `Problem.batches` (one vmapped call), each
    at full clock or under the power cap as the problem asks (`_cost`)."""
    at = lambda b: _cost(problem, eqx.tree_at(lambda w: w.scenario.batch, workload, b), chip, placement)
    return jax.vmap(at)(problem.batches)


def serving_metric(tpot, tokens_per_step, chips, feasible, overflow, target, soft: bool = False):
    """Chip-seconds per token at the best batch that meets a TPOT target, and its index.

    Args:
        tpot: `[batches]` step time at each batch, s.
        tokens_per_step: `[batches]` tokens each step emits (batch x accepted).
        chips: chips in the system.
        feasible: `[batches]` whether the batch fits in memory.
        overflow: `[batches]` the bytes beyond DRAM's capacity, as a fraction of
            those stored (0 where the batch fits).
        target: the TPOT target, s.
        soft: a smooth figure for gradients instead of the hard minimum: a soft
            minimum (`SERVING_SHARPNESS`) of the batches' log figures, each raised by
            `SERVING_PENALTY x (h(log(tpot / target)) + log(1 + overflow))` beyond the
            target and the memory, `h` quadratic up to `SERVING_KNEE` and linear beyond
            (smooth in the design, so the gradient sees a batch come to fit or meet the
            target, and finite for a target no batch meets).

    Returns:
        (figure, index of the best batch). With no batch meeting the target the hard
        figure is inf, the soft one finite (the penalty's gradient points to faster
        designs).
    """
    per_token = chips * tpot / tokens_per_step
    ok = feasible & (tpot <= target)
    best = jnp.argmin(jnp.where(ok, per_token, jnp.inf))
    if not soft:
        return jnp.where(jnp.any(ok), per_token[best], jnp.inf), best
    late = jnp.maximum(jnp.log(tpot / target), 0.0)
    # Quadratic near the target, linear beyond the knee (same value and slope there).
    late = jnp.where(late < SERVING_KNEE, late**2, 2 * SERVING_KNEE * late - SERVING_KNEE**2)
    score = jnp.log(per_token) + SERVING_PENALTY * (late + jnp.log1p(overflow))
    soft_min = -jax.nn.logsumexp(-SERVING_SHARPNESS * score) / SERVING_SHARPNESS
    # A figure beyond float32's range would overflow the mix's sum and the loss's log.
    # A smooth cap: the gradient fades above the ceiling but never stops.
    return jnp.exp(SOFT_LOG_CEILING - jax.nn.softplus(SOFT_LOG_CEILING - soft_min)), best


@eqx.filter_jit  # called one design at a time by the polish and by users: one compile, not op by op
def evaluate_design(problem: Problem, area_logits, placements, soft: bool = False):
    """The mix objective of one design (a vector of `DESIGN_VARIABLES`): weighted mean
    of the per-point metric (`point_metric`; `soft`: the serving objective's smooth
    figure, for gradients).

    Returns:
        (objective, overflow, per-point costs), where overflow is what the placement
        asks of every tier beyond its capacity, as a fraction of the bytes stored
        (SRAM and PIM overflow spills to DRAM inside `decode_cost`, so it costs time
        there; counting the ask as well keeps a gradient on a placement that asks a
        slow, full tier for more than it holds).
    """
    design = design_of(problem, area_logits)
    chip = design_chip(problem, area_logits, design)
    metric, _, costs = jax.vmap(lambda w, p: point_metric(problem, w, chip, p, design, soft))(
        problem.workloads, placements
    )
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

    The all-DRAM design's stacks must hold the largest point, with 30% headroom: PIM
    dies hold less than standard ones, and the optimiser should be free to buy some.

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


def _usd(x: float) -> str:
    return f"${x:,.0f}"


def _check_budget_usd(
    budget_usd: float, n_stacks: int | str, stored_per_chip: float, tech: Technology, econ: Economics, what: str
) -> None:
    """One line naming the dollar budget and what the workload needs, if it cannot hold it."""
    needed = max(1, math.ceil(stored_per_chip / float(tech.stack_capacity)))
    stacks = needed if n_stacks == "auto" else int(n_stacks)
    max_stacks = int(tech.max_stacks)
    if n_stacks == "auto" and stacks > max_stacks:
        raise InputError(
            f"--budget-usd {budget_usd:g}: {what} needs {stacks} stacks per chip, more than the {max_stacks} a "
            "logic die connects; use more --chips"
        )
    stacks_usd = stacks * float(stack_cost(tech.dies_per_stack, tech.die_capacity, 0.0, econ))
    die_usd = float(die_cost(float(fixed_area(tech, stacks)) + MIN_FREE_AREA, econ))
    package = float(econ.packaging_cost)
    if budget_usd < stacks_usd + die_usd + package:
        raise InputError(
            f"--budget-usd {budget_usd:g}: {what} needs {stacks} stacks ({_usd(stacks_usd)}) + the smallest die "
            f"({_usd(die_usd)}, I/O and {stacks} HBM PHYs) + packaging ({_usd(package)}) = "
            f"{_usd(stacks_usd + die_usd + package)}"
        )


def build_problem(
    model: str = "llama-3-8b",
    *,
    mix: str | Path | None = None,
    batch: float = 1,
    context: float = 4096,
    prefix: float = 0,
    weights: str = "bf16",
    kv: str = "bf16",
    logic_area: float | None = REFERENCE_DIE_AREA,
    budget_usd: float | None = None,
    tech: str = "N5",
    n_stacks: int | str = "auto",
    chips: int | None = None,
    system: str = "h100-sxm",
    objective: str = "latency",
    power_cap: float | None = None,
    profile: str | AccessProfile = "dense",
    tpot_target: float | None = None,
) -> tuple[Problem, list[str]]:
    """The co-design problem for a model (or a mix) under a budget, from names and numbers.

    Args:
        model, batch, context, prefix, weights, kv: the one mix point, when `mix` is None
            (tokens; number formats by name).
        mix: a workload-mix TOML instead of one point.
        profile: the KV access profile of every point (a preset id, a TOML path or an
            `AccessProfile`), an input like the batch and the context.
        logic_area: logic die area budget, m² (the H100's 814 mm² by default).
        budget_usd: one dollar budget per chip (logic die, stacks, package) instead.
        tech: technology node (`data/tech.toml`); it also prices the design.
        n_stacks: HBM stacks per chip, or `"auto"` (a design variable, up to the
            stacks the die's edge and area hold).
        chips: chips per system; by default `design_system_chips` sizes it (with
            `DEFAULT_STACKS` stacks under `"auto"`).
        system: chip preset whose links, overheads and efficiencies the design shares.
        objective: one of `OBJECTIVES`.
        power_cap: W per chip: optimise the sustained figures under it (None: at full clock).
        tpot_target: the `serving` objective's time-per-output-token target, s: the
            design that serves the most tokens per second per chip within it, each
            mix point at its best batch of `SERVING_BATCHES` (the point's own batch
            is ignored). Only with that objective.

    Returns:
        (problem, the mix points' names).

    Raises:
        InputError: an unknown preset or unreadable file, an area that does not hold
            the fixed I/O and PHYs, a dollar budget that cannot buy the stacks the
            workload needs with the smallest die and the package, or a mix that no
            system of at most `MAX_SYSTEM_CHIPS` holds (each in one line).
    """
    if (objective == "serving") != (tpot_target is not None):
        raise InputError(
            f"--objective {objective} with --tpot-ms {'none' if tpot_target is None else f'{tpot_target * 1e3:g}'}: "
            "expected a TPOT target with the serving objective, and with it only"
        )
    points = mix_workloads(
        mix, model=model, batch=batch, context=context, prefix=prefix, weights=weights, kv=kv, profile=profile
    )
    technology = tech_preset(tech)
    econ = economics_preset(tech)
    auto = n_stacks == "auto"
    io, phy = float(technology.io_area), float(technology.phy_area)
    sizing = DEFAULT_STACKS if auto else int(n_stacks)
    if budget_usd is None:
        if logic_area is None:
            raise ValueError("build_problem: give logic_area or budget_usd")
        fits = math.floor((logic_area - io - MIN_FREE_AREA) / phy) if phy > 0 else int(technology.max_stacks)
        if auto:
            if fits < 1:
                raise InputError(
                    f"--logic-area-mm2 {logic_area * 1e6:g}: expected more than the fixed I/O and one HBM PHY "
                    f"({(io + phy) * 1e6:.1f} mm² at {tech})"
                )
            top = min(int(technology.max_stacks), fits)
            technology = eqx.tree_at(lambda t: t.max_stacks, technology, jnp.asarray(float(top)))
            sizing = min(sizing, top)
        elif logic_area - float(fixed_area(technology, sizing)) < MIN_FREE_AREA:
            raise InputError(
                f"--logic-area-mm2 {logic_area * 1e6:g}: expected more than the fixed I/O and {sizing} HBM PHYs "
                f"({float(fixed_area(technology, sizing)) * 1e6:.1f} mm² at {tech})"
            )
    reference = chip_info(system).chip
    if power_cap is not None:
        reference = reference.replace(power_cap=power_cap)
    stored = max(float(jnp.sum(lower_traffic(w).stored_bytes)) for _, w, _ in points)
    if budget_usd is not None and auto and chips is not None:
        # The dollars buy the stacks: `_check_budget_usd` says whether they hold the mix.
        tensor_parallel = design_system_chips(0.0, technology, sizing, chips)
    else:
        tensor_parallel = design_system_chips(stored, technology, sizing, chips)
    if budget_usd is not None:
        what = model if mix is None else "the mix"
        if tensor_parallel > 1:
            what += f" on {tensor_parallel} chips"
        _check_budget_usd(budget_usd, n_stacks, stored / tensor_parallel, technology, econ, what)
    problem = make_problem(
        [w for _, w, _ in points],
        [wt for _, _, wt in points],
        technology,
        logic_area=logic_area if logic_area is not None else RETICLE_AREA,
        budget_usd=budget_usd,
        n_stacks="auto" if auto else int(n_stacks),
        tensor_parallel=tensor_parallel,
        system=reference,
        econ=econ,
        objective=objective,
        sustained=power_cap is not None,
        tpot_target=tpot_target,
    )
    return problem, [name for name, _, _ in points]
