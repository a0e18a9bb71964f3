"""Evaluating a model on a chip preset: presets and names in, a decode cost out.

The system-sizing rule (`size_system`, traceable, shared with the compiled sweep), the
placement on the whole system (`system_placement`) and the serving-framework
multipliers (`apply_multipliers`) live here too, so every application sizes and
places a system the same way.
"""

from __future__ import annotations

import dataclasses
import functools
import math

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from ._core.chip import DRAM, PIM, SRAM, TIERS, Chip
from ._core.cost import Cost, decode_cost
from ._core.placement import CAPACITY_MARGIN, policy_placement
from ._core.traffic import lower_traffic
from ._core.workload import AccessProfile, Model, Workload
from .io import ChipInfo, InputError, chip_info, load_model, make_scenario
from .io.frameworks import (
    CHIP_HALF_RATE,
    INFERENCE_MODES,
    PROFILE_FIELDS,
    PROFILE_HALF_RATE_FLOOR,
    UNBOUNDED_IN_FLIGHT_KB,
    Framework,
    resolve_framework,
)


MAX_TENSOR_PARALLEL = 8
"""Widest tensor-parallel group the automatic system sizing uses; beyond it the
layers are split into pipeline stages (as SRAM-only machines serve 70B models)."""

MAX_SYSTEM_CHIPS = 64
"""Most chips a system of chips built from an area split may have (co-design and the
sweep's area mode): a chip with no preset has no `max_chips` of its own."""


def system_placement(policy: str, traffic, chip: Chip, whole_blocks: bool = True) -> jnp.ndarray:
    """`policy_placement` computed on the whole system as one chip (`whole_blocks`: as
    there; False fills SRAM and PIM to the byte).

    Every block is split evenly over all chips, so "each chip's share fits each chip"
    and "the whole fits the sum of the capacities" are the same constraint. Stated on
    the whole system, block sizes stay whole numbers of bytes, which keeps the
    placement's block rounding exact in float32: per chip, `blocks * (bytes / n) / (bytes
    / n)` can round to one block less, which on a machine with no DRAM (Groq) sends a
    block to a tier of zero bandwidth.
    """
    n = chip.n_chips
    whole = chip.replace(
        tensor_parallel=1.0,
        pipeline_parallel=1.0,
        tiers=eqx.tree_at(lambda t: t.capacity, chip.tiers, chip.tiers.capacity * n),
    )
    return policy_placement(policy, traffic, whole, whole_blocks)


@eqx.filter_jit
def evaluate_policy(workload: Workload, chip: Chip, policy: str) -> tuple[Cost, jnp.ndarray]:
    """Cost of a workload on a chip with a hard placement from `policy` (jit-compiled)."""
    placement = system_placement(policy, lower_traffic(workload), chip)
    return decode_cost(workload, chip, placement), placement


FAST_TIERS = {"dram": [DRAM], "sram": [SRAM], "pim_kv": [PIM, DRAM], "pim": [PIM], "greedy": [SRAM, PIM]}
"""Placement policy -> the tiers it fills first (an SRAM machine is sized to hold
everything in SRAM when it can)."""
ALL_TIERS = {
    "dram": [DRAM],
    "sram": [SRAM, DRAM],
    "pim_kv": [PIM, DRAM],
    "pim": [PIM, DRAM],
    "greedy": [SRAM, PIM, DRAM],
}
"""Placement policy -> the tiers it may use at all; with `FAST_TIERS` (the tiers it
fills first), what `size_system` sizes a system to hold."""


SRAM_RESERVE = 0.05
"""Fraction of each chip's SRAM an SRAM machine is sized to leave free for activations,
instruction streams and whole-block rounding (an assumption: Groq's third-party
576-chip estimate for Llama-2-70B leaves far more)."""


def tier_mask(tiers: list[int]) -> np.ndarray:
    """A `[tiers]` 0/1 mask of the listed tier indices."""
    return np.array([float(i in tiers) for i in range(len(TIERS))], np.float32)


