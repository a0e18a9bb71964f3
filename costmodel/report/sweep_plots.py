"""The plot of a sweep's Pareto front (`costmodel pareto --out`)."""

from __future__ import annotations

from pathlib import Path

import numpy as np


def plot_pareto(front, xs, ys, x: str, y: str, path: Path | str, title: str = "") -> None:
    """Writes a PNG: sampled configs in grey, the front in colour.

    Args:
        front: the front's rows (a `pyarrow.Table`, as `costmodel.sweep.pareto_front`
            gives it), sorted by `x`.
        xs, ys: a sample of all configs' values of the two columns.
        x, y: the columns (axis labels); an axis is logarithmic where its values span
            more than a factor of 100.
        path: the PNG to write.
        title: the plot's title.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fx, fy = front.column(x).to_numpy(), front.column(y).to_numpy()
    fig, ax = plt.subplots(figsize=(6.4, 4.8), dpi=120)
    if len(xs):
        ax.scatter(xs, ys, s=2, c="0.75", label="configs (sample)", rasterized=True)
    ax.plot(fx, fy, "-o", c="tab:red", ms=3, lw=1.2, label=f"Pareto front ({len(fx)})")
    for axis, v in ((ax.xaxis, np.concatenate([xs, fx])), (ax.yaxis, np.concatenate([ys, fy]))):
        v = v[np.isfinite(v)]
        if len(v) and v.min() > 0 and v.max() / v.min() > 100:
            (ax.set_xscale if axis is ax.xaxis else ax.set_yscale)("log")
    ax.set_xlabel(x)
    ax.set_ylabel(y)
    ax.set_title(title)
    ax.legend(loc="best", fontsize=8)
    ax.grid(True, alpha=0.3)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
