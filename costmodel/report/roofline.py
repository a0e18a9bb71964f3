"""The roofline plot of one evaluation (`evaluate --plot`): per block class and for the whole step.

Every rate on it comes from the core's channel functions (`costmodel._core.channels`),
the ones `decode_cost` times a step with, so a change to how a channel is timed moves
the plot with it.
"""

from __future__ import annotations

from pathlib import Path

import jax.numpy as jnp
import numpy as np

from .._core import channels as ch
from .._core.chip import DRAM, PIM, SRAM, TIERS, Chip
from .._core.cost import BOUNDS
from .._core.numerics import safe_div
from .._core.traffic import CLASS_IS_KV, CLASSES, class_sum, lower_traffic
from .._core.types import RealScalarLike
from .._core.workload import F32
from ..evaluation import Evaluation


def attainable_flops(
    chip: Chip,
    held,
    moved,
    flops,
    rate,
    stream_efficiency: RealScalarLike = 1.0,
    unpack: RealScalarLike = 0.0,
    cached: RealScalarLike = 0.0,
    kv_unpack: RealScalarLike = 0.0,
    in_flight: RealScalarLike | None = None,
):
    """FLOP/s one tensor-parallel group reaches on `flops` FLOPs over `moved` bytes, timed
    by the channels as `decode_cost` times a step (no serial terms; one difference: here
    each class's stream takes its own unpacking time, `unpack`, where `decode_cost`
    spreads the weights' over every byte DRAM streams, K/V included).

    Args:
        chip: the chip, with its tensor-parallel group size set.
        held: `[..., tiers]` fractions of the bytes (and of the FLOPs) each tier holds.
        moved: bytes read and written, B (all chips of the group together).
        flops: FLOPs on those bytes, FLOP.
        rate: FLOP/s one chip's compute die reaches on them with operands on chip
            (`class_flop_rates`, or peak x compute efficiency for a roof), FLOP/s.
        stream_efficiency: fraction of SRAM and DRAM bandwidth the kernels stream at
            (`class_stream_efficiency`).
        unpack: the chip's ALU seconds per byte of these bytes that DRAM streams, to
            unpack quantised weights (`dequant_seconds` of one byte), s/B.
        cached: K/V re-reads the on-chip cache serves per full-rate byte streamed from
            SRAM and DRAM (`class_cached_rereads`), streamed at the SRAM tier's rate.
        kv_unpack: ALU seconds per byte SRAM and DRAM stream spent on the compute
            lanes: the attention kernels' on K/V, every read unpacked
            (`kv_dequant_seconds` of one byte), or a weight kernel's whose matmuls run on
            the FP32 lanes (GPTQ's: `decode_cost`), s/B.
        in_flight: bytes the kernels keep in flight on one chip (`class_in_flight`;
            0: no bound), B; by default the weights' kernels' (`chip_in_flight`).

    Returns:
        `flops` over the overlapped time of the SRAM, PIM, DRAM and compute channels, FLOP/s.
    """

    def one(held, moved, flops, rate, stream_efficiency, unpack, cached, kv_unpack, in_flight):  # held [tiers]
        tp = chip.tensor_parallel
        busy = unpack * held[DRAM] * moved / tp
        full = held * (moved / stream_efficiency / tp)
        full = full.at[SRAM].add((full[SRAM] + full[DRAM]) * cached)
        stream = ch.stream_seconds(full, chip.tiers, in_flight, busy)
        pim = ch.pim_seconds(held[PIM] * moved / tp, held[PIM] * flops / tp, chip)
        compute = ch.compute_seconds(flops, rate, held[SRAM], held[DRAM], ch.effective_feed(chip), tp)
        compute = compute + kv_unpack * (held[SRAM] + held[DRAM]) * moved / tp
        return safe_div(flops, ch.overlapped_seconds(stream[SRAM], pim, stream[DRAM], compute, chip))

    # The channel functions time one point: broadcast the batch axes explicitly (the
    # tests forbid rank promotion) and map `one` over them.
    held = jnp.asarray(held, dtype=float)
    in_flight = ch.chip_in_flight(chip) if in_flight is None else in_flight
    points = [
        jnp.asarray(a, dtype=float)
        for a in (moved, flops, rate, stream_efficiency, unpack, cached, kv_unpack, in_flight)
    ]
    batch = jnp.broadcast_shapes(held.shape[:-1], *(a.shape for a in points))
    held = jnp.broadcast_to(held, (*batch, held.shape[-1]))
    points = [jnp.broadcast_to(a, batch) for a in points]
    return jnp.vectorize(one, signature="(t),(),(),(),(),(),(),(),()->()")(held, *points)


