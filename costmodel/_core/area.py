"""From a design (a logic die and DRAM stacks) to a chip, through technology constants.

Two dies, two budgets, one price (`chip_from_design`, the one formula from an area
split to a chip: what co-design optimises, the sweep's area mode sweeps and
`explain`'s area designs differentiate):

- the **logic die** (area in m² at a logic node) pays for fixed I/O, one HBM PHY per
  stack, and compute and SRAM (a softmax over the two);
- the **DRAM stacks** (a count, continuous while optimising) each hold `dies_per_stack`
  dies, of which a share ρ are PIM dies: a PIM die, in a DRAM process, holds less
  capacity (its PIM logic takes cell area) and gives its banks' internal bandwidth
  and FLOP/s to the PIM tier; the PIM logic is DRAM-process area on the DRAM dies,
  never charged to the logic die (HBM-PIM's PIM dies hold half the capacity of a
  standard die, the rest of their area being PIM logic: S. Lee et al., ISCA 2021);
- **one price**: good logic die + package + stacks (`costmodel._core.economics`).

A design is a vector of logits (`DESIGN_VARIABLES`, `design_point`), or readable
shares and counts (`design_from_split`: a logic-die area, the SRAM share of its free
area, a stack count and a PIM share, mapped onto the logits by `design_logits`).
"""

import equinox as eqx
import jax
import jax.numpy as jnp

from .chip import DEFAULT_OVERLAP, Chip, make_chip
from .economics import Economics, die_area_for_cost, die_cost, stack_cost
from .types import PerPrecision, RealScalarLike, Scalar


DESIGN_VARIABLES = ("compute", "sram", "pim_share", "stacks", "die_share")
"""The entries of a design vector (`chip_from_design`), all unconstrained reals:
logits of the compute/SRAM split of the logic die's free area; the logit of the PIM
share ρ of the DRAM dies; the logit of the stack count within `[1, max_stacks]`
(with `stacks="auto"` under an area budget); the logit of the logic die's share of
the dollars left after packaging (under a dollar budget)."""

MIN_FREE_AREA = 1e-6
"""Least logic-die area left for compute and SRAM, m² (1 mm²): a design whose die
cannot hold its I/O and PHYs keeps this sliver (and decodes very slowly), so its
objective and gradient stay finite; `Design.logic_fits` flags it."""

REFERENCE_DIE_AREA = 814e-6
"""The default die-area budget, m²: the H100's GH100 die, 814 mm² (NVIDIA H100 Tensor
Core GPU Architecture whitepaper, 2022), about the reticle limit of one die."""


