"""Residual plots of a calibration: measured vs predicted, and stream bandwidth vs working set."""

from __future__ import annotations

from pathlib import Path

import numpy as np


def residual_plots(predictions: dict, out_dir: Path, title: str = "") -> list[Path]:
    """Measured vs predicted and relative residuals vs working set / step, as PNGs."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.5))
    markers = {"stream": "o", "gemv": "s", "gemm": "D", "attention_decode": "^", "decode_step": "*"}
    for part, (rows, full, base) in predictions.items():
        for kind in sorted({r["kind"] for r in rows}):
            idx = [i for i, r in enumerate(rows) if r["kind"] == kind]
            meas = np.array([rows[i]["seconds"] for i in idx])
            label = f"{kind} ({part})"
            axes[0].loglog(meas, full[idx], markers[kind], ms=6 if kind == "decode_step" else 4, label=label, alpha=0.8)
            axes[1].semilogx(meas, full[idx] / meas - 1, markers[kind], ms=6 if kind == "decode_step" else 4, alpha=0.8)
            if part == "holdout":
                axes[1].semilogx(meas, base[idx] / meas - 1, "x", color="gray", label=f"{kind} roofline baseline")
    lo = min(min(r["seconds"] for r in rows) for rows, _, _ in predictions.values() if rows)
    hi = max(max(r["seconds"] for r in rows) for rows, _, _ in predictions.values() if rows)
    axes[0].plot([lo, hi], [lo, hi], "k--", lw=0.8)
    axes[0].set_xlabel("measured (s)")
    axes[0].set_ylabel("predicted (s)")
    axes[0].legend(fontsize=7)
    axes[1].axhline(0, color="k", lw=0.8)
    axes[1].axhspan(-0.15, 0.15, color="green", alpha=0.08)
    axes[1].set_xlabel("measured (s)")
    axes[1].set_ylabel("predicted / measured - 1")
    axes[1].legend(fontsize=7)
    fig.suptitle(title or "calibration residuals")
    fig.tight_layout()
    p = out_dir / "residuals.png"
    fig.savefig(p, dpi=110)
    plt.close(fig)
    paths.append(p)

    stream = [(r, f) for rows, full, _ in predictions.values() for r, f in zip(rows, full) if r["kind"] == "stream"]
    if stream:
        fig, ax = plt.subplots(figsize=(6, 4))
        ws = np.array([r["working_set"] for r, _ in stream])
        order = np.argsort(ws)
        meas_bw = np.array([r["bytes"] / r["seconds"] for r, _ in stream])[order]
        pred_bw = np.array([r["bytes"] / f for r, f in stream])[order]
        ax.semilogx(ws[order], meas_bw / 1e9, "o", label="measured")
        ax.semilogx(ws[order], pred_bw / 1e9, "-", label="fitted model")
        ax.set_xlabel("working set (B)")
        ax.set_ylabel("bandwidth (GB/s)")
        ax.legend()
        ax.set_title("stream bandwidth vs working set")
        fig.tight_layout()
        p = out_dir / "stream_bandwidth.png"
        fig.savefig(p, dpi=110)
        plt.close(fig)
        paths.append(p)
    return paths
