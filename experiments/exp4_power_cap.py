# %% [markdown]
# # Experiment 4: peak vs sustained: does the per-token figure hold under a power cap?
#
# Three designs as presets (data/chips.toml): an SRAM-heavy dataflow machine
# (`groq-lpu`: 230 MB SRAM per chip at 80 TB/s, weights and KV in SRAM across many
# chips), a PIM design (`hbm-pim-gpu`) and an HBM GPU (`h100-sxm`). For two workloads
# (llama-3-8b bf16, batch 32 at 4k context, and batch 512 at 1k) each system is sized
# as it deploys, then its per-chip power cap is swept from 15% to 60% of its rated
# cap (above 50% none of the three throttles). Where full-clock power exceeds the cap, the clock falls (DVFS, power ~ f^3 in
# the compute-bound limit; costmodel._core.power) and the step slows only as far as the
# clocked resources (compute, SRAM) bind. Cost per million tokens: die (from area,
# yield, wafer price), package and DRAM amortised over 4 years at 60% utilisation, plus
# energy at $0.10/kWh (data/tech.toml [cost]).
# Run: `python experiments/exp4_power_cap.py` (~1 min).

# %%
import csv
from pathlib import Path

import equinox as eqx
import matplotlib


matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np

import costmodel as cm
from costmodel._core.economics import token_cost
from costmodel._core.power import sustained_cost
from costmodel.io import chip_node, economics_preset


OUT = Path(__file__).resolve().parent / "results"
OUT.mkdir(parents=True, exist_ok=True)
DESIGNS = {"groq-lpu": "SRAM-heavy", "hbm-pim-gpu": "PIM", "h100-sxm": "HBM"}
WORKLOADS = {"batch 32, 4k context": (32, 4096), "batch 512, 1k context": (512, 1024)}
FRACTIONS = np.linspace(0.15, 0.6, 46)

sustained = eqx.filter_jit(sustained_cost)
price = eqx.filter_jit(token_cost)

# %%
rows, curves = [], {}
for chip_name, kind in DESIGNS.items():
    econ = economics_preset(chip_node(chip_name)[0])
    for wl, (b, c) in WORKLOADS.items():
        e = cm.evaluate("llama-3-8b", chip_name, batch=b, context=c)
        rated = float(e.chip.power_cap)
        ratio, usd_s, clock, ok = [], [], [], []
        for frac in FRACTIONS:
            chip = e.chip.replace(power_cap=rated * frac)
            s = sustained(e.workload, chip, e.placement)
            tp = price(s.peak, chip, econ)
            ts = price(s.cost, chip, econ)
            ratio.append(float(s.sustained_to_peak))
            usd_s.append(float(ts.usd_per_million_tokens))
            clock.append(float(s.clock))
            ok.append(bool(s.within_cap))
            rows.append(
                {
                    "design": kind,
                    "chip": chip_name,
                    "workload": wl,
                    "chips": e.tensor_parallel * e.pipeline_parallel,
                    "cap_fraction": frac,
                    "cap_W": rated * frac,
                    "peak_W": float(s.peak.power),
                    "sustained_W": float(s.cost.power),
                    "clock": float(s.clock),
                    "within_cap": bool(s.within_cap),
                    "sustained_to_peak": float(s.sustained_to_peak),
                    "peak_usd_per_Mtok": float(tp.usd_per_million_tokens),
                    "sustained_usd_per_Mtok": float(ts.usd_per_million_tokens),
                    "sustained_energy_usd_per_Mtok": 1e6 * float(ts.energy_usd_per_token),
                }
            )
        curves[(kind, wl)] = (
            np.array(ratio),
            np.array(usd_s),
            np.array(clock),
            float(s.peak.power) / rated,
            float(tp.usd_per_million_tokens),
            e.tensor_parallel * e.pipeline_parallel,
            np.array(ok),
        )

with open(OUT / "exp4_power_cap.csv", "w", newline="") as f:
    wr = csv.DictWriter(f, fieldnames=list(rows[0]))
    wr.writeheader()
    wr.writerows(rows)

# %%
fig, axes = plt.subplots(2, 2, figsize=(13, 8.5), sharex=True)
colors = {"SRAM-heavy": "tab:green", "PIM": "tab:purple", "HBM": "tab:blue"}
for k, wl in enumerate(WORKLOADS):
    for kind in DESIGNS.values():
        ratio, usd, clock, peak_frac, peak_usd, n, ok = curves[(kind, wl)]
        col = colors[kind]
        bad = ~ok
        axes[0, k].plot(100 * FRACTIONS[bad], ratio[bad], "x", color=col, ms=5)
        axes[1, k].plot(100 * FRACTIONS[bad], usd[bad] / peak_usd, "x", color=col, ms=5)
        axes[0, k].plot(
            100 * FRACTIONS,
            ratio,
            "-",
            color=col,
            label=f"{kind} (x{n}; full-clock power {100 * peak_frac:.0f}% of rated)",
        )
        axes[0, k].plot(100 * FRACTIONS, clock, ":", color=col, lw=1)
        axes[1, k].plot(100 * FRACTIONS, usd / peak_usd, "-", color=col, label=f"{kind}: peak ${peak_usd:.3g}/Mtok")
    axes[0, k].set_title(f"llama-3-8b bf16, {wl}", fontsize=10)
    axes[0, k].set_ylabel("sustained / peak tokens/s (solid); clock ratio (dotted)")
    axes[1, k].set_ylabel("sustained / peak USD per token")
    axes[1, k].set_xlabel("power cap, % of the chip's rated cap")
    for ax in axes[:, k]:
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7)
    axes[1, k].set_yscale("log")
    axes[1, k].text(
        0.4, 0.9, "x: cap below what the lowest clock (0.1) draws", transform=axes[1, k].transAxes, fontsize=7
    )
fig.suptitle("Peak vs sustained under a power cap (DVFS: on-chip energy/op ~ V² ~ f², DRAM unaffected)")
fig.tight_layout()
fig.savefig(OUT / "exp4_power_cap.png", dpi=120)

# %%
lines = [
    "| design | workload | chips | cap % | clock | sustained/peak | peak $/Mtok | sustained $/Mtok |",
    "|---|---|---|---|---|---|---|---|",
]
for r in rows:
    if round(100 * r["cap_fraction"]) in (15, 20, 25, 30, 40, 50, 60):
        lines.append(
            f"| {r['design']} | {r['workload']} | {r['chips']} | {100 * r['cap_fraction']:.0f} | {r['clock']:.2f} | "
            f"{r['sustained_to_peak']:.3f} | {r['peak_usd_per_Mtok']:.3g} | {r['sustained_usd_per_Mtok']:.3g} |"
        )
(OUT / "exp4_power_cap.md").write_text(
    "# Experiment 4: peak vs sustained under a power cap\n\n" + "\n".join(lines) + "\n"
)
for (kind, wl), (ratio, usd, clock, peak_frac, peak_usd, n, ok) in curves.items():
    half = np.argmin(abs(FRACTIONS - 0.3))
    print(
        f"{kind:10s} {wl:22s} x{n:<4d} peak {100 * peak_frac:.0f}% of rated; at 30% cap: clock {clock[half]:.2f}, "
        f"speed {ratio[half]:.3f} of peak; at 15%: clock {clock[0]:.2f}, speed {ratio[0]:.3f}, $ x{usd[0] / peak_usd:.2f}; peak ${peak_usd:.3g}/Mtok"
    )
