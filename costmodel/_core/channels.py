"""Each channel of a decode step, its time and its energy: the formulas in one place.

A step moves bytes through four channels that run side by side: SRAM and DRAM
stream operands to the compute die, the PIM tier computes on the bytes it holds,
and the compute die does the remaining FLOPs. Serial terms (access latency, kernel
launches, all-reduces, pipeline hops) add on top. `costmodel.decode_cost`, the
roofline plot (`costmodel.report.roofline`) and the calibration fit
(`calibration.fit.model`) all call these functions, so a change to how a channel is
timed is made here once.

Units are SI: bytes (B), seconds (s), FLOP, B/s, FLOP/s, J.
"""

import jax
import jax.numpy as jnp

from .chip import DRAM, PIM, SRAM, Chip, Tiers
from .numerics import p_norm, safe_div, seconds
from .traffic import CLASS_IS_KV, N_WEIGHT_CLASSES, Traffic, copies_weights, step_groups, step_rows
from .types import PerClass, PerTier, RealScalarLike, Scalar
from .workload import F32, Workload


FEED_FLOOR = 1e-6
"""Smallest `Tiers.compute_feed` used: a feed of 0 would make the FLOPs on that
tier's bytes take forever."""


# --- kernel efficiencies ------------------------------------------------------------


def hockney(rows, half_rate_rows):
    """Fraction of a matmul's FLOP rate reached with `m` rows per operand element.

    Hockney's half-performance length: a GEMM with `m` rows runs at `m / (m + m½)` of
    the rate for large `m`. The `m½` is phased in as `(1 - 1/m)`, so a GEMV (`m = 1`),
    which streams its operand through a matrix-vector kernel, runs at the full rate:
    `m / (m + m½ (1 - 1/m))`. In time, each operand element of a multi-row matmul
    costs up to `m½` rows' worth of extra work (operand packing on a CPU). 1 when
    `m½ = 0`, and 1 for a class with no rows (no FLOPs).

    References:
        R. W. Hockney and C. R. Jesshope, *Parallel Computers 2*, Adam Hilger, 1988,
        §1.3.3 (the half-performance length n½).
    """
    # Double where: an empty class has 0 rows, and 0 / (0 + 0) must not be NaN.
    ok = rows > 0
    m = jnp.where(ok, rows, 1.0)
    return jnp.where(ok, m / (m + half_rate_rows * jnp.clip(1.0 - 1.0 / m, 0.0, 1.0)), 1.0)


def kernel_efficiency(kernel_bytes, chip: Chip):
    """Fraction of a tier's bandwidth a kernel over `kernel_bytes` of operand streams at.

    `1 - (1 - e) / (1 + (S / S_small)**k)`: `e` (`Chip.small_kernel_efficiency`)
    well below the step at `S_small` (`Chip.small_kernel_bytes`), 1 well above it,
    with sharpness `k` in log size (`Chip.small_kernel_knee`). 1 for every kernel
    when `S_small = 0`. The step was measured on XLA:CPU GEMV chains
    (`benchmarks/gemv_chain_grid.py`, output in `benchmarks/gemv_chain_grid_cpu.txt`).
    """
    # Both sizes floored at one byte: an empty class (S = 0) or no step (S_small = 0)
    # gives a finite log and the limit (1 with no step).
    log_ratio = jnp.log(jnp.maximum(kernel_bytes, 1.0)) - jnp.log(jnp.maximum(chip.small_kernel_bytes, 1.0))
    small = jnp.where(chip.small_kernel_bytes > 0, jax.nn.sigmoid(-chip.small_kernel_knee * log_ratio), 0.0)
    return 1.0 - (1.0 - chip.small_kernel_efficiency) * small


def kv_reads(traffic: Traffic, chip: Chip) -> Scalar:
    """Times the decode-attention kernels stream each K/V head, for `g` query heads per
    K/V head: `1 + r (g - 1)` with `r = Chip.attention_kv_rereads`, or `g / min(h, g)`
    with `h = Chip.attention_heads_per_block` (> 0), whichever is more; 1 when neither is
    set or without GQA (g = 1).

    TensorRT-LLM's masked-MHA generation kernel launches one block per query head and
    sequence (r = 1: `mmha_launch_kernel_ex` in cpp/tensorrt_llm/kernels/
    decoderMaskedMultiheadAttention/decoderMaskedMultiheadAttentionLaunch.h; its XQA
    kernel for MQA/GQA "reduc[es] data loading", 2.4x on Llama-70B: docs/source/blogs/
    XQA-kernel.md and Falcon180B-H200.md, github.com/NVIDIA/TensorRT-LLM). LMDeploy's
    TurboMind decoder attention (v0.1.0a1-v0.2.6) gives each block 4 query heads of a
    group that divides by 4, 2 of one that divides by 2, else 1 (h = 4 for a group of 8:
    each K/V head read twice; `DispatchDecoderMultiheadAttention`, src/turbomind/kernels/
    decoder_multihead_attention/decoder_multihead_attention.cu, github.com/InternLM/
    lmdeploy at v0.1.0a1, v0.1.0, v0.2.0 and v0.2.6; g / h is exact for groups of 1, 2,
    4, 8 and 16, not for a group of 6 or 7, which it splits in twos or ones).

    Examples:
        >>> import costmodel as cm
        >>> from costmodel._core.channels import kv_reads
        >>> w = cm.Workload(cm.model_preset("llama-2-70b"), cm.Scenario(batch=8, context=2048))  # g = 8
        >>> chip = cm.chip_preset("h100-sxm")
        >>> t = cm.lower_traffic(w, buckets=False)
        >>> float(kv_reads(t, chip)), float(kv_reads(t, chip.replace(attention_heads_per_block=4.0)))
        (1.0, 2.0)
        >>> float(kv_reads(t, chip.replace(attention_kv_rereads=1.0)))
        8.0
    """
    g = traffic.heads_per_kv_head
    h = chip.attention_heads_per_block
    per_block = jnp.where(h > 0, g / jnp.clip(h, 1.0, jnp.maximum(g, 1.0)), 1.0)
    return jnp.maximum(1.0 + chip.attention_kv_rereads * (g - 1.0), per_block)


