# %% [markdown]
# # Experiment 1: double FLOP/s, DRAM bandwidth or SRAM: which buys decode speed?
#
# llama-3-8b (bf16 weights and KV) on an H100-SXM system placed greedily (its 50 MB L2
# used as a managed scratchpad, then HBM), sized to the fewest chips (at most 8) the
# model and KV cache fit on. For each batch (1…256) and context (1k…128k) we compute
# the speed-up of the step time from doubling, one at a time: peak FLOP/s; DRAM (HBM)
# bandwidth; SRAM (capacity and bandwidth together, i.e. twice the SRAM macros). Grey
# cells do not fit on 8 chips. The grid extends the batch 1…256 and context
# 1k…128k to batch 1024 and context 128, to show where decode stops being memory-bound. Run: `python experiments/exp1_doubling.py` (~1 min).

# %%
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
MODEL, CHIP, POLICY = "llama-3-8b", "h100-sxm", "greedy"
BATCHES = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024]
CONTEXTS = [128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768, 65536, 131072]

# %%
import dataclasses


info = dataclasses.replace(cm.chip_info(CHIP), placement=POLICY)
model = cm.model_preset(MODEL)


def doubled(chip, what):
    t = chip.tiers
    if what == "flops":
        return chip.replace(peak_flops=chip.peak_flops * 2)
    if what == "dram":
        return chip.replace(tiers=t.replace(bandwidth=t.bandwidth.at[2].multiply(2)))
    if what == "sram":
        return chip.replace(
            tiers=t.replace(capacity=t.capacity.at[0].multiply(2), bandwidth=t.bandwidth.at[0].multiply(2))
        )
    return chip


VARIANTS = ("flops", "dram", "sram")
speedup = {v: np.full((len(BATCHES), len(CONTEXTS)), np.nan) for v in VARIANTS}
bound = np.full((len(BATCHES), len(CONTEXTS)), "", dtype=object)
rows = []
for i, b in enumerate(BATCHES):
    for j, c in enumerate(CONTEXTS):
        w = cm.Workload(model, cm.make_scenario(batch=b, context=c))
        try:
            tp, pp = system_size(info, w)
        except InputError:
            continue
        chip = info.chip.replace(tensor_parallel=tp, pipeline_parallel=pp)
        base, _ = evaluate_policy(w, chip, POLICY)
        if not bool(base.feasible):
            continue
        t0 = float(base.seconds_per_step)
        bound[i, j] = cm.BOUNDS[int(base.bound)]
        row = {"batch": b, "context": c, "chips": tp * pp, "ms_per_step": 1e3 * t0, "bound": bound[i, j]}
        for v in VARIANTS:
            cost, _ = evaluate_policy(w, doubled(chip, v), POLICY)
            speedup[v][i, j] = t0 / float(cost.seconds_per_step)
            row[f"speedup_2x_{v}"] = speedup[v][i, j]
        rows.append(row)

# %%
import csv


with open(OUT / "exp1_doubling.csv", "w", newline="") as f:
    wr = csv.DictWriter(f, fieldnames=list(rows[0]))
    wr.writeheader()
    wr.writerows(rows)

titles = {"flops": "2x peak FLOP/s", "dram": "2x DRAM bandwidth", "sram": "2x SRAM (capacity + bandwidth)"}
fig, axes = plt.subplots(1, 3, figsize=(18, 5.5), sharey=True)
for ax, v in zip(axes, VARIANTS):
    m = np.ma.masked_invalid(speedup[v])
    cmap = plt.get_cmap("viridis").copy()
    cmap.set_bad("lightgrey")
    im = ax.imshow(m, origin="lower", cmap=cmap, vmin=1.0, vmax=2.0, aspect="auto")
    for i in range(len(BATCHES)):
        for j in range(len(CONTEXTS)):
            if np.isfinite(speedup[v][i, j]):
                ax.text(
                    j,
                    i,
                    f"{speedup[v][i, j]:.2f}",
                    ha="center",
                    va="center",
                    fontsize=5.5,
                    color="white" if speedup[v][i, j] < 1.5 else "black",
                )
    ax.set_xticks(range(len(CONTEXTS)), [f"{c // 1024}k" if c >= 1024 else str(c) for c in CONTEXTS])
    ax.set_yticks(range(len(BATCHES)), BATCHES)
    ax.set_xlabel("context (tokens)")
    ax.set_title(titles[v], fontsize=10)
axes[0].set_ylabel("batch")
fig.colorbar(im, ax=axes, label="speed-up of the decode step", shrink=0.85)
fig.suptitle(f"{MODEL} bf16 on {CHIP} (greedy placement, fewest chips ≤ 8): speed-up from doubling one resource")
fig.savefig(OUT / "exp1_doubling.png", dpi=120, bbox_inches="tight")

# %%
lines = [
    "| batch | context | chips | ms/step | bound | 2x FLOP/s | 2x DRAM BW | 2x SRAM |",
    "|---|---|---|---|---|---|---|---|",
]
for r in rows:
    lines.append(
        f"| {r['batch']} | {r['context']} | {r['chips']} | {r['ms_per_step']:.3g} | {r['bound']} | "
        f"{r['speedup_2x_flops']:.2f} | {r['speedup_2x_dram']:.2f} | {r['speedup_2x_sram']:.2f} |"
    )
(OUT / "exp1_doubling.md").write_text(
    "# Experiment 1: speed-up from doubling one resource\n\n" + "\n".join(lines) + "\n"
)
print(f"wrote {OUT}/exp1_doubling.png, .csv, .md ({len(rows)} feasible points)")
for v in VARIANTS:
    print(v, "max speed-up", np.nanmax(speedup[v]), "min", np.nanmin(speedup[v]))