def size_system(stored, n_layers, capacity, max_chips, fast_tiers, all_tiers, sram_machine, chips=None):
    """The system-sizing rules of `system_size`, traceable: jit- and vmap-safe.

    Args:
        stored: bytes the whole system stores (weights and KV cache), B.
        n_layers: layers of the model.
        capacity: `[tiers]` capacity of one chip, B.
        max_chips: most chips the system may have.
        fast_tiers, all_tiers: `[tiers]` 0/1 masks: the tiers the placement policy
            fills first, and every tier it may use.
        sram_machine: whether the chip is an SRAM machine (placement `sram`).
        chips: a fixed number of chips, or None for the fewest that fit.

    Returns:
        (tensor_parallel, pipeline_parallel, fits), as arrays; `fits` is False when
        `chips` is None and no system of at most `max_chips` chips holds `stored`.
    """
    capacity = jnp.asarray(capacity)
    fast_tiers, all_tiers = (jnp.asarray(m, capacity.dtype) for m in (fast_tiers, all_tiers))
    stored = jnp.asarray(stored, capacity.dtype)
    # A hard placement leaves CAPACITY_MARGIN of SRAM and PIM free: size for what it uses.
    usable = jnp.asarray([1 - SRAM_RESERVE, 1 - 2 * CAPACITY_MARGIN, 1 - 2 * CAPACITY_MARGIN], capacity.dtype)
    sram_machine = jnp.asarray(sram_machine, bool)
    if chips is None:

        def need(mask):
            per_chip = jnp.sum(capacity * usable * mask)
            ok = per_chip > 0
            n = jnp.ceil(stored / jnp.where(ok, per_chip, 1.0) * (1 + 1e-6))
            return jnp.where(ok, jnp.maximum(n, 1.0), jnp.inf)

        fast = need(fast_tiers)
        in_fast = fast <= max_chips
        n = jnp.where(in_fast, fast, need(all_tiers))
        fits = n <= max_chips
        n = jnp.clip(n, 1.0, max_chips)
        # An SRAM machine that does not fit in SRAM spills to its DRAM like a GPU.
        sram_machine = sram_machine & in_fast
    else:
        n = jnp.asarray(chips, capacity.dtype)
        fits = jnp.asarray(True)
    # A dataflow machine splits each layer over the fewest chips (a power of two, at
    # most MAX_TENSOR_PARALLEL) whose SRAM holds the layer's share.
    per_layer = stored / jnp.maximum(n_layers, 1.0)
    layer_tp = jnp.asarray(1.0, capacity.dtype)
    for _ in range(max(1, math.ceil(math.log2(MAX_TENSOR_PARALLEL)))):
        grow = (layer_tp < MAX_TENSOR_PARALLEL) & (per_layer / layer_tp > capacity[SRAM])
        layer_tp = jnp.where(grow, layer_tp * 2, layer_tp)
    dataflow = sram_machine & (capacity[SRAM] > 0)
    tp = jnp.minimum(n, jnp.where(dataflow, layer_tp, float(MAX_TENSOR_PARALLEL)))
    return tp, jnp.ceil(n / tp), fits


_size_auto = jax.jit(functools.partial(size_system, chips=None))
_size_fixed = jax.jit(size_system)


def layout_problem(model: Model, tensor_parallel: int, pipeline_parallel: int) -> str | None:
    """Why a tensor x pipeline layout cannot split `model` as the cost model splits it,
    or None when it can.

    Tensor parallelism splits every layer's query heads and KV heads evenly over the
    group (`decode_cost` divides each tier's bytes, the KV cache's included, by
    `tensor_parallel`), so the width must divide both head counts: KV-head
    replication (a width above the KV heads, as vLLM does) is not modelled. Pipeline
    stages split the layers and add a hop each (`pipeline_seconds`); they need no
    divisibility.
    """
    del pipeline_parallel
    heads, kv = int(round(float(model.n_heads))), int(round(float(model.n_kv_heads)))
    if heads % tensor_parallel or kv % tensor_parallel:
        widths = [d for d in range(1, math.gcd(heads, kv) + 1) if math.gcd(heads, kv) % d == 0]
        return (
            f"tensor parallelism {tensor_parallel} does not divide the model's {heads} query heads and {kv} KV heads "
            f"evenly (expected a width in {widths}; KV-head replication is not modelled)"
        )
    return None