def cached_reread_share(chip: Chip) -> Scalar:
    """The share of the decode-attention kernels' K/V re-reads the chip's on-chip cache
    serves (`Chip.attention_rereads_cached`, clipped to [0, 1]: a share), 0 on a chip with
    no SRAM tier. The re-reads stream at the SRAM tier's rate, so as its bandwidth goes to 0
    their time grows without bound, then drops to the holding tier's at exactly 0 (no
    cache): only framework profiles set the share, and the co-design's reference chips
    leave it at 0."""
    has_cache = (chip.tiers.capacity[SRAM] > 0) & (chip.tiers.bandwidth[SRAM] > 0)
    return jnp.where(has_cache, jnp.clip(chip.attention_rereads_cached, 0.0, 1.0), 0.0)


def kv_stored_reads(traffic: Traffic, chip: Chip) -> Scalar:
    """Times the decode-attention kernels stream each K/V head from the tier that holds
    it: the first read and the re-reads (`kv_reads` - 1) the on-chip cache does not
    serve (`cached_reread_share`): `1 + (1 - c) (kv_reads - 1)`.

    Examples:
        >>> import costmodel as cm
        >>> from costmodel._core.channels import kv_stored_reads
        >>> w = cm.Workload(cm.model_preset("llama-2-70b"), cm.Scenario(batch=8, context=2048))  # g = 8
        >>> chip = cm.chip_preset("h100-sxm").replace(attention_kv_rereads=1.0)
        >>> t = cm.lower_traffic(w, buckets=False)
        >>> float(kv_stored_reads(t, chip)), float(kv_stored_reads(t, chip.replace(attention_rereads_cached=0.75)))
        (8.0, 2.75)
    """
    return 1.0 + (1.0 - cached_reread_share(chip)) * (kv_reads(traffic, chip) - 1.0)


def class_stream_efficiency(traffic: Traffic, chip: Chip) -> PerClass:
    """Fraction of the SRAM and DRAM bandwidth each block class's kernels stream at:
    the `kernel_efficiency` of one chip's share of their operands (each chip holds
    1/tp of every matrix and cache), times `Chip.attention_stream_efficiency` for
    the KV classes (decode attention gathers pages of many sequences), over the times
    a kernel streams each K/V head from the tier that holds it (`kv_stored_reads`; the
    re-reads the on-chip cache serves are `class_cached_rereads`). Time only: the bytes
    and energy are not charged."""
    kv = jnp.where(jnp.asarray(CLASS_IS_KV), chip.attention_stream_efficiency / kv_stored_reads(traffic, chip), 1.0)
    return kv * kernel_efficiency(traffic.kernel_bytes / chip.tensor_parallel, chip)


def class_cached_rereads(traffic: Traffic, chip: Chip) -> PerClass:
    """Per block class: the K/V re-reads the on-chip cache serves, as a multiple of the
    class's full-rate bytes streamed from SRAM and DRAM (`class_stream_efficiency`):
    `c (kv_reads - 1) / kv_stored_reads`, 0 for the weight classes. They stream at the
    SRAM tier's rate (`decode_cost`), so a kernel whose blocks re-read each K/V head
    together (one block per query head, the group's blocks adjacent in launch order)
    pays for its re-reads in the cache's bandwidth, not DRAM's. Time only."""
    extra = cached_reread_share(chip) * (kv_reads(traffic, chip) - 1.0) / kv_stored_reads(traffic, chip)
    return jnp.where(jnp.asarray(CLASS_IS_KV), extra, 0.0)


def flop_rate(chip: Chip, precision, attention, rows):
    """FLOP/s one chip's compute die reaches on a kernel, operands on chip: the peak of
    its `precision` x `Chip.compute_efficiency` x `Chip.attention_efficiency` (where
    `attention`: decode attention over a KV cache) x the Hockney factor of its `rows`
    per operand element (at `Chip.attention_half_rate_rows` for attention,
    `Chip.half_rate_rows` for a weight matmul). Arguments broadcast (one entry per
    class, or per point)."""
    kernel = jnp.where(attention, chip.attention_efficiency, 1.0)
    half_rate = jnp.where(attention, chip.attention_half_rate_rows, chip.half_rate_rows)
    return chip.peak_flops[precision] * chip.compute_efficiency * kernel * hockney(rows, half_rate)


def class_flop_rates(workload: Workload, traffic: Traffic, chip: Chip) -> PerClass:
    """`flop_rate` of each block class: KV classes are attention, and a class's rows are
    the rows sharing each operand element read (2 FLOPs per row per element)."""
    s = workload.scenario
    is_kv = jnp.asarray(CLASS_IS_KV)
    element_bytes = jnp.concatenate(
        [s.class_weight_bytes, jnp.broadcast_to(s.kv_bytes, (len(CLASS_IS_KV) - N_WEIGHT_CLASSES,))]
    )
    rows = traffic.intensity * element_bytes / 2.0
    return flop_rate(chip, traffic.precision.astype(jnp.int32), is_kv, rows)


