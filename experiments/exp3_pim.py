# %% [markdown]
# # Experiment 3: where does processing-in-memory attention win, and where does it lose?
#
# `hbm-pim-gpu` (an H100-class die whose HBM3 stacks are half PIM dies: 20 GB PIM +
# 40 GB normal, attention on the KV in the PIM dies, PIM and normal reads serial on the
# shared channels) against `h100-sxm` (80 GB HBM3), each on the same number of chips:
# the fewest (at most 8) on which the PIM system fits. Speed-up of the decode step
# (H100 time / PIM time) and energy ratio across batch 1…256 and context 1k…128k, for
# a GQA model (llama-3-8b, 4 query heads per KV head: 4 FLOP/B of attention) and an
# MHA model (llama-2-7b: 1 FLOP/B). Grey: does not fit on 8 chips.
# Run: `python experiments/exp3_pim.py` (~1 min).

# %%
import csv
from pathlib import Path

import matplotlib


matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np

import costmodel as cm
from costmodel.evaluation import evaluate_policy, system_size
from costmodel.io import InputError


OUT = Path(__file__).resolve().parent / "results"
OUT.mkdir(parents=True, exist_ok=True)
BATCHES = [1, 2, 4, 8, 16, 32, 64, 128, 256]
CONTEXTS = [1024, 2048, 4096, 8192, 16384, 32768, 65536, 131072]
MODELS = ["llama-3-8b", "llama-2-7b"]

pim, gpu = cm.chip_info("hbm-pim-gpu"), cm.chip_info("h100-sxm")

# %%
speed = {m: np.full((len(BATCHES), len(CONTEXTS)), np.nan) for m in MODELS}
energy = {m: np.full((len(BATCHES), len(CONTEXTS)), np.nan) for m in MODELS}
rows = []
for m in MODELS:
    model = cm.model_preset(m)
    for i, b in enumerate(BATCHES):
        for j, c in enumerate(CONTEXTS):
            w = cm.Workload(model, cm.make_scenario(batch=b, context=c))
            try:
                tp, pp = system_size(pim, w)
            except InputError:
                continue
            cp, _ = evaluate_policy(w, pim.chip.replace(tensor_parallel=tp, pipeline_parallel=pp), pim.placement)
            cg, _ = evaluate_policy(w, gpu.chip.replace(tensor_parallel=tp, pipeline_parallel=pp), gpu.placement)
            if not (bool(cp.feasible) and bool(cg.feasible)):
                continue
            speed[m][i, j] = float(cg.seconds_per_step) / float(cp.seconds_per_step)
            energy[m][i, j] = float(cp.joules_per_token) / float(cg.joules_per_token)
            rows.append(
                {
                    "model": m,
                    "batch": b,
                    "context": c,
                    "chips": tp * pp,
                    "pim_ms": 1e3 * float(cp.seconds_per_step),
                    "h100_ms": 1e3 * float(cg.seconds_per_step),
                    "speedup": speed[m][i, j],
                    "energy_ratio": energy[m][i, j],
                    "pim_share_of_bytes": float(cp.tier_bytes[1] / cp.tier_bytes.sum()),
                }
            )

with open(OUT / "exp3_pim.csv", "w", newline="") as f:
    wr = csv.DictWriter(f, fieldnames=list(rows[0]))
    wr.writeheader()
    wr.writerows(rows)

# %%
fig, axes = plt.subplots(2, 2, figsize=(14, 9), sharex=True, sharey=True)
for r, (grid, label, cmap_name, lim) in enumerate(
    [
        (speed, "speed-up (H100 time / PIM time)", "RdBu", (0.5, 2.0)),
        (energy, "energy ratio (PIM J / H100 J)", "RdBu_r", (0.5, 2.0)),
    ]
):
    for k, m in enumerate(MODELS):
        ax = axes[r, k]
        cmap = plt.get_cmap(cmap_name).copy()
        cmap.set_bad("lightgrey")
        data = grid[m]
        im = ax.imshow(
            np.ma.masked_invalid(np.log2(data)),
            origin="lower",
            cmap=cmap,
            vmin=np.log2(lim[0]),
            vmax=np.log2(lim[1]),
            aspect="auto",
        )
        for i in range(len(BATCHES)):
            for j in range(len(CONTEXTS)):
                if np.isfinite(data[i, j]):
                    ax.text(j, i, f"{data[i, j]:.2f}", ha="center", va="center", fontsize=6.5)
        ax.set_xticks(range(len(CONTEXTS)), [f"{c // 1024}k" for c in CONTEXTS])
        ax.set_yticks(range(len(BATCHES)), BATCHES)
        ax.set_title(f"{m}: {label}", fontsize=10)
        if r == 1:
            ax.set_xlabel("context (tokens)")
        if k == 0:
            ax.set_ylabel("batch")
    cb = fig.colorbar(im, ax=axes[r], shrink=0.85)
    cb.set_ticks(np.log2([0.5, 0.71, 1, 1.41, 2]), labels=["0.5", "0.71", "1", "1.41", "2"])
fig.suptitle("HBM-PIM GPU (KV in PIM dies, attention in memory) vs H100-SXM on the same number of chips")
fig.savefig(OUT / "exp3_pim.png", dpi=120, bbox_inches="tight")

# %%
lines = [
    "| model | batch | context | chips | PIM ms | H100 ms | speed-up | energy ratio |",
    "|---|---|---|---|---|---|---|---|",
]
for r in rows:
    lines.append(
        f"| {r['model']} | {r['batch']} | {r['context']} | {r['chips']} | {r['pim_ms']:.3g} | {r['h100_ms']:.3g} | "
        f"{r['speedup']:.2f} | {r['energy_ratio']:.2f} |"
    )
(OUT / "exp3_pim.md").write_text("# Experiment 3: PIM attention vs HBM GPU\n\n" + "\n".join(lines) + "\n")
for m in MODELS:
    print(
        m,
        "speed-up range",
        np.nanmin(speed[m]),
        np.nanmax(speed[m]),
        "energy ratio",
        np.nanmin(energy[m]),
        np.nanmax(energy[m]),
    )
