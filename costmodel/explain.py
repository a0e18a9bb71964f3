"""Why a chip decodes at the speed, energy and price it does: sensitivities and answers.

Everything in the model is differentiable, so the sensitivity of each objective
(seconds per token, joules per token, USD per token) to each hardware parameter is
one `jax.jacrev` away. They are reported as *elasticities*, `d log y / d log x`: the
per-cent change in `y` for a one per-cent change in `x` (so -1 w.r.t. DRAM bandwidth
means "time is inversely proportional to DRAM bandwidth", 0 means "this parameter
does not matter here"). Doubling `x` changes `y` by about `2**e - 1`.

Parameters: peak FLOP/s (all precisions together), each tier's bandwidth (for PIM the
internal, bank-level bandwidth), PIM FLOP/s, the chip-to-chip link bandwidth, each
tier's capacity and, for a chip designed from an area split (`chip_from_area`), the
area of compute, SRAM and PIM (each part grows alone, so the die grows with it).

**Capacity and area elasticities need a placement that responds to capacity.** A
hard placement is fixed: it respects every capacity, so one more byte of SRAM
changes nothing and its elasticity is exactly 0, however much a real system would
gain by filling it. For those parameters the placement is therefore a *cascade*:
every class asks for the fast tier the chip's own policy fills (SRAM for `sram` and
`greedy`, PIM for KV under `pim_kv` and for KV that overflows SRAM under `greedy`),
each tier keeps the same fraction `min(1, capacity / demand)` of every class that
asks for it, and the rest falls to the next tier. This is `costmodel.spill`'s
uniform spill, made two-stage; it is smooth in capacity, it equals the policy's
placement wherever nothing overflows, and where something does it differs only in
which classes stay (the greedy policy keeps the most-read first), which moves the
base point by little (the record reports both). Re-running the greedy policy at a
changed capacity would give a step function of whole blocks, whose gradient is 0
almost everywhere. A `dram` chip never fills its SRAM or PIM, so their capacity
elasticities are 0, truthfully: that system does not use them.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from ._core.area import AREA_PARTS, Technology, chip_from_area, fixed_area
from ._core.channels import class_flop_rates, class_stream_efficiency, effective_feed
from ._core.chip import DRAM, PIM, SRAM, TIERS, Chip
from ._core.cost import BOUNDS, Cost, decode_cost
from ._core.economics import Economics, TokenCost, token_cost
from ._core.placement import policy_placement
from ._core.power import sustained_cost
from ._core.traffic import IS_KV, Traffic, lower_traffic
from ._core.types import RealScalarLike
from ._core.workload import Workload


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
AREA_PARAMETERS = tuple(f"area.{p}" for p in AREA_PARTS)


class AreaDesign(eqx.Module):
    """A chip designed from an area split, so that area elasticities exist.

    Attributes:
        tech: technology constants.
        parts: `[3]` area of compute, SRAM and PIM, m² (`AREA_PARTS`).
        n_stacks: HBM stacks.
        options: other keyword arguments of `chip_from_area` (power cap, efficiencies).
        links: (link bandwidth B/s, all-reduce latency s, pipeline hop latency s)
            between chips; `chip_from_area` has none. Default: h100-sxm's NVLink
            (450 GB/s per direction, 8 us, 3 us; data/chips.toml).
    """

    tech: Technology
    parts: Any
    n_stacks: RealScalarLike = 5.0
    options: dict = eqx.field(default_factory=dict)
    links: tuple = (450e9, 8e-6, 3e-6)

    def chip(self, parts=None) -> Chip:
        parts = jnp.asarray(self.parts if parts is None else parts, dtype=float)
        budget = fixed_area(self.tech, self.n_stacks) + jnp.sum(parts)
        # Double where: a part of zero area has logit -inf; keep it finite (its share
        # is then ~0) so gradients through the softmax stay finite.
        ok = parts > 0
        logits = jnp.where(ok, jnp.log(jnp.where(ok, parts, 1.0)), -60.0)
        chip = chip_from_area(budget, logits, self.tech, n_stacks=self.n_stacks, **self.options)
        bw, lat, hop = self.links
        return chip.replace(link_bandwidth=bw, link_latency=lat, hop_latency=hop)

    @staticmethod
    def from_split(
        tech: Technology, budget: float, split, n_stacks: float = 5.0, links=(450e9, 8e-6, 3e-6), **options
    ) -> AreaDesign:
        """From a total die area (m²) and fractions of the free area (summing to 1)."""
        free = float(budget) - float(fixed_area(tech, n_stacks))
        split = np.asarray(split, dtype=float)
        # Numbers as arrays, not Python floats: jit would treat floats as static and
        # recompile for every power cap or stack count.
        arr = lambda v: jnp.asarray(v, dtype=float)
        options = {k: arr(v) for k, v in options.items()}
        return AreaDesign(tech, arr(free * split / split.sum()), arr(n_stacks), options, tuple(map(arr, links)))


def _wishes(policy: str, dtype):
    """(want_sram, want_pim, kv_overflows_to_pim) of a policy, as arrays (so not static)."""
    is_kv = np.asarray(IS_KV, dtype=float)
    n = len(IS_KV)
    want_sram = np.ones(n) if policy in ("sram", "greedy") else np.zeros(n)
    want_pim = is_kv if policy == "pim_kv" else np.zeros(n)
    to_pim = 1.0 if policy == "greedy" else 0.0
    return tuple(jnp.asarray(a, dtype=dtype) for a in (want_sram, want_pim, to_pim))


def _cascade(traffic: Traffic, chip: Chip, wishes):
    want_sram, want_pim, to_pim = wishes
    is_kv = jnp.asarray(IS_KV).astype(want_sram.dtype)
    stored = traffic.stored_bytes / chip.n_chips
    cap = chip.tiers.capacity
    present = (stored > 0).astype(stored.dtype)  # empty classes stay in DRAM, as in a hard placement

    def keep(request, capacity):
        demand = jnp.sum(request * stored)
        # Double where: no overflow keeps everything (and must not divide by zero).
        ok = demand > capacity
        return jnp.where(ok, capacity / jnp.where(ok, demand, 1.0), 1.0)

    want_sram = want_sram * present
    in_sram = want_sram * keep(want_sram, cap[SRAM])
    has_pim = (cap[PIM] > 0).astype(stored.dtype)
    want_pim = present * (want_pim + to_pim * has_pim * is_kv * (want_sram - in_sram))
    in_pim = want_pim * keep(want_pim, cap[PIM])
    return jnp.stack([in_sram, in_pim, 1.0 - in_sram - in_pim], axis=-1)


def cascade_placement(traffic: Traffic, chip: Chip, policy: str):
    """A capacity-responsive placement following a policy's wishes (see module notes).

    Args:
        traffic: the workload's traffic.
        chip: the chip (its capacities bound SRAM and PIM, per chip).
        policy: one of `costmodel.POLICIES`.

    Returns:
        A `[classes, tiers]` placement, smooth in the capacities, rows on the simplex.
    """
    return _cascade(traffic, chip, _wishes(policy, traffic.stored_bytes.dtype))


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
        lambda c: (c.tiers, c.peak_flops, c.pim_bandwidth, c.pim_flops, c.link_bandwidth),
        chip,
        (
            tiers,
            chip.peak_flops * s.get("peak_flops", one),
            chip.pim_bandwidth * s.get("bandwidth.pim", one),
            chip.pim_flops * s.get("pim_flops", one),
            chip.link_bandwidth * s.get("link_bandwidth", one),
        ),
    )


def _objectives(workload, chip, placement, econ, mode) -> tuple[Cost, TokenCost, Any]:
    if mode == "sustained":
        s = sustained_cost(workload, chip, placement)
        cost, ratio = s.cost, s.sustained_to_peak
    else:
        cost = decode_cost(workload, chip, placement)
        ratio = jnp.ones_like(cost.seconds_per_step)
    return cost, token_cost(cost, chip, econ), ratio


def _logs(cost: Cost, money: TokenCost):
    return jnp.log(jnp.stack([cost.seconds_per_step, cost.joules_per_token, money.usd_per_token]))


@eqx.filter_jit
def _gradients(workload: Workload, chip: Chip, econ: Economics, hard, wishes, mode: str, area_parts, area):
    """Jacobians of the three log-objectives w.r.t. log-parameters at the design point.

    The policy enters as arrays (its hard placement and its wishes), not as a static
    string, so that every policy shares one compiled program.
    """
    traffic = lower_traffic(workload)
    hard = jax.lax.stop_gradient(hard)
    tp, pp = chip.tensor_parallel, chip.pipeline_parallel
    dtype = chip.peak_flops.dtype

    def build(log_parts):
        if area is None:
            return chip
        base = area.chip(area_parts * jnp.exp(log_parts))
        return base.replace(tensor_parallel=tp, pipeline_parallel=pp)

    def fixed_placement(theta):
        c = _scale_chip(chip, theta)
        return _logs(*_objectives(workload, c, hard, econ, mode)[:2])

    def responsive(theta, log_parts):
        c = _scale_chip(build(log_parts), theta)
        return _logs(*_objectives(workload, c, _cascade(traffic, c, wishes), econ, mode)[:2])

    zeros = lambda names: {k: jnp.zeros((), dtype=dtype) for k in names}
    no_area = jnp.zeros((len(AREA_PARTS),), dtype=dtype)
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
        area: the area design the chip came from, for area elasticities.

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
    parts = None if area is None else jnp.asarray(area.parts, dtype=float)
    traffic = lower_traffic(workload)
    placement = _policy_placement(policy, traffic, chip)
    wishes = _wishes(policy, chip.peak_flops.dtype)
    j_fixed, j_cap, j_area, base_cascade = _gradients(workload, chip, econ, placement, wishes, mode, parts, area)

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
    money_peak = token_cost(peak, chip, econ)
    money_sus = token_cost(sus, chip, econ)

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
    prec = np.asarray(traffic.precision, dtype=int)
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
    }
    return Explanation(record, answers(record))


def _pct(x: float) -> str:
    return f"{100 * x:.0f}%"


def _doubling(e: float) -> str:
    """What doubling a parameter does to time, from its elasticity, in words."""
    change = 2.0**e - 1.0
    if abs(change) < 0.005:
        return "would change nothing"
    return f"would {'cut' if change < 0 else 'raise'} it by {_pct(abs(change))}"


def answers(r: dict[str, Any]) -> list[str]:
    """The five buyer's questions, answered in sentences from an explain record."""
    e = r["elasticities"]
    fast = r["onchip_byte_share"] + r["pim_byte_share"]
    dram_e = e["bandwidth.dram"]
    flops_e = e["peak_flops"]
    out = []

    # 1. Does it cut data movement or only add compute?
    moved = (
        f"{_pct(r['onchip_byte_share'])} of the bytes a step reads are served from on-chip SRAM, "
        f"{_pct(r['pim_byte_share'])} are processed in memory (PIM) and {_pct(r['dram_byte_share'])} cross "
        "the DRAM interface"
    )
    verdict = (
        "so it cuts data movement"
        if fast >= 0.5
        else "so it does not cut off-chip data movement; more compute alone would not help"
        if abs(flops_e) < 0.1
        else "so off-chip data movement remains, but compute also binds"
    )
    out.append(
        f"Data movement: {moved}, {verdict} (doubling peak FLOP/s {_doubling(flops_e)} in time per token; "
        f"doubling DRAM bandwidth {_doubling(dram_e)})."
    )

    # 2. Does the number hold sustained?
    ratio = r["sustained_to_peak"]
    cap, p = r["power_cap_watts"], r["peak_power_watts_per_chip"]
    if ratio > 0.995:
        held = f"Yes: at full clock it draws {p:.0f} W per chip"
        held += (
            f" against a {cap:.0f} W cap"
            if p <= cap
            else (
                f", above its {cap:.0f} W cap, but the clock can fall to {r['sustained_clock']:.2f} of peak "
                "without slowing the memory-bound step"
            )
        )
        out.append(f"Sustained: {held}, so sustained speed is {_pct(ratio)} of peak.")
    else:
        out.append(
            f"Sustained: No: at full clock it draws {p:.0f} W per chip against a {cap:.0f} W cap; the clock falls to "
            f"{r['sustained_clock']:.2f} of peak and sustained throughput is {_pct(ratio)} of the peak figure"
            + ("" if r["within_power_cap"] else " (even the lowest clock does not reach the cap)")
            + "."
        )

    # 3. Is on-chip storage big enough for the hot KV history?
    kv, oncap = r["kv_bytes_per_chip"], r["onchip_capacity_bytes_per_chip"]
    cap_e = e["capacity.sram"] + e["capacity.pim"]
    if kv <= 0:
        out.append("On-chip storage: there is no KV history at this scenario.")
    else:
        out.append(
            f"On-chip storage: the KV history is {kv / 1e9:.3g} GB per chip against {oncap / 1e9:.3g} GB of SRAM "
            f"and PIM; {_pct(r['kv_share_on_chip'])} of it is held on-chip or in PIM"
            + (
                ", so the hot history fits."
                if r["kv_share_on_chip"] > 0.99
                else f", so it does not fit (elasticity of time to on-chip capacity {cap_e:+.2f}"
                + ("; this system's placement does not use SRAM or PIM" if r["policy"] == "dram" else "")
                + ")."
            )
        )

    # 4. Does the gain come from removing the structural bottleneck?
    names = {k: v for k, v in e.items() if not k.startswith("capacity.") and not k.startswith("area.")}
    top = min(names, key=lambda k: names[k])
    if abs(dram_e) >= 0.2:
        out.append(
            f"Bottleneck: No: time still follows DRAM bandwidth (elasticity {dram_e:+.2f}; step bound: {r['bound']}), "
            "so the structural off-chip bottleneck remains and gains from other resources are capped by it."
        )
    elif fast >= 0.5:
        out.append(
            f"Bottleneck: Yes: DRAM bandwidth no longer sets the time (elasticity {dram_e:+.2f}) because "
            f"{_pct(fast)} of the bytes stay on-chip or in memory; the binding resource is now {top} "
            f"({names[top]:+.2f})."
        )
    else:
        out.append(
            f"Bottleneck: DRAM bandwidth does not set the time here (elasticity {dram_e:+.2f}), but not because of "
            f"the design: {_pct(r['dram_byte_share'])} of the bytes still cross the DRAM interface and {top} "
            f"({names[top]:+.2f}) binds at this operating point."
        )

    # 5. Steady cost per token.
    c = r["cost_sustained"]
    out.append(
        f"Cost: ${c['usd_per_million_tokens']:.3g} per million tokens sustained "
        f"(die ${c['die_usd_per_million_tokens']:.3g}, package and DRAM "
        f"${c['package_and_dram_usd_per_million_tokens']:.3g}, energy ${c['energy_usd_per_million_tokens']:.3g}), "
        f"on {r['chips']} chip(s) at {r['tokens_per_second']:.4g} tokens/s"
        + ("" if r["die_usd"] > 0 else "; die area unknown, so no die or package price is included")
        + "."
    )
    return out