def effective_feed(chip: Chip) -> PerTier:
    """`Tiers.compute_feed` as the compute channel applies it: floored, and on chip never
    below DRAM's (else more SRAM could slow a step)."""
    feed = jnp.maximum(chip.tiers.compute_feed, FEED_FLOOR)
    return feed.at[SRAM].set(jnp.maximum(feed[SRAM], feed[DRAM]))


# --- channel times --------------------------------------------------------------------


LITTLE_SHARPNESS = 4.0
"""Exponent of the soft minimum between a tier's reachable bandwidth and the bound
Little's law puts on it (`stream_bandwidth`): at the crossing the stream runs at
`2**(-1/4)` = 84 % of either, as queueing near saturation makes it; assumption, in
the range of the soft rooflines of the calibration fits (`Chip.overlap`)."""


def stream_bandwidth(tiers: Tiers, in_flight: Scalar | float = 0.0, busy_per_byte: RealScalarLike = 0.0):
    """Bandwidth each tier streams at, B/s: `bandwidth x efficiency`, and on DRAM at most
    what the bytes the kernels keep in flight sustain against its latency, and what the
    ALUs that must work on each byte keep up with.

    Little's law: a stream with `in_flight` bytes outstanding over a memory of
    latency `L` moves at most `in_flight / L` bytes per second, so a kernel with
    little memory-level parallelism saturates a narrow memory and not a wide one.
    A slot is held for the latency and for the arithmetic that must follow the load
    before the next is issued (a latency-bound loop's iteration is its memory latency
    plus its dependent instructions: Volkov 2016, ch. 4), so the bound's time per
    byte is `L / in_flight + busy_per_byte`; with no bytes-in-flight bound it is
    `busy_per_byte` alone, the ALUs' throughput. The limits combine as a soft
    minimum (`LITTLE_SHARPNESS`).

    Args:
        tiers: the tiers (may carry batch axes).
        in_flight: bytes in flight on the whole chip (`Chip.parallel_units x
            Chip.bytes_in_flight`, or a class's `class_in_flight`), B; 0: no bound.
        busy_per_byte: the chip's ALU time per full-rate DRAM byte between a load and
            the next (`dequant_seconds` over the bytes), s/B; 0: none.

    References:
        J. D. C. Little, "A proof for the queuing formula L = λW", Operations Research
        9(3), 1961; V. Volkov, "Understanding Latency Hiding on GPUs", PhD thesis,
        UC Berkeley, 2016, ch. 4 (memory throughput = bytes in flight / latency).
    """
    reachable = tiers.effective_bandwidth
    latency = tiers.latency[..., DRAM]
    # Time per byte: the soft maximum of the limits'. Little's is latency / bytes in
    # flight, 0 where there is no bound (no bytes in flight given, or no latency);
    # double where, so that neither a 0 nor its gradient divides anything. The ALU time
    # adds to it: it holds a slot under the bound, and is a throughput limit without.
    ok = (in_flight > 0) & (latency > 0)
    little = jnp.where(ok, jnp.where(ok, latency, 1.0) / jnp.where(ok, in_flight, 1.0), 0.0) + busy_per_byte
    per_byte = jnp.stack(jnp.broadcast_arrays(1.0 / jnp.maximum(reachable[..., DRAM], 1.0), little), -1)
    # Without a bound, exactly `bandwidth x efficiency` (not its reciprocal's reciprocal).
    dram = jnp.where(little > 0, 1.0 / p_norm(per_byte, LITTLE_SHARPNESS), reachable[..., DRAM])
    return jnp.where(jnp.arange(reachable.shape[-1]) == DRAM, dram[..., None], reachable)


def chip_in_flight(chip: Chip):
    """Bytes in flight on one chip: `parallel_units x bytes_in_flight` (0: no bound), B."""
    return chip.parallel_units * chip.bytes_in_flight


def class_in_flight(chip: Chip) -> PerClass:
    """Bytes in flight on one chip per block class (`stream_bandwidth`'s bound), B: the
    weights' kernels keep `chip_in_flight`, and the KV classes none (no bound: their
    tier's reachable rate).

    `Chip.bytes_in_flight` is a matrix-vector kernel's concurrency (fitted on batch-1
    rows, where the weights' stream is the step). Decode attention runs other kernels,
    launched one thread block per sequence and (query or K/V) head, hundreds to
    thousands of them at a serving batch, each with 8-32 KiB of K/V loads issued
    before their first use: TensorRT-LLM's masked MHA and XQA, vLLM's PagedAttention
    and FlashAttention-2's decode request some 32-96 KiB in flight per SM on an H100,
    where about 18 KiB covers HBM3's latency at its rate (3.35 TB/s x ~0.7 us loaded,
    an assumption / 132 SMs). Their launch shapes and tiles, read from the public
    source, are in benchmarks/attention_kernel_launch_shapes.md. So Little's law does
    not bind the K/V stream. Exceptions this leaves out: a kernel with a block per
    query head over a grouped-query cache (masked MHA, PagedAttention) requests its
    group's K/V several times, and if its cache serves the re-reads it has only 8-16
    KiB of DRAM-unique bytes in flight per SM, near or below that yardstick
    (TensorRT-LLM 0.8/0.9's grouped-query rows, which ran masked MHA, now price too
    fast); and at a batch of one the attention launches only a block per head.
    """
    return jnp.where(jnp.asarray(CLASS_IS_KV), 0.0, chip_in_flight(chip))