def check_chip_count(info: ChipInfo, chips: int) -> None:
    """The one check of a requested chip count against the chip's system: a whole number
    from 1 to `max_chips`.

    Raises:
        InputError: naming the count, the chip and its `max_chips`.
    """
    if isinstance(chips, bool) or not isinstance(chips, int) or chips < 1:
        raise InputError(f"chips = {chips!r}: expected a whole number >= 1")
    if chips > info.max_chips:
        raise InputError(
            f"chips = {chips}: expected at most the max_chips of chip {info.name!r} ({info.max_chips}), the "
            "largest system its data describes"
        )


def check_layout(
    workload: Workload, info: ChipInfo, tensor_parallel: int, pipeline_parallel: int, chips: int | None = None
) -> None:
    """The one check of a system's layout: `layout_problem`, and for a requested chip
    count (`chips`) that the layout uses exactly that many chips (`check_chip_count`
    first). A layout given as (`tensor_parallel`, `pipeline_parallel`) alone may exceed
    `max_chips` (a paper's multi-node baseline: NeuPIMs' 32 A100s).

    Raises:
        InputError: naming the chip count or layout, the model's heads and what was
            expected.
    """
    where = f"chips = {chips}" if chips is not None else f"tensor_parallel = {tensor_parallel}"
    if chips is not None:
        check_chip_count(info, chips)
    problem = layout_problem(workload.model, tensor_parallel, pipeline_parallel)
    if problem is None and chips is not None and tensor_parallel * pipeline_parallel != chips:
        problem = (
            f"chip {info.name!r} lays {chips} chips out as TP {tensor_parallel} x PP {pipeline_parallel} = "
            f"{tensor_parallel * pipeline_parallel} chips; expected a count it uses exactly"
        )
    if problem is not None:
        if chips is not None:
            valid = _valid_counts(workload, info, chips)
            problem += f"; chip counts that split evenly near {chips}: {valid}" if valid else ""
        raise InputError(f"{where} (TP {tensor_parallel} x PP {pipeline_parallel}): {problem}")


def _sizing_args(info: ChipInfo, workload: Workload) -> tuple:
    stored = jnp.sum(lower_traffic(workload).stored_bytes)
    return (
        stored,
        workload.model.n_layers,
        info.chip.tiers.capacity,
        float(info.max_chips),
        tier_mask(FAST_TIERS[info.placement]),
        tier_mask(ALL_TIERS[info.placement]),
        info.placement == "sram",
    )


def _valid_counts(workload: Workload, info: ChipInfo, chips: int, show: int = 4) -> list[int]:
    """Up to `show` chip counts nearest `chips` (at most `max_chips`) whose layout
    passes `layout_problem` and uses exactly that many chips; for an error message."""
    counts = np.arange(1, info.max_chips + 1, dtype=float)
    tp, pp, _ = jax.vmap(_size_fixed, in_axes=(None,) * 7 + (0,))(*_sizing_args(info, workload), counts)
    ok = [
        int(n)
        for n, t, p in zip(counts, np.asarray(tp), np.asarray(pp))
        if int(t) * int(p) == int(n) and layout_problem(workload.model, int(t), int(p)) is None
    ]
    return sorted(sorted(ok, key=lambda n: (abs(n - chips), n))[:show])


