"""The calibrated parameters of one device (`Knobs`), their starting point, and the `Chip` they describe.

The parameters are the effective bandwidths of the on-chip tier (SRAM; the
last-level cache on a CPU) and of DRAM, the on-chip capacity and the sharpness of its
knee, an inner cache level (capacity, knee, speed-up), per-kernel latencies and launch
overhead, the effective FLOP rate per precision, the fraction of it that attention
kernels reach, the matmuls' Hockney n½ (`Chip.half_rate_rows`), the fraction of the
FLOP rate the cores sustain on operands streamed from DRAM, the step down in
streaming rate of kernels over small operands (`Chip.small_kernel_bytes`), the speed-up
of a single-array microbenchmark over a pass over distinct tensors, and the overlap
exponent of the channel p-norm; stored as logs (rates, sizes, times) or logits (fractions).
"""

from __future__ import annotations

import dataclasses

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

import costmodel as cm


KERNELS_PER_LAYER = 9.0
"""Kernels that stream memory in one transformer layer of a decode step: the seven
weight matmuls of a Llama-style layer (q, k, v, o, gate, up, down) and the two
attention dots over the K and V caches. Each pays the per-kernel latency and launch
overhead the microbenchmarks measure (a GEMV chain over `kernels` distinct matrices
pays it `kernels` times), so the chip file's per-layer figures are per-kernel x this:
`Chip.tiers.latency` and `Chip.kernel_overhead`, which `decode_cost` charges once per
layer per step."""

DRAM_CAPACITY = 1e13
"""DRAM capacity used while fitting (B): large enough that nothing overflows."""


class Knobs(eqx.Module):
    """Calibrated parameters of one device, all stored as natural logs of SI values.

    Attributes:
        log_sram_capacity: bytes the on-chip tier (last-level cache) holds, log B.
        log_knee: sharpness k of the capacity knee, `hit(S) = 1 / (1 + (S/C)**k)`, log 1.
        log_sram_bandwidth: effective on-chip bandwidth, log B/s.
        log_dram_bandwidth: effective DRAM bandwidth, log B/s.
        log_sram_latency: latency per kernel of the on-chip tier (its outer level), log s.
        log_dram_latency: latency per kernel of DRAM, log s.
        log_flops_f32: effective f32 FLOP rate (peak x efficiency), log FLOP/s.
        log_flops_16_ratio: 16-bit FLOP rate over the f32 one, log 1 (8- and 4-bit
            take the 16-bit rate: not measured).
        log_kernel_overhead: launch overhead per kernel, log s.
        log_overlap_m1: the channel p-norm exponent minus one, log(p - 1).
        log_inner_capacity: capacity of an inner, faster cache level (L2 on a CPU),
            log B.
        log_inner_knee: sharpness of the inner level's knee, log 1.
        log_inner_speedup_m1: how much faster the on-chip tier streams a working set
            that fits the inner level, minus one, log 1: the on-chip bandwidth at
            working set S is `B_sram * (1 + r * hit_inner(S))`.
        log_hot_speedup_m1: how much faster a kernel looping over one array streams it
            than a pass over distinct tensors does, minus one, log 1. A property of
            the single-array microbenchmarks, not of the chip: a decode step reads
            distinct tensors, so the chip file carries the distinct-tensor rates.
        logit_attention_efficiency: the FLOP rate of decode-attention kernels over that
            of matmuls (`Chip.attention_efficiency`), logit of a fraction.
        log_half_rate_rows: Hockney's n½ of the matmuls, in rows per operand element
            (`Chip.half_rate_rows`: a matmul with m rows runs at
            `m / (m + n½ (1 - 1/m))` of the FLOP rate), log 1.
        logit_dram_feed: the FLOP rate the cores sustain on operands streamed from
            DRAM over that on operands in cache (`Tiers.compute_feed` of DRAM), logit
            of a fraction.
        log_small_kernel_bytes: operand size below which kernels stream from the
            on-chip tier and DRAM at only the small-kernel efficiency
            (`Chip.small_kernel_bytes`), log B.
        logit_small_kernel_efficiency: that fraction of the bandwidth
            (`Chip.small_kernel_efficiency`), logit of a fraction.
        log_small_kernel_knee: sharpness of the step in log size
            (`Chip.small_kernel_knee`), log 1.
        log_call_overhead: fixed time per call of the measured program, whatever
            kernels it runs: one iteration of the harness's loop (a microbenchmark
            call, or one decode step), log s. On XLA:GPU a `while` loop pays a host
            round trip per iteration; the chip file carries it as `Chip.host_step`,
            the serial time per step the device does not hide
            (`costmodel.host_seconds`).

    The inner level is not a `Chip` field: the chip file carries the outer level
    (what a working set past the inner cache sees).
    """

    log_sram_capacity: jax.Array
    log_knee: jax.Array
    log_sram_bandwidth: jax.Array
    log_dram_bandwidth: jax.Array
    log_sram_latency: jax.Array
    log_dram_latency: jax.Array
    log_flops_f32: jax.Array
    log_flops_16_ratio: jax.Array
    log_kernel_overhead: jax.Array
    log_overlap_m1: jax.Array
    log_inner_capacity: jax.Array
    log_inner_knee: jax.Array
    log_inner_speedup_m1: jax.Array
    log_hot_speedup_m1: jax.Array
    logit_attention_efficiency: jax.Array
    log_half_rate_rows: jax.Array
    logit_dram_feed: jax.Array
    log_small_kernel_bytes: jax.Array
    logit_small_kernel_efficiency: jax.Array
    log_small_kernel_knee: jax.Array
    log_call_overhead: jax.Array