def stream_seconds(full_rate_bytes, tiers: Tiers, in_flight: Scalar | float = 0.0, busy: RealScalarLike = 0.0):
    """Seconds each tier needs to stream bytes to the compute die.

    Args:
        full_rate_bytes: `[..., tiers]` bytes per tier, each already divided by the
            `kernel_efficiency` of the kernel it belongs to (full-rate equivalents), B.
        tiers: the tiers; each streams at `stream_bandwidth`.
        in_flight: bytes the kernels keep in flight on the chip (`chip_in_flight`, or a
            class's `class_in_flight`), B; 0: no latency bound.
        busy: the chip's ALU seconds on the DRAM stream's bytes between their loads and
            the next (`dequant_seconds`), s: they lengthen each slot of the latency
            bound, and bound the stream by the ALUs' throughput where there is none.
    """
    per_byte = busy_per_byte(full_rate_bytes[..., DRAM], busy)
    return seconds(full_rate_bytes, stream_bandwidth(tiers, in_flight, per_byte))


def busy_per_byte(dram_bytes, busy: RealScalarLike = 0.0):
    """The ALUs' time per full-rate DRAM byte, `busy / dram_bytes` (`stream_bandwidth`'s
    `busy_per_byte`), s/B; 0 without ALU time or DRAM bytes."""
    # Double where: no ALU time (every format used as stored) must leave the stream and
    # its gradient exactly as they were, even over a vanishing DRAM share. (So the
    # derivative with respect to the ALU time is 0 at exactly 0, not its one-sided value.)
    busy = jnp.asarray(busy, dtype=jnp.asarray(dram_bytes).dtype)
    ok = (busy > 0) & (dram_bytes > 0)
    return jnp.where(ok, jnp.where(ok, busy, 0.0) / jnp.where(ok, dram_bytes, 1.0), 0.0)


def dequant_seconds(weight_bytes, workload: Workload, chip: Chip):
    """Seconds one chip's ALUs spend unpacking weights before the matmul uses them.

    `weight_bytes / Scenario.weight_bytes` elements, each unpacked `unpack_passes` times
    (once, unless the kernel unpacks per tile of rows) and taking
    `Scenario.weight_dequant_ops` instructions (the framework's kernel for the format),
    at one instruction per FP32 lane per clock: `peak_flops[F32] / 2` (the non-tensor
    peak counts a fused multiply-add as two FLOPs) times `Chip.compute_efficiency` (the
    sustained share of peak the chip's file assumes; the published-trace calibrations
    fold it into their peaks, so a preset and its `-published` file unpack at one rate).
    A proxy, assumed: it holds where integer and packed-bf16 instructions issue at the
    FP32 lanes' rate (the A100); Hopper and Ada issue 32-bit integer instructions at
    half their FP32 lanes' rate, and type conversions run at 16 per SM per clock, a
    quarter of the FP32 lanes on compute capability 8.0 and an eighth on 8.6-9.0 (CUDA
    C++ Programming Guide, arithmetic instruction throughput, as read here), so the
    count a profile gives is in FP32-lane slots. A chip file whose
    F32 peak is a fitted GEMM rate (`data/calibrated/h200.toml`) unpacks far too fast.
    Time only: the instructions' energy is not charged.

    Args:
        weight_bytes: bytes of weights one chip streams, B.
        workload: the scenario's bytes per weight and instructions per weight.
        chip: the chip (its F32 peak and compute efficiency).

    Returns:
        Seconds, s; 0 with no instructions, or a chip with no F32 peak.

    Examples:
        >>> import costmodel as cm
        >>> w = cm.Workload(cm.model_preset("llama-2-7b"), cm.Scenario(weight_bytes=1.0, weight_dequant_ops=1.0))
        >>> chip = cm.make_chip(capacity=(0, 0, 80e9), bandwidth=(0, 0, 2e12), peak_flops=20e12)
        >>> round(float(cm.dequant_seconds(1e9, w, chip)) * 1e3, 3)  # 1e9 elements at 1e13 per second
        0.1
    """
    s = workload.scenario
    elements = safe_div(weight_bytes, s.weight_bytes) * unpack_passes(workload)
    return unpack_seconds(elements, s.weight_dequant_ops, chip)


def unpack_passes(workload: Workload):
    """Times a step's weight kernels unpack each weight element they stream.

    A kernel that tiles the step's rows (`costmodel.step_rows`) unpacks its weight
    tile again in every thread block of another tile of rows, `ceil(rows /
    Scenario.weight_dequant_rows)` times: vLLM's GPTQ kernel launches a block per 8
    rows (`BLOCK_M_SIZE_MAX`, gemm_half_q_half_cuda_part in
    csrc/quantization/gptq/q_gemm.cu), its AWQ GEMM one per 16 (its m16n8k16 tile,
    gemm_forward_4bit_cuda_m16nXk32 in csrc/quantization/awq/gemm_kernels.cu;
    github.com/vllm-project/vllm). Once where `weight_dequant_rows` is 0, and once
    where the step works on a 16-bit copy (`copies_weights`: one kernel unpacks the
    whole matrix). A count of whole tiles: its derivative in the rows is 0.

    Examples:
        >>> import costmodel as cm
        >>> w = lambda batch: cm.Workload(cm.model_preset("llama-3-8b"), cm.Scenario(batch=batch, weight_dequant_rows=16))
        >>> [float(cm.unpack_passes(w(b))) for b in (1, 16, 17, 100)]
        [1.0, 1.0, 2.0, 7.0]
    """
    tile = workload.scenario.weight_dequant_rows
    tiled = (tile > 0) & ~copies_weights(workload)
    passes = jnp.ceil(step_rows(workload) / jnp.where(tiled, tile, 1.0))
    return jnp.where(tiled, jnp.maximum(passes, 1.0), 1.0)