def system_size(info: ChipInfo, workload: Workload, chips: int | None = None) -> tuple[int, int]:
    """(tensor_parallel, pipeline_parallel) for `chips` chips, or the fewest that fit.

    A GPU-like chip (placement other than `sram`) splits each layer over up to
    `MAX_TENSOR_PARALLEL` chips and only then adds pipeline stages.

    An SRAM machine (placement `sram`) is sized to hold everything in SRAM when it can
    within its `max_chips` (as Groq and Cerebras deploy), and otherwise spills to its
    DRAM. It is laid out as a dataflow pipeline: each layer is split over the fewest
    chips whose SRAM holds its share (`tensor_parallel`, a power of two up to
    `MAX_TENSOR_PARALLEL`), and the layers are spread over the remaining chips as
    pipeline stages, so a token crosses `pipeline_parallel - 1` chip-to-chip hops. This
    is what sets a per-user rate of such a machine: a few hundred chips for a 70B model
    mean tens of hops per token, each paying `hop_latency`.

    The rules are `size_system` (traceable, shared with the compiled sweep). Here the
    layout is also checked (`check_layout`): a given `chips` must be at most
    `max_chips`, laid out exactly and with a tensor-parallel width that divides the
    query and KV heads; without `chips`, the fewest chips that fit is raised to the
    next count whose layout divides the heads (a 70B model that needs 3 H100s gets 4:
    three-way tensor parallelism does not split 64 query and 8 KV heads).

    Raises:
        InputError: if the workload fits on no system of at most `max_chips` chips, or
            a given `chips` fails `check_layout`.
    """
    if chips is not None:
        check_chip_count(info, chips)
    args = _sizing_args(info, workload)
    tp, pp, fits = _size_auto(*args) if chips is None else _size_fixed(*args, float(chips))
    if not bool(fits):
        raise InputError(
            f"chip {info.name!r}: the model and KV cache need {float(args[0]) / 1e9:.3g} GB, more than "
            f"max_chips ({info.max_chips}) chips hold; pass --chips to force a size"
        )
    tp, pp = int(tp), int(pp)
    if chips is None and layout_problem(workload.model, tp, pp) is not None:
        for n in range(tp * pp + 1, info.max_chips + 1):
            t, p, _ = _size_fixed(*args, float(n))
            if layout_problem(workload.model, int(t), int(p)) is None:
                tp, pp = int(t), int(p)
                break
    check_layout(workload, info, tp, pp, chips)
    return tp, pp


@dataclasses.dataclass(frozen=True)
class Evaluation:
    """A cost with what it was computed for."""

    cost: Cost
    placement: jnp.ndarray
    workload: Workload
    chip: Chip
    info: ChipInfo
    model_name: str
    tensor_parallel: int
    pipeline_parallel: int
    profile_name: str = "dense"

    def require_fit(self) -> Evaluation:
        """This evaluation, if the model and KV cache fit the system.

        Raises:
            InputError: naming the chip, the system size and the overflow.
        """
        if not bool(self.cost.feasible):
            over = float(self.cost.overflow_bytes) / 1e9
            raise InputError(
                f"chip {self.info.name!r} x {self.tensor_parallel * self.pipeline_parallel}: the model and KV cache "
                f"do not fit ({over:.3g} GB per chip over capacity); use more --chips"
            )
        return self


