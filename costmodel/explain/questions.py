"""The five buyer's questions, answered in sentences from an explain record."""

from __future__ import annotations

from typing import Any


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
    h = r["history"]
    cap_e = e["capacity.sram"] + e["capacity.pim"]
    if kv <= 0 or h["kv_read_bytes"] <= 0:
        out.append("On-chip storage: there is no KV history read at this scenario.")
    else:
        need = h["capacity_for_share"]["0.9"]
        fits = need <= oncap
        out.append(
            f"On-chip storage: the KV history is {kv / 1e9:.3g} GB per chip; its hottest {need / 1e9:.3g} GB serve "
            f"90% of a step's KV reads, against {oncap / 1e9:.3g} GB of SRAM and PIM"
            + (", so the hot history fits" if fits else ", so the hot history does not fit")
            + f"; as placed, {_pct(h['on_chip_read_share'])} of the KV reads are served on chip"
            + ("" if fits else f" (elasticity of time to on-chip capacity {cap_e:+.2f})")
            + ("; this system's placement does not use SRAM or PIM" if r["policy"] == "dram" else "")
            + f". One more MB of SRAM filled by access density would change the step time by "
            f"{h['marginal_seconds_per_byte'] * 1e6 * 1e6:+.3g} µs."
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