COPY_BYTES = 2.0
"""Bytes per element of the 16-bit copy of the weights a kernel writes and reads back
(`weight_copy_bytes`): fp16, what vLLM's GPTQ and AWQ kernels unpack to."""


def weight_copy_bytes(weight_bytes, workload: Workload):
    """Bytes a step's weight kernels move through a 16-bit copy of the weights, per
    weight class, B.

    Where the step's rows exceed `Scenario.weight_copy_rows` (`copies_weights`), a
    kernel unpacks every weight element it streams into a 16-bit buffer in memory, and
    a 16-bit GEMM reads it back: `2 x COPY_BYTES` per element, on top of the stored
    format's bytes (vLLM's GPTQ kernel above 50 rows: `reconstruct_exllama` writes
    `temp_dq`, then `cublasHgemm` reads it, csrc/quantization/gptq/q_gemm.cu; its AWQ
    kernel from 256 rows: `awq_dequantize`, then `torch.matmul`,
    vllm/model_executor/layers/quantization/awq.py; github.com/vllm-project/vllm).
    For a 4-bit format that is 4 B per element against about 0.5 stored: a step
    streams some nine times the bytes, twice a 16-bit model's. The copy is written to
    the memory that holds the weights (`with_weight_copy`: a GPU's HBM), an upper
    bound where a matrix's copy is small enough to be read back from the on-chip cache
    (an H100's 50 MB L2 holds an 8B model's attention output projection, 33 MB). Its
    unpacking is the format's `weight_dequant_ops`, once per element (the copy's kernel
    unpacks the whole matrix once: `unpack_passes`).

    Args:
        weight_bytes: `[N_WEIGHT_CLASSES]` bytes of each weight class the step streams,
            in its stored format, B.
        workload: the step (its rows and `Scenario.weight_copy_rows`; bytes per
            element of each class, `Scenario.class_weight_bytes`).

    Returns:
        `[N_WEIGHT_CLASSES]` bytes, B; 0 where the step does not copy.

    Examples:
        >>> import costmodel as cm
        >>> import jax.numpy as jnp
        >>> from costmodel._core.channels import weight_copy_bytes
        >>> s = lambda batch: cm.Scenario(batch=batch, weight_bytes=0.5, weight_copy_rows=50)
        >>> w = lambda batch: cm.Workload(cm.model_preset("llama-3-8b"), s(batch))
        >>> one_gb = jnp.full(4, 1e9)  # 2e9 elements of each class at 0.5 B
        >>> float(weight_copy_bytes(one_gb, w(50)).sum()), float(weight_copy_bytes(one_gb, w(51)).sum()) / 1e9
        (0.0, 32.0)
    """
    elements = safe_div(weight_bytes, workload.scenario.class_weight_bytes)
    return jnp.where(copies_weights(workload), 2.0 * COPY_BYTES * elements, 0.0)


def with_weight_copy(moved, workload: Workload):
    """`[classes, tiers]` bytes a step moves per class and tier (`moved`: each class's
    bytes as stored, read and written) with the 16-bit copy of the weights added to each
    weight class where its bytes are (`weight_copy_bytes`): what `decode_cost` streams,
    and `costmodel.report.roofline` plots."""
    weights = moved[:N_WEIGHT_CLASSES]
    total = jnp.sum(weights, axis=-1)
    share = safe_div(weights, total[:, None])
    return moved.at[:N_WEIGHT_CLASSES].add(weight_copy_bytes(total, workload)[:, None] * share)


def kv_dequant_seconds(kv_bytes, traffic: Traffic, workload: Workload, chip: Chip):
    """Seconds one chip's ALUs spend on the K/V elements its decode-attention kernels
    read, each time a thread block reads them.

    `kv_bytes / Scenario.kv_bytes` elements, read `kv_reads` times (a kernel with one
    thread block per query head unpacks its group's K/V head once per query head), each
    read taking `Scenario.kv_dequant_ops` instructions, at `dequant_seconds`' rate (one
    per FP32 lane per clock x `Chip.compute_efficiency`). Decode attention over a
    quantised cache is then bound by the CUDA cores where they are few against the
    memory: QServe's 4-bit cache on the A100 (Y. Lin et al., "QServe: W4A8KV4
    Quantization and System Co-design for Efficient LLM Serving", arXiv:2405.04532, §5:
    its KV4 attention had to be moved out of the CUDA cores' compute-bound region).
    Time only, charged to the attention classes' compute (`decode_cost`).

    The count is per element per read: a kernel's unpacking, and, where it runs its dot
    products on the CUDA cores with one block per query head (QServe's), their
    arithmetic too, which happens once per query head and so once per read there (with
    blocks of several query heads, `Chip.attention_heads_per_block`, such a count would
    be short by the heads per block; no profile sets both). That arithmetic is also in
    the attention FLOPs priced at the tensor rate, a double count of about 1 % of it. A
    shared prefix, stored and read once per step (`lower_traffic`), is counted once,
    though each sequence's blocks unpack it: short by the batch where a prefix is given.

    Args:
        kv_bytes: bytes of K/V one chip streams to its compute die (SRAM and DRAM), B.
        traffic: the step's traffic (its query heads per K/V head, for `kv_reads`).
        workload: the scenario's bytes per K/V element and instructions per read.
        chip: the chip (its F32 peak, compute efficiency and attention kernels).

    Returns:
        Seconds, s; 0 with no instructions, or a chip with no F32 peak.

    Examples:
        >>> import costmodel as cm
        >>> from costmodel._core.channels import kv_dequant_seconds
        >>> w = cm.Workload(cm.model_preset("llama-2-70b"), cm.Scenario(kv_bytes=0.5, kv_dequant_ops=2.0))
        >>> chip = cm.make_chip(capacity=(0, 0, 80e9), bandwidth=(0, 0, 2e12), peak_flops=20e12)
        >>> t = cm.lower_traffic(w, buckets=False)
        >>> once = float(kv_dequant_seconds(1e9, t, w, chip))  # 2e9 elements x 2 at 1e13 per second
        >>> round(once * 1e3, 3), round(float(kv_dequant_seconds(1e9, t, w, chip.replace(attention_kv_rereads=1.0))) / once)
        (0.4, 8)
    """
    s = workload.scenario
    return unpack_seconds(safe_div(kv_bytes, s.kv_bytes) * kv_reads(traffic, chip), s.kv_dequant_ops, chip)


