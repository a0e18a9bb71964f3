"""Fitting the cost model's physical parameters to a measured trace.

The parameters (`Knobs`) are the effective bandwidths of the on-chip tier (SRAM; the
last-level cache on a CPU) and of DRAM, the on-chip capacity and the sharpness of its
knee, an inner cache level (capacity, knee, speed-up), per-kernel latencies and launch
overhead, the effective FLOP rate per precision, the fraction of it that attention
kernels reach, the matmuls' Hockney n½ (`Chip.half_rate_rows`), the fraction of the
FLOP rate the cores sustain on operands streamed from DRAM, the step down in
streaming rate of kernels over small operands (`Chip.small_kernel_bytes`), the speed-up
of a single-array microbenchmark over a pass over distinct tensors, and the overlap
exponent of the channel p-norm; stored as logs (rates, sizes, times) or logits (fractions).
Which of them are trained is chosen by a filter spec (`eqx.partition` /
`eqx.combine`); the plain roofline baseline is the same model with the cache switched
off, latencies and overheads at zero, the kernel knobs neutral, a near-max overlap and
only one bandwidth and one FLOP rate trained.

Predictions reuse the core:

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
  overhead).

The loss is the mean squared log error (so every point weighs by its relative error)
plus a weak prior towards the starting point, minimised with optax (Adam from a few
starts in one `vmap`, then L-BFGS). The parameter uncertainty is the Gauss-Newton
covariance `s² H⁻¹` of the log parameters, with `H` the Hessian of half the summed
squared log residuals and `s²` their variance.
"""

from __future__ import annotations

import dataclasses
import math

import equinox as eqx
import jax
import jax.numpy as jnp
import jax.tree_util as jtu
import numpy as np
import optax

import costmodel as cm
from costmodel.io import formats


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
        small_kernel_bytes=e(knobs.log_small_kernel_bytes),
        small_kernel_efficiency=small_kernel_efficiency(knobs, working_set),
        small_kernel_knee=e(knobs.log_small_kernel_knee),
        kernel_overhead=e(knobs.log_kernel_overhead) * KERNELS_PER_LAYER,
        overlap=1.0 + e(knobs.log_overlap_m1),
    )


# --- predictions ----------------------------------------------------------------


class MicroPoints(eqx.Module):
    """Microbenchmark rows as arrays: bytes moved, working set (B), FLOPs, precision,
    whether the kernel is decode attention (1) or a stream or matmul (0), the
    distinct kernels one call runs (a GEMV chain: one per matrix), the rows sharing
    each operand element, and the operand bytes of one kernel (a matrix, the array
    of a stream, one of K and V of attention)."""

    bytes: jax.Array
    working_set: jax.Array
    flops: jax.Array
    precision: jax.Array
    attention: jax.Array
    kernels: jax.Array
    rows: jax.Array
    kernel_bytes: jax.Array


def predict_micro(knobs: Knobs, pts: MicroPoints):
    """Seconds per kernel call of each microbenchmark point (see the module docstring)."""
    chip = to_chip(knobs)
    h = hit_fraction(knobs, pts.working_set)
    # A loop over one array streams it faster than a pass over distinct tensors (a
    # GEMV chain, a decode step): the hot-array speed-up, a property of the benchmark.
    hot = 1.0 + jnp.exp(knobs.log_hot_speedup_m1) * (pts.kernels == 1)
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
    stream = cm.stream_seconds(shares * (pts.bytes / hot)[:, None], chip.tiers.replace(bandwidth=bandwidth))
    rate = chip.peak_flops[pts.precision] * jnp.where(pts.attention > 0, chip.attention_efficiency, 1.0)
    rate = rate * cm.hockney(pts.rows, chip.half_rate_rows)
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
    return parallel + serial


def decode_placement(knobs: Knobs, traffic: cm.Traffic):
    """Every class held on chip for the fraction the cache keeps of the step's bytes."""
    h = hit_fraction(knobs, jnp.sum(traffic.stored_bytes))
    row = jnp.stack([h, jnp.zeros_like(h), 1.0 - h])
    return jnp.broadcast_to(row, (len(cm.CLASSES), 3))


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


