"""The cost of one decode step: time, energy and what bounds it.

Per step, each tier serves the bytes its share of each block class is read (and
written) with; SRAM and DRAM stream them to the compute die, while the PIM tier
computes on the bytes it holds (attention where its KV sits), sending the scores to
a host softmax and back unless the softmax sits beside it. The compute die does
the remaining FLOPs. The four channels overlap, over the whole step or, where the
kernels run in sequence (`Chip.serial_kernels`), within each block class's kernel, the
classes' times then adding; serial terms (per-layer latency,
kernel overhead, all-reduces, pipeline hops and the serving stack's unhidden host
time) add on top. Each channel's time and
energy formula lives in `costmodel._core.channels`; this module assembles them.
"""

import equinox as eqx
import jax
import jax.numpy as jnp

from . import channels as ch
from .chip import DRAM, PIM, SRAM, Chip
from .numerics import safe_div, seconds as seconds_at
from .placement import spill
from .traffic import CLASS_IS_KV, N_CLASSES, class_sum, lower_traffic
from .types import BoolScalar, IntScalar, PerTier, PlacementMatrix, Scalar
from .workload import F32, Workload


BOUNDS = ("memory", "compute", "latency")
"""What a step is bound by: the slowest memory channel, the compute die, or the
serial latency terms."""