def unpack_seconds(elements, ops, chip: Chip):
    """Seconds `elements x ops` ALU instructions take at one per FP32 lane per clock
    (`peak_flops[F32] / 2 x compute_efficiency`: `dequant_seconds`); 0 where `ops` is 0
    or the chip has no F32 peak."""
    lanes = chip.peak_flops[F32] * chip.compute_efficiency / 2.0
    # Double where: with no instructions the time and its gradient are exactly 0, even on
    # a chip with a vanishing F32 rate.
    ok = (ops > 0) & (lanes > 0)
    return jnp.where(ok, elements * ops / jnp.where(ok, lanes, 1.0), 0.0)


def pim_seconds(pim_bytes, pim_flops, chip: Chip):
    """Seconds the PIM tier needs to compute on `pim_bytes` in place (`pim_flops` FLOPs).

    The PIM units read their banks at `pim_bandwidth x efficiency` and compute at
    `pim_flops`; the two overlap like the chip's channels do, through the p-norm at
    `Chip.overlap` (the max for a large exponent).

    References:
        S. Lee et al., "Hardware Architecture and Software Stack for PIM Based on
        Commercial DRAM Technology", ISCA 2021 (HBM-PIM: bank-level bandwidth and
        in-bank FLOP/s as the two limits of a PIM kernel).
    """
    memory = seconds(pim_bytes, chip.pim_bandwidth * chip.tiers.efficiency[PIM])
    math = seconds(pim_flops, chip.pim_flops)
    return p_norm(jnp.stack([memory, math], axis=-1), chip.overlap)


def softmax_bytes(pim_attention_flops, workload: Workload, chip: Chip):
    """Bytes a host softmax moves over the PIM tier's external links, B.

    PIM units compute the scores `QKᵀ` and the context `PV` (GEMVs) but not the
    softmax between them unless the design puts it beside them (`Chip.pim_softmax`;
    AttAcc runs it on the HBM buffer die); otherwise every score leaves the PIM dies
    and its probability comes back: two activation-sized elements per score, and
    there is one score per `4 x head_dim` attention FLOPs (QKᵀ and PV each do a
    `head_dim` multiply-add per score).

    Args:
        pim_attention_flops: attention FLOPs done in the PIM units, FLOP.

    References:
        S. Lee et al., "Hardware Architecture and Software Stack for PIM Based on
        Commercial DRAM Technology", ISCA 2021 (HBM-PIM's PCU: FP16 multiply, add and
        multiply-add, no exponential); J. Park et al., "AttAcc! Unleashing the Power
        of PIM for Batched Transformer-based Generative Model Inference", ASPLOS
        2024 (softmax on the buffer die).
    """
    m, s = workload.model, workload.scenario
    scores = pim_attention_flops / (4.0 * m.head_dim)
    return (1.0 - chip.pim_softmax) * 2.0 * scores * s.activation_bytes


def softmax_seconds(host_bytes, pim_attention_share, workload: Workload, chip: Chip):
    """Time of a host softmax over attention held in PIM: `host_bytes` over the PIM
    tier's external bandwidth (`Tiers.bandwidth x efficiency`), serial with the PIM
    kernels it sits between, plus one round trip of the tier's latency per layer
    (scores out, probabilities in), weighted by the share of the attention FLOPs done
    in PIM, s."""
    link = seconds(host_bytes, chip.tiers.effective_bandwidth[PIM])
    round_trips = (1.0 - chip.pim_softmax) * workload.model.n_layers * chip.tiers.latency[PIM]
    return link + pim_attention_share * round_trips


def compute_seconds(flops, rate, sram_share, dram_share, feed, parallel: RealScalarLike = 1.0):
    """Seconds the compute die needs for `flops` whose operands stream from SRAM and DRAM.

    Args:
        flops: FLOPs (per class, or per point), FLOP.
        rate: the FLOP rate reached with operands on chip (`flop_rate`), FLOP/s.
        sram_share / dram_share: fractions of the operands streamed from SRAM and DRAM
            (PIM's share computes in the PIM units, not here).
        feed: `effective_feed(chip)`: the rate on each tier's operands is `rate x feed`.
        parallel: chips sharing the FLOPs (the tensor-parallel group).
    """
    work = sram_share / feed[SRAM] + dram_share / feed[DRAM]
    return seconds(work * flops / parallel, rate)


