"""The chip (or system of chips) a model is decoded on.

Three memory tiers, in a fixed order: on-chip SRAM, processing-in-memory DRAM and
plain DRAM/HBM. A tier with zero capacity is simply absent. All fields are SI
(bytes, s, J, W, B/s, FLOP/s); conversions from datasheet units live in `costmodel.io`.
"""

from collections.abc import Sequence

import equinox as eqx
import jax.numpy as jnp
from jaxtyping import Array, Float

from .types import PerPrecision, PerTier, PerTierLike, RealScalarLike, Scalar
from .workload import PRECISIONS


TIERS = ("sram", "pim", "dram")
SRAM, PIM, DRAM = 0, 1, 2

SMALL_KERNEL_KNEE = 4.0
"""Default sharpness of the small-kernel step in log size (`Chip.small_kernel_knee`):
a neutral value, since the step is off (`small_kernel_bytes = 0`) unless calibrated."""

DEFAULT_OVERLAP = 64.0
"""p of the channel p-norm for an uncalibrated chip: close to a full overlap (the
DMA engines of a GPU stream while the SMs compute)."""


class Tiers(eqx.Module):
    """Per-tier memory parameters, one entry per tier in `TIERS`, per chip.

    Attributes:
        capacity: bytes each chip holds in the tier, B.
        bandwidth: peak bandwidth from the tier to the compute die, B/s.
        latency: access latency paid once per layer per step, s.
        energy_per_byte: energy to move one byte to the compute die, J/B.
        efficiency: fraction of `bandwidth` the kernels reach, in (0, 1].
        compute_feed: fraction of the compute die's FLOP rate sustained on operands
            streamed from the tier, in (0, 1]: 1 where the kernels hide the stream
            behind the math (an accelerator's DMA engines), below 1 where the cores
            stall on it (a CPU core multiplying weights that arrive from DRAM). The
            on-chip tier's is taken as at least DRAM's; PIM's is unused (PIM-held
            FLOPs run in the PIM units).
    """

    capacity: PerTier
    bandwidth: PerTier
    latency: PerTier
    energy_per_byte: PerTier
    efficiency: PerTier
    compute_feed: PerTier

    def __check_init__(self):
        for name in ("capacity", "bandwidth", "latency", "energy_per_byte", "efficiency", "compute_feed"):
            if jnp.shape(getattr(self, name))[-1:] != (len(TIERS),):
                raise ValueError(f"Tiers.{name} must have a last axis of {len(TIERS)} tiers")

    @property
    def effective_bandwidth(self) -> Float[Array, "*batch tiers"]:
        """`bandwidth x efficiency` (B/s): what the kernels reach. Tiers may carry batch
        axes (one set of tiers per point, as the calibration fit uses them)."""
        return self.bandwidth * self.efficiency

    def replace(self, **changes) -> "Tiers":
        """A copy with some fields replaced (values converted to float arrays)."""
        names = list(changes)
        values = [jnp.asarray(v, dtype=float) for v in changes.values()]
        return eqx.tree_at(lambda t: [getattr(t, n) for n in names], self, values)


