"""The hot-history plot (`evaluate --history-plot`): step time and energy against SRAM
capacity, with the knee and the capacities that serve 50 / 90 / 99 % of the KV reads."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from .._core.traffic import lower_traffic
from ..evaluation import Evaluation
from ..explain.history import SHARES, SramCurve, capacity_for_reads, sram_curve


def history_plot(e: Evaluation, path: str | Path, title: str = "", curve: SramCurve | None = None) -> SramCurve:
    """Writes step time and J/token against SRAM capacity per chip (filled by access
    density, `explain.history.sram_curve`), marks the knee and the KV capacities for
    `SHARES` of the reads, and returns the curve.

    Args:
        e: the evaluation (its workload, profile and system).
        path: PNG file to write.
        title: figure title.
        curve: a curve already computed (default: `sram_curve` over its default range).
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    curve = curve or sram_curve(e.workload, e.chip)
    caps_mb = curve.capacities / 1e6
    fig, ax = plt.subplots(figsize=(7, 4.2))
    ax.plot(caps_mb, 1e3 * curve.seconds_per_step, "-", color="tab:blue", label="time per step")
    ax.set_xscale("log")
    ax.set_xlabel("SRAM capacity per chip, MB (filled hottest first)")
    ax.set_ylabel("ms per step", color="tab:blue")
    bx = ax.twinx()
    bx.plot(caps_mb, curve.joules_per_token, "--", color="tab:orange", label="J per token")
    bx.set_ylabel("J per token", color="tab:orange")
    ax.axvline(curve.knee / 1e6, color="red", lw=1.2, label=f"knee {curve.knee / 1e6:.3g} MB")
    need = np.asarray(capacity_for_reads(lower_traffic(e.workload), np.asarray(SHARES)), dtype=float)
    need = need / float(e.chip.n_chips) / 1e6
    lo, hi = caps_mb.min(), caps_mb.max()
    for share, mb in zip(SHARES, need):
        if lo <= mb <= hi:
            ax.axvline(mb, color="gray", ls=":", lw=1)
            ax.annotate(f"{share:.0%} of KV reads", (mb, ax.get_ylim()[1]), fontsize=7, rotation=90, va="top")
    ax.grid(True, which="both", alpha=0.25)
    ax.legend(fontsize=7, loc="upper right")
    ax.set_title(title or f"{e.model_name} on {e.info.name}, profile {e.profile_name}", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return curve
