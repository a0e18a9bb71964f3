"""The parity plot of `costmodel validate --plot` and the main job: predicted vs measured."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from ..io.measurements import GROUPS, STATUSES
from ..validate import Result


def parity_plot(results: list[Result], path: Path | str) -> None:
    """A log-log plot of predicted vs measured, by group, with y = x and factor-2 lines."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.5, 6.0))
    colors = dict(zip(GROUPS, ("tab:blue", "tab:green", "tab:red", "tab:purple")))
    markers = {"test": "o", "fit": "s", "reference": "x"}
    for group in GROUPS:
        for status in STATUSES:
            sel = [r for r in results if r.row.group == group and r.row.status == status]
            if not sel:
                continue
            style: dict[str, Any] = {"color": colors[group]} if status == "reference" else {"edgecolors": colors[group]}
            if status == "fit":
                style["facecolors"] = "none"
            elif status == "test":
                style["facecolors"] = colors[group]
            ax.scatter(
                [r.row.value for r in sel],
                [r.predicted for r in sel],
                marker=markers[status],
                label=f"{group} ({status}, {len(sel)})",
                s=28,
                **style,
            )
    values = [r.row.value for r in results] + [r.predicted for r in results]
    lo, hi = min(values) / 1.5, max(values) * 1.5
    xs = np.geomspace(lo, hi, 10)
    ax.plot(xs, xs, "k-", lw=0.8)
    for f in (0.5, 2.0):
        ax.plot(xs, xs * f, "k:", lw=0.6)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(lo, hi)
    ax.set_ylim(lo, hi)
    ax.set_xlabel("measured (tok/s per sequence, or output tok/s per chip)")
    ax.set_ylabel("predicted")
    ax.set_title("costmodel vs published decode measurements")
    ax.legend(fontsize=7, loc="upper left")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
