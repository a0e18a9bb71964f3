"""The cost of one decode step: time, energy and what bounds it.

Per step, each tier serves the bytes its share of each block class is read (and
written) with; SRAM and DRAM stream them to the compute die, while the PIM tier
computes on the bytes it holds (attention where its KV sits), limited by
`max(bytes / internal bandwidth, FLOPs / PIM compute)`. The compute die does the
remaining FLOPs, at its peak times the matmul efficiency (times the attention
efficiency for the FLOPs on KV), slowed by the tier the operands stream from
(`Tiers.compute_feed`). Kernels over small operands stream from SRAM and DRAM at a
fraction of the bandwidth (`Chip.small_kernel_bytes`). The four channels (SRAM, PIM, DRAM, compute) overlap through a
p-norm (p = 1 fully serial, large p fully overlapped); serial terms (per-layer
latency, kernel overhead, all-reduces and pipeline hops) add on top.
"""

import equinox as eqx
import jax
import jax.numpy as jnp

from ._chip import DRAM, PIM, SRAM, Chip
from ._custom_types import BoolScalar, IntScalar, PerClass, PerTier, PlacementMatrix, Scalar
from ._traffic import IS_KV, Traffic, lower_traffic
from ._workload import Workload


BOUNDS = ("memory", "compute", "latency")
"""What a step is bound by: the slowest memory channel, the compute die, or the
serial latency terms."""


class Cost(eqx.Module):
    """The cost of one decode step of a whole system.

    Attributes:
        seconds_per_step: wall time of one decode step, s.
        tokens_per_second: tokens per second over the whole batch.
        tokens_per_second_per_sequence: tokens per second seen by one sequence.
        joules_per_token: energy per generated token, all chips, J.
        power: average power per chip while decoding, W.
        bound: index into `BOUNDS`.
        tier_bytes: bytes each tier serves per step (all chips), B.
        tier_seconds: time each tier's channel needs per step, s.
        tier_joules: energy of each tier's accesses per step (all chips), J.
        compute_seconds: time the compute die needs per step, s.
        compute_joules: dynamic compute energy per step (all chips), J.
        flops: FLOPs per step (all chips), FLOP.
        serial_seconds: latency, kernel overhead and communication per step, s.
        static_joules: static energy per step (all chips), J.
        stored_bytes: bytes each chip holds in each tier after spilling, B.
        overflow_bytes: bytes per chip that fit in no tier, B.
        feasible: whether everything fits.
    """

    seconds_per_step: Scalar
    tokens_per_second: Scalar
    tokens_per_second_per_sequence: Scalar
    joules_per_token: Scalar
    power: Scalar
    bound: IntScalar
    tier_bytes: PerTier
    tier_seconds: PerTier
    tier_joules: PerTier
    compute_seconds: Scalar
    compute_joules: Scalar
    flops: Scalar
    serial_seconds: Scalar
    static_joules: Scalar
    stored_bytes: PerTier
    overflow_bytes: Scalar
    feasible: BoolScalar


RATE_FLOOR = 1.0
"""Smallest rate (B/s or FLOP/s) a channel is given: a tier, PIM unit or compute die
that is absent (rate 0) then takes absurdly long for any work asked of it, rather
than none, and both the value and the gradient stay finite."""


def _time(work, rate):
    """Seconds for `work` at `rate`; zero work takes no time, even at rate 0."""
    return work / jnp.maximum(rate, RATE_FLOOR)


def _safe_div(num, den):
    # Double where: a zero denominator (an absent tier, no links) must give a zero
    # term and a finite gradient, not inf or NaN through the untaken branch.
    ok = den > 0
    return jnp.where(ok, num / jnp.where(ok, den, 1.0), 0.0)


FEED_FLOOR = 1e-6
"""Smallest `Tiers.compute_feed` used: a feed of 0 would make the FLOPs on that
tier's bytes take forever."""