class Technology(eqx.Module):
    """Technology constants of one process node, with its memory and packaging (SI).

    Attributes:
        flops_per_area: dense FLOP/s per m² of compute area, per precision class.
        energy_per_flop: dynamic J/FLOP per precision class.
        sram_capacity_per_area: B/m² of scratchpad SRAM.
        sram_bandwidth_per_area: B/s per m² of SRAM.
        sram_energy_per_byte: J/B read from SRAM.
        sram_latency: s.
        leakage_per_area: static W/m² of logic and SRAM.
        pim_flops_per_area: FLOP/s per m² of PIM logic (the tech file's per-area
            PIM figures; no chip is built from them since the single-budget model
            left: a designed chip's PIM comes from its PIM dies' banks).
        pim_bandwidth_per_area: internal B/s per m² of PIM logic (likewise).
        pim_capacity_per_area: PIM-reachable DRAM bytes per m² of PIM logic (likewise).
        pim_capacity_lost_per_area: normal DRAM bytes displaced per m² of PIM logic
            (likewise).
        pim_energy_per_byte: J/B of an internal PIM access.
        pim_latency: s.
        stack_capacity: bytes per HBM stack (`dies_per_stack` × `die_capacity`).
        stack_bandwidth: B/s per HBM stack.
        dram_energy_per_byte: J/B off-chip.
        dram_latency: s.
        phy_area: m² of die per HBM stack interface.
        io_area: fixed m² of other I/O.
        dies_per_stack: DRAM dies per HBM stack.
        die_capacity: bytes of a standard DRAM die.
        pim_capacity_lost: fraction of a die's capacity a PIM die gives to its logic.
        pim_banks_per_die: banks of a DRAM die, each with its PIM unit.
        pim_bank_bandwidth: internal B/s of one bank's PIM unit.
        pim_bank_flops: FLOP/s of one bank's PIM unit.
        pim_derate: fraction of the banks' rate reached (HBM power limit, refresh).
        pim_energy_per_flop: J/FLOP of the PIM ALUs.
        pim_logic_area: m² of PIM logic per PIM die, in the DRAM process.
        pim_serial: `Chip.pim_serial` of a designed chip.
        pim_softmax: `Chip.pim_softmax` of a designed chip.
        pim_pipelined: `Chip.pim_pipelined` of a designed chip.
        max_stacks: most HBM stacks one logic die connects.
    """

    flops_per_area: PerPrecision
    energy_per_flop: PerPrecision
    sram_capacity_per_area: Scalar
    sram_bandwidth_per_area: Scalar
    sram_energy_per_byte: Scalar
    sram_latency: Scalar
    leakage_per_area: Scalar
    pim_flops_per_area: Scalar
    pim_bandwidth_per_area: Scalar
    pim_capacity_per_area: Scalar
    pim_capacity_lost_per_area: Scalar
    pim_energy_per_byte: Scalar
    pim_latency: Scalar
    stack_capacity: Scalar
    stack_bandwidth: Scalar
    dram_energy_per_byte: Scalar
    dram_latency: Scalar
    phy_area: Scalar
    io_area: Scalar
    dies_per_stack: Scalar
    die_capacity: Scalar
    pim_capacity_lost: Scalar
    pim_banks_per_die: Scalar
    pim_bank_bandwidth: Scalar
    pim_bank_flops: Scalar
    pim_derate: Scalar
    pim_energy_per_flop: Scalar
    pim_logic_area: Scalar
    pim_serial: Scalar
    pim_softmax: Scalar
    pim_pipelined: Scalar
    max_stacks: Scalar


def fixed_area(tech: Technology, n_stacks: RealScalarLike) -> Scalar:
    """Area the I/O and HBM PHYs take before any split, m²."""
    return tech.io_area + n_stacks * tech.phy_area


def area_logits(parts):
    """Logits whose softmax gives back `parts` (areas or area fractions) exactly.

    The softmax is scale-invariant, so areas and fractions give the same split. An
    empty part gets a logit of -inf: exactly no area, not a sliver.
    """
    parts = jnp.asarray(parts, dtype=float)
    # Double where: log(0) is -inf with an infinite derivative; the empty part's logit
    # is the constant -inf instead, with a zero gradient, and softmax maps it to 0.
    ok = parts > 0
    return jnp.where(ok, jnp.log(jnp.where(ok, parts, 1.0)), -jnp.inf)


# --- two dies, two budgets, one price ----------------------------------------------------


class Design(eqx.Module):
    """A co-designed chip's physical description and price (SI units, USD).

    Attributes:
        logic_area: logic die area, m².
        compute_area, sram_area: the two free parts of the logic die, m².
        fixed_area: I/O and HBM PHYs on the logic die, m².
        stacks: HBM stacks (continuous while optimising).
        pim_share: fraction ρ of each stack's DRAM dies that are PIM dies.
        pim_dies: PIM dies per chip.
        pim_logic_area: PIM logic on the DRAM dies, m² of DRAM process (not on the
            logic die, not charged to it).
        die_usd: price of the good logic die, USD.
        stacks_usd: price of the stacks, PIM premium included, USD.
        packaging_usd: package, USD.
        logic_fits: whether the logic die holds its I/O and PHYs with at least
            `MIN_FREE_AREA` to spare.
    """

    logic_area: Scalar
    compute_area: Scalar
    sram_area: Scalar
    fixed_area: Scalar
    stacks: Scalar
    pim_share: Scalar
    pim_dies: Scalar
    pim_logic_area: Scalar
    die_usd: Scalar
    stacks_usd: Scalar
    packaging_usd: Scalar
    logic_fits: jax.Array

    @property
    def chip_usd(self) -> Scalar:
        """Price of one chip: good logic die + stacks + package, USD."""
        return self.die_usd + self.stacks_usd + self.packaging_usd