def class_rates(e: Evaluation) -> tuple[np.ndarray, np.ndarray]:
    """(`[classes, tiers]` share of each block class's bytes per tier, `[classes]` FLOP/s
    each class reaches) of an evaluation: each class (its heat buckets summed) through the
    channels as placed, with its own compute rate, small-kernel stream efficiency and,
    for quantised weights and K/V, the unpacking `decode_cost` prices, and the K/V re-reads the
    on-chip cache serves, each under its kernels' bytes in flight (`attainable_flops`)."""
    traffic = lower_traffic(e.workload)
    stored = class_sum(e.placement * (traffic.read_bytes + traffic.writes)[:, None], axis=0)  # [classes, tiers]
    moved = ch.with_weight_copy(stored, e.workload)  # a 16-bit copy of the weights, where one is made
    total = jnp.sum(moved, axis=-1)
    held = np.asarray(safe_div(moved, total[:, None]), dtype=float)
    # The weights' unpacking per byte moved (it is per byte as stored: the copy is not
    # unpacked), on the stream's slots, or on the FP32 lanes with a kernel whose matmuls
    # run there (`decode_cost`).
    is_kv = jnp.asarray(CLASS_IS_KV)
    unpack = jnp.where(is_kv, 0.0, ch.dequant_seconds(1.0, e.workload, e.chip)) * safe_div(
        jnp.sum(stored, axis=-1), total
    )
    lanes = traffic.precision == F32
    rates = attainable_flops(
        e.chip,
        held,
        total,
        class_sum(traffic.flops),
        ch.class_flop_rates(e.workload, traffic, e.chip),
        ch.class_stream_efficiency(traffic, e.chip),
        jnp.where(lanes, 0.0, unpack),
        ch.class_cached_rereads(traffic, e.chip),
        jnp.where(is_kv, ch.kv_dequant_seconds(1.0, traffic, e.workload, e.chip), jnp.where(lanes, unpack, 0.0)),
        ch.class_in_flight(e.chip),
    )
    return held, np.asarray(rates, dtype=float)


def _f(x) -> float:
    return float(np.asarray(x))