class Chip(eqx.Module):
    """A chip and the system it is deployed in.

    Attributes:
        tiers: the three memory tiers (per chip).
        pim_bandwidth: internal (bank-level) bandwidth of the PIM tier, B/s.
        pim_flops: in-memory compute of the PIM tier, FLOP/s.
        pim_energy_per_byte: energy of an internal PIM access, J/B.
        pim_serial: fraction of the PIM tier's time that cannot overlap DRAM
            streaming, in [0, 1] (1 when PIM and normal dies share channels, as
            PIM and normal accesses cannot overlap; IANUS, ASPLOS 2024).
        pim_energy_per_flop: dynamic energy of a FLOP in the PIM units, J/FLOP.
        pim_softmax: 1 when the attention softmax runs beside the PIM units (AttAcc's
            buffer die), 0 when it runs on the host: the scores then leave the PIM
            dies and the probabilities come back over the PIM tier's external
            `Tiers.bandwidth`, with a round trip of its latency per layer.
        pim_pipelined: fraction of the PIM tier's time hidden behind the host's work
            by interleaving sub-batches (AttAcc, NeuPIMs), in [0, 1]; at 0 a layer's
            attention in PIM and its FFN on the host run one after the other.
        peak_flops: dense peak per precision class (`PRECISIONS`), FLOP/s.
        compute_efficiency: fraction of peak the matmul kernels reach, in (0, 1].
        attention_efficiency: fraction of that rate the decode-attention kernels
            reach (QKᵀ, softmax and PV over the KV cache: skinny matmuls with a
            softmax between them), in (0, 1].
        attention_stream_efficiency: fraction of the SRAM and DRAM bandwidth the
            decode-attention kernels reach streaming the KV cache, in (0, 1] (paged
            gathers and per-sequence kernels reach less than a weight stream).
        attention_kv_rereads: how far the decode-attention kernels read each K/V
            head once per query head of its group rather than once, in [0, 1]: 0 for
            a kernel that shares the read across a grouped-query (GQA) group, 1 for
            one thread block per query head that streams its group's K/V itself;
            the KV stream then takes `1 + r (heads per K/V head - 1)` times as long
            (`costmodel.class_stream_efficiency`): priced as time at the stream's rate,
            from the tier that holds the cache but for the share
            `attention_rereads_cached`; the re-read bytes and their energy are not
            added to the step's.
        attention_rereads_cached: the share of those re-reads (from
            `attention_kv_rereads` or `attention_heads_per_block`) the on-chip cache
            (the SRAM tier: a GPU's L2) serves, in [0, 1]: they stream at the SRAM
            tier's rate instead of the holding tier's (`costmodel.class_cached_rereads`);
            0: every re-read from where the K/V is held; no effect on a chip with no
            SRAM tier. A kernel whose blocks for one group's query heads run side by
            side (adjacent in launch order) reads each K/V page once from DRAM and the
            other times from L2.
        attention_heads_per_block: query heads of a grouped-query (GQA) group that one
            decode-attention thread block serves from one read of their K/V head, a
            count >= 0 (a chip file's is a whole number; a value in (0, 1) acts as 1);
            0: the whole group (one read of each K/V head). A kernel that
            splits a group of `g` query heads over blocks of `h` streams each K/V head
            `g / min(h, g)` times (LMDeploy's TurboMind decoder attention: 4 heads per
            block where the group divides by 4); the K/V stream takes as long as the
            larger of that and the `attention_kv_rereads` count, priced like it.
        half_rate_rows: Hockney's n½ of the weight matmuls, in rows m sharing each
            weight element (the tokens of the batch): a multi-row matmul runs at
            `m / (m + n½ (1 - 1/m))` of the rate, a GEMV (m = 1) at all of it
            (`costmodel.hockney`); 0: every such kernel at the full rate.
        small_kernel_bytes: operand size below which a kernel streams from SRAM or
            DRAM at only `small_kernel_efficiency` of the bandwidth (a kernel library
            that blocks small operands for the cache, or too few bytes in flight to
            fill the channels), B; 0: no such step.
        small_kernel_efficiency: fraction of the bandwidth kernels well below
            `small_kernel_bytes` reach, in (0, 1].
        small_kernel_knee: sharpness k of that step in log size: a kernel over S
            bytes streams at `1 - (1 - e) / (1 + (S / small_kernel_bytes)**k)` of the
            bandwidth (`costmodel.kernel_efficiency`).
        energy_per_flop: dynamic energy per FLOP per precision class, J/FLOP.
        static_power: static (leakage and idle) power per chip, W.
        power_cap: power limit per chip, W.
        kernel_overhead: fixed time per layer per step (launch, sync), s.
        link_bandwidth: chip-to-chip bandwidth per direction, B/s: the rate of an
            all-reduce's bytes up to `link_knee`, and of the point-to-point KV
            transfer.
        link_knee: message size beyond which an all-reduce's further bytes move at
            `link_bandwidth_large`, B (`costmodel.ring_seconds`).
        link_bandwidth_large: rate of an all-reduce's bytes beyond `link_knee`, B/s;
            0: none (every byte at `link_bandwidth`). Collective libraries switch
            protocol and algorithm with the message size, and a PCIe host bridge
            may fall to a lower rate past its buffers: a measured all-reduce curve
            is two lines, not one.
        link_latency: latency of one all-reduce across the tensor-parallel group, s: the
            ring's (bulk) protocol's where the chip has a small-message one (on the H100 a
            fitted intercept).
        link_latency_small: latency of the small-message protocol's all-reduce, s
            (`costmodel.allreduce_seconds`).
        link_bandwidth_small: rate of the small-message protocol's bytes, B/s; 0: no
            such protocol (every all-reduce at `link_latency` and the ring's rates). A
            collective library (or an engine's own all-reduce) runs a small message
            with a protocol of low latency and low rate, a large one with a protocol
            of higher latency and higher rate, and picks by size the cheaper: an
            all-reduce takes the lesser of the two lines.
        hop_latency: latency of one pipeline hop between chips, s.
        overlap: exponent p of the p-norm that combines the memory and compute
            channels: 1 is fully serial, large p is fully overlapped (p >= 1).
        serial_kernels: share of the step whose kernels run one after another, in
            [0, 1]. At 1 each block class's kernel (a layer's attention, its FFN's
            GEMMs, ...) overlaps only its own memory and compute channels and the
            classes' times add, as on a GPU whose serving engine launches a layer's
            kernels in sequence on one stream (a compute-bound GEMM then cannot hide
            a memory-bound attention kernel: NanoFlow, OSDI 2025); at 0 the whole
            step's bytes and FLOPs overlap, as an engine that co-schedules them would
            (`costmodel.decode_cost`).
        parallel_units: units that issue memory requests independently (a GPU's
            streaming multiprocessors), per chip; 0: no latency bound on DRAM
            streaming.
        bytes_in_flight: bytes the weights' decode kernels keep in flight per unit
            (a serving framework's kernel concurrency), B; 0: unbounded. By Little's
            law DRAM then streams the weights at most `parallel_units x
            bytes_in_flight / Tiers.latency[DRAM]` (`costmodel.stream_bandwidth`);
            the attention kernels' K/V is not bound (`costmodel.class_in_flight`).
        tensor_parallel: chips each layer is split across.
        pipeline_parallel: pipeline stages the layers are split into.
        area: die area per chip, m² (0 when unknown).
        host_step: host time per step that the serving stack does not hide behind
            the device's work (scheduling the next step, preparing its inputs,
            gathering the last step's tokens), s; 0: none (`costmodel.host_seconds`).
        host_per_sequence: host time per sequence of the batch per step that is not
            hidden (each request's bookkeeping, sampling and detokenisation), s.
        host_per_sequence_tp: host time per sequence per step added when the system
            splits each layer over more than one chip (`tensor_parallel` > 1): an engine
            whose driver process prepares every step's inputs and broadcasts them to
            the other tensor-parallel workers (vLLM's V0 engine), s; 0: none.
        attention_half_rate_rows: Hockney's n½ of the decode-attention kernels, in
            rows sharing each KV element (the query heads per KV head, times the
            queries per sequence); 0: at the full rate. Separate from the weight
            matmuls' (`half_rate_rows`): a GPU's GEMM library tiles a batch's rows,
            while its decode-attention kernels stream the cache with their own
            tiling. A calibration fit gives both one value.

    Names live outside the pytree (`costmodel.io.ChipInfo`), so that every chip
    shares one compiled program.
    """

    tiers: Tiers
    pim_bandwidth: Scalar
    pim_flops: Scalar
    pim_energy_per_byte: Scalar
    pim_serial: Scalar
    pim_energy_per_flop: Scalar
    pim_softmax: Scalar
    pim_pipelined: Scalar
    peak_flops: PerPrecision
    compute_efficiency: Scalar
    attention_efficiency: Scalar
    attention_stream_efficiency: Scalar
    attention_kv_rereads: Scalar
    attention_heads_per_block: Scalar
    attention_rereads_cached: Scalar
    half_rate_rows: Scalar
    small_kernel_bytes: Scalar
    small_kernel_efficiency: Scalar
    small_kernel_knee: Scalar
    energy_per_flop: PerPrecision
    static_power: Scalar
    power_cap: Scalar
    kernel_overhead: Scalar
    link_bandwidth: Scalar
    link_knee: Scalar
    link_bandwidth_large: Scalar
    link_latency: Scalar
    link_latency_small: Scalar
    link_bandwidth_small: Scalar
    hop_latency: Scalar
    overlap: Scalar
    serial_kernels: Scalar
    parallel_units: Scalar
    bytes_in_flight: Scalar
    tensor_parallel: Scalar
    pipeline_parallel: Scalar
    area: Scalar
    host_step: Scalar
    host_per_sequence: Scalar
    host_per_sequence_tp: Scalar
    attention_half_rate_rows: Scalar

    @property
    def n_chips(self) -> Scalar:
        return self.tensor_parallel * self.pipeline_parallel

    def replace(self, **changes) -> "Chip":
        """A copy with some fields replaced (values converted to float arrays)."""
        names = list(changes)
        values = [v if isinstance(v, Tiers) else jnp.asarray(v, dtype=float) for v in changes.values()]
        return eqx.tree_at(lambda c: [getattr(c, n) for n in names], self, values)