def stacks_of(x, tech: Technology) -> Scalar:
    """The stack count a design vector's `stacks` logit gives: `1 + (max − 1)·σ`."""
    return 1.0 + (tech.max_stacks - 1.0) * jax.nn.sigmoid(x[..., 3])


def design_point(
    x,
    tech: Technology,
    econ: Economics,
    *,
    logic_area: RealScalarLike = 0.0,
    budget_usd: RealScalarLike = 0.0,
    n_stacks: RealScalarLike = 5.0,
    budget: str = "area",
    stacks: str = "fixed",
) -> Design:
    """The design a vector of `DESIGN_VARIABLES` gives under a budget.

    Args:
        x: `[5]` design vector (`DESIGN_VARIABLES`).
        tech: technology constants.
        econ: prices (the die's wafer and yield, the stacks' $/B and PIM premium).
        logic_area: the logic die's area, m² (with `budget="area"`).
        budget_usd: dollars per chip for die, stacks and package (with `budget="usd"`).
        n_stacks: the stack count (with `stacks="fixed"`).
        budget: `"area"` (a logic-die area and a stack count) or `"usd"` (one dollar
            budget: the logic die gets a sigmoid share of what packaging leaves, its
            area from those dollars by inverting the die price, and the stacks the
            rest; with a fixed stack count the die gets what they leave).
        stacks: `"fixed"` (`n_stacks`) or `"auto"` (a design variable).

    Returns:
        A `Design`, differentiable in `x`, `tech`, `econ` and the budgets.
    """
    rho = jax.nn.sigmoid(x[..., 2])
    per_stack = stack_cost(tech.dies_per_stack, tech.die_capacity, rho, econ)
    packaging = econ.packaging_cost
    if budget == "area":
        n = stacks_of(x, tech) if stacks == "auto" else jnp.asarray(n_stacks, dtype=float)
        area = jnp.asarray(logic_area, dtype=float)
        die_usd = die_cost(area, econ)
    elif budget == "usd":
        rest = budget_usd - packaging
        if stacks == "auto":
            share = jax.nn.sigmoid(x[..., 4])
            die_usd = share * rest
            n = jnp.clip((1.0 - share) * rest / per_stack, 0.0, tech.max_stacks)
        else:
            n = jnp.asarray(n_stacks, dtype=float)
            die_usd = jnp.maximum(rest - n * per_stack, 0.0)
        area = die_area_for_cost(die_usd, econ)
    else:
        raise ValueError(f"budget {budget!r}: expected 'area' or 'usd'")
    fixed = fixed_area(tech, n)
    free = jnp.maximum(area - fixed, MIN_FREE_AREA)
    compute, sram = free * jax.nn.softmax(x[..., :2], axis=-1)
    pim_dies = n * tech.dies_per_stack * rho
    return Design(
        logic_area=area,
        compute_area=compute,
        sram_area=sram,
        fixed_area=fixed,
        stacks=n,
        pim_share=rho,
        pim_dies=pim_dies,
        pim_logic_area=pim_dies * tech.pim_logic_area,
        die_usd=die_usd,
        stacks_usd=n * per_stack,
        packaging_usd=packaging,
        logic_fits=area - fixed >= MIN_FREE_AREA * (1 - 1e-6),
    )


