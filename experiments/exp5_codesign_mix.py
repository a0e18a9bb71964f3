# %% [markdown]
# # Experiment 5: the co-designed area split as a function of the workload mix
#
# An 814 mm² N5 die with 5 HBM3 stacks (data/tech.toml), two chips tensor-parallel,
# h100-sxm's links, efficiencies and power cap. The free area (after I/O and PHYs) is
# split among compute, SRAM and PIM, and the KV/weight placement chosen with it, by
# `costmodel.codesign.optimize` (Adam on area and placement logits, 6 restarts, 60
# steps, hardened), minimising the mix-weighted step time of llama-3-8b bf16 at three
# operating points: chat (batch 1, 4k context), long-context (batch 4, 64k) and
# high-concurrency (batch 128, 2k), over seven mixes of them.
# Run: `python experiments/exp5_codesign_mix.py` (a few minutes).

# %%
import csv
from pathlib import Path

import jax.numpy as jnp
import matplotlib


matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np

import costmodel as cm
from costmodel.codesign import design_of, make_problem, optimize


OUT = Path(__file__).resolve().parent / "results"
OUT.mkdir(parents=True, exist_ok=True)
POINTS = {"chat": (1, 4096), "long-context": (4, 65536), "high-concurrency": (128, 2048)}
MIXES = {
    "chat": (1, 0, 0),
    "long": (0, 1, 0),
    "concurrency": (0, 0, 1),
    "chat+long": (0.5, 0.5, 0),
    "chat+conc.": (0.5, 0, 0.5),
    "long+conc.": (0, 0.5, 0.5),
    "equal thirds": (1 / 3, 1 / 3, 1 / 3),
}

tech = cm.tech_preset("N5")
model = cm.model_preset("llama-3-8b")
workloads = [cm.Workload(model, cm.make_scenario(batch=b, context=c)) for b, c in POINTS.values()]
system = cm.chip_preset("h100-sxm")

# %%
rows = []
for name, weights in MIXES.items():
    # A zero weight would leave a point out of the objective; a tiny one keeps shapes equal.
    w = [max(x, 1e-6) for x in weights]
    problem = make_problem(
        workloads,
        w,
        tech,
        logic_area=814e-6,
        n_stacks=5,
        tensor_parallel=2,
        system=system,
        econ=cm.economics_preset("N5"),
    )
    res = optimize(problem, restarts=6, steps=60)
    d = design_of(problem, jnp.asarray(res.area_logits))
    # Logic-die compute and SRAM, and the PIM logic on the DRAM dies (DRAM-process mm²).
    areas = np.asarray([d.compute_area, d.sram_area, d.pim_logic_area]) * 1e6
    rows.append(
        {
            "mix": name,
            **{f"weight_{k}": v for k, v in zip(POINTS, weights)},
            "compute_mm2": areas[0],
            "sram_mm2": areas[1],
            "pim_mm2": areas[2],
            "objective_ms": 1e3 * res.objective,
            "feasible": res.feasible,
            "seconds": res.seconds,
        }
    )
    print(name, [f"{a:.0f}" for a in areas], f"{1e3 * res.objective:.3g} ms", res.feasible, f"{res.seconds:.0f} s")

with open(OUT / "exp5_codesign_mix.csv", "w", newline="") as f:
    wr = csv.DictWriter(f, fieldnames=list(rows[0]))
    wr.writeheader()
    wr.writerows(rows)

# %%
fig, ax = plt.subplots(figsize=(10, 4.5))
x = np.arange(len(rows))
bottom = np.zeros(len(rows))
for part, col in (("compute", "k"), ("sram", "tab:green"), ("pim", "tab:purple")):
    v = np.array([r[f"{part}_mm2"] for r in rows])
    ax.bar(x, v, bottom=bottom, color=col, label=part, alpha=0.85)
    for i in range(len(rows)):
        if v[i] > 25:
            ax.text(i, bottom[i] + v[i] / 2, f"{v[i]:.0f}", ha="center", va="center", color="white", fontsize=8)
    bottom += v
for i, r in enumerate(rows):
    ax.text(i, bottom[i] + 8, f"{r['objective_ms']:.3g} ms", ha="center", fontsize=8)
ax.set_xticks(x, [r["mix"] for r in rows], fontsize=8)
ax.set_ylabel("mm² of the free die area")
ax.set_ylim(0, bottom.max() * 1.12)
ax.set_title("Co-designed area split (814 mm² N5, 5 HBM3 stacks, TP 2) vs workload mix; label: mix-weighted step time")
ax.legend(fontsize=8, loc="lower right")
fig.tight_layout()
fig.savefig(OUT / "exp5_codesign_mix.png", dpi=120)

lines = ["| mix | compute mm² | SRAM mm² | PIM mm² | step time ms | feasible |", "|---|---|---|---|---|---|"]
for r in rows:
    lines.append(
        f"| {r['mix']} | {r['compute_mm2']:.0f} | {r['sram_mm2']:.0f} | {r['pim_mm2']:.0f} | {r['objective_ms']:.3g} | {r['feasible']} |"
    )
(OUT / "exp5_codesign_mix.md").write_text(
    "# Experiment 5: co-designed area split vs workload mix\n\n" + "\n".join(lines) + "\n"
)