def overlapped_seconds(sram, pim, dram, compute, chip: Chip):
    """The four channels' times combined into the step's parallel time.

    PIM that shares the DRAM channels (`Chip.pim_serial`) runs serially with normal
    DRAM reads (IANUS, ASPLOS 2024); the channels then overlap through the p-norm at
    `Chip.overlap` (1: fully serial, large: fully overlapped). That overlap needs
    the host and the PIM units to have independent work: within one batch, a layer's
    FFN on the host waits for its attention in PIM, so only the share
    `Chip.pim_pipelined` of the PIM time that sub-batch interleaving hides (AttAcc,
    ASPLOS 2024; NeuPIMs, ASPLOS 2024) overlaps; the rest adds to the host's time.
    Every argument may have batch axes (one exponent for all of them).
    """

    def overlap(*times):
        channels = jnp.stack(jnp.broadcast_arrays(*times), axis=-1)
        return p_norm(channels, jnp.broadcast_to(chip.overlap, channels.shape[:-1]))

    pipelined = overlap(sram, (1.0 - chip.pim_serial) * pim, dram + chip.pim_serial * pim, compute)
    one_after_the_other = overlap(sram, dram, compute) + pim
    return chip.pim_pipelined * pipelined + (1.0 - chip.pim_pipelined) * one_after_the_other


def access_seconds(accesses, shares, latency, overhead):
    """Serial latency of `accesses` dependent accesses (layers, or kernels): each waits
    for the latency of the tiers it reads, weighted by their `shares` of the bytes,
    plus a fixed `overhead` (kernel launch, synchronisation), s."""
    return accesses * jnp.sum(latency * shares, axis=-1) + accesses * overhead


def ring_seconds(message, chip: Chip):
    """Seconds one chip's link takes to move `message` bytes of an all-reduce: those up to
    `Chip.link_knee` at `Chip.link_bandwidth`, the rest at `Chip.link_bandwidth_large`
    (every byte at `link_bandwidth` where that is 0).

    A measured all-reduce's time against its size is two lines: NCCL (its default
    algorithm) on eight H100 (NVLink4, NVSwitch) moves 1-32 MiB at some 303 GB/s per
    link after a 26.5 us intercept and the bytes past ~22 MB at ~448 (protocol and
    algorithm change with the size: NVLink SHARP at large messages), RCCL on eight MI300X
    at 235 and ~320; on eight L40S over PCIe (NCCL's ring forced) the rate falls past
    ~8 MB from 22 to ~11 GB/s. (Below ~1 MiB the H100's small-message protocol is the
    cheaper: `allreduce_seconds`.)
    `python benchmarks/gpu_allreduce_fit.py` fits both lines to the published runs.

    Examples:
        >>> import costmodel as cm
        >>> from costmodel._core.channels import ring_seconds
        >>> chip = cm.chip_preset("h100-sxm").replace(link_bandwidth=200e9, link_knee=20e6, link_bandwidth_large=400e9)
        >>> [round(float(ring_seconds(s, chip)) * 1e6, 1) for s in (10e6, 20e6, 60e6)]  # us
        [50.0, 100.0, 200.0]
    """
    large = chip.link_bandwidth_large > 0
    beyond = jnp.where(large, jnp.maximum(message - chip.link_knee, 0.0), 0.0)
    return seconds(message - beyond, chip.link_bandwidth) + seconds(beyond, chip.link_bandwidth_large)


def allreduce_seconds(workload: Workload, chip: Chip) -> Scalar:
    """Two ring all-reduces per layer across the tensor-parallel group (after attention
    and after the FFN): each chip sends `2 (tp - 1) / tp` of the batch's activations
    over its link (one `d_model` vector per query token; `ring_seconds`), plus one link
    latency per all-reduce when `tp > 1`, s.

    Where the chip has a small-message protocol (`Chip.link_bandwidth_small` > 0), an
    all-reduce takes the lesser of two lines: that protocol's (`link_latency_small`, then
    the same `2 (tp - 1) / tp` of the message at `link_bandwidth_small`) and the ring's
    above. NCCL prices each of its protocols as a latency plus bytes over a rate and runs
    the cheapest for the size (its LL protocol for small messages, Simple for large:
    S. Jeaugey, NCCL 2.0, GTC 2017; the tuning model in src/graph/tuning.cc of
    github.com/NVIDIA/nccl), and serving engines pick their own one-shot/two-shot
    all-reduce below a size and NCCL above it.

    Examples:
        >>> import costmodel as cm
        >>> from costmodel._core.channels import allreduce_seconds
        >>> chip = cm.chip_preset("h100-sxm").replace(tensor_parallel=8)
        >>> def per(batch, chip):  # us per all-reduce of Llama 3 70B's step on eight H100
        ...     w = cm.Workload(cm.model_preset("llama-3-70b"), cm.Scenario(batch=batch, context=1024))
        ...     return round(float(allreduce_seconds(w, chip)) / (2 * 80) * 1e6, 1)
        >>> [per(b, chip) for b in (1, 64, 256)]  # 16 KiB: the small protocol; 1 and 4 MiB: the ring
        [8.4, 32.6, 50.7]
        >>> [per(b, chip.replace(link_bandwidth_small=0.0)) for b in (1, 64, 256)]  # the ring's line alone
        [26.6, 32.6, 50.7]

    References:
        P. Patarasuk and X. Yuan, "Bandwidth optimal all-reduce algorithms for
        clusters of workstations", J. Parallel Distrib. Comput. 69(2), 2009.
    """
    m, s = workload.model, workload.scenario
    tp = chip.tensor_parallel
    g = step_groups(workload)  # every query token of the step, prefill chunks included
    message = jnp.sum(g.sequences * g.queries) * m.d_model * s.activation_bytes
    share = 2.0 * (tp - 1.0) / tp
    several = jnp.clip(tp - 1.0, 0.0, 1.0)  # 1 on more than one chip: no latency on one
    ring = chip.link_latency * several + share * ring_seconds(message, chip)
    small_rate = chip.link_bandwidth_small > 0
    small = chip.link_latency_small * several + share * seconds(
        message, jnp.where(small_rate, chip.link_bandwidth_small, 1.0)
    )
    return 2.0 * m.n_layers * jnp.where(small_rate, jnp.minimum(small, ring), ring)


