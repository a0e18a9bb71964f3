"""Elasticities of time, energy and cost per token, and the figures `explain` reports.

The sensitivity of each objective (seconds per token, joules per token, USD per token)
to each hardware parameter is one `jax.jacrev` away; see `costmodel.explain` for what
the parameters are, and `costmodel.explain.cascade` for why capacity and area
elasticities are taken through a cascade placement.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from .._core.chip import DRAM, PIM, SRAM, TIERS, Chip
from .._core.cost import BOUNDS, Cost, decode_cost
from .._core.economics import Economics, TokenCost, token_cost
from .._core.placement import policy_placement
from .._core.power import sustained_cost
from .._core.traffic import IS_KV, class_rows, lower_traffic
from .._core.workload import Workload
from .cascade import _cascade, _wishes
from .design import DESIGN_PARAMETERS, AreaDesign
from .history import hot_history
from .questions import answers


OBJECTIVES = ("seconds_per_token", "joules_per_token", "usd_per_token")
"""What the elasticities are of: time per output token of one sequence (the step
time), energy per generated token, and USD per generated token."""

CHIP_PARAMETERS = (
    "peak_flops",
    "bandwidth.sram",
    "bandwidth.pim",
    "bandwidth.dram",
    "pim_flops",
    "link_bandwidth",
)
CAPACITY_PARAMETERS = ("capacity.sram", "capacity.pim", "capacity.dram")
AREA_PARAMETERS = tuple(f"area.{p}" for p in DESIGN_PARAMETERS)
"""Parameters of an area design (`AreaDesign`): the logic die's compute and SRAM areas
(each grows alone, and the die with it), the PIM share of the DRAM dies and the HBM
stack count (each stack brings its PHY on the logic die)."""


def _scale_chip(chip: Chip, log_scale: dict[str, Any]) -> Chip:
    s = {k: jnp.exp(v) for k, v in log_scale.items()}
    one = jnp.ones((), dtype=chip.peak_flops.dtype)
    tier = lambda name: jnp.stack([s.get(f"{name}.{t}", one) for t in TIERS])
    bw = tier("bandwidth").at[PIM].set(1.0)  # the PIM stream bandwidth is not used
    tiers = eqx.tree_at(
        lambda t: (t.bandwidth, t.capacity),
        chip.tiers,
        (chip.tiers.bandwidth * bw, chip.tiers.capacity * tier("capacity")),
    )
    return eqx.tree_at(
        lambda c: (
            c.tiers,
            c.peak_flops,
            c.pim_bandwidth,
            c.pim_flops,
            c.link_bandwidth,
            c.link_bandwidth_large,
            c.link_bandwidth_small,
        ),
        chip,
        (
            tiers,
            chip.peak_flops * s.get("peak_flops", one),
            chip.pim_bandwidth * s.get("bandwidth.pim", one),
            chip.pim_flops * s.get("pim_flops", one),
            chip.link_bandwidth * s.get("link_bandwidth", one),
            chip.link_bandwidth_large * s.get("link_bandwidth", one),  # every line of the all-reduce
            chip.link_bandwidth_small * s.get("link_bandwidth", one),
        ),
    )


def _objectives(workload, chip, placement, econ, mode, price=None) -> tuple[Cost, TokenCost, Any]:
    if mode == "sustained":
        s = sustained_cost(workload, chip, placement)
        cost, ratio = s.cost, s.sustained_to_peak
    else:
        cost = decode_cost(workload, chip, placement)
        ratio = jnp.ones_like(cost.seconds_per_step)
    return cost, token_cost(cost, chip, econ, price), ratio


def _logs(cost: Cost, money: TokenCost):
    return jnp.log(jnp.stack([cost.seconds_per_step, cost.joules_per_token, money.usd_per_token]))


@eqx.filter_jit
def _gradients(workload: Workload, chip: Chip, econ: Economics, hard, wishes, mode: str, area_values, area):
    """Jacobians of the three log-objectives w.r.t. log-parameters at the design point.

    The policy enters as arrays (its hard placement and its wishes), not as a static
    string, so that every policy shares one compiled program. An area design is
    priced as a whole (`AreaDesign.price`: die, stacks with the PIM premium, package).
    """
    traffic = lower_traffic(workload)
    hard = jax.lax.stop_gradient(hard)
    tp, pp = chip.tensor_parallel, chip.pipeline_parallel
    dtype = chip.peak_flops.dtype

    def build(log_values):
        if area is None:
            return chip, None
        values = area_values * jnp.exp(log_values)
        base = area.chip(values)
        return base.replace(tensor_parallel=tp, pipeline_parallel=pp), area.price(values, econ)

    def fixed_placement(theta):
        c = _scale_chip(chip, theta)
        price = None if area is None else area.price(area_values, econ)
        return _logs(*_objectives(workload, c, hard, econ, mode, price)[:2])

    def responsive(theta, log_values):
        base, price = build(log_values)
        c = _scale_chip(base, theta)
        return _logs(*_objectives(workload, c, _cascade(traffic, c, wishes), econ, mode, price)[:2])

    zeros = lambda names: {k: jnp.zeros((), dtype=dtype) for k in names}
    no_area = jnp.zeros((len(AREA_PARAMETERS),), dtype=dtype)
    j_fixed = jax.jacrev(fixed_placement)(zeros(CHIP_PARAMETERS))
    j_cap, j_area = jax.jacrev(responsive, argnums=(0, 1))(zeros(CAPACITY_PARAMETERS), no_area)
    return j_fixed, j_cap, j_area, responsive(zeros(()), no_area)


_sustained_cost = eqx.filter_jit(sustained_cost)
_policy_placement = eqx.filter_jit(policy_placement)


@dataclasses.dataclass(frozen=True)
class Explanation:
    """The figures `costmodel explain` reports (plain Python numbers)."""

    record: dict[str, Any]
    answers: list[str]


def _f(x) -> float:
    return float(np.asarray(x))


def explain(
    workload: Workload,
    chip: Chip,
    econ: Economics,
    *,
    policy: str,
    mode: str = "peak",
    area: AreaDesign | None = None,
) -> Explanation:
    """Elasticities, locality, utilisation, sustained ratio and cost of one design point.

    Args:
        workload: the model and scenario.
        chip: the chip, with its tensor/pipeline-parallel system size set (for an
            `area` design, `area.chip()` with the system size set).
        econ: prices for the cost per token.
        policy: the placement policy the system uses (`costmodel.POLICIES`).
        mode: "peak" (full clock) or "sustained" (clock lowered to the power cap):
            which cost the elasticities are of.
        area: the area design the chip came from, for area elasticities; its chip
            is priced as the design (`AreaDesign.price` at `econ`'s prices: good
            logic die, stacks with the PIM premium, package), so the chip-parameter
            elasticities hold that price fixed.

    Returns:
        An `Explanation`: a JSON-ready record (elasticities in
        `record["elasticities"]`, flat by parameter, of seconds per token; all three
        objectives in `record["elasticities_by_objective"]`) and the answers to the
        five buyer's questions as sentences.

    Examples:
        >>> import costmodel as cm
        >>> from costmodel.explain import explain
        >>> from costmodel.io import economics_preset
        >>> e = cm.evaluate("llama-3-8b", "h100-sxm", batch=1, context=4096)
        >>> x = explain(e.workload, e.chip, economics_preset("N5"), policy="dram")
        >>> x.record["elasticities"]["bandwidth.dram"] < -0.5
        True
    """
    if mode not in ("peak", "sustained"):
        raise ValueError(f"mode {mode!r}: expected 'peak' or 'sustained'")
    values = None if area is None else jnp.asarray(area.values, dtype=float)
    traffic = lower_traffic(workload)
    placement = _policy_placement(policy, traffic, chip)
    wishes = _wishes(policy, chip.peak_flops.dtype)
    j_fixed, j_cap, j_area, base_cascade = _gradients(workload, chip, econ, placement, wishes, mode, values, area)

    by_objective: dict[str, dict[str, float]] = {}
    for i, obj in enumerate(OBJECTIVES):
        d = {k: _f(j_fixed[k][i]) for k in CHIP_PARAMETERS}
        d.update({k: _f(j_cap[k][i]) for k in CAPACITY_PARAMETERS})
        if area is not None:
            d.update({k: _f(j_area[i, n]) for n, k in enumerate(AREA_PARAMETERS)})
        by_objective[obj] = d

    s = _sustained_cost(workload, chip, placement)
    peak, sus = s.peak, s.cost
    cost = sus if mode == "sustained" else peak
    price = None if area is None else area.price(values, econ)
    money_peak = token_cost(peak, chip, econ, price)
    money_sus = token_cost(sus, chip, econ, price)

    tier_bytes = np.asarray(cost.tier_bytes, dtype=float)
    total = tier_bytes.sum()
    share = tier_bytes / total if total > 0 else np.zeros(3)
    kv = np.asarray(IS_KV)
    stored = np.asarray(traffic.stored_bytes, dtype=float) / _f(chip.n_chips)
    held = np.asarray(placement, dtype=float)
    kv_stored = float(stored[kv].sum())
    kv_on_chip = float((stored[kv][:, None] * held[kv][:, :DRAM]).sum())
    cap = np.asarray(chip.tiers.capacity, dtype=float)
    seconds = _f(cost.seconds_per_step)
    # FLOPs the compute dies do over what their peaks could do in the step's time.
    prec = np.asarray(class_rows(traffic.precision), dtype=int)
    host_flops = (1.0 - held[:, PIM]) * np.asarray(traffic.flops, dtype=float)
    at_peak = float(np.sum(host_flops / np.asarray(chip.peak_flops, dtype=float)[prec]))
    utilisation = at_peak / (_f(chip.n_chips) * seconds) if seconds > 0 else 0.0

    def money(t: TokenCost) -> dict[str, float]:
        return {
            "usd_per_million_tokens": _f(t.usd_per_million_tokens),
            "die_usd_per_million_tokens": 1e6 * _f(t.die_usd_per_token),
            "package_and_dram_usd_per_million_tokens": 1e6 * _f(t.package_usd_per_token),
            "energy_usd_per_million_tokens": 1e6 * _f(t.energy_usd_per_token),
        }

    record = {
        "mode": mode,
        "policy": policy,
        "chips": int(round(_f(chip.n_chips))),
        "seconds_per_token": seconds,
        "tokens_per_second": _f(cost.tokens_per_second),
        "joules_per_token": _f(cost.joules_per_token),
        "bound": BOUNDS[int(cost.bound)],
        "elasticities": by_objective["seconds_per_token"],
        "elasticities_by_objective": by_objective,
        "capacity_method": "cascade placement (policy's wishes, uniform spill to the next tier)",
        "cascade_seconds_per_token": math.exp(_f(base_cascade[0])),
        "onchip_byte_share": float(share[SRAM]),
        "pim_byte_share": float(share[PIM]),
        "dram_byte_share": float(share[DRAM]),
        "compute_utilisation": utilisation,
        "sustained_to_peak": _f(s.sustained_to_peak),
        "sustained_clock": _f(s.clock),
        "within_power_cap": bool(s.within_cap),
        "peak_power_watts_per_chip": _f(peak.power),
        "sustained_power_watts_per_chip": _f(sus.power),
        "power_cap_watts": _f(chip.power_cap),
        "kv_bytes_per_chip": kv_stored,
        "kv_share_on_chip": kv_on_chip / kv_stored if kv_stored > 0 else 1.0,
        "onchip_capacity_bytes_per_chip": float(cap[SRAM] + cap[PIM]),
        "chip_usd": _f(money_peak.chip_usd),
        "die_usd": _f(money_peak.die_usd),
        "cost_peak": money(money_peak),
        "cost_sustained": money(money_sus),
        "history": hot_history(workload, chip, placement),
    }
    return Explanation(record, answers(record))