KNOB_NAMES = tuple(f.name for f in dataclasses.fields(Knobs))

PARAMETERS = {
    # knob: (report name, unit, scale to the unit)
    "log_sram_capacity": ("sram_capacity", "MB", 1e-6),
    "log_knee": ("knee_sharpness", "1", 1.0),
    "log_sram_bandwidth": ("sram_bandwidth", "GB/s", 1e-9),
    "log_dram_bandwidth": ("dram_bandwidth", "GB/s", 1e-9),
    "log_sram_latency": ("sram_latency", "ns", 1e9),
    "log_dram_latency": ("dram_latency", "ns", 1e9),
    "log_flops_f32": ("flops_f32", "GFLOP/s", 1e-9),
    "log_flops_16_ratio": ("flops_16_over_f32", "1", 1.0),
    "log_kernel_overhead": ("kernel_overhead", "us", 1e6),
    "log_overlap_m1": ("overlap_minus_1", "1", 1.0),
    "log_inner_capacity": ("inner_cache_capacity", "MB", 1e-6),
    "log_inner_knee": ("inner_knee_sharpness", "1", 1.0),
    "log_inner_speedup_m1": ("inner_cache_speedup_minus_1", "1", 1.0),
    "log_hot_speedup_m1": ("hot_array_speedup_minus_1", "1", 1.0),
    "logit_attention_efficiency": ("attention_efficiency", "1", 1.0),
    "log_half_rate_rows": ("half_rate_rows", "1", 1.0),
    "logit_dram_feed": ("dram_compute_feed", "1", 1.0),
    "log_small_kernel_bytes": ("small_kernel_bytes", "MB", 1e-6),
    "logit_small_kernel_efficiency": ("small_kernel_efficiency", "1", 1.0),
    "log_small_kernel_knee": ("small_kernel_knee", "1", 1.0),
    "log_call_overhead": ("call_overhead", "us", 1e6),
}


def _short(name: str) -> str:
    return name.removeprefix("log_").removeprefix("logit_")


def _to_knob(name: str, value):
    """A SI value (or fraction) as the knob stores it: a log, or a logit."""
    x = jnp.asarray(value, dtype=float)
    if name.startswith("logit_"):
        x = jnp.clip(x, 1e-6, 1.0 - 1e-6)  # a fraction of exactly 0 or 1: a finite logit (float32)
        return jnp.log(x / (1.0 - x))
    return jnp.log(x)


def _from_knob(name: str, stored):
    """The SI value (or fraction) of a stored knob."""
    return jax.nn.sigmoid(stored) if name.startswith("logit_") else jnp.exp(stored)


def make_knobs(**values) -> Knobs:
    """Knobs from SI values (not logs): names of `Knobs` without the `log_`/`logit_` prefix."""
    out = {}
    for name in KNOB_NAMES:
        key = _short(name)
        if key not in values:
            raise TypeError(f"make_knobs: missing {key!r}")
        out[name] = _to_knob(name, values[key])
    return Knobs(**out)


def knob_values(knobs: Knobs) -> dict[str, float]:
    """SI values (not logs) by name without the `log_`/`logit_` prefix."""
    return {_short(n): float(_from_knob(n, getattr(knobs, n))) for n in KNOB_NAMES}


def hit_fraction(knobs: Knobs, working_set):
    """Fraction of the bytes served by the on-chip tier for a working set of `S` bytes:
    `1 / (1 + (S/C)**k)`, a smooth knee at the capacity `C` (a sigmoid in log S)."""
    # Positive S always (validated), so log is safe.
    return jax.nn.sigmoid(-jnp.exp(knobs.log_knee) * (jnp.log(working_set) - knobs.log_sram_capacity))


def inner_hit_fraction(knobs: Knobs, working_set):
    """Fraction of the on-chip bytes the inner cache level serves: the same knee at the
    inner capacity, with its own sharpness."""
    return jax.nn.sigmoid(-jnp.exp(knobs.log_inner_knee) * (jnp.log(working_set) - knobs.log_inner_capacity))


def sram_bandwidth(knobs: Knobs, working_set=None):
    """On-chip bandwidth (B/s), faster for a working set that fits the inner cache."""
    outer = jnp.exp(knobs.log_sram_bandwidth)
    if working_set is None:
        return outer
    return outer * (1.0 + jnp.exp(knobs.log_inner_speedup_m1) * inner_hit_fraction(knobs, working_set))


