"""The chip presets on the default workload mix: records, a Markdown table and a plot."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from ..evaluation import evaluate
from ..io import InputError, chip_presets, load_mix
from .records import cost_record, si


def evaluate_presets_on_mix(progress: Callable[[], None] | None = None) -> list[dict]:
    """One record per (chip preset, mix point); points that do not fit say so."""
    mix = load_mix()
    rows = []
    for chip in sorted(chip_presets()):
        for point in mix:
            base = {
                "chip": chip,
                "workload": point.name,
                "model": point.model,
                "batch": point.batch,
                "context": point.context,
            }
            try:
                e = evaluate(
                    point.model,
                    chip,
                    batch=point.batch,
                    context=point.context,
                    prefix=point.prefix,
                    weights=point.weights,
                    kv=point.kv,
                )
            except InputError as err:
                rows.append({**base, "fits": False, "reason": str(err)})
            else:
                record = cost_record(e)
                rows.append(
                    {**base, "fits": bool(record["feasible"]), "weights": point.weights, "kv": point.kv, **record}
                )
            if progress is not None:
                progress()
    return rows


def presets_table(rows: list[dict]) -> str:
    """The records of `evaluate_presets_on_mix` as a Markdown table."""
    lines = [
        "| chip | workload | chips | tok/s per seq | tok/s total | J/token | bound |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        if not r["fits"]:
            lines.append(f"| {r['chip']} | {r['workload']} | — | does not fit | | | |")
            continue
        lines.append(
            f"| {r['chip']} | {r['workload']} | {r['chips']} | {r['tokens_per_second_per_sequence']:.4g} | "
            f"{r['tokens_per_second']:.4g} | {si(r['joules_per_token'], 'J')} | {r['bound']} |"
        )
    return "\n".join(lines) + "\n"


def plot_presets(rows: list[dict], path: str | Path) -> None:
    """Energy per token against tokens/s per sequence, one panel per mix point, as a PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    workloads = list(dict.fromkeys(r["workload"] for r in rows))
    fig, axes = plt.subplots(1, len(workloads), figsize=(4.5 * len(workloads), 4.2), squeeze=False)
    for ax, w in zip(axes[0], workloads):
        for r in (r for r in rows if r["workload"] == w and r["fits"]):
            ax.scatter(r["tokens_per_second_per_sequence"], r["joules_per_token"], s=18)
            ax.annotate(r["chip"], (r["tokens_per_second_per_sequence"], r["joules_per_token"]), fontsize=6)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("tokens/s per sequence")
        ax.set_ylabel("J per token (all chips)")
        ax.set_title(w, fontsize=9)
        ax.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
