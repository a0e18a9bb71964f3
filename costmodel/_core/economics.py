"""What a token costs: the chip's price amortised over its service life, plus energy.

A die's price comes from its area: dies per wafer `πr²/A − πd/√(2A)`, negative
binomial yield `Y = (1 + A·D0/α)^−α`, and the wafer price; a good die costs
`wafer / (dies · Y)`. To it the package adds a fixed price and the DRAM (HBM) a
price per byte. Over a `lifetime` at a `utilization` the system generates
`tokens/s · lifetime · utilization` tokens, so the capital part of a token's cost is
the system price over that count; the energy part is J/token times the price per J.

All quantities are SI (m², m, 1/m², s, J) and USD.

A co-designed chip (`costmodel._core.area`) is priced part by part: the good logic
die, the package, and its HBM stacks, each a standard stack's capacity at the price
per byte plus a premium per PIM die (`stack_cost`); `die_area_for_cost` inverts the
die price, so a dollar budget can be turned into a die area.

References:
    LLMCompass `supply_chain_model.py` (dies per wafer, negative-binomial yield with
    α = 3). Worked example: 814 mm² at N5 (D0 0.10 /cm², TSMC at its 2020 Technology
    Symposium as reported by AnandTech, "'Better Yield on 5nm than 7nm': TSMC Update
    on Defect Rates for N5", 2020-08-25, anandtech.com/show/16028) → Y ≈ 0.49, 63.5 sites, ≈ $550
    per good die (with LLMCompass's 0.20 /cm² it was Y ≈ 0.27 and ≈ $980).
"""

import equinox as eqx
import jax
import jax.numpy as jnp

from .chip import DRAM, PIM, Chip
from .cost import Cost
from .numerics import safe_div
from .types import RealScalarLike, Scalar


class Economics(eqx.Module):
    """Prices and operating assumptions (SI units, USD).

    Attributes:
        wafer_cost: price of one processed wafer, USD.
        defect_density: D0, defects per m².
        yield_alpha: clustering parameter α of the negative-binomial yield.
        wafer_diameter: m.
        packaging_cost: package (interposer, assembly) per chip, USD.
        dram_cost_per_byte: DRAM/HBM (and PIM-DRAM) price, USD/B.
        pim_die_premium: extra price of a PIM die over a standard DRAM die of the
            same stack, USD per PIM die.
        energy_price: electricity, USD/J.
        lifetime: service life the chip is amortised over, s.
        utilization: fraction of the lifetime spent decoding, in (0, 1].
    """

    wafer_cost: Scalar
    defect_density: Scalar
    yield_alpha: Scalar
    wafer_diameter: Scalar
    packaging_cost: Scalar
    dram_cost_per_byte: Scalar
    pim_die_premium: Scalar
    energy_price: Scalar
    lifetime: Scalar
    utilization: Scalar


class TokenCost(eqx.Module):
    """The cost of one generated token and its parts (USD).

    Attributes:
        usd_per_token: total.
        die_usd_per_token: amortised good-die price.
        package_usd_per_token: amortised packaging and DRAM price.
        energy_usd_per_token: electricity.
        chip_usd: price of one chip (die + package + DRAM), USD.
        die_usd: price of one good die, USD.
    """

    usd_per_token: Scalar
    die_usd_per_token: Scalar
    package_usd_per_token: Scalar
    energy_usd_per_token: Scalar
    chip_usd: Scalar
    die_usd: Scalar

    @property
    def usd_per_million_tokens(self) -> Scalar:
        return 1e6 * self.usd_per_token


def dies_per_wafer(area: RealScalarLike, wafer_diameter: RealScalarLike) -> Scalar:
    """Gross die sites on a round wafer: `πr²/A − πd/√(2A)` (edge loss), at least 0.

    Args:
        area: die area, m².
        wafer_diameter: m.
    """
    area = jnp.asarray(area, dtype=float)
    ok = area > 0
    a = jnp.where(ok, area, 1.0)
    r = wafer_diameter / 2
    sites = jnp.pi * r**2 / a - jnp.pi * wafer_diameter / jnp.sqrt(2 * a)
    return jnp.where(ok, jnp.maximum(sites, 0.0), 0.0)