def roofline_plot(evaluation, path, title: str = "") -> None:
    """Writes a roofline (per block class and for the whole step) and a time breakdown.

    Left: attainable FLOP/s of the whole system against arithmetic intensity, with
    the compute roof (peak x efficiency of the weights' precision) and one bandwidth
    roof per tier (PIM: `min(internal bandwidth x I, PIM FLOP/s)`); each block class
    sits on the roof of the tier that holds most of it (lowered by its small-kernel
    efficiency), capped by its own compute ceiling (attention efficiency, Hockney
    factor and the tier's compute feed; all 1 on an uncalibrated chip), and the step
    as a whole at its achieved FLOP/s. Right: each channel's time per step against the
    step time.

    Args:
        evaluation: a `costmodel.Evaluation` (its `cost` may be a sustained cost).
        path: PNG file to write.
        title: figure title.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from ._core.traffic import CLASSES

    e = evaluation
    chip, cost = e.chip, e.cost
    traffic = lower_traffic(e.workload)
    n = _f(chip.n_chips)
    tp = _f(chip.tensor_parallel)
    prec = int(np.asarray(e.workload.scenario.weight_precision))
    peak = _f(chip.peak_flops[prec]) * _f(chip.compute_efficiency) * tp
    bw = np.asarray(chip.tiers.effective_bandwidth, dtype=float) * tp
    pim_bw = _f(chip.pim_bandwidth) * _f(chip.tiers.efficiency[PIM]) * tp
    pim_fl = _f(chip.pim_flops) * tp
    x = np.logspace(-2, 4, 200)
    colors = {"sram": "tab:green", "pim": "tab:purple", "dram": "tab:blue"}

    fig, (ax, bx) = plt.subplots(1, 2, figsize=(11, 4.3), gridspec_kw={"width_ratios": [1.4, 1]})
    ax.plot(x, np.full_like(x, peak), "k-", lw=1.5, label=f"compute {peak / 1e12:.3g} TFLOP/s")
    roofs = {}
    for i, t in enumerate(TIERS):
        if float(np.asarray(chip.tiers.capacity[i])) <= 0:
            continue
        if t == "pim":
            if pim_bw <= 0:
                continue
            roofs[t] = np.minimum(pim_bw * x, pim_fl)
            label = f"pim {pim_bw / 1e12:.3g} TB/s, {pim_fl / 1e12:.3g} TFLOP/s"
        else:
            roofs[t] = np.minimum(bw[i] * x, peak)
            label = f"{t} {bw[i] / 1e12:.3g} TB/s"
        ax.plot(x, roofs[t], "-", color=colors[t], lw=1.2, label=label)
    held = np.asarray(e.placement, dtype=float)
    intensity = np.asarray(traffic.intensity, dtype=float)
    read = np.asarray(traffic.read_bytes, dtype=float)
    # Each class's own compute ceiling (attention efficiency, Hockney factor, and the
    # compute feed of the tier its operands stream from; 1s for an uncalibrated chip).
    ceiling = np.asarray(class_flop_rates(e.workload, traffic, chip), dtype=float) * tp
    feed = np.asarray(effective_feed(chip), dtype=float)
    # And its own memory roof: small kernels stream below the tier's bandwidth.
    small = np.asarray(class_stream_efficiency(traffic, chip), dtype=float)
    for c, name in enumerate(CLASSES):
        if read[c] <= 0 or intensity[c] <= 0:
            continue
        i = int(np.argmax(held[c]))
        t = TIERS[i]
        if t not in roofs:
            continue
        if t == "pim":
            y = float(np.interp(np.log(intensity[c]), np.log(x), roofs[t]))
        else:
            y = min(bw[i] * small[c] * intensity[c], peak, ceiling[c] * feed[i])
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
