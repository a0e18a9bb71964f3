"""From a die-area split to a chip, through technology constants.

The area budget pays first for fixed I/O (links, PCIe, misc) and one PHY per HBM
stack; the rest is split by a softmax of logits over compute, SRAM and PIM. Compute
area gives FLOP/s; SRAM area gives capacity and bandwidth; PIM area is bank-level
PIM logic on the DRAM dies, which makes part of the DRAM reachable by in-memory
compute and displaces normal DRAM capacity (HBM-PIM's PIM dies hold half the capacity
of a standard die, the rest of their area being PIM logic: S. Lee et al., ISCA 2021).
"""

import equinox as eqx
import jax
import jax.numpy as jnp

from .chip import DEFAULT_OVERLAP, Chip, make_chip
from .types import PerPrecision, RealScalarLike, Scalar


AREA_PARTS = ("compute", "sram", "pim")

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
        pim_flops_per_area: FLOP/s per m² of PIM logic.
        pim_bandwidth_per_area: internal B/s per m² of PIM logic.
        pim_capacity_per_area: PIM-reachable DRAM bytes per m² of PIM logic.
        pim_capacity_lost_per_area: normal DRAM bytes displaced per m² of PIM logic.
        pim_energy_per_byte: J/B of an internal PIM access.
        pim_latency: s.
        stack_capacity: bytes per HBM stack.
        stack_bandwidth: B/s per HBM stack.
        dram_energy_per_byte: J/B off-chip.
        dram_latency: s.
        phy_area: m² of die per HBM stack interface.
        io_area: fixed m² of other I/O.
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


def fixed_area(tech: Technology, n_stacks: RealScalarLike) -> Scalar:
    """Area the I/O and HBM PHYs take before any split, m²."""
    return tech.io_area + n_stacks * tech.phy_area


def area_split(budget: RealScalarLike, logits, tech: Technology, n_stacks: RealScalarLike):
    """Area per part (`AREA_PARTS`), m²: the budget left after fixed I/O, by softmax."""
    free = jnp.maximum(budget - fixed_area(tech, n_stacks), 0.0)
    return free * jax.nn.softmax(logits, axis=-1)


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


def chip_from_area(
    budget: RealScalarLike,
    logits,
    tech: Technology,
    *,
    n_stacks: RealScalarLike = 5,
    compute_efficiency: RealScalarLike = 0.8,
    memory_efficiency: RealScalarLike = 0.9,
    kernel_overhead: RealScalarLike = 0.0,
    overlap: RealScalarLike = DEFAULT_OVERLAP,
    power_cap: RealScalarLike = 1e9,
) -> Chip:
    """A chip whose compute, SRAM and PIM come from an area split.

    Args:
        budget: total die area, m².
        logits: `[3]` logits of the split over `AREA_PARTS`.
        tech: the technology constants.
        n_stacks: HBM stacks (each brings capacity, bandwidth and a PHY).
        compute_efficiency, memory_efficiency: achievable fractions of peak.
        kernel_overhead: fixed time per layer per step, s.
        overlap: p of the channel-overlap p-norm.
        power_cap: W.

    Returns:
        A differentiable `Chip` (gradients flow to `budget`, `logits` and `tech`).

    Examples:
        >>> import costmodel as cm, jax.numpy as jnp
        >>> chip = cm.chip_from_area(814e-6, jnp.zeros(3), cm.tech_preset("N5"))
        >>> bool(chip.peak_flops[1] > 0)
        True
    """
    compute, sram, pim = area_split(budget, logits, tech, n_stacks)
    pim_capacity = pim * tech.pim_capacity_per_area
    dram_capacity = jnp.maximum(
        n_stacks * tech.stack_capacity - pim * (tech.pim_capacity_per_area + tech.pim_capacity_lost_per_area),
        0.0,
    )
    dram_bandwidth = n_stacks * tech.stack_bandwidth
    return make_chip(
        capacity=jnp.stack([sram * tech.sram_capacity_per_area, pim_capacity, dram_capacity]),
        bandwidth=jnp.stack([sram * tech.sram_bandwidth_per_area, dram_bandwidth, dram_bandwidth]),
        latency=jnp.stack([tech.sram_latency, tech.pim_latency, tech.dram_latency]),
        energy_per_byte=jnp.stack([tech.sram_energy_per_byte, tech.dram_energy_per_byte, tech.dram_energy_per_byte]),
        efficiency=jnp.full((3,), memory_efficiency),
        pim_bandwidth=pim * tech.pim_bandwidth_per_area,
        pim_flops=pim * tech.pim_flops_per_area,
        pim_energy_per_byte=tech.pim_energy_per_byte,
        peak_flops=compute * tech.flops_per_area,
        compute_efficiency=compute_efficiency,
        energy_per_flop=tech.energy_per_flop,
        static_power=(compute + sram) * tech.leakage_per_area,
        power_cap=power_cap,
        kernel_overhead=kernel_overhead,
        overlap=overlap,
        area=budget,
    )
