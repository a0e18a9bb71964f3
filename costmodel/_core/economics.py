"""What a token costs: the chip's price amortised over its service life, plus energy.

A die's price comes from its area: dies per wafer `πr²/A − πd/√(2A)`, negative
binomial yield `Y = (1 + A·D0/α)^−α`, and the wafer price; a good die costs
`wafer / (dies · Y)`. To it the package adds a fixed price and the DRAM (HBM) a
price per byte. Over a `lifetime` at a `utilization` the system generates
`tokens/s · lifetime · utilization` tokens, so the capital part of a token's cost is
the system price over that count; the energy part is J/token times the price per J.

All quantities are SI (m², m, 1/m², s, J) and USD.

References:
    LLMCompass `supply_chain_model.py` (dies per wafer, negative-binomial yield with
    α = 3); technology.md worked example (814 mm² at N5, D0 0.2/cm² → Y ≈ 0.27,
    63.5 sites, ≈ $980 per good die).
"""

import equinox as eqx
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
        982
    """
    area = jnp.asarray(area, dtype=float)
    sites = dies_per_wafer(area, econ.wafer_diameter)
    good = sites * die_yield(area, econ.defect_density, econ.yield_alpha)
    wafer_area = jnp.pi * (econ.wafer_diameter / 2) ** 2
    wafer_scale = area > wafer_area / 2
    return jnp.where(wafer_scale, econ.wafer_cost, safe_div(econ.wafer_cost, good))


def chip_cost(chip: Chip, econ: Economics) -> tuple[Scalar, Scalar]:
    """(price of one chip, price of its die), USD: die + package + DRAM and PIM bytes."""
    die = die_cost(chip.area, econ)
    memory = (chip.tiers.capacity[DRAM] + chip.tiers.capacity[PIM]) * econ.dram_cost_per_byte
    package = jnp.where(chip.area > 0, econ.packaging_cost, 0.0)
    return die + package + memory, die


def token_cost(cost: Cost, chip: Chip, econ: Economics) -> TokenCost:
    """USD per generated token: amortised system price plus energy.

    Args:
        cost: the decode step's cost (peak or sustained), for the whole system.
        chip: one chip of the system (`chip.n_chips` of them).
        econ: prices and operating assumptions.

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
    chip_usd, die_usd = chip_cost(chip, econ)
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
