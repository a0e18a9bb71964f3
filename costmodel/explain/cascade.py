"""A placement that responds to capacity, for capacity and area elasticities.

**Capacity and area elasticities need a placement that responds to capacity.** A
hard placement is fixed: it respects every capacity, so one more byte of SRAM
changes nothing and its elasticity is exactly 0, however much a real system would
gain by filling it. For those parameters the placement is therefore a *cascade*:
every class asks for the fast tier the chip's own policy fills (SRAM for `sram` and
`greedy`, PIM for KV under `pim_kv` and for KV that overflows SRAM under `greedy`),
each tier keeps the same fraction `min(1, capacity / demand)` of every class that
asks for it, and the rest falls to the next tier. This is `costmodel.spill`'s
uniform spill, made two-stage; it is smooth in capacity, it equals the policy's
placement wherever nothing overflows, and where something does it differs only in
which classes stay (the greedy policy keeps the most-read first), which moves the
base point by little (the record reports both). Re-running the greedy policy at a
changed capacity would give a step function of whole blocks, whose gradient is 0
almost everywhere. A `dram` chip never fills its SRAM or PIM, so their capacity
elasticities are 0, truthfully: that system does not use them.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from .._core.chip import PIM, SRAM, Chip
from .._core.traffic import IS_KV, Traffic


def _wishes(policy: str, dtype):
    """(want_sram, want_pim, kv_overflows_to_pim) of a policy, as arrays (so not static)."""
    is_kv = np.asarray(IS_KV, dtype=float)
    n = len(IS_KV)
    want_sram = np.ones(n) if policy in ("sram", "greedy") else np.zeros(n)
    want_pim = is_kv if policy == "pim_kv" else np.zeros(n)
    to_pim = 1.0 if policy == "greedy" else 0.0
    return tuple(jnp.asarray(a, dtype=dtype) for a in (want_sram, want_pim, to_pim))


def _cascade(traffic: Traffic, chip: Chip, wishes):
    want_sram, want_pim, to_pim = wishes
    is_kv = jnp.asarray(IS_KV).astype(want_sram.dtype)
    stored = traffic.stored_bytes / chip.n_chips
    cap = chip.tiers.capacity
    present = (stored > 0).astype(stored.dtype)  # empty classes stay in DRAM, as in a hard placement

    def keep(request, capacity):
        demand = jnp.sum(request * stored)
        # Double where: no overflow keeps everything (and must not divide by zero).
        ok = demand > capacity
        return jnp.where(ok, capacity / jnp.where(ok, demand, 1.0), 1.0)

    want_sram = want_sram * present
    in_sram = want_sram * keep(want_sram, cap[SRAM])
    has_pim = (cap[PIM] > 0).astype(stored.dtype)
    want_pim = present * (want_pim + to_pim * has_pim * is_kv * (want_sram - in_sram))
    in_pim = want_pim * keep(want_pim, cap[PIM])
    return jnp.stack([in_sram, in_pim, 1.0 - in_sram - in_pim], axis=-1)


def cascade_placement(traffic: Traffic, chip: Chip, policy: str):
    """A capacity-responsive placement following a policy's wishes (see module notes).

    Args:
        traffic: the workload's traffic.
        chip: the chip (its capacities bound SRAM and PIM, per chip).
        policy: one of `costmodel.POLICIES`.

    Returns:
        A `[classes, tiers]` placement, smooth in the capacities, rows on the simplex.
    """
    return _cascade(traffic, chip, _wishes(policy, traffic.stored_bytes.dtype))
