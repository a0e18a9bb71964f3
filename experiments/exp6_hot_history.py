# %% [markdown]
# # Experiment 6: does the hot KV history fit on chip? Step time and J/token vs SRAM
#
# Step time and J/token against SRAM capacity per chip (8 MB to 2 GB, 49 log-spaced
# points, filled to the byte by the greedy placement: by reads per byte stored,
# `costmodel.explain.history.sram_curve`) under the dense, window-sinks (StreamingLLM)
# and topk (Quest) access profiles of `data/profiles.toml`, for llama-3-8b and
# llama-3-70b at contexts 32k, 64k, 128k and batch 1, 16, 64 (bf16), each on the
# system `costmodel.evaluate` sizes (the fewest chips that hold it; configs that no
# system of the preset's `max_chips` holds are skipped and listed).
#
# Models: both presets carry the shapes of Llama-3.1-8B / -70B (data/models.toml), whose
# context window is 128K tokens (Llama Team, "The Llama 3 Herd of Models",
# arXiv:2407.21783, abstract); 70B is the long-context model because llama-3.1-405b
# does not fit on 8 H100s at all.
# Chips: `sn40l` is the SRAM-heavy preset (520 MB SRAM per socket in front of 64 GB HBM
# at 1.6 TB/s, so its actual SRAM sits inside the swept range; d-Matrix Corsair's 2 GB
# is the range's top and has LPDDR, not HBM, behind it); `h100-sxm` is the HBM GPU
# (50 MB L2, 3.35 TB/s HBM3).
#
# Per curve: the knee (`SramCurve.knee`: the smallest capacity reaching 90 % of the
# curve's drop in step time), the KV bytes per chip serving 90 % of a step's KV reads,
# hottest first (`capacity_for_reads(traffic, 0.9) / n_chips`), and whether that fits
# in the chip's actual SRAM.
# Run: `python experiments/exp6_hot_history.py` (about 30 s on 2 CPU cores).

# %%
import csv
import itertools as it
from pathlib import Path

import matplotlib


matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
from matplotlib.lines import Line2D

import costmodel as cm
from costmodel.explain.history import CURVE_RANGE, capacity_for_reads, sram_curve
from costmodel.io.errors import InputError


OUT = Path(__file__).resolve().parent / "results"
OUT.mkdir(parents=True, exist_ok=True)
MODELS = ["llama-3-8b", "llama-3-70b"]
CHIPS = ["sn40l", "h100-sxm"]
PROFILES = ["dense", "window-sinks", "topk"]
CONTEXTS = [32768, 65536, 131072]
BATCHES = [1, 16, 64]
SHARE = 0.9
SRAM = 0  # tier index of SRAM in `Tiers`
CAPS = np.geomspace(*CURVE_RANGE, 49)  # B of SRAM per chip

# %%
curves, skipped = {}, []
for model, chip, profile, context, batch in it.product(MODELS, CHIPS, PROFILES, CONTEXTS, BATCHES):
    key = (model, chip, profile, context, batch)
    try:
        e = cm.evaluate(model, chip, batch=batch, context=context, profile=profile)
    except InputError as err:
        skipped.append((key, str(err)))
        continue
    n = float(e.chip.n_chips)
    # Same pytree structure for every config: `sram_curve`'s compiled call is reused.
    curve = sram_curve(e.workload, e.chip, CAPS, policy="greedy")
    traffic = cm.lower_traffic(e.workload)
    curves[key] = {
        "curve": curve,
        "chips": int(n),
        "stored_per_chip": float(np.asarray(traffic.stored_bytes).sum()) / n,
        "hot90": float(capacity_for_reads(traffic, SHARE)) / n,
        "sram": float(e.chip.tiers.capacity[SRAM]),
    }

with open(OUT / "exp6_hot_history.csv", "w", newline="") as f:
    wr = csv.writer(f)
    wr.writerow(
        ["model", "chip", "profile", "context", "batch", "chips", "sram_MB_per_chip", "ms_per_step", "J_per_token"]
    )
    for (model, chip, profile, context, batch), r in curves.items():
        c = r["curve"]
        for cap, s, j in zip(c.capacities, c.seconds_per_step, c.joules_per_token):
            wr.writerow(
                [model, chip, profile, context, batch, r["chips"], f"{cap / 1e6:.4g}", f"{1e3 * s:.5g}", f"{j:.5g}"]
            )