# --- data -----------------------------------------------------------------------


@dataclasses.dataclass
class Dataset:
    """Rows split by how they are predicted, with measured seconds."""

    rows: list[dict]
    micro_index: np.ndarray
    decode_index: np.ndarray
    micro: MicroPoints | None
    decode: cm.Workload | None

    @property
    def n(self) -> int:
        return len(self.rows)

    @property
    def measured(self) -> np.ndarray:
        return np.array([r["seconds"] for r in self.rows])


def _stack(trees):
    return jtu.tree_map(lambda *xs: jnp.stack(xs), *trees)


def _rows(r: dict, fmts) -> float:
    """Rows sharing each operand element of a microbenchmark (`Chip.half_rate_rows`):
    `m` of a GEMV/GEMM, query heads per KV head of attention, 1 for a stream."""
    if r["kind"] in ("gemv", "gemm"):
        return r.get("m", 1.0)
    if r["kind"] == "attention_decode" and "n_heads" in r and "n_kv_heads" in r:
        return r["n_heads"] / r["n_kv_heads"]
    return 1.0


def _kernel_bytes(r: dict, fmts) -> float:
    """Operand bytes of one kernel of a microbenchmark (`Chip.small_kernel_bytes`): the
    weight matrix of a GEMV/GEMM, one of K and V of attention, the array of a stream."""
    if r["kind"] in ("gemv", "gemm") and "k" in r and "n" in r:
        return r["k"] * r["n"] * fmts[r["dtype"]].bytes_per_element
    if r["kind"] == "attention_decode":
        return r["working_set"] / 2 / r.get("kernels", 1.0)  # K (or V) of one layer
    return r["bytes"] / r.get("kernels", 1.0)


def make_dataset(rows: list[dict]) -> Dataset:
    fmts = formats()
    micro_i = [i for i, r in enumerate(rows) if r["kind"] != "decode_step"]
    dec_i = [i for i, r in enumerate(rows) if r["kind"] == "decode_step"]
    micro = None
    if micro_i:
        sel = [rows[i] for i in micro_i]
        micro = MicroPoints(
            bytes=jnp.asarray([r["bytes"] for r in sel], dtype=float),
            working_set=jnp.asarray([r["working_set"] for r in sel], dtype=float),
            flops=jnp.asarray([r["flops"] for r in sel], dtype=float),
            precision=jnp.asarray([fmts[r["dtype"]].precision for r in sel], dtype=jnp.int32),
            attention=jnp.asarray([r["kind"] == "attention_decode" for r in sel], dtype=float),
            kernels=jnp.asarray([r.get("kernels", 1.0) for r in sel], dtype=float),
            rows=jnp.asarray([_rows(r, fmts) for r in sel], dtype=float),
            kernel_bytes=jnp.asarray([_kernel_bytes(r, fmts) for r in sel], dtype=float),
        )
    decode = None
    if dec_i:
        ws = []
        for i in dec_i:
            r = rows[i]
            model = cm.Model(
                n_layers=r["n_layers"],
                d_model=r["d_model"],
                n_heads=r["n_heads"],
                n_kv_heads=r["n_kv_heads"],
                head_dim=r["head_dim"],
                d_ff=r["d_ff"],
                vocab=r["vocab"],
                ffn_matrices=r.get("ffn_matrices", 3.0),
                tied_embeddings=r.get("tied_embeddings", 0.0),
            )
            w, k = fmts[r["weights"]], fmts[r["kv"]]
            scenario = cm.Scenario(
                batch=r["batch"],
                context=r["context"],
                weight_bytes=w.bytes_per_element,
                kv_bytes=k.bytes_per_element,
                weight_precision=w.precision,
                kv_precision=k.precision,
                activation_bytes=w.bytes_per_element,
            )
            ws.append(cm.Workload(model, scenario))
        decode = _stack(ws)
    return Dataset(rows, np.asarray(micro_i, int), np.asarray(dec_i, int), micro, decode)


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


# --- initial values and filter specs --------------------------------------------


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
        kernel_overhead=max(min(r["seconds"] for r in micro) / 2, 1e-8) if micro else 1e-6,
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
    )


