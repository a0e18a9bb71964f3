"""Predictions through the core: seconds of every microbenchmark and decode-step row.

* a `decode_step` row becomes a `costmodel.Workload` (the measured model's
  dimensions, the row's batch, context and formats) and is priced by
  `costmodel.decode_cost` on `to_chip(knobs, S)` (the on-chip bandwidth and latency
  that the step's stored bytes `S` see, inner level included), with every block class
  held in the on-chip tier for the fraction `hit(S)` that the cache keeps, the rest in
  DRAM;
* a microbenchmark row (`kernels` kernel calls moving `bytes`, `working_set`
  resident, `flops` at `m` rows per operand element) goes through the same channels:
  `hit(S)` of the bytes from the on-chip tier and the rest from DRAM (a single-array
  row, `kernels` = 1, at the hot-array speed-up; a kernel over a small operand at the
  chip's small-kernel efficiency, as `decode_cost` charges it), compute at the FLOP rate of its
  precision times the Hockney factor (times the attention efficiency for an
  attention kernel, over the DRAM feed for the operands from DRAM), combined with
  `costmodel.p_norm` at the chip's overlap, plus `kernels` x (latency + launch
  overhead), plus the fixed time of one call (the harness loop's per-iteration floor,
  which a decode step pays once per step as `Chip.host_step`).

Every channel's time is the core's (`costmodel.stream_seconds`, `compute_seconds`,
`overlapped_seconds`, `access_seconds`): a change to a channel formula reaches the fit.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

import costmodel as cm

from .data import Dataset, MicroPoints
from .knobs import Knobs, hit_fraction, small_kernel_efficiency, sram_bandwidth, sram_latency, to_chip


def predict_micro(knobs: Knobs, pts: MicroPoints):
    """Seconds per kernel call of each microbenchmark point (see the module docstring)."""
    chip = to_chip(knobs)
    h = hit_fraction(knobs, pts.working_set)
    # A loop over one array streams it faster than a pass over distinct tensors (a
    # GEMV chain, a decode step): the hot-array speed-up, a property of the benchmark.
    hot = 1.0 + jnp.where(pts.kernels == 1, jnp.exp(knobs.log_hot_speedup_m1), 0.0)
    # A small kernel streams slower, except what the inner level serves (the step
    # diluted per point, as `to_chip(knobs, S)` dilutes it for a decode step).
    diluted = chip.replace(small_kernel_efficiency=small_kernel_efficiency(knobs, pts.working_set))
    hot = hot * cm.kernel_efficiency(pts.kernel_bytes, diluted)
    # The same channels as `costmodel.decode_cost`: `hit(S)` of the bytes from the
    # on-chip tier (at the bandwidth the working set sees), the rest from DRAM.
    bandwidth = jnp.stack(
        jnp.broadcast_arrays(sram_bandwidth(knobs, pts.working_set), 0.0, chip.tiers.bandwidth[2]), -1
    )
    shares = jnp.stack([h, jnp.zeros_like(h), 1.0 - h], axis=-1)
    # Per-point tiers: the efficiencies broadcast explicitly to the points' bandwidths.
    tiers = chip.tiers.replace(bandwidth=bandwidth, efficiency=jnp.broadcast_to(chip.tiers.efficiency, bandwidth.shape))
    stream = cm.stream_seconds(shares * (pts.bytes / hot)[:, None], tiers)
    # The FLOP rate as the core forms it for a block class (`costmodel.flop_rate`).
    rate = cm.flop_rate(chip, pts.precision, pts.attention > 0, pts.rows)
    t_comp = cm.compute_seconds(pts.flops, rate, h, 1.0 - h, cm.effective_feed(chip))
    parallel = cm.overlapped_seconds(stream[:, 0], stream[:, 1], stream[:, 2], t_comp, chip)
    # Latency per kernel call (the core's per-layer latency, one kernel at a time).
    latency = jnp.stack(
        [
            sram_latency(knobs, pts.working_set),
            jnp.zeros_like(h),
            jnp.broadcast_to(jnp.exp(knobs.log_dram_latency), h.shape),
        ],
        -1,
    )
    serial = cm.access_seconds(pts.kernels, shares, latency, jnp.exp(knobs.log_kernel_overhead))
    # Once per call, whatever it runs: the harness's per-iteration floor, which a
    # decode step pays once per step (`Chip.host_step`, through `decode_cost`).
    return parallel + serial + chip.host_step


def decode_placement(knobs: Knobs, traffic: cm.Traffic):
    """Every class held on chip for the fraction the cache keeps of the step's bytes."""
    h = hit_fraction(knobs, jnp.sum(traffic.stored_bytes))
    row = jnp.stack([h, jnp.zeros_like(h), 1.0 - h])
    return jnp.broadcast_to(row, (len(cm.ROWS), 3))


def predict_decode(knobs: Knobs, workloads: cm.Workload, hard: bool = False):
    """Seconds per decode step of each (stacked) workload, by `costmodel.decode_cost`.

    With `hard`, the placement is the chip file's own policy ("sram": fill the on-chip
    tier, spill the rest to DRAM) on the chip file's parameters (no inner cache), i.e.
    what `costmodel evaluate --chip` computes.
    """

    def one(w):
        traffic = cm.lower_traffic(w)
        if hard:
            chip = to_chip(knobs)
            placement = cm.policy_placement("sram", traffic, chip)
        else:
            chip = to_chip(knobs, jnp.sum(traffic.stored_bytes))
            placement = decode_placement(knobs, traffic)
        return cm.decode_cost(w, chip, placement).seconds_per_step

    return jax.vmap(one)(workloads)


def predict(knobs: Knobs, data: Dataset, hard: bool = False) -> jax.Array:
    """Predicted seconds for every row of `data`, in row order (jit-compiled)."""
    return jax.jit(lambda k: _predict(k, data, hard))(knobs)


def _predict(knobs: Knobs, data: Dataset, hard: bool = False) -> jax.Array:
    out = jnp.zeros((data.n,))
    if data.micro is not None:
        out = out.at[data.micro_index].set(predict_micro(knobs, data.micro))
    if data.decode is not None:
        out = out.at[data.decode_index].set(predict_decode(knobs, data.decode, hard))
    return out
