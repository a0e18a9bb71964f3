# %% [markdown]
# # Experiment 2: how much SRAM does decode need? DRAM bytes, time and energy per token
#
# An H100-SXM-class chip (its compute, HBM and power) whose on-chip SRAM is swept
# from 10 MB to 200 GB per chip, at a fixed 40 TB/s SRAM bandwidth (half a Groq LPU's,
# 4x the H100's L2) and 1.6 pJ/B (N5 scratchpad, data/tech.toml), with the greedy
# placement (SRAM filled first, by bytes read per byte stored). llama-3-8b on 1 chip
# and llama-3-70b on 4 (tensor parallel), bf16, batch 16, context 8k. Vertical lines:
# SRAM per chip that holds the weights, and the weights plus the whole KV history.
# Run: `python experiments/exp2_sram_capacity.py` (~1 min).

# %%
import csv
from pathlib import Path

import equinox as eqx
import jax
import jax.numpy as jnp
import matplotlib


matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np

import costmodel as cm


OUT = Path(__file__).resolve().parent / "results"
OUT.mkdir(parents=True, exist_ok=True)
SRAM_BW, SRAM_PJ = 40e12, 1.6e-12
CAPS = np.logspace(7, np.log10(200e9), 41)  # bytes per chip
CASES = [("llama-3-8b", 1), ("llama-3-70b", 4)]
BATCH, CONTEXT = 16, 8192

# %%
base = cm.chip_preset("h100-sxm")


@eqx.filter_jit
def sweep(w, chip, caps):
    def one(cap):
        t = chip.tiers
        c = chip.replace(
            tiers=t.replace(
                capacity=t.capacity.at[0].set(cap),
                bandwidth=t.bandwidth.at[0].set(SRAM_BW),
                energy_per_byte=t.energy_per_byte.at[0].set(SRAM_PJ),
                efficiency=t.efficiency.at[0].set(1.0),
            )
        )
        cost = cm.decode_cost(w, c, cm.policy_placement("greedy", cm.lower_traffic(w), c))
        b = w.scenario.batch
        return (
            cost.tier_bytes[2] / b,
            cost.seconds_per_step,
            cost.joules_per_token,
            cost.tier_bytes[0] / jnp.sum(cost.tier_bytes),
        )

    return jax.vmap(one)(caps)


rows, curves = [], {}
for name, tp in CASES:
    w = cm.Workload(cm.model_preset(name), cm.make_scenario(batch=BATCH, context=CONTEXT))
    chip = base.replace(tensor_parallel=tp)
    traffic = cm.lower_traffic(w)
    stored = np.asarray(traffic.stored_bytes) / tp
    weights = float(stored[~np.asarray(cm.IS_KV)].sum())
    total = float(stored.sum())
    dram, sec, joules, share = (np.asarray(a, dtype=float) for a in sweep(w, chip, jnp.asarray(CAPS)))
    curves[name] = (tp, weights, total, dram, sec, joules, share)
    for k, cap in enumerate(CAPS):
        rows.append(
            {
                "model": name,
                "chips": tp,
                "sram_GB_per_chip": cap / 1e9,
                "dram_GB_per_token": dram[k] / 1e9,
                "ms_per_token": 1e3 * sec[k],
                "J_per_token": joules[k],
                "onchip_byte_share": share[k],
            }
        )

with open(OUT / "exp2_sram_capacity.csv", "w", newline="") as f:
    wr = csv.DictWriter(f, fieldnames=list(rows[0]))
    wr.writeheader()
    wr.writerows(rows)

# %%
fig, axes = plt.subplots(1, 3, figsize=(16, 4.5))
colors = {"llama-3-8b": "tab:blue", "llama-3-70b": "tab:red"}
for name, (tp, weights, total, dram, sec, joules, share) in curves.items():
    col = colors[name]
    for ax, y, label in zip(
        axes, (dram / 1e9, 1e3 * sec, joules), ("DRAM GB read per token", "ms per token (step)", "J per token")
    ):
        ax.plot(CAPS / 1e9, y, "-o", ms=2.5, color=col, label=f"{name} ({tp} chip{'s' if tp > 1 else ''})")
        ax.axvline(weights / 1e9, color=col, ls=":", lw=1)
        ax.axvline(total / 1e9, color=col, ls="--", lw=1)
        ax.set_xscale("log")
        ax.set_xlabel("SRAM per chip, GB")
        ax.set_ylabel(label)
        ax.grid(True, which="both", alpha=0.25)
axes[0].set_yscale("log")
axes[0].legend(fontsize=8)
axes[1].text(0.02, 0.02, "dotted: weights fit; dashed: weights + KV fit", transform=axes[1].transAxes, fontsize=8)
fig.suptitle(
    f"SRAM capacity sweep: H100-class chip + 40 TB/s SRAM, greedy placement, bf16, batch {BATCH}, context {CONTEXT}"
)
fig.tight_layout()
fig.savefig(OUT / "exp2_sram_capacity.png", dpi=120)

# %%
lines = [
    "| model | chips | SRAM GB/chip | DRAM GB/token | ms/token | J/token | on-chip byte share |",
    "|---|---|---|---|---|---|---|",
]
for r in rows[::4]:
    lines.append(
        f"| {r['model']} | {r['chips']} | {r['sram_GB_per_chip']:.3g} | {r['dram_GB_per_token']:.3g} | "
        f"{r['ms_per_token']:.3g} | {r['J_per_token']:.3g} | {r['onchip_byte_share']:.2f} |"
    )
(OUT / "exp2_sram_capacity.md").write_text(
    "# Experiment 2: SRAM capacity sweep (every 4th point)\n\n" + "\n".join(lines) + "\n"
)
for name, (tp, weights, total, dram, sec, joules, share) in curves.items():
    print(
        name,
        f"weights/chip {weights / 1e9:.3g} GB, all/chip {total / 1e9:.3g} GB;",
        f"ms {1e3 * sec[0]:.3g} -> {1e3 * sec[-1]:.3g}; J {joules[0]:.3g} -> {joules[-1]:.3g};",
        f"DRAM GB/token {dram[0] / 1e9:.3g} -> {dram[-1] / 1e9:.3g}",
    )
