"""Is on-chip storage big enough for the hot part of the KV history?

Under an access profile (`costmodel.AccessProfile`) the heat buckets of the KV history
are read with different probabilities per step, so the question has a number: the
on-chip bytes that serve 50 / 90 / 99 % of a step's KV reads (the hottest buckets
first: a fractional knapsack by reads per byte stored), the share of the KV reads the
placement actually serves on chip, and the marginal value of SRAM, `d seconds / d
capacity`, from `jax.grad` through the fractional greedy placement (whose cost is
continuous and piecewise linear in the capacity). `sram_curve` gives the step time
and energy against SRAM capacity for the plot, with its knee.
"""

from __future__ import annotations

import dataclasses

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from .._core.chip import DRAM, SRAM, Chip
from .._core.cost import decode_cost
from .._core.numerics import safe_div
from .._core.placement import spill
from .._core.traffic import IS_KV, Traffic, lower_traffic
from .._core.types import PlacementMatrix
from .._core.workload import Workload
from ..evaluation import system_placement


SHARES = (0.5, 0.9, 0.99)
"""Shares of a step's KV reads the capacity needs are reported for."""

KNEE_SHARE = 0.9
"""The knee of the step-time curve: the smallest SRAM capacity that gets this share of
the whole drop in step time over the curve's range."""

CURVE_RANGE = (8e6, 2e9)
"""Default SRAM capacities per chip of `sram_curve`, B (8 MB to 2 GB)."""


def capacity_for_reads(traffic: Traffic, share) -> jax.Array:
    """Bytes (whole system) of KV that serve `share` of a step's KV reads, hottest first.

    The KV rows are taken in order of reads per byte stored; a row's reads are spread
    evenly over its bytes, so the capacity is exact for the bucketed history:
    `sum_i s_i clip((share - R_(i-1)) / r_i, 0, 1)`, with `s_i` the row's bytes, `r_i`
    its share of the reads and `R_(i-1)` the reads of the hotter rows. Rows never read
    need no capacity. `share` may be an array (one capacity per entry).
    """
    kv = jnp.asarray(IS_KV)
    stored = jnp.where(kv, traffic.stored_bytes, 0.0)
    read = jnp.where(kv, traffic.read_bytes, 0.0)
    order = jnp.argsort(-safe_div(read, stored))
    s, r = stored[order], safe_div(read[order], jnp.sum(read))
    before = jnp.cumsum(r) - r
    one = lambda f: jnp.sum(s * jnp.clip(safe_div(f - before, r), 0.0, 1.0))
    return jnp.vectorize(one)(jnp.asarray(share, stored.dtype))


def on_chip_read_share(traffic: Traffic, chip: Chip, placement: PlacementMatrix) -> jax.Array:
    """Share of a step's KV read bytes served from SRAM or PIM (after spilling)."""
    held = spill(placement, traffic, chip)
    read = jnp.where(jnp.asarray(IS_KV), traffic.read_bytes, 0.0)
    return safe_div(jnp.sum(read * (1.0 - held[:, DRAM])), jnp.sum(read))


def _with_sram(chip: Chip, capacity) -> Chip:
    return eqx.tree_at(lambda c: c.tiers.capacity, chip, chip.tiers.capacity.at[SRAM].set(capacity))


def _fill_cost(workload: Workload, chip: Chip, capacity, policy: str):
    """The cost with `capacity` bytes of SRAM per chip, filled by `policy` to the byte."""
    c = _with_sram(chip, capacity)
    return decode_cost(workload, c, system_placement(policy, lower_traffic(workload), c, whole_blocks=False))


@eqx.filter_jit
def sram_marginal(workload: Workload, chip: Chip, policy: str = "greedy") -> tuple[jax.Array, jax.Array]:
    """(d seconds per step, d joules per token) per byte of SRAM per chip, at the chip's
    capacity, with the capacity filled to the byte by `policy` (jit-compiled)."""

    def both(cap):
        cost = _fill_cost(workload, chip, cap, policy)
        return cost.seconds_per_step, cost.joules_per_token

    # One forward-mode pass gives both derivatives of a scalar input.
    cap = chip.tiers.capacity[SRAM]
    _, (seconds, joules) = jax.jvp(both, (cap,), (jnp.ones_like(cap),))
    return seconds, joules