def die_yield(area: RealScalarLike, defect_density: RealScalarLike, alpha: RealScalarLike) -> Scalar:
    """Negative-binomial yield `(1 + A·D0/α)^−α`.

    Args:
        area: die area, m².
        defect_density: D0, defects per m².
        alpha: clustering parameter (3 in LLMCompass).
    """
    area, defect_density, alpha = (jnp.asarray(x) for x in (area, defect_density, alpha))
    return (1.0 + area * defect_density / alpha) ** (-alpha)


def die_cost(area: RealScalarLike, econ: Economics) -> Scalar:
    """Price of one good die, USD: `wafer / (dies per wafer · yield)`.

    A die of more than half a wafer is wafer-scale (Cerebras): the negative-binomial
    model does not apply, since such designs survive defects by redundancy; it is
    priced at one wafer (yield 1 assumed). An unknown area (0) is priced at 0.

    Examples:
        >>> from costmodel._core.economics import die_cost
        >>> from costmodel.io import economics_preset
        >>> round(float(die_cost(814e-6, economics_preset("N5"))))
        550
    """
    area = jnp.asarray(area, dtype=float)
    sites = dies_per_wafer(area, econ.wafer_diameter)
    good = sites * die_yield(area, econ.defect_density, econ.yield_alpha)
    wafer_area = jnp.pi * (econ.wafer_diameter / 2) ** 2
    wafer_scale = area > wafer_area / 2
    return jnp.where(wafer_scale, econ.wafer_cost, safe_div(econ.wafer_cost, good))


SMALLEST_DIE_AREA = 1e-6
"""Smallest die `die_area_for_cost` returns, m² (1 mm²)."""

RETICLE_AREA = 858e-6
"""Largest die one exposure prints, m²: the 26 mm x 33 mm reticle field of today's
scanners (ASML NXT/NXE full field), so the largest a single logic die can be."""

_BISECTION_STEPS = 60
"""Bisection steps in log area: 60 halvings of ln(858) ≈ 6.8 leave < 1e-17 of relative error."""


@jax.custom_jvp
def die_area_for_cost(usd: RealScalarLike, econ: Economics) -> Scalar:
    """The die area whose good die costs `usd` (the inverse of `die_cost`), m².

    `die_cost` rises monotonically with the area (fewer sites, lower yield), so the
    inverse is found by bisection in log area between `SMALLEST_DIE_AREA` and
    `RETICLE_AREA`, and clamped there: dollars beyond a reticle-size die buy no more
    die. Its derivative is the implicit function's, `dA = (dusd − ∂c/∂econ · decon) /
    (∂c/∂A)` (zero where clamped), not the bisection's.

    Args:
        usd: dollars for one good die.
        econ: prices (wafer cost, defect density, yield clustering, wafer diameter).

    Examples:
        >>> from costmodel._core.economics import die_area_for_cost, die_cost
        >>> from costmodel.io import economics_preset
        >>> econ = economics_preset("N5")
        >>> round(float(die_area_for_cost(die_cost(600e-6, econ), econ)) * 1e6, 3)
        600.0
    """
    usd = jnp.asarray(usd, dtype=float)
    lo = jnp.log(jnp.asarray(SMALLEST_DIE_AREA, usd.dtype))
    hi = jnp.log(jnp.asarray(RETICLE_AREA, usd.dtype))

    def body(_, bounds):
        lo, hi = bounds
        mid = (lo + hi) / 2
        low = die_cost(jnp.exp(mid), econ) < usd
        return jnp.where(low, mid, lo), jnp.where(low, hi, mid)

    lo, hi = jax.lax.fori_loop(0, _BISECTION_STEPS, body, (lo, hi))
    return jnp.exp((lo + hi) / 2)