class Cost(eqx.Module):
    """The cost of one decode step of a whole system.

    Attributes:
        seconds_per_step: wall time of one decode step, s.
        tokens_per_second: tokens per second over the whole batch (each sequence
            emits `AccessProfile.accepted` tokens per step).
        tokens_per_second_per_sequence: tokens per second seen by one sequence.
        joules_per_token: energy per generated token, all chips, J.
        power: average power per chip while decoding, W.
        bound: index into `BOUNDS`.
        tier_bytes: bytes each tier serves per step (all chips), B.
        tier_seconds: time each tier's channel needs per step (per micro-batch's
            pass, see `decode_cost`), s.
        tier_joules: energy of each tier's accesses per step (all chips), J.
        compute_seconds: time the compute die needs per step (per pass), s.
        compute_joules: dynamic compute energy per step (all chips), J.
        flops: FLOPs per step (all chips), FLOP.
        serial_seconds: latency, kernel overhead and communication per step (per
            pass), s.
        static_joules: static energy per step (all chips), J.
        stored_bytes: bytes each chip holds in each tier after spilling, B.
        overflow_bytes: bytes per chip that fit in no tier, B.
        feasible: whether everything fits.

    With `Chip.serial_kernels` > 0 the channel times (`tier_seconds`, `compute_seconds`)
    are still those of the whole step, but the step is no longer their overlap plus
    `serial_seconds`: each class's kernel overlaps its own channels and the classes add,
    so the step can exceed every channel, and `bound` names the largest channel, not a
    share of the step.
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


def decode_cost(workload: Workload, chip: Chip, placement: PlacementMatrix) -> Cost:
    """The time and energy of one decode step.

    Args:
        workload: the model and scenario.
        chip: the chip (and its tensor/pipeline-parallel system).
        placement: `[rows, tiers]` fractions of each row of `ROWS` (a weight class
            or a heat bucket of the KV history) per tier (rows on the simplex), soft
            or hard; or `[len(CLASSES), tiers]`, one row per class (the class layout
            of `lower_traffic(..., buckets=False)`).

    Returns:
        A `Cost`. A placement that overflows SRAM or PIM spills to DRAM; one that
        overflows DRAM is reported through `overflow_bytes` and `feasible`.

    With `Scenario.micro_batches` = G > 1 the batch passes through the pipeline
    stages in G groups (`costmodel.pipelined_seconds`): a step is the time between
    two tokens of one sequence, during which every group takes one pass; the
    channel times (`tier_seconds`, `compute_seconds`, `serial_seconds`) are those of
    one group's pass, the bytes, FLOPs and energies those of all G passes. With
    G = 1 the two are the same.

    Examples:
        >>> import costmodel as cm
        >>> w = cm.Workload(cm.model_preset("llama-3-8b"), cm.Scenario(batch=1, context=4096))
        >>> chip = cm.chip_preset("h100-sxm")
        >>> cost = cm.decode_cost(w, chip, cm.policy_placement("dram", cm.lower_traffic(w), chip))
        >>> cm.BOUNDS[int(cost.bound)]
        'memory'
    """
    # The placement's rows say the layout: heat buckets (`ROWS`) or one row per class.
    buckets = placement.shape[-2] != N_CLASSES
    traffic = lower_traffic(workload, buckets)  # every sequence of the batch: what is stored
    s = workload.scenario
    tiers = chip.tiers
    n = chip.n_chips
    tp = chip.tensor_parallel
    held = spill(placement, traffic, chip)  # [rows, tiers]
    # The batch passes through the stages in `micro_batches` groups: each pass reads
    # the weights and its own sequences' KV, and does their FLOPs.
    groups = jnp.maximum(s.micro_batches, 1.0)
    group = eqx.tree_at(lambda w: w.scenario.batch, workload, s.batch / groups)
    passing = lower_traffic(group, buckets)

    # Per tier and class: the bytes moved and the FLOPs done in one pass (each class's
    # buckets summed), so the per-class kernel efficiencies and FLOP rates apply once.
    moved = class_sum(held * (passing.read_bytes + passing.writes)[:, None], axis=0)  # [classes, tiers]
    # Quantised weights are unpacked between their loads and the matmul: ALU time each
    # chip spends on its share of each weight class's bytes DRAM streams (in the stored
    # format). A kernel whose matmuls run on the FP32 lanes (precision F32: GPTQ's below
    # its copy) unpacks on the same lanes, so its unpacking adds to its compute; a
    # tensor-core kernel's holds its loads' slots instead (`stream_bandwidth`).
    weight_dram = jnp.where(jnp.asarray(CLASS_IS_KV), 0.0, moved[:, DRAM]) / tp  # [classes]
    unpack = ch.dequant_seconds(weight_dram, group, chip)  # [classes]
    on_lanes = jnp.where(passing.precision == F32, unpack, 0.0)
    busy = jnp.sum(unpack - on_lanes)
    # A kernel that unpacks them into a 16-bit copy writes it and its GEMM reads it back
    # (`weight_copy_bytes`; none unless `Scenario.weight_copy_rows`).
    moved = ch.with_weight_copy(moved, group)
    flops = class_sum(held * passing.flops[:, None], axis=0)  # [classes, tiers]
    tier_bytes = jnp.sum(moved, axis=0)  # [tiers], all chips
    # A pipeline runs its stages one after another for each token, so a pass sees
    # the bytes of all stages through one tensor-parallel group's channels.
    group_bytes = tier_bytes / tp
    # Small kernels stream slower: each class's bytes in full-rate equivalents.
    stream_eff = ch.class_stream_efficiency(passing, chip)  # [classes]
    full = moved / stream_eff[:, None]  # [classes, tiers]
    # K/V re-reads the on-chip cache serves stream at its rate (`class_cached_rereads`).
    full = full.at[:, SRAM].add((full[:, SRAM] + full[:, DRAM]) * ch.class_cached_rereads(passing, chip))
    slow = jnp.sum(full, axis=0)
    # One stream rate per class and tier for the step (`stream_seconds` is linear in the
    # bytes): the weights' kernels under their bytes in flight, the attention kernels'
    # K/V at the tier's rate (`class_in_flight`).
    per_byte = ch.busy_per_byte(slow[DRAM] / tp, busy)
    bandwidth = jax.vmap(lambda f: ch.stream_bandwidth(tiers, f, per_byte))(
        ch.class_in_flight(chip)
    )  # [classes, tiers]
    class_tier = seconds_at(full / tp, bandwidth)  # [classes, tiers]
    stream = jnp.sum(class_tier, axis=0)
    pim_flops = jnp.sum(flops[:, PIM])
    # Attention in PIM sends its scores to a host softmax and takes the probabilities
    # back over the PIM dies' external links (none when the softmax sits beside them).
    kv_flops = jnp.where(jnp.asarray(CLASS_IS_KV)[:, None], flops, 0.0)
    pim_attention = jnp.sum(kv_flops[:, PIM])
    host_bytes = ch.softmax_bytes(pim_attention, group, chip)
    pim_share = safe_div(pim_attention, jnp.sum(kv_flops))
    pim_seconds = ch.pim_seconds(group_bytes[PIM], pim_flops / tp, chip) + ch.softmax_seconds(
        host_bytes / tp, pim_share, group, chip
    )
    is_pim = jnp.arange(stream.shape[-1]) == PIM
    tier_seconds = jnp.where(is_pim, pim_seconds, stream)

    # The compute die does the FLOPs on the bytes SRAM and DRAM stream to it, each at
    # the rate it sustains on operands from that tier (`compute_feed`); the shares are
    # given as FLOPs (of one FLOP each).
    rates = ch.class_flop_rates(group, passing, chip)
    feed = ch.effective_feed(chip)
    ones = jnp.ones_like(rates)
    class_compute = ch.compute_seconds(ones, rates, flops[:, SRAM], flops[:, DRAM], feed, tp) + on_lanes
    # A quantised cache is unpacked by the attention kernels' ALUs, once per thread block
    # that reads it: compute time of the KV classes, on the bytes SRAM and DRAM stream
    # (PIM computes on its own bytes; writes are not unpacked).
    read = class_sum(held * passing.read_bytes[:, None], axis=0)  # [classes, tiers]
    kv_streamed = (read[:, SRAM] + read[:, DRAM]) / tp
    class_compute = class_compute + jnp.where(
        jnp.asarray(CLASS_IS_KV), ch.kv_dequant_seconds(kv_streamed, passing, group, chip), 0.0
    )
    compute_seconds = jnp.sum(class_compute)
    overlapped = ch.overlapped_seconds(tier_seconds[SRAM], tier_seconds[PIM], tier_seconds[DRAM], compute_seconds, chip)
    # Kernels in sequence: each class's kernel overlaps only its own channels, and the
    # classes add (a layer's GEMMs wait for its attention on one stream; NanoFlow, K. Zhu
    # et al., OSDI 2025, arXiv:2408.12757). Each class streams its full-rate bytes at its
    # rate in the step (so the weights' unpacking time, `busy`, slows the KV classes'
    # bytes as well, an approximation); of the PIM tier's time each class takes its share of the
    # PIM bytes (its softmax round trips too, though they belong to attention alone: no
    # profile with PIM sets the field; the share's floor of 1 B keeps its gradient finite
    # over a vanishing PIM tier). By Minkowski's inequality the sum is never below the
    # whole step's overlap.
    pim_share = moved[:, PIM] / jnp.maximum(tier_bytes[PIM], 1.0)
    class_tier = class_tier.at[:, PIM].set(tier_seconds[PIM] * pim_share)
    in_sequence = jnp.sum(
        ch.overlapped_seconds(class_tier[:, SRAM], class_tier[:, PIM], class_tier[:, DRAM], class_compute, chip)
    )
    parallel = (1.0 - chip.serial_kernels) * overlapped + chip.serial_kernels * in_sequence

    share = safe_div(tier_bytes, jnp.sum(tier_bytes))
    latency = ch.access_seconds(workload.model.n_layers, share, tiers.latency, chip.kernel_overhead)
    serial = (
        latency
        + ch.allreduce_seconds(group, chip)
        + ch.pipeline_seconds(chip)
        + ch.host_seconds(group.scenario.batch, chip)
    )
    one_pass = parallel + serial
    # A step: every group takes one pass, each stage working on another group. With
    # no more groups than stages a group never waits for a stage, and the step is
    # one pass; with more, each stage works through all of them in turn.
    seconds = ch.pipelined_seconds(one_pass, groups, chip.pipeline_parallel)

    tier_joules = groups * ch.tier_joules(tier_bytes, chip, host_bytes)
    host_flops = jnp.sum(flops, axis=-1) - flops[:, PIM]  # [classes]
    compute_joules = groups * ch.compute_joules(host_flops, passing.precision.astype(jnp.int32), chip, pim_flops)
    static_joules = chip.static_power * n * seconds
    joules = jnp.sum(tier_joules) + compute_joules + static_joules

    stored = jnp.sum(held * traffic.stored_bytes[:, None], axis=0) / n
    # SRAM and PIM cannot overflow after `spill`; DRAM, the last tier, can.
    overflow = jnp.maximum(stored[DRAM] - tiers.capacity[DRAM], 0.0)
    feasible = overflow <= 1e-6 * jnp.sum(stored)

    memory_seconds = jnp.max(tier_seconds)
    bound = jnp.argmax(jnp.stack([memory_seconds, compute_seconds, serial])).astype(jnp.int32)
    emitted = s.batch * workload.profile.accepted  # tokens per step, all sequences
    return Cost(
        seconds_per_step=seconds,
        tokens_per_second=safe_div(emitted, seconds),
        tokens_per_second_per_sequence=safe_div(workload.profile.accepted * jnp.ones_like(seconds), seconds),
        joules_per_token=safe_div(joules, emitted),
        power=safe_div(joules, seconds * n),
        bound=bound,
        tier_bytes=groups * tier_bytes,
        tier_seconds=tier_seconds,
        tier_joules=tier_joules,
        compute_seconds=compute_seconds,
        compute_joules=compute_joules,
        flops=groups * jnp.sum(passing.flops),
        serial_seconds=serial,
        static_joules=static_joules,
        stored_bytes=stored,
        overflow_bytes=overflow,
        feasible=feasible,
    )


def first_token_seconds(workload: Workload, seconds_per_step):
    """Time to first token under chunked prefill (`Workload.prefill`): a request's
    prompt is prefilled in `prompt / chunk` consecutive steps, one chunk per step, and
    its first token comes with the last chunk, s. Queueing before admission is not
    included (a steady state below saturation). Without a `Prefill`, 0.

    References:
        A. Agrawal et al., "Taming Throughput-Latency Tradeoff in LLM Inference with
        Sarathi-Serve", OSDI 2024, §4 (a prompt's chunks ride on consecutive steps).
    """
    pre = workload.prefill
    if pre is None:
        return 0.0 * seconds_per_step
    return safe_div(pre.prompt_tokens, pre.chunk) * seconds_per_step