def full_spec(rows: list[dict], knobs: Knobs):
    """Every knob trained, except the 16-bit FLOP ratio when no 16-bit row is measured,
    the attention efficiency when no attention kernel is, and the hot-array speed-up
    when no pass over distinct tensors (a GEMV chain) is: it would only trade places
    with the bandwidths."""
    fmts = formats()
    has16 = any(
        r["kind"] != "decode_step"
        and fmts[r["dtype"]].precision == cm.PRECISIONS.index("16")
        or r["kind"] == "decode_step"
        and fmts[r["weights"]].precision == cm.PRECISIONS.index("16")
        for r in rows
    )
    has_attention = any(r["kind"] == "attention_decode" for r in rows)
    has_chains = any(r["kind"] != "decode_step" and r.get("kernels", 1.0) > 1 for r in rows)
    spec = jtu.tree_map(lambda _: True, knobs)
    return eqx.tree_at(
        lambda k: (
            k.log_flops_16_ratio,
            k.logit_attention_efficiency,
            k.log_hot_speedup_m1,
            k.log_small_kernel_bytes,
            k.logit_small_kernel_efficiency,
            k.log_small_kernel_knee,
        ),
        spec,
        (has16, has_attention, has_chains, has_chains, has_chains, has_chains),
    )


def roofline_knobs(knobs: Knobs) -> Knobs:
    """The plain roofline as a point of the same model: no cache (1-byte capacity, no
    inner level), no latency or overhead, no hot-array speed-up, one FLOP rate for every
    precision, kernel and row count (attention efficiency and DRAM feed ~1, half-rate
    rows ~0), overlap p = 64 (~max)."""
    tiny = jnp.log(jnp.asarray(1e-15))
    one = jnp.asarray(30.0)  # logit: sigmoid(30) = 1 - 1e-13
    return eqx.tree_at(
        lambda k: (
            k.log_sram_capacity,
            k.log_knee,
            k.log_sram_latency,
            k.log_dram_latency,
            k.log_flops_16_ratio,
            k.log_kernel_overhead,
            k.log_overlap_m1,
            k.log_inner_speedup_m1,
            k.log_hot_speedup_m1,
            k.logit_attention_efficiency,
            k.log_half_rate_rows,
            k.logit_dram_feed,
            k.logit_small_kernel_efficiency,
        ),
        knobs,
        (
            jnp.asarray(0.0),
            jnp.asarray(0.0),
            tiny,
            tiny,
            jnp.asarray(0.0),
            tiny,
            jnp.log(jnp.asarray(63.0)),
            tiny,
            tiny,
            one,
            tiny,
            one,
            one,
        ),
    )


def roofline_spec(knobs: Knobs):
    spec = jtu.tree_map(lambda _: False, knobs)
    return eqx.tree_at(lambda k: (k.log_dram_bandwidth, k.log_flops_f32), spec, (True, True))


# --- fitting --------------------------------------------------------------------

STATUS = ("converged", "max_steps_reached", "nonfinite")


@dataclasses.dataclass
class Fit:
    """A fitted model: knobs, status, loss, and the log-parameter covariance."""

    knobs: Knobs
    initial: Knobs
    spec: Knobs
    status: str
    loss: float
    grad_norm: float
    steps: int
    trained: tuple[str, ...]
    log_std: dict[str, float]


def _residuals(knobs, data: Dataset, measured):
    return jnp.log(_predict(knobs, data)) - jnp.log(measured)


START_OFFSETS = {
    # knob: offsets (in log units) of the extra starts; 0 is the given start
    "log_overlap_m1": (0.0, -1.6, 0.0, -1.6),
    "log_inner_capacity": (0.0, 0.0, 1.4, 1.4),
}
"""Where the vmapped Adam starts: the given knobs, shifted by these (trained knobs only)."""


def _starts(train: Knobs) -> Knobs:
    """The trainable knobs, stacked over the starts of `START_OFFSETS`."""
    n = len(next(iter(START_OFFSETS.values())))
    stacked = jtu.tree_map(lambda x: jnp.broadcast_to(x, (n, *jnp.shape(x))), train)
    for name, offsets in START_OFFSETS.items():
        leaf = getattr(stacked, name)
        if leaf is not None:
            stacked = eqx.tree_at(lambda k, name=name: getattr(k, name), stacked, leaf + jnp.asarray(offsets))
    return stacked