def make_chip(
    *,
    capacity: PerTierLike,
    bandwidth: PerTierLike,
    peak_flops: RealScalarLike | Sequence[RealScalarLike],
    latency: PerTierLike = (0.0, 0.0, 0.0),
    energy_per_byte: PerTierLike = (0.0, 0.0, 0.0),
    efficiency: PerTierLike = (1.0, 1.0, 1.0),
    compute_feed: PerTierLike = (1.0, 1.0, 1.0),
    pim_bandwidth: RealScalarLike = 0.0,
    pim_flops: RealScalarLike = 0.0,
    pim_energy_per_byte: RealScalarLike = 0.0,
    pim_serial: RealScalarLike = 0.0,
    pim_energy_per_flop: RealScalarLike = 0.0,
    pim_softmax: RealScalarLike = 1.0,
    pim_pipelined: RealScalarLike = 1.0,
    compute_efficiency: RealScalarLike = 1.0,
    attention_efficiency: RealScalarLike = 1.0,
    attention_stream_efficiency: RealScalarLike = 1.0,
    attention_kv_rereads: RealScalarLike = 0.0,
    attention_heads_per_block: RealScalarLike = 0.0,
    attention_rereads_cached: RealScalarLike = 0.0,
    half_rate_rows: RealScalarLike = 0.0,
    attention_half_rate_rows: RealScalarLike = 0.0,
    small_kernel_bytes: RealScalarLike = 0.0,
    small_kernel_efficiency: RealScalarLike = 1.0,
    small_kernel_knee: RealScalarLike = SMALL_KERNEL_KNEE,
    energy_per_flop: RealScalarLike | Sequence[RealScalarLike] = 0.0,
    static_power: RealScalarLike = 0.0,
    power_cap: RealScalarLike = 1e9,
    kernel_overhead: RealScalarLike = 0.0,
    link_bandwidth: RealScalarLike = 0.0,
    link_knee: RealScalarLike = 0.0,
    link_bandwidth_large: RealScalarLike = 0.0,
    link_latency: RealScalarLike = 0.0,
    link_latency_small: RealScalarLike = 0.0,
    link_bandwidth_small: RealScalarLike = 0.0,
    hop_latency: RealScalarLike = 0.0,
    host_step: RealScalarLike = 0.0,
    host_per_sequence: RealScalarLike = 0.0,
    host_per_sequence_tp: RealScalarLike = 0.0,
    overlap: RealScalarLike = DEFAULT_OVERLAP,
    serial_kernels: RealScalarLike = 0.0,
    parallel_units: RealScalarLike = 0.0,
    bytes_in_flight: RealScalarLike = 0.0,
    tensor_parallel: RealScalarLike = 1,
    pipeline_parallel: RealScalarLike = 1,
    area: RealScalarLike = 0.0,
) -> Chip:
    """Builds a `Chip` from plain numbers (SI units).

    A scalar `peak_flops` or `energy_per_flop` applies to every precision.

    Examples:
        >>> import costmodel as cm
        >>> chip = cm.make_chip(capacity=(50e6, 0, 80e9), bandwidth=(10e12, 0, 3.35e12), peak_flops=989e12)
        >>> chip.tiers.capacity.shape
        (3,)
    """
    f = lambda x: jnp.asarray(x, dtype=float)
    per_precision = lambda x: jnp.broadcast_to(f(x), (len(PRECISIONS),))
    tiers = Tiers(f(capacity), f(bandwidth), f(latency), f(energy_per_byte), f(efficiency), f(compute_feed))
    return Chip(
        tiers=tiers,
        pim_bandwidth=f(pim_bandwidth),
        pim_flops=f(pim_flops),
        pim_energy_per_byte=f(pim_energy_per_byte),
        pim_serial=f(pim_serial),
        pim_energy_per_flop=f(pim_energy_per_flop),
        pim_softmax=f(pim_softmax),
        pim_pipelined=f(pim_pipelined),
        peak_flops=per_precision(peak_flops),
        compute_efficiency=f(compute_efficiency),
        attention_efficiency=f(attention_efficiency),
        attention_stream_efficiency=f(attention_stream_efficiency),
        attention_kv_rereads=f(attention_kv_rereads),
        attention_heads_per_block=f(attention_heads_per_block),
        attention_rereads_cached=f(attention_rereads_cached),
        half_rate_rows=f(half_rate_rows),
        small_kernel_bytes=f(small_kernel_bytes),
        small_kernel_efficiency=f(small_kernel_efficiency),
        small_kernel_knee=f(small_kernel_knee),
        energy_per_flop=per_precision(energy_per_flop),
        static_power=f(static_power),
        power_cap=f(power_cap),
        kernel_overhead=f(kernel_overhead),
        link_bandwidth=f(link_bandwidth),
        link_knee=f(link_knee),
        link_bandwidth_large=f(link_bandwidth_large),
        link_latency=f(link_latency),
        link_latency_small=f(link_latency_small),
        link_bandwidth_small=f(link_bandwidth_small),
        hop_latency=f(hop_latency),
        host_step=f(host_step),
        host_per_sequence=f(host_per_sequence),
        host_per_sequence_tp=f(host_per_sequence_tp),
        attention_half_rate_rows=f(attention_half_rate_rows),
        overlap=f(overlap),
        serial_kernels=f(serial_kernels),
        parallel_units=f(parallel_units),
        bytes_in_flight=f(bytes_in_flight),
        tensor_parallel=f(tensor_parallel),
        pipeline_parallel=f(pipeline_parallel),
        area=f(area),
    )