def roofline_plot(evaluation: Evaluation, path: str | Path, title: str = "") -> None:
    """Writes a roofline (per block class and for the whole step) and a time breakdown.

    Left: attainable FLOP/s of one tensor-parallel group against arithmetic intensity,
    with the compute roof (peak x efficiency of the weights' precision) and one roof
    per tier that holds anything (its bytes and FLOPs through `attainable_flops`, DRAM's
    under the weights' bytes in flight; for PIM, its internal bandwidth and PIM FLOP/s),
    so a KV class, not bound by them (`class_in_flight`), may sit above DRAM's roof;
    each block class at the rate the channels give its own bytes, spread over the tiers
    as placed (lowered by its small-kernel efficiency, capped by its own compute rate:
    attention efficiency, Hockney factor and the tiers' compute feed, all 1 on an
    uncalibrated chip), in the colour of the tier that holds most of it; and the step as a whole at its achieved
    FLOP/s. Right: each channel's time per step against the step time.

    Args:
        evaluation: a `costmodel.Evaluation` (its `cost` may be a sustained cost).
        path: PNG file to write.
        title: figure title.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    e = evaluation
    chip, cost = e.chip, e.cost
    traffic = lower_traffic(e.workload)
    n = _f(chip.n_chips)
    tp = _f(chip.tensor_parallel)
    prec = int(np.asarray(traffic.precision[1]))  # the FFN's GEMMs (16 bits over a weight copy)
    peak_rate = chip.peak_flops[prec] * chip.compute_efficiency  # one chip, FLOP/s
    peak = _f(peak_rate) * tp
    bw = np.asarray(ch.stream_bandwidth(chip.tiers, ch.chip_in_flight(chip)), dtype=float) * tp
    pim_bw = _f(chip.pim_bandwidth) * _f(chip.tiers.efficiency[PIM]) * tp
    pim_fl = _f(chip.pim_flops) * tp
    x = np.logspace(-2, 4, 200)
    colors = {"sram": "tab:green", "pim": "tab:purple", "dram": "tab:blue"}

    fig, (ax, bx) = plt.subplots(1, 2, figsize=(11, 4.3), gridspec_kw={"width_ratios": [1.4, 1]})
    ax.plot(x, np.full_like(x, peak), "k-", lw=1.5, label=f"compute {peak / 1e12:.3g} TFLOP/s")
    roofs = set()
    for i, t in enumerate(TIERS):
        if float(np.asarray(chip.tiers.capacity[i])) <= 0 or (t == "pim" and pim_bw <= 0):
            continue
        # One byte per FLOP-per-byte of intensity, all of it in this tier.
        roof = attainable_flops(chip, np.eye(len(TIERS))[i], jnp.ones_like(x), jnp.asarray(x), peak_rate)
        roofs.add(t)
        if t == "pim":
            label = f"pim {pim_bw / 1e12:.3g} TB/s, {pim_fl / 1e12:.3g} TFLOP/s"
        else:
            label = f"{t} {bw[i] / 1e12:.3g} TB/s"
        ax.plot(x, np.asarray(roof), "-", color=colors[t], lw=1.2, label=label)
    held, rates = class_rates(e)
    read = np.asarray(class_sum(traffic.read_bytes), dtype=float)
    intensity = np.asarray(traffic.intensity, dtype=float)
    for c, name in enumerate(CLASSES):
        if read[c] <= 0 or intensity[c] <= 0:
            continue
        t = TIERS[int(np.argmax(held[c]))]
        if t not in roofs:
            continue
        y = rates[c]
        ax.scatter([intensity[c]], [y], color=colors[t], s=25, zorder=3)
        near = sum(
            1 for k in range(c) if read[k] > 0 and intensity[k] > 0 and abs(np.log(intensity[k] / intensity[c])) < 0.3
        )
        ax.annotate(name, (intensity[c], y), fontsize=7, xytext=(3, -9 - 8 * near), textcoords="offset points")
    flops, moved = _f(cost.flops), float(np.asarray(cost.tier_bytes, dtype=float).sum())
    if moved > 0 and flops > 0:
        ax.scatter(
            [flops / moved],
            [flops / _f(cost.seconds_per_step) / (n / tp)],
            marker="*",
            s=160,
            color="red",
            zorder=4,
            label=f"whole step: {flops / _f(cost.seconds_per_step) / 1e12:.3g} TFLOP/s achieved",
        )
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity, FLOP per byte read")
    ax.set_ylabel("FLOP/s of one tensor-parallel group")
    ax.grid(True, which="both", alpha=0.25)
    ax.legend(fontsize=7, loc="lower right")
    ax.set_title(title or "roofline", fontsize=9)

    names = ["sram", "pim", "dram", "compute", "serial"]
    ts = [*np.asarray(cost.tier_seconds, dtype=float), _f(cost.compute_seconds), _f(cost.serial_seconds)]
    bx.barh(names, [1e3 * v for v in ts], color=["tab:green", "tab:purple", "tab:blue", "k", "tab:gray"])
    bx.axvline(1e3 * _f(cost.seconds_per_step), color="red", ls="--", label="step time")
    bx.set_xlabel("ms per step")
    bx.set_title(f"bound: {BOUNDS[int(cost.bound)]}", fontsize=9)
    bx.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