P_NORM_FLOOR = 1e-30
"""Channel times below this (s) count as zero in the overlap p-norm."""


def p_norm(x, p):
    """`(sum x**p)**(1/p)` of non-negative `x` along the last axis.

    p = 1 is the sum (fully serial channels), p -> inf the max (fully overlapped).
    Computed as `c * (sum (x/c)**p)**(1/p)` with `c = max(x)` held constant under
    differentiation: the value is exact, the gradient is exact (the norm is
    homogeneous), and neither overflows for large p or underflows for tiny x.
    """
    c = jax.lax.stop_gradient(jnp.max(x, axis=-1, keepdims=True))
    # Double where: below the floor the norm is 0 with a zero, finite gradient.
    ok = c > P_NORM_FLOOR
    scaled = x / jnp.where(ok, c, 1.0)
    # And again for the power: d(s**p)/ds is computed as p * s**p / s, NaN at s = 0.
    live = ok & (scaled > 0)
    p = jnp.asarray(p)
    powered = jnp.where(live, jnp.where(live, scaled, 1.0) ** p[..., None], 0.0)
    inner = jnp.where(ok[..., 0], jnp.sum(powered, axis=-1), 1.0)
    return jnp.where(ok[..., 0], c[..., 0] * inner ** (1.0 / p), 0.0)


def hockney(rows, half_rate_rows):
    """Fraction of a matmul's FLOP rate reached with `m` rows per operand element.

    Hockney's half-performance length: a GEMM with `m` rows runs at `m / (m + m½)` of
    the rate for large `m`. The `m½` is phased in as `(1 - 1/m)`, so a GEMV (`m = 1`),
    which streams its operand through a matrix-vector kernel, runs at the full rate:
    `m / (m + m½ (1 - 1/m))`. In time, each operand element of a multi-row matmul
    costs up to `m½` rows' worth of extra work (operand packing on a CPU). 1 when
    `m½ = 0`, and 1 for a class with no rows (no FLOPs).
    """
    # Double where: an empty class has 0 rows, and 0 / (0 + 0) must not be NaN.
    ok = rows > 0
    m = jnp.where(ok, rows, 1.0)
    return jnp.where(ok, m / (m + half_rate_rows * jnp.clip(1.0 - 1.0 / m, 0.0, 1.0)), 1.0)


def class_flop_rates(workload: Workload, traffic: Traffic, chip: Chip) -> PerClass:
    """FLOP/s one chip's compute die reaches on each block class's FLOPs, operands on chip:
    peak of the class's precision x compute efficiency x attention efficiency (KV
    classes) x the Hockney factor of the class's rows per operand element."""
    s = workload.scenario
    is_kv = jnp.asarray(IS_KV)
    kernel = jnp.where(is_kv, chip.attention_efficiency, 1.0)
    # Rows sharing each operand element: 2 FLOPs per row per element read.
    element_bytes = jnp.where(is_kv, s.kv_bytes, s.weight_bytes)
    rows = traffic.intensity * element_bytes / 2.0
    peak = chip.peak_flops[traffic.precision.astype(jnp.int32)]
    return peak * chip.compute_efficiency * kernel * hockney(rows, chip.half_rate_rows)


def kernel_efficiency(kernel_bytes, chip: Chip):
    """Fraction of a tier's bandwidth a kernel over `kernel_bytes` of operand streams at.

    `1 - (1 - e) / (1 + (S / S_small)**k)`: `e` (`Chip.small_kernel_efficiency`)
    well below the step at `S_small` (`Chip.small_kernel_bytes`), 1 well above it,
    with sharpness `k` in log size (`Chip.small_kernel_knee`). 1 for every kernel
    when `S_small = 0`.
    """
    # Both sizes floored at one byte: an empty class (S = 0) or no step (S_small = 0)
    # gives a finite log and the limit (1 with no step).
    log_ratio = jnp.log(jnp.maximum(kernel_bytes, 1.0)) - jnp.log(jnp.maximum(chip.small_kernel_bytes, 1.0))
    small = jax.nn.sigmoid(-chip.small_kernel_knee * log_ratio) * (chip.small_kernel_bytes > 0)
    return 1.0 - (1.0 - chip.small_kernel_efficiency) * small