def design_logits(compute_share, pim_share, stacks, tech: Technology, econ: Economics, *, budget_usd=0.0):
    """Design vectors (`DESIGN_VARIABLES`) of given splits, PIM shares and stack counts.

    The inverse of `design_point` on its grid: compute share of the free logic area
    (SRAM the rest), PIM share ρ, stacks. Under a dollar budget (`budget_usd > 0`) the
    die share is what those stacks leave of the budget after packaging (−inf where
    they leave nothing). An end of a range (a share of 0 or 1, 1 or `max_stacks`
    stacks) gets a logit of ∓inf: exactly that value, not a sliver off it.

    Args:
        compute_share, pim_share, stacks: arrays broadcast together.
        tech, econ: the technology and prices.
        budget_usd: the dollar budget, or 0 under an area budget.

    Returns:
        `[..., 5]` design vectors.
    """
    c = jnp.asarray(compute_share, dtype=float)
    rho = jnp.asarray(pim_share, dtype=float)
    n = jnp.asarray(stacks, dtype=float)
    c, rho, n = jnp.broadcast_arrays(c, rho, n)
    split = area_logits(jnp.stack([c, 1.0 - c], axis=-1))
    stack_fraction = (n - 1.0) / jnp.maximum(tech.max_stacks - 1.0, 1e-9)
    if budget_usd:
        rest = budget_usd - econ.packaging_cost
        share = 1.0 - n * stack_cost(tech.dies_per_stack, tech.die_capacity, rho, econ) / rest
    else:
        share = jnp.full_like(c, 0.5)
    cols = [_logit(rho), _logit(jnp.clip(stack_fraction, 0.0, 1.0)), _logit(share)]
    return jnp.concatenate([split, jnp.stack(cols, axis=-1)], axis=-1)


def _logit(p):
    """`log(p / (1 − p))`, ∓inf at 0 and 1 and below 0 (constants, not traced values)."""
    inner = (p > 0) & (p < 1)
    q = jnp.where(inner, p, 0.5)
    return jnp.where(inner, jnp.log(q) - jnp.log1p(-q), jnp.where(p >= 1, jnp.inf, -jnp.inf))


def chip_from_design(
    design: Design,
    tech: Technology,
    *,
    compute_efficiency: RealScalarLike = 0.8,
    memory_efficiency: RealScalarLike = 0.9,
    kernel_overhead: RealScalarLike = 0.0,
    overlap: RealScalarLike = DEFAULT_OVERLAP,
    power_cap: RealScalarLike = 1e9,
) -> Chip:
    """The chip a `Design` gives: tiers from the logic die's SRAM and the stacks' dies.

    SRAM: the SRAM area's capacity and bandwidth. PIM: the PIM dies' capacity (what
    their logic leaves), their banks' internal bandwidth and FLOP/s (`pim_bandwidth`,
    `pim_flops`, derated), and as external bandwidth (the host's round trips) the PIM
    dies' share ρ of the stacks' channels. DRAM: the standard dies' capacity at the
    stacks' full channel bandwidth, which PIM shares (`pim_serial`: PIM and normal
    accesses do not overlap). Every stack bandwidth is counted once.

    Args:
        design: the design (`design_point`).
        tech: the technology constants.
        compute_efficiency: achievable fraction of peak FLOP/s.
        memory_efficiency: achievable fraction of each tier's bandwidth, scalar or `[3]`.
        kernel_overhead: fixed time per layer per step, s.
        overlap: p of the channel-overlap p-norm.
        power_cap: W.

    Examples:
        >>> import costmodel as cm, jax.numpy as jnp
        >>> from costmodel._core.area import chip_from_design, design_point
        >>> tech, econ = cm.tech_preset("N5"), cm.economics_preset("N5")
        >>> d = design_point(jnp.asarray([0.0, 0.0, -1.0, 0.0, 0.0]), tech, econ, logic_area=814e-6)
        >>> chip = chip_from_design(d, tech)
        >>> round(float(chip.tiers.capacity[1] + chip.tiers.capacity[2]) / 1e9, 1)  # 5 stacks, ρ = 0.27
        69.2
    """
    d = design
    dies = d.stacks * tech.dies_per_stack
    pim_banks = dies * d.pim_share * tech.pim_banks_per_die
    sram_capacity = d.sram_area * tech.sram_capacity_per_area
    pim_capacity = dies * d.pim_share * tech.die_capacity * (1.0 - tech.pim_capacity_lost)
    dram_capacity = dies * (1.0 - d.pim_share) * tech.die_capacity
    channels = d.stacks * tech.stack_bandwidth
    return make_chip(
        capacity=jnp.stack([sram_capacity, pim_capacity, dram_capacity]),
        bandwidth=jnp.stack([d.sram_area * tech.sram_bandwidth_per_area, channels * d.pim_share, channels]),
        latency=jnp.stack([tech.sram_latency, tech.pim_latency, tech.dram_latency]),
        energy_per_byte=jnp.stack([tech.sram_energy_per_byte, tech.dram_energy_per_byte, tech.dram_energy_per_byte]),
        efficiency=jnp.broadcast_to(jnp.asarray(memory_efficiency, dtype=float), (3,)),
        pim_bandwidth=pim_banks * tech.pim_bank_bandwidth * tech.pim_derate,
        pim_flops=pim_banks * tech.pim_bank_flops * tech.pim_derate,
        pim_energy_per_byte=tech.pim_energy_per_byte,
        pim_energy_per_flop=tech.pim_energy_per_flop,
        pim_serial=tech.pim_serial,
        pim_softmax=tech.pim_softmax,
        pim_pipelined=tech.pim_pipelined,
        peak_flops=d.compute_area * tech.flops_per_area,
        compute_efficiency=compute_efficiency,
        energy_per_flop=tech.energy_per_flop,
        static_power=(d.compute_area + d.sram_area) * tech.leakage_per_area,
        power_cap=power_cap,
        kernel_overhead=kernel_overhead,
        overlap=overlap,
        area=d.logic_area,
    )