# %%
fig, axes = plt.subplots(2 * len(PROFILES), len(CHIPS) * len(MODELS), figsize=(17, 18), sharex=True)
colors = {32768: "tab:blue", 65536: "tab:orange", 131072: "tab:red"}
widths = {32768: 2.8, 65536: 1.9, 131072: 1.0}  # nested, so coinciding contexts stay visible
styles = {1: "-", 16: "--", 64: ":"}
for i, profile in enumerate(PROFILES):
    for jc, (chip, model) in enumerate(it.product(CHIPS, MODELS)):
        ax_t, ax_j = axes[2 * i, jc], axes[2 * i + 1, jc]
        sram = None
        for context, batch in it.product(CONTEXTS, BATCHES):
            r = curves.get((model, chip, profile, context, batch))
            if r is None:
                continue
            c, sram = r["curve"], r["sram"]
            x = c.capacities / 1e6
            k = int(np.argmin(np.abs(c.capacities - c.knee)))
            for ax, y in ((ax_t, c.seconds_per_step), (ax_j, c.joules_per_token)):
                rel = y / y[0]
                ax.plot(x, rel, styles[batch], color=colors[context], lw=widths[context])
                ax.plot(x[k], rel[k], "o", color=colors[context], ms=5, mfc="white")
            if r["hot90"] <= CURVE_RANGE[1]:
                ax_t.plot(r["hot90"] / 1e6, 1.0, "v", color=colors[context], ms=7)
        for ax, what in ((ax_t, "step time"), (ax_j, "J/token")):
            if sram is not None:
                ax.axvline(sram / 1e6, color="k", ls="-.", lw=1)
            ax.set_xscale("log")
            ax.grid(True, which="both", alpha=0.25)
            ax.set_title(f"{profile}: {model} on {chip}, {what}", fontsize=9)
            if jc == 0:
                ax.set_ylabel(f"{what} / at 8 MB")
        if i == len(PROFILES) - 1:
            ax_j.set_xlabel("SRAM per chip, MB")
handles = [Line2D([], [], color=colors[c], lw=widths[c], label=f"context {c // 1024}k") for c in CONTEXTS]
handles += [Line2D([], [], color="gray", ls=styles[b], label=f"batch {b}") for b in BATCHES]
handles += [
    Line2D([], [], color="gray", marker="o", mfc="white", ls="", label="knee (90 % of the drop)"),
    Line2D([], [], color="gray", marker="v", ls="", label="KV/chip serving 90 % of KV reads"),
    Line2D([], [], color="k", ls="-.", label="the chip's own SRAM"),
]
fig.legend(handles=handles, loc="upper center", ncol=9, fontsize=8, bbox_to_anchor=(0.5, 0.975))
fig.suptitle(
    "Step time and J/token vs SRAM per chip (greedy fill, bf16), relative to their value at 8 MB", fontsize=11, y=0.995
)
fig.tight_layout(rect=(0, 0, 1, 0.955))
fig.savefig(OUT / "exp6_hot_history.png", dpi=90)


# %%
def mb(x: float) -> str:
    return f"{x / 1e6:.4g}"


TOP = CURVE_RANGE[1]
lines = [
    "| model | chip | profile | context | batch | chips | stored GB/chip | knee MB | 90 % KV reads MB/chip "
    "| SRAM MB | fits? | ms at 8 MB | ms at 2 GB | J/token at 8 MB | J/token at 2 GB |",
    "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
]
for (model, chip, profile, context, batch), r in curves.items():
    c = r["curve"]
    knee = mb(c.knee) + ("*" if c.knee >= TOP * (1 - 1e-6) else "")
    lines.append(
        f"| {model} | {chip} | {profile} | {context // 1024}k | {batch} | {r['chips']} | "
        f"{r['stored_per_chip'] / 1e9:.3g} | {knee} | {mb(r['hot90'])} | {mb(r['sram'])} | "
        f"{'yes' if r['hot90'] <= r['sram'] else 'no'} | {1e3 * c.seconds_per_step[0]:.4g} | "
        f"{1e3 * c.seconds_per_step[-1]:.4g} | {c.joules_per_token[0]:.4g} | {c.joules_per_token[-1]:.4g} |"
    )

# When the hot history stops fitting: per batch, the smallest context whose 90 % KV
# capacity per chip exceeds the chip's SRAM ("-": it fits at every context evaluated).
stops = [
    "| model | chip | profile | " + " | ".join(f"batch {b}" for b in BATCHES) + " |",
    "|---|---|---|" + "---|" * len(BATCHES),
]
for model, chip, profile in it.product(MODELS, CHIPS, PROFILES):
    cells = []
    for batch in BATCHES:
        rs = [(ctx, curves.get((model, chip, profile, ctx, batch))) for ctx in CONTEXTS]
        rs = [(ctx, r) for ctx, r in rs if r is not None]
        over = [ctx for ctx, r in rs if r["hot90"] > r["sram"]]
        cells.append(f"{over[0] // 1024}k" if over else ("-" if rs else "n/a"))
    stops.append(f"| {model} | {chip} | {profile} | " + " | ".join(cells) + " |")

skip = [f"- {m} on {c}, {p}, {x // 1024}k, batch {b}: {err}" for (m, c, p, x, b), err in skipped]
text = (
    "# Experiment 6: hot KV history vs SRAM per chip\n\n"
    "`python experiments/exp6_hot_history.py`. Greedy fill of 8 MB - 2 GB SRAM per chip; "
    "`knee` is `SramCurve.knee` (* = the range's top: no knee inside 8 MB - 2 GB); "
    "`90 % KV reads` is `capacity_for_reads(traffic, 0.9) / chips`; `fits?` compares it "
    "with the chip's own SRAM.\n\n" + "\n".join(lines) + "\n\n"
    "## When the hot history stops fitting in the chip's own SRAM\n\n"
    "Smallest context at which the KV serving 90 % of KV reads exceeds the chip's SRAM per chip "
    "(- : fits at every context; n/a: no config fits the chip).\n\n" + "\n".join(stops) + "\n\n"
    f"## Skipped: no system of the preset's max_chips holds them ({len(skipped)})\n\n" + "\n".join(skip) + "\n"
)
(OUT / "exp6_hot_history.md").write_text(text)
print(text)