@eqx.filter_jit
def _curve(workload: Workload, chip: Chip, capacities, policy: str):
    cost = jax.vmap(lambda cap: _fill_cost(workload, chip, cap, policy))(capacities)
    return cost.seconds_per_step, cost.joules_per_token


def knee(capacities, seconds, share: float = KNEE_SHARE) -> float:
    """The smallest capacity whose step time has fallen `share` of the way from the
    curve's first value to its lowest (the first capacity if the curve is flat)."""
    seconds = np.asarray(seconds, dtype=float)
    drop = seconds[0] - seconds.min()
    if not drop > 0:
        return float(capacities[0])
    reached = seconds <= seconds[0] - share * drop
    return float(np.asarray(capacities)[int(np.argmax(reached))])


@dataclasses.dataclass(frozen=True)
class SramCurve:
    """Step time and energy against SRAM capacity per chip (`sram_curve`)."""

    capacities: np.ndarray  # B per chip
    seconds_per_step: np.ndarray
    joules_per_token: np.ndarray
    knee: float  # B per chip
    policy: str


def sram_curve(workload: Workload, chip: Chip, capacities=None, policy: str = "greedy", points: int = 49) -> SramCurve:
    """Step time and J/token with each SRAM capacity per chip, filled to the byte by
    `policy` (one compiled, vmapped call), and the curve's knee.

    Args:
        workload: the model, scenario and access profile.
        chip: the system (its tensor/pipeline layout set).
        capacities: SRAM bytes per chip; default `points` log-spaced over `CURVE_RANGE`.
        policy: the placement that fills the SRAM (`greedy`: by reads per byte).
        points: how many default capacities.
    """
    if capacities is None:
        capacities = np.geomspace(*CURVE_RANGE, points)
    caps = jnp.asarray(np.asarray(capacities, dtype=float))
    seconds, joules = _curve(workload, chip, caps, policy)
    seconds, joules = np.asarray(seconds, dtype=float), np.asarray(joules, dtype=float)
    caps = np.asarray(caps, dtype=float)
    return SramCurve(caps, seconds, joules, knee(caps, seconds), policy)


def hot_history(workload: Workload, chip: Chip, placement: PlacementMatrix, policy: str = "greedy") -> dict:
    """The hot-history answer, JSON-ready (SI units; capacities per chip).

    Args:
        workload: the model, scenario and access profile.
        chip: the system as evaluated.
        placement: the placement evaluated (for the share of KV reads served on chip).
        policy: the placement whose SRAM fill the marginal value is taken through.

    Returns:
        `kv_read_bytes` and `kv_stored_bytes` per step (all chips); `on_chip_read_share`
        (SRAM and PIM, of the KV reads, as placed); `capacity_for_share` (KV bytes per
        chip serving each of `SHARES` of the reads, hottest first);
        `onchip_capacity_bytes_per_chip`; and `marginal_seconds_per_byte` and
        `marginal_joules_per_token_per_byte` (of one more byte of SRAM per chip,
        filled by `policy`).
    """
    traffic = lower_traffic(workload)
    kv = np.asarray(IS_KV)
    n = float(chip.n_chips)
    caps = np.asarray(capacity_for_reads(traffic, jnp.asarray(SHARES)), dtype=float) / n
    ds, dj = sram_marginal(workload, chip, policy)
    capacity = np.asarray(chip.tiers.capacity, dtype=float)
    return {
        "kv_read_bytes": float(np.asarray(traffic.read_bytes)[kv].sum()),
        "kv_stored_bytes": float(np.asarray(traffic.stored_bytes)[kv].sum()),
        "on_chip_read_share": float(on_chip_read_share(traffic, chip, placement)),
        "capacity_for_share": {f"{s:g}": float(c) for s, c in zip(SHARES, caps)},
        "onchip_capacity_bytes_per_chip": float(capacity[:DRAM].sum()),
        "marginal_seconds_per_byte": float(ds),
        "marginal_joules_per_token_per_byte": float(dj),
        "marginal_policy": policy,
    }
