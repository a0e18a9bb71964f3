"""Peak vs sustained: a power cap and a differentiable DVFS relation.

`decode_cost` gives the energy and time of a step at the chip's full clock ("peak"
or "performance mode"), hence its average power. Where that power exceeds
`chip.power_cap`, the chip lowers its clock until it does not ("sustained").

The DVFS relation: at a clock ratio `r = f / f_max` in the DVFS range the supply
voltage follows the clock, `V ~ f`, so the dynamic energy of one on-chip operation,
`C V^2`, scales as `r^2` and dynamic power `C V^2 f` as `r^3` when the work per
second follows the clock. The clock sets

* the compute die's peak FLOP/s (`* r`) and its energy per FLOP (`* r^2`);
* the on-chip SRAM tier's bandwidth (`* r`) and energy per byte (`* r^2`).

It does not set DRAM (or PIM-in-DRAM) bandwidth or energy per byte: the DRAM dies
and their interface run on their own clock and supply. Static power, latencies,
kernel overheads and links are held fixed (a conservative choice: leakage falls a
little with V, so the true sustained clock is slightly higher).

The sustained clock is the root of `P(r) = cap`, where `P(r)` is the step's average
power per chip at clock `r`. `P` is increasing in `r` (a faster clock moves more
energy per op and never lengthens the step), so the root is unique; it is found by
bisection in `log r`, and its gradient comes from the implicit function theorem
(`dr/dθ = -(∂P/∂θ) / (∂P/∂r)`), applied by one Newton step whose value is
discarded. Below the cap the relation is the identity (`r = 1`); across the cap it
is continuous and piecewise smooth.

References:
    Rabaey, Chandrakasan and Nikolić, *Digital Integrated Circuits*, ch. 5
    (dynamic power `a C V^2 f`); Hennessy and Patterson, *Computer Architecture*,
    6th ed., §1.5 (DVFS: power falls roughly with the cube of frequency).
"""

import equinox as eqx
import jax
import jax.numpy as jnp

from .chip import SRAM, Chip
from .cost import Cost, decode_cost
from .types import BoolScalar, PlacementMatrix, RealScalarLike, Scalar
from .workload import Workload


MIN_CLOCK = 0.1
"""Lowest clock ratio the DVFS relation goes to. Below it a chip cannot get under
its cap (static and DRAM power alone exceed it) and `Sustained.within_cap` is False."""

BISECTION_STEPS = 40
"""Bisection steps in log r over [MIN_CLOCK, 1]: 2.3 / 2^40 relative, far below f32."""


class Sustained(eqx.Module):
    """A decode step at full clock and at the clock the power cap allows.

    Attributes:
        cost: the sustained (power-capped) `Cost`.
        peak: the `Cost` at full clock (performance mode).
        clock: sustained clock ratio `f / f_max`, in [MIN_CLOCK, 1].
        within_cap: whether the sustained power is within the cap (False only when
            even `MIN_CLOCK` cannot bring it there).
    """

    cost: Cost
    peak: Cost
    clock: Scalar
    within_cap: BoolScalar

    @property
    def sustained_to_peak(self) -> Scalar:
        """Sustained tokens/s over peak tokens/s, in (0, 1]."""
        return self.peak.seconds_per_step / self.cost.seconds_per_step


