"""The main job: every chip preset on the default workload mix, as a report folder."""

from __future__ import annotations

import json
import os
from pathlib import Path

from .api import evaluate
from .io import InputError, chip_presets, load_mix
from .report import cost_record, si


def _atomic_write(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def evaluate_presets_on_mix(progress=None) -> list[dict]:
    """One record per (chip preset, mix point); points that do not fit say so."""
    mix = load_mix()
    chips = sorted(chip_presets())
    rows = []
    for chip in chips:
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
                rows.append({**base, "fits": True, "weights": point.weights, "kv": point.kv, **cost_record(e)})
            if progress is not None:
                progress()
    return rows


def markdown_table(rows: list[dict]) -> str:
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


def plot_presets(rows: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    workloads = sorted({r["workload"] for r in rows})
    fig, axes = plt.subplots(1, len(workloads), figsize=(4.5 * len(workloads), 4.2), squeeze=False)
    for ax, w in zip(axes[0], workloads):
        pts = [r for r in rows if r["workload"] == w and r["fits"]]
        for r in pts:
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


def run_main_job(out: str | Path = "report") -> int:
    from rich.console import Console
    from rich.progress import Progress

    console = Console(stderr=True)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    n = len(chip_presets()) * len(load_mix())
    with Progress(console=console, transient=True) as progress:
        task = progress.add_task("evaluating chip presets on the workload mix", total=n)
        rows = evaluate_presets_on_mix(lambda: progress.advance(task))
    _atomic_write(out / "presets.json", json.dumps(rows, indent=2))
    table = markdown_table(rows)
    _atomic_write(out / "presets.md", "# Chip presets on the default workload mix\n\n" + table)
    plot_presets(rows, out / "presets.png")
    console.print(table)
    console.print(f"wrote {out}/presets.json, {out}/presets.md, {out}/presets.png")
    return 0