@die_area_for_cost.defjvp
def _die_area_for_cost_jvp(primals, tangents):
    usd, econ = primals
    usd_dot, econ_dot = tangents
    area = die_area_for_cost(usd, econ)
    # The implicit function theorem on die_cost(area, econ) = usd.
    _, dc_da = jax.jvp(lambda a: die_cost(a, econ), (area,), (jnp.ones_like(area),))
    _, dc_de = jax.jvp(lambda e: die_cost(area, e), (econ,), (econ_dot,))
    # Clamped at either end, or a flat price: the area does not move.
    inside = (area > SMALLEST_DIE_AREA * (1 + 1e-6)) & (area < RETICLE_AREA * (1 - 1e-6)) & (dc_da > 0)
    area_dot = jnp.where(inside, (usd_dot - dc_de) / jnp.where(inside, dc_da, 1.0), 0.0)
    return area, area_dot


def stack_cost(dies: RealScalarLike, die_capacity: RealScalarLike, pim_share: RealScalarLike, econ: Economics):
    """Price of one HBM stack, USD: its standard capacity at the HBM price per byte,
    plus the PIM premium for each PIM die.

    A PIM die is the same silicon as a standard die with part of its cell area given
    to PIM logic, so its capacity is paid in full (what PIM displaces is lost, not
    refunded) and its logic on top.

    Args:
        dies: DRAM dies per stack (8 for an 8-high HBM3 stack).
        die_capacity: bytes of a standard die.
        pim_share: fraction of the dies that are PIM dies, in [0, 1].
        econ: `dram_cost_per_byte` and `pim_die_premium`.
    """
    return dies * (die_capacity * econ.dram_cost_per_byte + pim_share * econ.pim_die_premium)


def chip_cost(chip: Chip, econ: Economics) -> tuple[Scalar, Scalar]:
    """(price of one chip, price of its die), USD: die + package + DRAM and PIM bytes."""
    die = die_cost(chip.area, econ)
    memory = (chip.tiers.capacity[DRAM] + chip.tiers.capacity[PIM]) * econ.dram_cost_per_byte
    package = jnp.where(chip.area > 0, econ.packaging_cost, 0.0)
    return die + package + memory, die


def token_cost(cost: Cost, chip: Chip, econ: Economics, price: tuple | None = None) -> TokenCost:
    """USD per generated token: amortised system price plus energy.

    Args:
        cost: the decode step's cost (peak or sustained), for the whole system.
        chip: one chip of the system (`chip.n_chips` of them).
        econ: prices and operating assumptions.
        price: (price of one chip, price of its die), USD, where the chip's price is
            known part by part (a co-designed chip's stacks and PIM dies); by default
            `chip_cost`.

    Returns:
        A `TokenCost`. A chip of unknown area (0) has no die or package price, so
        its token cost is DRAM and energy only.

    Examples:
        >>> import costmodel as cm
        >>> from costmodel._core.economics import token_cost
        >>> from costmodel.io import economics_preset
        >>> e = cm.evaluate("llama-3-8b", "h100-sxm", batch=1, context=4096)
        >>> t = token_cost(e.cost, e.chip, economics_preset("N5"))
        >>> 0.05 < float(t.usd_per_million_tokens) < 2  # manufacturing cost, no margin
        True
    """
    chip_usd, die_usd = chip_cost(chip, econ) if price is None else price
    tokens = cost.tokens_per_second * econ.lifetime * econ.utilization
    per_token = safe_div(chip.n_chips, tokens)
    die = die_usd * per_token
    package = (chip_usd - die_usd) * per_token
    energy = cost.joules_per_token * econ.energy_price
    return TokenCost(
        usd_per_token=die + package + energy,
        die_usd_per_token=die,
        package_usd_per_token=package,
        energy_usd_per_token=energy,
        chip_usd=chip_usd,
        die_usd=die_usd,
    )