def fit_knobs(
    data: Dataset,
    knobs: Knobs,
    spec: Knobs,
    *,
    adam_steps: int = 1500,
    lbfgs_steps: int = 200,
    learning_rate: float = 0.05,
    prior: float = 1e-4,
    tol: float = 1e-5,
) -> Fit:
    """Fits the trainable knobs (`spec` True) to the rows of `data`.

    Args:
        data: the training rows.
        knobs: the starting point (also the centre of a weak prior).
        spec: a `Knobs` of bools: which leaves are trained.
        adam_steps / lbfgs_steps: optimiser steps (Adam first, then L-BFGS).
        learning_rate: Adam's step size in log units.
        prior: weight of `sum (log p - log p0)**2` added to the mean squared log
            error, which keeps parameters the data cannot see near their start.
        tol: the fit is `converged` when the gradient norm of the loss is below this.

    Returns:
        A `Fit`. A fit whose loss is not finite, or whose gradient is still large,
        says so in `status` rather than raising.
    """
    measured = jnp.asarray(data.measured)
    train, static = eqx.partition(knobs, spec)
    start = train

    def loss_fn(train):
        k = eqx.combine(train, static)
        r = _residuals(k, data, measured)
        reg = sum(jnp.sum((a - b) ** 2) for a, b in zip(jtu.tree_leaves(train), jtu.tree_leaves(start)))
        return jnp.mean(r**2) + prior * reg

    value_and_grad = jax.value_and_grad(loss_fn)
    schedule = optax.cosine_decay_schedule(learning_rate, adam_steps, alpha=0.01)
    adam = optax.adam(schedule)

    @jax.jit
    def run_adam(train):
        def step(carry, _):
            p, s = carry
            loss, g = value_and_grad(p)
            u, s = adam.update(g, s, p)
            return (optax.apply_updates(p, u), s), loss

        (p, _), losses = jax.lax.scan(step, (train, adam.init(train)), None, length=adam_steps)
        return p, losses

    # Adam from several starts at once (vmapped): the knee and overlap knobs trade off
    # and one start can settle in a local minimum. The best start goes on to L-BFGS.
    if any(getattr(train, name) is not None for name in START_OFFSETS):
        ends, losses = jax.vmap(run_adam)(_starts(train))
        best = int(jnp.nanargmin(jnp.where(jnp.isfinite(losses[:, -1]), losses[:, -1], jnp.inf)))
        train = jtu.tree_map(lambda x: x[best], ends)
    else:  # none of the knobs the starts differ in is trained: one start
        train, _ = run_adam(train)
    lbfgs = optax.lbfgs()

    @jax.jit
    def run_lbfgs(train):
        vg = optax.value_and_grad_from_state(loss_fn)

        def step(carry, _):
            p, s = carry
            value, g = vg(p, state=s)
            u, s = lbfgs.update(g, s, p, value=value, grad=g, value_fn=loss_fn)
            return (optax.apply_updates(p, u), s), value

        (p, _), values = jax.lax.scan(step, (train, lbfgs.init(train)), None, length=lbfgs_steps)
        return p

    if lbfgs_steps:
        candidate = run_lbfgs(train)
        # L-BFGS polishes; keep it only if it helped and stayed finite.
        loss_jit = jax.jit(loss_fn)
        before, after = float(loss_jit(train)), float(loss_jit(candidate))
        if math.isfinite(after) and after <= before:
            train = candidate
    loss, g = jax.jit(value_and_grad)(train)
    loss = float(loss)
    gnorm = float(optax.tree.norm(g))
    if not (math.isfinite(loss) and math.isfinite(gnorm)):
        status = "nonfinite"
    elif gnorm <= tol:
        status = "converged"
    else:
        status = "max_steps_reached"
    fitted = eqx.combine(train, static)
    trained = tuple(n for n in KNOB_NAMES if bool(getattr(spec, n)))
    log_std = uncertainty(fitted, spec, data, prior) if status != "nonfinite" else {n: float("nan") for n in trained}
    return Fit(fitted, knobs, spec, status, loss, gnorm, adam_steps + lbfgs_steps, trained, log_std)


