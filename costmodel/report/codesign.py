"""The co-design record (`costmodel optimize --json`, the main job's section 4) and its plot."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from .. import codesign
from ..io import InputError


UNITS = {"latency": "s per step", "energy": "J per token", "cost": "USD per token"}
"""Unit of each co-design objective (`codesign.OBJECTIVES`)."""


def codesign_report(
    problem: codesign.Problem,
    names: list[str],
    *,
    restarts: int = 6,
    steps: int = 45,
    refine: int = 25,
    seed: int = 0,
    grid_step: float = 0.02,
    baseline: bool = True,
    progress: Callable[[int], None] | None = None,
) -> dict[str, Any]:
    """Optimises a co-design problem, runs the grid baseline, and returns the JSON-ready record.

    Args:
        problem: the problem (`codesign.build_problem`).
        names: the mix points' names.
        restarts, steps, seed, refine: of `codesign.optimize`.
        grid_step: simplex step of the baseline grid (1/N).
        baseline: False to skip the grid baseline.
        progress: called with the number of Adam steps done.

    Returns:
        The record: objective, design (`codesign.describe`), the soft-to-hard and
        polish gaps, evaluations and, with the baseline, its design and the gap to it.

    Raises:
        InputError: if no restart found a design that fits (`DesignStatus.infeasible_capacity`).
    """
    result = codesign.optimize(problem, restarts=restarts, steps=steps, seed=seed, refine=refine, progress=progress)
    rounded = result.objective if result.rounded_objective is None else result.rounded_objective
    report: dict[str, Any] = {
        "objective_name": problem.objective,
        "objective_units": UNITS[problem.objective],
        "sustained": problem.sustained,
        "mix": names,
        "chips": int(problem.tensor_parallel),
        "design": codesign.describe(problem, result, names),
        "objective": result.objective,
        "soft_objective": result.soft_objective,
        # Hardening alone: the rounded, capacity-repaired soft placement (before the
        # policy polish, whose gain is reported on its own).
        "soft_to_hard_gap": rounded / result.soft_objective - 1.0,
        "polish_gain": result.objective / rounded - 1.0,
        "rounded_objective": result.rounded_objective,
        "polished_by": result.polished_by,
        "feasible": result.feasible,
        "evaluations": result.evaluations,
        "seconds": result.seconds,
        "history": [float(x) for x in result.history],
    }
    if result.status == codesign.DesignStatus.infeasible_capacity:
        raise InputError("no feasible design: the model and KV cache overflow DRAM in every restart; use more --chips")
    if baseline:
        base = codesign.grid_baseline(problem, step=grid_step)
        report["baseline"] = {
            "objective": base.objective,
            "evaluations": base.evaluations,
            "seconds": base.seconds,
            "design": codesign.describe(problem, base, names),
        }
        report["gap"] = result.objective / base.objective - 1.0
        report["evaluation_ratio"] = base.evaluations / result.evaluations
    return report


def plot_codesign(report: dict[str, Any], path: str | Path) -> None:
    """Writes the objective along the run (against the hard design and the grid) and the
    area split of each design, as a PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 4))
    ax1.plot(report["history"], label="soft objective (best restart)")
    ax1.axhline(report["objective"], color="C1", ls="--", label="hard design")
    if "baseline" in report:
        ax1.axhline(report["baseline"]["objective"], color="C2", ls=":", label="grid baseline")
    ax1.set_xlabel("Adam step")
    ax1.set_ylabel(report["objective_units"])
    ax1.set_yscale("log")
    ax1.legend(fontsize=8)
    ax1.set_title("objective along the optimisation")
    parts = ["compute", "sram", "pim", "fixed_io"]
    designs = [("gradient", report["design"])] + (
        [("grid", report["baseline"]["design"])] if "baseline" in report else []
    )
    bottom = [0.0] * len(designs)
    for part in parts:
        vals = [d["area_mm2"][part] for _, d in designs]
        ax2.bar([n for n, _ in designs], vals, bottom=bottom, label=part)
        bottom = [b + v for b, v in zip(bottom, vals)]
    ax2.set_ylabel("mm²")
    ax2.set_title("area split")
    ax2.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