def tier_efficiency(memory_efficiency: RealScalarLike):
    """`[3]` per-tier efficiency of a designed chip: `memory_efficiency` for SRAM and
    DRAM, 1 for PIM, whose bank units reach `Technology.pim_derate` of their rate
    already (the derate is not applied twice), as co-design's chips have it."""
    m = jnp.asarray(memory_efficiency, dtype=float)
    return jnp.stack([m, jnp.ones_like(m), m])


def design_from_split(
    logic_area: RealScalarLike,
    sram_share: RealScalarLike,
    stacks: RealScalarLike,
    pim_share: RealScalarLike,
    tech: Technology,
    econ: Economics,
) -> Design:
    """The design of readable shares and counts, under an area budget with fixed stacks.

    `design_logits` maps the shares onto a design vector and `design_point` builds
    the design from it, so a split means exactly what co-design's vector means. An
    end of a range is exact: `sram_share` 0 gives no SRAM, `pim_share` 0 no PIM die.
    Everything is traced (no Python branch on a value), so it vmaps over configs.

    Args:
        logic_area: logic die area, m² (I/O, HBM PHYs, compute and SRAM).
        sram_share: share of the logic die's free area (after I/O and PHYs) that is
            SRAM, in [0, 1]; the rest is compute.
        stacks: HBM stacks (each `dies_per_stack` DRAM dies and one PHY).
        pim_share: share ρ of the DRAM dies that are PIM dies, in [0, 1] (a share
            that is not a multiple of `1 / dies_per_stack` is the continuous
            relaxation co-design optimises over).
        tech, econ: the technology and its prices.

    Returns:
        A `Design` (its `chip_usd` is the one price), differentiable in every input.

    Examples:
        >>> import costmodel as cm
        >>> from costmodel._core.area import chip_from_design, design_from_split
        >>> tech, econ = cm.tech_preset("N5"), cm.economics_preset("N5")
        >>> d = design_from_split(814e-6, 0.25, 5.0, 0.25, tech, econ)
        >>> float(d.pim_dies), round(float(d.sram_area / (d.compute_area + d.sram_area)), 6)
        (10.0, 0.25)
        >>> bool(chip_from_design(d, tech).pim_flops > 0)
        True
    """
    sram = jnp.asarray(sram_share, dtype=float)
    x = design_logits(1.0 - sram, pim_share, stacks, tech, econ)
    return design_point(x, tech, econ, logic_area=logic_area, n_stacks=stacks, budget="area", stacks="fixed")
