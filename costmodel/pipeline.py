"""The main job (`costmodel run`): the whole pipeline on the embedded defaults.

1. calibrate the model on the shipped CPU trace (held-out decode steps reported);
2. validate the presets against the published measurements;
3. evaluate every chip preset on the default workload mix (`data/workloads.toml`);
4. co-design an area split and placement for that mix, against the grid baseline;

and write a report folder: `report.json`, `report.md` and PNG figures.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .evaluation import evaluate
from .io import InputError, atomic_write, chip_presets, data_dir, load_mix
from .report import cost_record, si


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


def _calibrate(out: Path) -> dict[str, Any]:
    """Fits the model on the shipped CPU trace."""
    from calibration.pipeline import calibrate_shipped

    return calibrate_shipped(out)


def _validate(out: Path) -> dict[str, Any]:
    from .validate import evaluate_rows, parity_plot, summarize

    results = evaluate_rows()
    parity_plot(results, out / "validation_parity.png")
    return summarize(results)


def _codesign(out: Path, progress: Callable[[int], None]) -> dict[str, Any]:
    from .cli import build_parser
    from .codesign_cli import plot_report, run_optimize

    args = build_parser().parse_args(["optimize", "--mix", str(data_dir() / "workloads.toml")])
    report = run_optimize(args, progress=progress)
    plot_report(report, out / "codesign.png")
    return report


def _markdown(report: dict[str, Any]) -> str:
    parts = ["# costmodel main job report\n"]
    parts.append("## 1. Calibration on the shipped CPU trace\n")
    parts.append(report["calibration"]["markdown"])
    val = report["validation"]
    parts.append("## 2. Validation against published measurements (held-out rows)\n")
    parts.append("| group | rows | median APE | p90 APE | worst factor |\n|---|---|---|---|---|")
    for group, median in val["median_ape"].items():
        parts.append(
            f"| {group} | {val['n_test'][group]} | {100 * median:.1f}% | {100 * val['p90_ape'][group]:.1f}% | "
            f"{val['max_factor'][group]:.2f}x |"
        )
    parts.append("\n![parity](validation_parity.png)\n")
    parts.append("## 3. Chip presets on the default workload mix\n")
    parts.append(presets_table(report["presets"]))
    parts.append("\n![presets](presets.png)\n")
    cd = report["codesign"]
    a, b = cd["design"]["area_mm2"], cd["baseline"]["design"]["area_mm2"]
    parts.append("## 4. Co-designed area split for the mix\n")
    parts.append(
        f"Objective: {cd['objective_name']} ({cd['objective_units']}), mix {', '.join(cd['mix'])}, {cd['chips']} chip(s).\n\n"
        "| | gradient design | grid baseline |\n|---|---|---|\n"
        f"| objective | {cd['objective']:.5g} | {cd['baseline']['objective']:.5g} |\n"
        f"| evaluations | {cd['evaluations']} | {cd['baseline']['evaluations']} |\n"
        f"| area compute / SRAM / PIM (mm²) | {a['compute']:.0f} / {a['sram']:.0f} / {a['pim']:.0f} | "
        f"{b['compute']:.0f} / {b['sram']:.0f} / {b['pim']:.0f} |\n\n"
        f"Gap to the grid {100 * cd['gap']:+.2f}% with {cd['evaluation_ratio']:.1f}x fewer evaluations; "
        f"soft-to-hard gap {100 * cd['soft_to_hard_gap']:+.2f}%.\n\n![codesign](codesign.png)\n"
    )
    return "\n".join(parts)


def run_main_job(out: str | Path = "report") -> int:
    from rich.console import Console
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    console = Console(stderr=True)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    report: dict[str, Any] = {}
    n_presets = len(chip_presets()) * len(load_mix())
    columns = (
        TextColumn("{task.description}"),
        BarColumn(),
        TextColumn("{task.completed}/{task.total}"),
        TimeElapsedColumn(),
    )
    with Progress(*columns, console=console) as bar:
        task = bar.add_task("1/4 calibrating on the shipped CPU trace", total=1)
        report["calibration"] = _calibrate(out)
        bar.update(task, completed=1)
        task = bar.add_task("2/4 validating against published measurements", total=1)
        report["validation"] = _validate(out)
        bar.update(task, completed=1)
        task = bar.add_task("3/4 evaluating chip presets on the workload mix", total=n_presets)
        report["presets"] = evaluate_presets_on_mix(lambda: bar.advance(task))
        plot_presets(report["presets"], out / "presets.png")
        task = bar.add_task("4/4 co-designing an area split for the mix", total=50)
        report["codesign"] = _codesign(out, lambda done: bar.update(task, completed=done))
    from .provenance import provenance, shipped_inputs

    report["provenance"] = provenance(shipped_inputs())
    atomic_write(out / "report.json", json.dumps(report, indent=2, default=float))
    markdown = _markdown(report)
    atomic_write(out / "report.md", markdown)
    console.print(markdown, markup=False, highlight=False)
    console.print(f"wrote {out}/report.json, {out}/report.md and PNG figures")
    return 0