def sram_latency(knobs: Knobs, working_set=None):
    """On-chip latency per kernel (s): the outer level's, none for what the inner level serves."""
    outer = jnp.exp(knobs.log_sram_latency)
    if working_set is None:
        return outer
    return outer * (1.0 - inner_hit_fraction(knobs, working_set))


def small_kernel_efficiency(knobs: Knobs, working_set=None):
    """`Chip.small_kernel_efficiency` (the fraction of the bandwidth a small kernel
    streams at): the fitted one, diluted for a working set the inner cache level
    partly serves (the step is a property of streaming past the inner level:
    `1 - (1 - e) (1 - hit_inner(S))`)."""
    e = jax.nn.sigmoid(knobs.logit_small_kernel_efficiency)
    if working_set is None:
        return e
    return 1.0 - (1.0 - e) * (1.0 - inner_hit_fraction(knobs, working_set))


def to_chip(knobs: Knobs, working_set=None) -> cm.Chip:
    """The `costmodel.Chip` the knobs describe (no PIM, one chip, efficiencies folded in).

    With `working_set` (B), the on-chip bandwidth and latency are the ones that working
    set sees (inner cache included, which also dilutes the small-kernel step); without,
    the outer level's, as in the chip file.
    """
    e = jnp.exp
    f32 = e(knobs.log_flops_f32)
    f16 = e(knobs.log_flops_f32 + knobs.log_flops_16_ratio)
    zero = jnp.zeros_like(f32)
    return cm.make_chip(
        capacity=jnp.stack([e(knobs.log_sram_capacity), zero, zero + DRAM_CAPACITY]),
        bandwidth=jnp.stack([sram_bandwidth(knobs, working_set), zero, e(knobs.log_dram_bandwidth)]),
        latency=jnp.stack([sram_latency(knobs, working_set), zero, e(knobs.log_dram_latency)]) * KERNELS_PER_LAYER,
        compute_feed=jnp.stack([zero + 1.0, zero + 1.0, jax.nn.sigmoid(knobs.logit_dram_feed)]),
        peak_flops=jnp.stack([f32, f16, f16, f16]),
        compute_efficiency=1.0,
        attention_efficiency=jax.nn.sigmoid(knobs.logit_attention_efficiency),
        half_rate_rows=e(knobs.log_half_rate_rows),
        attention_half_rate_rows=e(knobs.log_half_rate_rows),  # one n½ for every matmul of the trace
        small_kernel_bytes=e(knobs.log_small_kernel_bytes),
        small_kernel_efficiency=small_kernel_efficiency(knobs, working_set),
        small_kernel_knee=e(knobs.log_small_kernel_knee),
        kernel_overhead=e(knobs.log_kernel_overhead) * KERNELS_PER_LAYER,
        overlap=1.0 + e(knobs.log_overlap_m1),
        host_step=e(knobs.log_call_overhead),
    )


def initial_knobs(rows: list[dict]) -> Knobs:
    """A starting point read off the trace (rates from the fastest and slowest streams)."""
    micro = [r for r in rows if r["kind"] != "decode_step"]
    rate = [r["bytes"] / r["seconds"] for r in micro if r["kind"] in ("stream", "gemv")]
    big = [r["bytes"] / r["seconds"] for r in micro if r["kind"] in ("stream", "gemv") and r["working_set"] >= 256e6]
    flops = [r["flops"] / r["seconds"] for r in micro if r["kind"] == "gemm"]
    fast = float(np.percentile(rate, 90)) if rate else 100e9
    slow = float(np.median(big)) if big else fast / 3
    has_chains = any(r.get("kernels", 1.0) > 1 for r in micro)
    has_attention = any(r["kind"] == "attention_decode" for r in micro)
    return make_knobs(
        sram_capacity=32e6,
        knee=1.5,
        sram_bandwidth=fast,
        dram_bandwidth=min(slow, fast / 1.5),
        sram_latency=10e-9,
        dram_latency=100e-9,
        flops_f32=1.5 * max(flops) if flops else 100e9,
        flops_16_ratio=1.0,
        kernel_overhead=max(min(r["seconds"] for r in micro) / (4 if has_chains else 2), 1e-8) if micro else 1e-6,
        overlap_m1=1.0,
        inner_capacity=1e6,
        inner_knee=4.0,
        inner_speedup_m1=1.0,
        # Neutral where the trace cannot see them (`full_spec` leaves them untrained):
        # no hot-array speed-up without GEMV chains, attention at the matmul rate
        # without attention kernels.
        hot_speedup_m1=0.3 if has_chains else 1e-9,
        attention_efficiency=0.5 if has_attention else 1.0,
        half_rate_rows=1.0,
        dram_feed=0.5,
        small_kernel_bytes=1e6,
        small_kernel_efficiency=0.6 if has_chains else 1.0,
        small_kernel_knee=4.0,
        # The fastest call's other half (the per-kernel overhead takes a quarter);
        # neutral without GEMV chains (`full_spec` leaves it untrained), which alone
        # tell a per-call floor from a per-kernel cost.
        call_overhead=max(min(r["seconds"] for r in micro) / 4, 1e-8) if micro and has_chains else 1e-12,
    )