def throttle(chip: Chip, clock: RealScalarLike) -> Chip:
    """The chip at clock ratio `clock`: on-chip rates `* clock`, on-chip energies `* clock**2`.

    Args:
        chip: the chip at full clock.
        clock: `f / f_max`, > 0.

    Returns:
        A `Chip` with peak FLOP/s and SRAM bandwidth scaled by `clock` and energy per
        FLOP and per SRAM byte by `clock**2` (V ~ f). DRAM and PIM are unchanged.

    Examples:
        >>> import costmodel as cm
        >>> from costmodel._core.power import throttle
        >>> chip = throttle(cm.chip_preset("h100-sxm"), 0.5)
        >>> round(float(chip.peak_flops[1]) / 1e12, 1)
        494.5
    """
    clock = jnp.asarray(clock, dtype=chip.peak_flops.dtype)
    tiers = chip.tiers
    on_chip = jnp.zeros_like(tiers.bandwidth).at[SRAM].set(1.0)
    rate = 1.0 + on_chip * (clock - 1.0)
    energy = 1.0 + on_chip * (clock**2 - 1.0)
    tiers = eqx.tree_at(
        lambda t: (t.bandwidth, t.energy_per_byte), tiers, (tiers.bandwidth * rate, tiers.energy_per_byte * energy)
    )
    return eqx.tree_at(
        lambda c: (c.tiers, c.peak_flops, c.energy_per_flop),
        chip,
        (tiers, chip.peak_flops * clock, chip.energy_per_flop * clock**2),
    )


def _power_at(workload: Workload, chip: Chip, placement: PlacementMatrix, clock) -> Scalar:
    return decode_cost(workload, throttle(chip, clock), placement).power


def sustained_cost(workload: Workload, chip: Chip, placement: PlacementMatrix) -> Sustained:
    """The cost of a decode step with the clock lowered to respect `chip.power_cap`.

    Args:
        workload: the model and scenario.
        chip: the chip at full clock; `chip.power_cap` is per chip, W.
        placement: `[classes, tiers]` placement, as for `decode_cost`.

    Returns:
        A `Sustained`: the peak and the sustained `Cost` and the clock ratio. Below the
        cap the two costs are equal and the clock is 1. The sustained power never
        exceeds the cap unless `within_cap` is False. Gradients flow through the
        clock by the implicit function theorem.

    Examples:
        >>> import costmodel as cm
        >>> w = cm.Workload(cm.model_preset("llama-3-8b"), cm.Scenario(batch=1024, context=512))
        >>> chip = cm.chip_preset("h100-sxm").replace(power_cap=300.0)
        >>> from costmodel._core.power import sustained_cost
        >>> s = sustained_cost(w, chip, cm.policy_placement("dram", cm.lower_traffic(w), chip))
        >>> bool(s.cost.power <= 300.0 * (1 + 1e-5)), bool(s.clock < 1)
        (True, True)
    """
    peak = decode_cost(workload, chip, placement)
    cap = chip.power_cap
    power = lambda r: _power_at(workload, chip, placement, r)

    # Bisection in log r on a stopped-gradient copy: the value of the root. The lower
    # end always satisfies P(lo) <= cap (when any clock does), so it is the answer.
    wl, ch, pl = jax.lax.stop_gradient((workload, chip, placement))
    cap0 = jax.lax.stop_gradient(cap)
    one = jnp.ones_like(cap0)

    def step(_, bounds):
        lo, hi = bounds
        mid = jnp.sqrt(lo * hi)
        over = _power_at(wl, ch, pl, mid) > cap0
        return jnp.where(over, lo, mid), jnp.where(over, mid, hi)

    lo, _ = jax.lax.fori_loop(0, BISECTION_STEPS, step, (MIN_CLOCK * one, one))
    capped = peak.power > cap
    root = jax.lax.stop_gradient(jnp.where(capped, lo, 1.0))

    # Implicit gradient: one Newton step r - (P(r) - cap) / P'(r) has the value ~r and
    # the derivative -(dP/dθ)/(dP/dr) at the root; keep its derivative, not its value.
    p_root, dp_dr = jax.jvp(power, (root,), (jnp.ones_like(root),))
    # Double where: below the cap (or at the floor) there is no root to differentiate.
    active = capped & (root > MIN_CLOCK * (1 + 1e-6)) & (dp_dr > 0)
    newton = root - jnp.where(active, (p_root - cap) / jnp.where(active, dp_dr, 1.0), 0.0)
    clock = root + (newton - jax.lax.stop_gradient(newton))

    sustained = decode_cost(workload, throttle(chip, clock), placement)
    within = sustained.power <= cap * (1 + 1e-5)
    return Sustained(cost=sustained, peak=peak, clock=clock, within_cap=within)