def uncertainty(knobs: Knobs, spec: Knobs, data: Dataset, prior: float = 1e-4) -> dict[str, float]:
    """Standard deviation of each trained log parameter: `diag(s² H⁻¹)`.

    `H` is the Hessian, over the trained log parameters, of the objective the fit
    minimises scaled to half the summed squared log residuals (`sum r²/2 + n prior
    |dθ|²/2`), and `s² = sum r² / (n - p)` the residual variance. A parameter the data
    cannot pin down is held only by the weak prior, so its standard deviation comes
    out large (several units of log, a factor of e^k) rather than small.
    """
    from jax.flatten_util import ravel_pytree

    measured = jnp.asarray(data.measured)
    train, static = eqx.partition(knobs, spec)
    flat, unravel = ravel_pytree(train)
    names = [n for n in KNOB_NAMES if bool(getattr(spec, n))]
    if not names:
        return {}

    def half_ssr(x):
        r = _residuals(eqx.combine(unravel(x), static), data, measured)
        return 0.5 * jnp.sum(r**2)

    n, p = data.n, len(names)
    h = np.asarray(jax.jit(jax.hessian(half_ssr))(flat), dtype=float)
    h = 0.5 * (h + h.T) + n * prior * np.eye(p)
    s2 = 2.0 * float(jax.jit(half_ssr)(flat)) / max(n - p, 1)
    try:
        cov = s2 * np.linalg.inv(h)
        var = np.diag(cov)
    except np.linalg.LinAlgError:
        var = np.full(p, np.inf)
    var = np.where(np.isfinite(var) & (var >= 0), var, np.inf)
    return {name: float(np.sqrt(x)) for name, x in zip(names, var)}


# --- metrics --------------------------------------------------------------------


def mape(pred, meas) -> float:
    pred, meas = np.asarray(pred, float), np.asarray(meas, float)
    return float(np.mean(np.abs(pred / meas - 1.0))) if len(meas) else float("nan")


def spearman(a, b) -> float:
    """Spearman rank correlation (average ranks for ties)."""
    a, b = np.asarray(a, float), np.asarray(b, float)
    if len(a) < 3:
        return float("nan")

    def ranks(x):
        order = np.argsort(x, kind="mergesort")
        r = np.empty(len(x))
        r[order] = np.arange(len(x), dtype=float)
        for v in np.unique(x):  # average ties
            m = x == v
            if m.sum() > 1:
                r[m] = r[m].mean()
        return r

    ra, rb = ranks(a), ranks(b)
    if np.std(ra) == 0 or np.std(rb) == 0:
        return float("nan")
    return float(np.corrcoef(ra, rb)[0, 1])


def parameter_table(fit: Fit) -> dict[str, dict]:
    """Fitted parameters in report units, with start value, change factor and uncertainty."""
    out = {}
    for knob, (name, unit, scale) in PARAMETERS.items():
        value = float(_from_knob(knob, getattr(fit.knobs, knob)))
        start = float(_from_knob(knob, getattr(fit.initial, knob)))
        if knob == "log_overlap_m1":
            name, value, start = "overlap_p", value + 1.0, start + 1.0
        if knob == "log_inner_speedup_m1":
            name, value, start = "inner_cache_speedup", value + 1.0, start + 1.0
        if knob == "log_hot_speedup_m1":
            name, value, start = "hot_array_speedup", value + 1.0, start + 1.0
        entry = {
            "value": value * scale,
            "unit": unit,
            "initial": start * scale,
            "change_factor": value / start,
            "trained": knob in fit.trained,
        }
        if knob in fit.log_std:
            sd = fit.log_std[knob]
            if knob.startswith("logit_"):
                sd *= 1.0 - value  # d log f = (1 - f) d logit f
            # A log-normal interval: the value is known within a factor exp(sd).
            entry["uncertainty_factor"] = float(math.exp(sd)) if math.isfinite(sd) and sd < 50 else float("inf")
            entry["determined_by_data"] = bool(math.isfinite(sd) and sd < math.log(2.0))
        out[name] = entry
    return out