def class_stream_efficiency(traffic: Traffic, chip: Chip) -> PerClass:
    """`kernel_efficiency` of each block class: the fraction of the SRAM and DRAM
    bandwidth its kernels stream at, over one chip's share of their operands (each
    chip holds 1/tp of every matrix and cache)."""
    return kernel_efficiency(traffic.kernel_bytes / chip.tensor_parallel, chip)


def effective_feed(chip: Chip) -> PerTier:
    """`Tiers.compute_feed` as `decode_cost` applies it: floored, and on chip never below
    DRAM's (else more SRAM could slow a step)."""
    feed = jnp.maximum(chip.tiers.compute_feed, FEED_FLOOR)
    return feed.at[SRAM].set(jnp.maximum(feed[SRAM], feed[DRAM]))


def _kept(demand, capacity):
    """Fraction of a tier's demand that fits (1 when it all does)."""
    # Floored at one byte: a demand of 1e-30 B (a saturated softmax) over a capacity
    # of 0 must not give 0/0 in the gradient.
    return jnp.where(demand > capacity, capacity / jnp.maximum(demand, 1.0), 1.0)


def spill(placement: PlacementMatrix, traffic: Traffic, chip: Chip) -> PlacementMatrix:
    """What each tier really holds: SRAM and PIM keep what fits, the rest goes to DRAM.

    Capacity is feasible by construction for SRAM and PIM (technology notes,
    recommendation 3): the fraction of a tier's demand that fits is kept, uniformly
    across classes, and the overflow goes to DRAM (as `harden_placement`'s repair
    does), so gradients stay alive when a capacity binds. A hard placement that
    respects capacities is unchanged.
    """
    demand = placement.T @ traffic.stored_bytes / chip.n_chips  # [tiers], per chip
    kept = _kept(demand, chip.tiers.capacity).at[DRAM].set(1.0)
    held = placement * kept[None, :]
    return held.at[:, DRAM].add(jnp.sum(placement - held, axis=-1))


