"""The throughput-versus-interactivity plot (`costmodel serve --plot`): tokens per second
per chip against tokens per second per user, one curve per tensor x pipeline split."""

from __future__ import annotations

from pathlib import Path

from ..serving import Serving


def serving_plot(servings: list[Serving], path: str | Path, title: str = "") -> None:
    """Writes one panel per `Serving` (side by side): each split's feasible points as a
    curve, the TPOT target as a vertical line (tokens/s per user = 1 / TPOT) and the
    chosen point marked.

    Args:
        servings: the answers to draw (one panel each).
        path: PNG file to write.
        title: figure title.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(servings), figsize=(5.2 * len(servings), 4.2), squeeze=False)
    for ax, s in zip(axes[0], servings):
        for tp, pp in s.splits:
            curve = s.curve(tp, pp)
            if curve:
                ax.plot(
                    [p.tokens_per_second_per_user for p in curve],
                    [p.tokens_per_second_per_chip for p in curve],
                    ".-",
                    ms=3,
                    label=f"TP {tp} x PP {pp}",
                )
        if s.tpot_target is not None:
            ax.axvline(1.0 / s.tpot_target, color="gray", ls=":", lw=1, label=f"TPOT {s.tpot_target * 1e3:g} ms")
        if s.best is not None:
            b = s.best
            ax.plot(
                b.tokens_per_second_per_user,
                b.tokens_per_second_per_chip,
                "r*",
                ms=11,
                label=f"best: batch {b.batch:g}",
            )
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("tokens/s per user")
        ax.set_ylabel("tokens/s per chip")
        ax.set_title(f"{s.model} on {s.chips} x {s.chip}", fontsize=9)
        ax.grid(True, which="both", alpha=0.25)
        ax.legend(fontsize=7)
    if title:
        fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