def pipeline_seconds(chip: Chip) -> Scalar:
    """Latency of the hops between pipeline stages, once per token, s."""
    return jnp.maximum(chip.pipeline_parallel - 1.0, 0.0) * chip.hop_latency


def host_seconds(sequences, chip: Chip):
    """Host time of one pass over `sequences` sequences that the serving stack does not
    hide behind the device: `host_step + (host_per_sequence + host_per_sequence_tp
    [tensor_parallel > 1]) x sequences`, s.

    A serving engine's CPU schedules each step, prepares its inputs and gathers the
    last step's tokens; each running request adds its own bookkeeping, sampling and
    detokenisation. Unless the engine overlaps that work with the device's (running
    one step ahead: NanoFlow, SGLang 0.4's and TensorRT-LLM's overlap schedulers),
    the device idles while it runs. vLLM 0.5.3 on one H100 serving Llama 3 8B spent
    33 % of its time in the HTTP API server and 29 % in scheduling, the GPU running
    38 % of the time. vLLM's V0 engine recreates every step's input tensors and
    metadata on its driver process, on any layout, and with more than one
    tensor-parallel worker broadcasts them to the others (V1 caches them on the workers
    and sends incremental updates): the `host_per_sequence_tp` term, one broadcast to
    all the workers, whatever their number.

    References:
        vLLM team, "vLLM v0.6.0: 2.7x Throughput Improvement and 5x Latency
        Reduction", https://blog.vllm.ai/2024/09/05/perf-update.html (2024);
        vLLM team, "vLLM V1: A Major Upgrade to vLLM's Core Architecture",
        https://blog.vllm.ai/2025/01/27/v1-alpha-release.html (2025), section 4 (the
        broadcast) and 5 (the inputs recreated each step);
        SGLang team, "SGLang v0.4: Zero-Overhead Batch Scheduler ...",
        https://lmsys.org/blog/2024-12-04-sglang-v0-4/ (2024);
        K. Zhu et al., "NanoFlow: Towards Optimal Large Language Model Serving
        Throughput", arXiv:2408.12757 (2024).
    """
    per_sequence = chip.host_per_sequence + jnp.where(chip.tensor_parallel > 1.0, chip.host_per_sequence_tp, 0.0)
    return chip.host_step + per_sequence * sequences


def pipelined_seconds(pass_seconds, micro_batches, stages):
    """Time between two tokens of a sequence when the batch is split into
    `micro_batches` groups that follow one another through `stages` pipeline stages, s.

    A group's pass through every stage takes `pass_seconds`, `1 / stages` of it in
    each. With at most as many groups as stages no group waits for a busy stage: a
    sequence's next token comes one pass later, while the other groups keep the other
    stages busy (GPipe's micro-batches; in decode, each group's next token needs its
    previous one, so the pipeline fills only with other groups). With more groups
    than stages each stage works through `micro_batches` groups per token:
    `pass_seconds x micro_batches / stages`.

    References:
        Y. Huang et al., "GPipe: Efficient Training of Giant Neural Networks using
        Pipeline Parallelism", NeurIPS 2019 (micro-batches in flight across stages);
        R. Pope et al., "Efficiently Scaling Transformer Inference", MLSys 2023, §3.3
        (pipelined decode: throughput from as many micro-batches as stages).
    """
    return pass_seconds * jnp.maximum(1.0, micro_batches / jnp.maximum(stages, 1.0))


# --- channel energies -----------------------------------------------------------------


def tier_joules(tier_bytes: PerTier, chip: Chip, host_bytes: RealScalarLike = 0.0) -> PerTier:
    """Energy of the bytes each tier serves: SRAM and DRAM at `Tiers.energy_per_byte`;
    the PIM tier at its internal access energy `Chip.pim_energy_per_byte`, plus the
    `host_bytes` its external links carry (`softmax_bytes`) at its
    `Tiers.energy_per_byte`, J."""
    joules = tier_bytes * chip.tiers.energy_per_byte
    pim = tier_bytes[PIM] * chip.pim_energy_per_byte + host_bytes * chip.tiers.energy_per_byte[PIM]
    return joules.at[PIM].set(pim)


def compute_joules(flops, precision, chip: Chip, pim_flops: RealScalarLike = 0.0) -> Scalar:
    """Dynamic energy of the FLOPs: the compute die's `flops` (per class) at their
    precision's `Chip.energy_per_flop`, and the PIM units' `pim_flops` at
    `Chip.pim_energy_per_flop`, J."""
    return jnp.sum(flops * chip.energy_per_flop[precision]) + pim_flops * chip.pim_energy_per_flop