def decode_cost(workload: Workload, chip: Chip, placement: PlacementMatrix) -> Cost:
    """The time and energy of one decode step.

    Args:
        workload: the model and scenario.
        chip: the chip (and its tensor/pipeline-parallel system).
        placement: `[classes, tiers]` fractions of each block class per tier (rows
            on the simplex), soft or hard.

    Returns:
        A `Cost`. A placement that overflows SRAM or PIM spills to DRAM; one that
        overflows DRAM is reported through `overflow_bytes` and `feasible`.

    Examples:
        >>> import costmodel as cm
        >>> w = cm.Workload(cm.model_preset("llama-3-8b"), cm.Scenario(batch=1, context=4096))
        >>> chip = cm.chip_preset("h100-sxm")
        >>> cost = cm.decode_cost(w, chip, cm.policy_placement("dram", cm.lower_traffic(w), chip))
        >>> cm.BOUNDS[int(cost.bound)]
        'memory'
    """
    traffic = lower_traffic(workload)
    m, s = workload.model, workload.scenario
    tiers = chip.tiers
    n = chip.n_chips
    tp, pp = chip.tensor_parallel, chip.pipeline_parallel
    held = spill(placement, traffic, chip)

    moved = traffic.read_bytes + traffic.writes  # [classes], all chips
    tier_bytes = held.T @ moved  # [tiers], all chips
    in_pim = held[:, PIM]
    pim_flops = jnp.sum(in_pim * traffic.flops)
    # A pipeline runs its stages one after another for each token, so the step sees
    # the bytes of all stages through one tensor-parallel group's channels.
    group_bytes = tier_bytes / tp
    # Small kernels stream slower: each class's bytes in full-rate equivalents.
    slow = moved / class_stream_efficiency(traffic, chip)
    stream = _time(held.T @ slow / tp, tiers.effective_bandwidth)
    pim_mem = _time(group_bytes[PIM], chip.pim_bandwidth * tiers.efficiency[PIM])
    pim_math = _time(pim_flops / tp, chip.pim_flops)
    pim_time = p_norm(jnp.stack([pim_mem, pim_math]), chip.overlap)
    tier_seconds = stream.at[PIM].set(pim_time)

    precision = traffic.precision.astype(jnp.int32)
    peak = class_flop_rates(workload, traffic, chip)
    # The compute die does the FLOPs on the bytes SRAM and DRAM stream to it, each at
    # the rate it sustains on operands from that tier (`compute_feed`).
    feed = effective_feed(chip)
    host_work = held[:, SRAM] / feed[SRAM] + held[:, DRAM] / feed[DRAM]
    compute_seconds = jnp.sum(_time(host_work * traffic.flops / tp, peak))

    # PIM that shares the DRAM channels runs serially with normal DRAM reads.
    pim_alone = (1.0 - chip.pim_serial) * tier_seconds[PIM]
    dram_and_pim = tier_seconds[DRAM] + chip.pim_serial * tier_seconds[PIM]
    channels = jnp.stack([tier_seconds[SRAM], pim_alone, dram_and_pim, compute_seconds])
    parallel = p_norm(channels, chip.overlap)

    total_bytes = jnp.sum(tier_bytes)
    share = _safe_div(tier_bytes, total_bytes)
    latency = m.n_layers * jnp.sum(tiers.latency * share)
    overhead = m.n_layers * chip.kernel_overhead
    # Two all-reduces per layer (after attention and after the FFN), ring algorithm:
    # each chip sends 2 (tp - 1) / tp of the message.
    message = s.batch * m.d_model * s.activation_bytes
    ring = 2.0 * (tp - 1.0) / tp * _time(message, chip.link_bandwidth)
    allreduce = 2.0 * m.n_layers * (chip.link_latency * jnp.clip(tp - 1.0, 0.0, 1.0) + ring)
    hops = jnp.maximum(pp - 1.0, 0.0) * chip.hop_latency
    serial = latency + overhead + allreduce + hops
    seconds = parallel + serial

    tier_joules = tier_bytes * tiers.energy_per_byte
    tier_joules = tier_joules.at[PIM].set(tier_bytes[PIM] * chip.pim_energy_per_byte)
    compute_joules = jnp.sum(traffic.flops * chip.energy_per_flop[precision])
    static_joules = chip.static_power * n * seconds
    joules = jnp.sum(tier_joules) + compute_joules + static_joules

    stored = held.T @ traffic.stored_bytes / n
    # SRAM and PIM cannot overflow after `spill`; DRAM, the last tier, can.
    overflow = jnp.maximum(stored[DRAM] - tiers.capacity[DRAM], 0.0)
    feasible = overflow <= 1e-6 * jnp.sum(stored)

    memory_seconds = jnp.max(tier_seconds)
    bound = jnp.argmax(jnp.stack([memory_seconds, compute_seconds, serial])).astype(jnp.int32)
    return Cost(
        seconds_per_step=seconds,
        tokens_per_second=_safe_div(s.batch, seconds),
        tokens_per_second_per_sequence=_safe_div(jnp.ones_like(seconds), seconds),
        joules_per_token=_safe_div(joules, s.batch),
        power=_safe_div(joules, seconds * n),
        bound=bound,
        tier_bytes=tier_bytes,
        tier_seconds=tier_seconds,
        tier_joules=tier_joules,
        compute_seconds=compute_seconds,
        compute_joules=compute_joules,
        flops=jnp.sum(traffic.flops),
        serial_seconds=serial,
        static_joules=static_joules,
        stored_bytes=stored,
        overflow_bytes=overflow,
        feasible=feasible,
    )
