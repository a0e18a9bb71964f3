"""The user-facing entry point: presets and names in, a decode cost out."""

from __future__ import annotations

import dataclasses
import math

import equinox as eqx
import jax.numpy as jnp

from ._chip import DRAM, PIM, SRAM, Chip
from ._cost import Cost, decode_cost
from ._placement import CAPACITY_MARGIN, policy_placement
from ._traffic import lower_traffic
from ._workload import Model, Workload
from .io import ChipInfo, InputError, chip_info, load_model, make_scenario


MAX_TENSOR_PARALLEL = 8
"""Widest tensor-parallel group the automatic system sizing uses; beyond it the
layers are split into pipeline stages (as SRAM-only machines serve 70B models)."""


def system_placement(policy: str, traffic, chip: Chip) -> jnp.ndarray:
    """`policy_placement` computed on the whole system as one chip.

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
    return policy_placement(policy, traffic, whole)


@eqx.filter_jit
def evaluate_policy(workload: Workload, chip: Chip, policy: str) -> tuple[Cost, jnp.ndarray]:
    """Cost of a workload on a chip with a hard placement from `policy` (jit-compiled)."""
    placement = system_placement(policy, lower_traffic(workload), chip)
    return decode_cost(workload, chip, placement), placement


_FAST_TIERS = {"dram": [DRAM], "sram": [SRAM], "pim_kv": [PIM, DRAM], "pim": [PIM], "greedy": [SRAM, PIM]}
_ALL_TIERS = {
    "dram": [DRAM],
    "sram": [SRAM, DRAM],
    "pim_kv": [PIM, DRAM],
    "pim": [PIM, DRAM],
    "greedy": [SRAM, PIM, DRAM],
}


SRAM_RESERVE = 0.05
"""Fraction of each chip's SRAM an SRAM machine is sized to leave free for activations,
instruction streams and whole-block rounding (an assumption: Groq's third-party
576-chip estimate for Llama-2-70B leaves far more)."""


def _chips_needed(stored: float, info: ChipInfo, tiers: list[int]) -> float:
    # A hard placement leaves CAPACITY_MARGIN of SRAM and PIM free: size for what it uses.
    usable = [1 - SRAM_RESERVE if i == SRAM else 1 - 2 * CAPACITY_MARGIN for i in range(3)]
    per_chip = sum(float(info.chip.tiers.capacity[i]) * usable[i] for i in tiers)
    return max(1, math.ceil(stored / per_chip * (1 + 1e-6))) if per_chip > 0 and math.isfinite(stored) else math.inf


def _layer_tensor_parallel(info: ChipInfo, workload: Workload, per_chip: float) -> int:
    """Chips one layer is split over on a dataflow machine: the fewest (a power of two,
    at most `MAX_TENSOR_PARALLEL`) whose fast memory holds one layer's share of the
    weights and KV cache."""
    traffic = lower_traffic(workload)
    per_layer = float(jnp.sum(traffic.stored_bytes)) / max(float(workload.model.n_layers), 1.0)
    tp = 1
    while tp < MAX_TENSOR_PARALLEL and per_layer / tp > per_chip:
        tp *= 2
    return tp


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

    Raises:
        InputError: if the workload fits on no system of at most `max_chips` chips.
    """
    sram = info.placement == "sram"
    if chips is None:
        stored = float(jnp.sum(lower_traffic(workload).stored_bytes))
        need = _chips_needed(stored, info, _FAST_TIERS[info.placement])
        if need > info.max_chips:
            need = _chips_needed(stored, info, _ALL_TIERS[info.placement])
            sram = False
        if need > info.max_chips:
            raise InputError(
                f"chip {info.name!r}: the model and KV cache need {stored / 1e9:.3g} GB, more than "
                f"max_chips ({info.max_chips}) chips hold; pass --chips to force a size"
            )
        chips = int(need)
    if chips < 1:
        raise InputError(f"chips = {chips!r}: expected a whole number >= 1")
    if sram and float(info.chip.tiers.capacity[SRAM]) > 0:
        tp = min(chips, _layer_tensor_parallel(info, workload, float(info.chip.tiers.capacity[SRAM])))
    else:
        tp = min(chips, MAX_TENSOR_PARALLEL)
    return tp, math.ceil(chips / tp)


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
            `llama.cpp`, `gpt-fast`, `trt-llm`, `vllm`, `native`), applied to the chip as
            multipliers on its memory-tier and compute efficiency, per-layer kernel
            overhead and all-reduce latency; None uses the chip preset as it is.
        tensor_parallel, pipeline_parallel: an explicit system layout (both, or
            neither); overrides `chips`.

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
    if framework is not None:
        from .validate import apply_framework

        info = apply_framework(info, framework)
    workload = Workload(m, make_scenario(batch=batch, context=context, prefix=prefix, weights=weights, kv=kv))
    if (tensor_parallel is None) != (pipeline_parallel is None):
        raise InputError(
            f"tensor_parallel = {tensor_parallel!r}, pipeline_parallel = {pipeline_parallel!r}: expected both or neither"
        )
    if tensor_parallel is not None:
        for key, value in (("tensor_parallel", tensor_parallel), ("pipeline_parallel", pipeline_parallel)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise InputError(f"{key} = {value!r}: expected a whole number >= 1")
        tp, pp = tensor_parallel, pipeline_parallel
    else:
        tp, pp = system_size(info, workload, chips)
    system = info.chip.replace(tensor_parallel=tp, pipeline_parallel=pp)
    cost, placed = evaluate_policy(workload, system, info.placement)
    name = model if isinstance(model, str) else "custom"
    return Evaluation(cost, placed, workload, system, info, name, tp, pp)
