"""The main job (`costmodel run`): the whole pipeline on the embedded defaults.

1. calibrate the model on the shipped CPU trace (held-out decode steps reported);
2. validate the presets against the published measurements;
3. evaluate every chip preset on the default workload mix (`data/workloads.toml`);
4. co-design an area split and placement for that mix, against the grid baseline;

and write a report folder: `report.json`, `report.md` and PNG figures. The
calibration stage is passed in (`calibrate_stage`): it is the `calibration` package's
(`calibration.pipeline.calibrate_shipped`), which this layer does not import.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .. import codesign
from ..io import atomic_write, chip_presets, data_dir, load_mix
from ..validate import evaluate_rows, summarize
from .codesign import codesign_report, design_rows, plot_codesign
from .parity import parity_plot
from .presets import evaluate_presets_on_mix, plot_presets, presets_table
from .provenance import provenance, shipped_inputs


STAGES = (
    "1/4 calibrating on the shipped CPU trace",
    "2/4 validating against published measurements",
    "3/4 evaluating chip presets on the workload mix",
    "4/4 co-designing an area split for the mix",
)
"""The main job's stages, as `progress` names them."""

CODESIGN_STEPS = 45
"""Adam steps of the co-design stage (`costmodel optimize`'s default)."""

Progress = Callable[[str, int, int], None]
"""Called as `progress(stage, done, total)`: a stage of `STAGES` has `done` of `total` parts done."""


@dataclasses.dataclass(frozen=True)
class MainJob:
    """What the main job wrote: the `report.json` record, the `report.md` text, the folder."""

    report: dict[str, Any]
    markdown: str
    folder: Path


def validation_stage(out: Path) -> dict[str, Any]:
    """Validates the presets against the published measurements; writes the parity plot."""
    results = evaluate_rows()
    parity_plot(results, out / "validation_parity.png")
    return summarize(results)


def codesign_stage(out: Path, progress: Callable[[int], None] | None = None) -> dict[str, Any]:
    """Co-designs a chip for the default workload mix (`costmodel optimize --mix
    data/workloads.toml` with every other default: an 814 mm² N5 logic die, the stack
    count and PIM share co-designed); writes `codesign.png`."""
    problem, names = codesign.build_problem(mix=data_dir() / "workloads.toml")
    report = codesign_report(problem, names, steps=CODESIGN_STEPS, progress=progress)
    plot_codesign(report, out / "codesign.png")
    return report


def main_job_markdown(report: dict[str, Any]) -> str:
    """The main job's `report.md`, from its `report.json` record."""
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
    ours, grid = design_rows(cd["design"]), design_rows(cd["baseline"]["design"])
    parts.append("## 4. Co-designed chip for the mix\n")
    parts.append(
        f"Objective: {cd['objective_name']} ({cd['objective_units']}), mix {', '.join(cd['mix'])}, {cd['chips']} chip(s); "
        f"budget: {cd['budget']}.\n\n"
        "| | gradient design | grid baseline |\n|---|---|---|\n"
        f"| objective | {cd['objective']:.5g} | {cd['baseline']['objective']:.5g} |\n"
        f"| evaluations | {cd['evaluations']} | {cd['baseline']['evaluations']} |\n"
        + "".join(f"| {label.strip()} | {v} | {g} |\n" for (label, v), (_, g) in zip(ours, grid))
        + "\n"
        f"Gap to the grid {100 * cd['gap']:+.2f}% with {cd['evaluation_ratio']:.1f}x fewer evaluations; "
        f"soft-to-hard gap {100 * cd['soft_to_hard_gap']:+.2f}%.\n\n![codesign](codesign.png)\n"
    )
    return "\n".join(parts)


def run_main_job(
    out: str | Path = "report",
    *,
    calibrate_stage: Callable[[Path], dict[str, Any]],
    progress: Progress | None = None,
) -> MainJob:
    """Runs the four stages and writes `report.json`, `report.md` and the figures to `out`.

    Args:
        out: the report folder (made if missing).
        calibrate_stage: fits the model and writes its plots to the folder it is given;
            returns the calibration record, with a `markdown` summary.
        progress: told how far each stage has got (`Progress`).

    Returns:
        A `MainJob`.
    """
    tell = progress or (lambda stage, done, total: None)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    report: dict[str, Any] = {}
    calibrating, validating, presets, designing = STAGES
    tell(calibrating, 0, 1)
    report["calibration"] = calibrate_stage(out)
    tell(calibrating, 1, 1)
    tell(validating, 0, 1)
    report["validation"] = validation_stage(out)
    tell(validating, 1, 1)
    n_presets = len(chip_presets()) * len(load_mix())
    done = 0
    tell(presets, 0, n_presets)

    def advance() -> None:
        nonlocal done
        done += 1
        tell(presets, done, n_presets)

    report["presets"] = evaluate_presets_on_mix(advance)
    plot_presets(report["presets"], out / "presets.png")
    tell(designing, 0, CODESIGN_STEPS)
    report["codesign"] = codesign_stage(out, lambda steps: tell(designing, steps, CODESIGN_STEPS))
    report["provenance"] = provenance(shipped_inputs())
    atomic_write(out / "report.json", json.dumps(report, indent=2, default=float))
    markdown = main_job_markdown(report)
    atomic_write(out / "report.md", markdown)
    return MainJob(report, markdown, out)
