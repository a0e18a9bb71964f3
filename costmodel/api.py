"""The user-facing entry point: presets and names in, a decode cost out."""

from __future__ import annotations

import dataclasses
import math

import equinox as eqx
import jax.numpy as jnp

from ._chip import DRAM, PIM, SRAM, Chip
from ._cost import Cost, decode_cost
from ._placement import policy_placement
from ._traffic import lower_traffic
from ._workload import Model, Workload
from .io import ChipInfo, InputError, chip_info, load_model, make_scenario


MAX_TENSOR_PARALLEL = 8
"""Widest tensor-parallel group the automatic system sizing uses; beyond it the
layers are split into pipeline stages (as SRAM-only machines serve 70B models)."""


@eqx.filter_jit
def evaluate_policy(workload: Workload, chip: Chip, policy: str) -> tuple[Cost, jnp.ndarray]:
    """Cost of a workload on a chip with a hard placement from `policy` (jit-compiled)."""
    placement = policy_placement(policy, lower_traffic(workload), chip)
    return decode_cost(workload, chip, placement), placement


_FAST_TIERS = {"dram": [DRAM], "sram": [SRAM], "pim_kv": [PIM, DRAM], "greedy": [SRAM, PIM]}
_ALL_TIERS = {"dram": [DRAM], "sram": [SRAM, DRAM], "pim_kv": [PIM, DRAM], "greedy": [SRAM, PIM, DRAM]}


def _chips_needed(stored: float, info: ChipInfo, tiers: list[int]) -> float:
    per_chip = sum(float(info.chip.tiers.capacity[i]) for i in tiers)
    return max(1, math.ceil(stored / per_chip * (1 + 1e-6))) if per_chip > 0 else math.inf


def system_size(info: ChipInfo, workload: Workload, chips: int | None = None) -> tuple[int, int]:
    """(tensor_parallel, pipeline_parallel) for `chips` chips, or the fewest that fit.

    An SRAM machine is sized to hold everything in SRAM when it can within its
    `max_chips` (as Groq and d-Matrix deploy), and otherwise spills to its DRAM.

    Raises:
        InputError: if the workload fits on no system of at most `max_chips` chips.
    """
    if chips is None:
        stored = float(jnp.sum(lower_traffic(workload).stored_bytes))
        need = _chips_needed(stored, info, _FAST_TIERS[info.placement])
        if need > info.max_chips:
            need = _chips_needed(stored, info, _ALL_TIERS[info.placement])
        if need > info.max_chips:
            raise InputError(
                f"chip {info.name!r}: the model and KV cache need {stored / 1e9:.3g} GB, more than "
                f"max_chips ({info.max_chips}) chips hold; pass --chips to force a size"
            )
        chips = int(need)
    if chips < 1:
        raise InputError(f"chips = {chips!r}: expected a whole number >= 1")
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
) -> Evaluation:
    """Evaluates one decode step of a model on a chip preset, placed as that system does.

    Args:
        model: a model preset id, a `config.json` path, or a `Model`.
        chip: a chip preset id, a chip TOML path, or a `ChipInfo`.
        batch, context, prefix: the scenario (tokens).
        weights, kv: number formats by name (`costmodel presets`).
        chips: system size; by default the fewest chips the model and cache fit on.
        placement: a placement policy overriding the chip's own.

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
    workload = Workload(m, make_scenario(batch=batch, context=context, prefix=prefix, weights=weights, kv=kv))
    tp, pp = system_size(info, workload, chips)
    system = info.chip.replace(tensor_parallel=tp, pipeline_parallel=pp)
    cost, placed = evaluate_policy(workload, system, info.placement)
    name = model if isinstance(model, str) else "custom"
    return Evaluation(cost, placed, workload, system, info, name, tp, pp)