def evaluate(
    model: str | Model = "llama-3-8b",
    chip: str | ChipInfo = "h100-sxm",
    *,
    batch: float = 1,
    context: float = 4096,
    prefix: float = 0,
    weights: str = "bf16",
    kv: str = "bf16",
    chips: int | None = None,
    placement: str | None = None,
    framework: str | None = None,
    tensor_parallel: int | None = None,
    pipeline_parallel: int | None = None,
    profile: str | AccessProfile = "dense",
    micro_batches: float | str = 1,
    inference: str = "online",
) -> Evaluation:
    """Evaluates one decode step of a model on a chip preset, placed as that system does.

    Args:
        model: a model preset id, a `config.json` path, or a `Model`.
        chip: a chip preset id, a chip TOML path, or a `ChipInfo`.
        batch, context, prefix: the scenario (tokens).
        weights, kv: number formats by name (`costmodel presets`).
        chips: system size; by default the fewest chips the model and cache fit on.
        placement: a placement policy overriding the chip's own.
        framework: a serving-framework efficiency profile (`data/frameworks.toml`:
            `llama.cpp`, `gpt-fast`, `trt-llm`, `vllm`, `native`, ...), applied as
            `apply_framework` does: its kernels' bytes in flight, multipliers on the
            chip's memory-tier and compute efficiency, per-layer kernel overhead and
            all-reduce latency, its host time, K/V re-reads and its kernels'
            instructions to unpack `weights`; None uses the chip preset as it is.
        tensor_parallel, pipeline_parallel: an explicit system layout (both, or
            neither); overrides `chips`.
        profile: the KV access profile: a preset id (`data/profiles.toml`), a
            profile TOML path, or an `AccessProfile`.
        micro_batches: groups the batch is split into, in flight at once through a
            pipeline-parallel system (`Scenario.micro_batches`), or "auto": one per
            pipeline stage (at most one per sequence), so every stage is busy.
        inference: how the framework's engine runs (`costmodel.io.frameworks.INFERENCE_MODES`):
            "online", serving requests and streaming each token as it is generated, or
            "offline", the whole batch run in the client's process (vLLM's
            `LLM.generate`), which prices its host time per sequence without the
            streaming where the profile gives one.

    Returns:
        An `Evaluation`; `.cost` holds the figures.

    Examples:
        >>> import costmodel as cm
        >>> e = cm.evaluate("llama-3-8b", "h100-sxm", batch=1, context=4096)
        >>> 100 < float(e.cost.tokens_per_second) < 250
        True
    """
    m = model if isinstance(model, Model) else load_model(model)
    info = chip if isinstance(chip, ChipInfo) else chip_info(chip)
    if placement is not None:
        info = dataclasses.replace(info, placement=placement)
    if inference not in INFERENCE_MODES:  # (apply_profile_fields checks it too, for its other callers)
        raise InputError(f"inference = {inference!r}: expected one of {list(INFERENCE_MODES)}")
    if framework is not None:
        info = apply_framework(info, framework, inference=inference, kv=kv)
    if micro_batches != "auto" and not isinstance(micro_batches, (int, float)) or isinstance(micro_batches, bool):
        raise InputError(f"micro_batches = {micro_batches!r}: expected a number >= 1 or 'auto'")
    groups = 1 if micro_batches == "auto" else micro_batches
    scenario = make_scenario(
        batch=batch,
        context=context,
        prefix=prefix,
        weights=weights,
        kv=kv,
        micro_batches=groups,
        dequant_ops=info.dequant(weights),
        kv_dequant_ops=info.kv_dequant(kv),
        copy_rows=info.copy(weights),
        dequant_rows=info.tile(weights),
    )
    profile_name, prof = resolve_profile(profile, context)
    workload = Workload(m, scenario, prof)
    if (tensor_parallel is None) != (pipeline_parallel is None):
        raise InputError(
            f"tensor_parallel = {tensor_parallel!r}, pipeline_parallel = {pipeline_parallel!r}: expected both or neither"
        )
    if tensor_parallel is not None:
        for key, value in (("tensor_parallel", tensor_parallel), ("pipeline_parallel", pipeline_parallel)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise InputError(f"{key} = {value!r}: expected a whole number >= 1")
        assert pipeline_parallel is not None  # both or neither, checked above
        tp, pp = tensor_parallel, pipeline_parallel
        check_layout(workload, info, tp, pp)
    else:
        tp, pp = system_size(info, workload, chips)
    if micro_batches == "auto":
        scenario = eqx.tree_at(lambda sc: sc.micro_batches, scenario, jnp.asarray(float(min(pp, batch))))
        workload = Workload(m, scenario, prof)
    system = info.chip.replace(tensor_parallel=tp, pipeline_parallel=pp)
    cost, placed = evaluate_policy(workload, system, info.placement)
    name = model if isinstance(model, str) else "custom"
    return Evaluation(cost, placed, workload, system, info, name, tp, pp, profile_name)


def resolve_profile(profile: str | AccessProfile, context: float) -> tuple[str, AccessProfile]:
    """(name, profile) of a profile preset id, a profile TOML path or an `AccessProfile`;
    a named one is checked against the `context` it is used at.

    Raises:
        InputError: an unknown preset, a bad file, or a profile that does not fit the
            context (e.g. a budget larger than the history).
    """
    if isinstance(profile, AccessProfile):
        return "custom", profile
    if profile == "dense":  # the default: no file to read (`data/profiles.toml` agrees)
        return "dense", AccessProfile()
    from .io.profiles import check_profile, profile_info

    info = profile_info(profile)
    check_profile(info, context)
    return info.name, info.profile


def apply_multipliers(chip: Chip, log_multipliers: jnp.ndarray) -> Chip:
    """A chip with a profile's multipliers and kernel concurrency applied (pure,
    differentiable).

    Args:
        chip: the chip preset.
        log_multipliers: `[6]` logs of the profile's `PROFILE_FIELDS`: the four
            multipliers, the bytes its kernels keep in flight per parallel unit (kB),
            then its matmuls' half-rate rows.

    Returns:
        The chip with tier efficiencies and compute efficiency scaled (capped at 1),
        kernel overhead and all-reduce latency scaled, `Chip.bytes_in_flight` the
        smaller of the chip's own (where it has one) and the profile's, and
        `Chip.half_rate_rows` the profile's where it gives one (above
        `PROFILE_HALF_RATE_FLOOR`), else the chip's own.
    """
    if jnp.shape(log_multipliers) != (len(PROFILE_FIELDS),):
        raise ValueError(
            f"log_multipliers has shape {jnp.shape(log_multipliers)}: expected ({len(PROFILE_FIELDS)},), "
            f"the logs of {list(PROFILE_FIELDS)}"
        )
    m = jnp.exp(log_multipliers)
    efficiency = jnp.minimum(chip.tiers.efficiency * m[0], 1.0)
    tiers = eqx.tree_at(lambda t: t.efficiency, chip.tiers, efficiency)
    profile = m[4] * 1e3
    in_flight = jnp.where(chip.bytes_in_flight > 0, jnp.minimum(chip.bytes_in_flight, profile), profile)
    half_rate = jnp.where(m[5] > PROFILE_HALF_RATE_FLOOR, m[5], chip.half_rate_rows)
    return eqx.tree_at(
        lambda c: (
            c.tiers,
            c.compute_efficiency,
            c.kernel_overhead,
            c.link_latency,
            c.link_latency_small,
            c.bytes_in_flight,
            c.half_rate_rows,
        ),
        chip,
        (
            tiers,
            jnp.minimum(chip.compute_efficiency * m[1], 1.0),
            chip.kernel_overhead * m[2],
            chip.link_latency * m[3],
            chip.link_latency_small * m[3],
            in_flight,
            half_rate,
        ),
    )


NEUTRAL_PROFILE = (1.0, 1.0, 1.0, 1.0, UNBOUNDED_IN_FLIGHT_KB, CHIP_HALF_RATE)
"""The profile that leaves a chip as it is (`apply_multipliers` of its log is the identity
up to the chip's own bytes in flight)."""


def apply_host(chip: Chip, host_us) -> Chip:
    """A chip whose serving stack's unhidden host time is a framework's: `host_us` is
    (`host_step`, `host_per_sequence`) in µs (`costmodel.io.frameworks.HOST_FIELDS`);
    they replace the chip's own (pure, differentiable)."""
    host = jnp.asarray(host_us, dtype=float) * 1e-6
    return eqx.tree_at(lambda c: (c.host_step, c.host_per_sequence), chip, (host[0], host[1]))


def apply_profile_fields(chip: Chip, f: Framework, inference: str = "online", kv: str | None = None) -> Chip:
    """A chip with the fields of a profile that are not in its log vector, where the
    profile gives them: its host time for an engine run as `inference` says
    (`apply_host`, `Framework.host_us`; `costmodel.io.frameworks.INFERENCE_MODES`) and the host
    time a tensor-parallel step adds (`Chip.host_per_sequence_tp`), its attention kernels' K/V
    re-reads (`Chip.attention_kv_rereads` of the kernel it runs over a cache of format `kv`:
    `Framework.rereads`; `Chip.attention_heads_per_block`) and the share of them the on-chip
    cache serves (`Chip.attention_rereads_cached`), whether it runs
    a layer's kernels in sequence (`Chip.serial_kernels`) and the share of the DRAM it allocates
    (`Framework.memory_fraction`: the DRAM tier's capacity scaled by it)."""
    if inference not in INFERENCE_MODES:
        raise InputError(f"inference = {inference!r}: expected one of {list(INFERENCE_MODES)}")
    host = f.host_us(inference)
    if host is not None:
        chip = apply_host(chip, host)
    if f.host_tp is not None:
        chip = chip.replace(host_per_sequence_tp=f.host_tp * 1e-6)
    rereads = f.rereads(kv)
    if rereads is not None:
        chip = chip.replace(attention_kv_rereads=rereads)
    if f.rereads_cached is not None:
        chip = chip.replace(attention_rereads_cached=f.rereads_cached)
    if f.heads_per_block is not None:
        chip = chip.replace(attention_heads_per_block=f.heads_per_block)
    if f.serial_kernels is not None:
        chip = chip.replace(serial_kernels=f.serial_kernels)
    if f.memory_fraction != 1.0:
        chip = allocate_dram(chip, chip.tiers.capacity, f.memory_fraction)
    return chip


def allocate_dram(chip: Chip, capacity, fraction: float) -> Chip:
    """A chip whose DRAM tier holds `fraction` of the DRAM of `capacity` (a `[tiers]`
    capacity, B): the share an engine allocates to weights and KV cache
    (`Framework.memory_fraction`, a serving row's own)."""
    return eqx.tree_at(lambda c: c.tiers.capacity, chip, jnp.asarray(capacity).at[DRAM].multiply(fraction))


def apply_framework(
    info: ChipInfo,
    framework: str,
    frameworks: dict[str, Framework] | None = None,
    inference: str = "online",
    kv: str | None = None,
) -> ChipInfo:
    """A `ChipInfo` whose chip has the framework profile applied (for `evaluate`): its
    multipliers, kernel concurrency and GEMMs' half-rate rows (`apply_multipliers`), its host time
    (`apply_host`), its attention kernels' K/V re-reads (`Chip.attention_kv_rereads`,
    `Chip.attention_heads_per_block`), whether it
    runs a layer's kernels in sequence (`Chip.serial_kernels`), and its
    scheduler's batch cap (`ChipInfo.max_batch`, for `serve`), and its kernels' instructions to
    unpack quantised weights and K/V (`ChipInfo.dequant_ops`, `ChipInfo.kv_dequant_ops`). `frameworks`: the profiles to
    take it from (default data/frameworks.toml); `inference`: how the engine runs
    (`costmodel.io.frameworks.INFERENCE_MODES`: online, streaming its tokens, or offline);
    `kv`: the KV-cache format, where the engine picks its attention kernel by it
    (`Framework.rereads`; None: the profile's default kernel)."""
    f = resolve_framework(framework, info.name, frameworks)
    logm = jnp.log(jnp.asarray(f.multipliers, dtype=float))
    chip = apply_profile_fields(apply_multipliers(info.chip, logm), f, inference, kv)
    caps = [c for c in (info.max_batch, f.max_batch) if c is not None]
    cap = min(caps) if caps else None
    label = f"{info.label or info.name} ({f.name})"
    return dataclasses.replace(
        info,
        chip=chip,
        label=label,
        max_batch=cap,
        dequant_ops=f.dequant_ops,
        kv_dequant_ops=f.kv_dequant_ops,
        copy_rows=f.copy_rows,
        dequant_rows=f.dequant_rows,
    )


def apply_dequant(workload: Workload, f: Framework, weights: str, kv: str) -> Workload:
    """A workload whose weights and K/V are unpacked as the profile's kernels do for the
    formats `weights` and `kv` (`Scenario.weight_dequant_ops`, `Scenario.kv_dequant_ops`,
    `Scenario.weight_copy_rows`: above how many rows they work on a 16-bit copy, and
    `Scenario.weight_dequant_rows`: how many rows each unpacking serves)."""
    s = lambda w: w.scenario
    return eqx.tree_at(
        lambda w: (s(w).weight_dequant_ops, s(w).kv_dequant_ops, s(w).weight_copy_rows, s(w).weight_dequant_rows),
        workload,
        tuple(
            jnp.asarray(x, dtype=float)
            for x in (f.dequant(weights), f.kv_dequant(kv), f.copy(weights), f.tile(weights))
        ),
    )
