"""Gradient-safe numerics shared by the core: division, the overlap p-norm, rates.

Each function is total (finite value and finite gradient for every input the core
can produce, zeros and absent tiers included); the reason for each guard is in a
comment beside it.
"""

import jax
import jax.numpy as jnp


RATE_FLOOR = 1.0
"""Smallest rate (B/s or FLOP/s) a channel is given: a tier, PIM unit or compute die
that is absent (rate 0) then takes absurdly long for any work asked of it, rather
than none, and both the value and the gradient stay finite."""

P_NORM_FLOOR = 1e-30
"""Channel times below this (s) count as zero in the overlap p-norm."""


def seconds(work, rate):
    """Seconds for `work` (B or FLOP) at `rate` (B/s or FLOP/s); zero work takes no
    time, even at rate 0 (the rate is floored at `RATE_FLOOR`)."""
    return work / jnp.maximum(rate, RATE_FLOOR)


def safe_div(num, den):
    """`num / den`, and 0 where `den <= 0`.

    Double where: a zero denominator (an absent tier, no links, an unknown die area,
    no throughput) must give a zero term and a finite gradient, not inf or NaN
    through the untaken branch.
    """
    ok = den > 0
    return jnp.where(ok, num / jnp.where(ok, den, 1.0), 0.0)


def p_norm(x, p):
    """`(sum x**p)**(1/p)` of non-negative `x` along the last axis.

    p = 1 is the sum (fully serial channels), p -> inf the max (fully overlapped).
    Computed as `c * (sum (x/c)**p)**(1/p)` with `c = max(x)` held constant under
    differentiation: the value is exact, the gradient is exact (the norm is
    homogeneous), and neither overflows for large p or underflows for tiny x.
    `p` broadcasts against the batch axes of `x`.
    """
    c = jax.lax.stop_gradient(jnp.max(x, axis=-1, keepdims=True))
    # Double where: below the floor the norm is 0 with a zero, finite gradient.
    ok = c > P_NORM_FLOOR
    scaled = x / jnp.where(ok, c, 1.0)
    # And again for the power: d(s**p)/ds is computed as p * s**p / s, NaN at s = 0.
    live = ok & (scaled > 0)
    p = jnp.broadcast_to(jnp.asarray(p, x.dtype), x.shape[:-1])
    powered = jnp.where(live, jnp.where(live, scaled, 1.0) ** p[..., None], 0.0)
    inner = jnp.where(ok[..., 0], jnp.sum(powered, axis=-1), 1.0)
    return jnp.where(ok[..., 0], c[..., 0] * inner ** (1.0 / p), 0.0)
