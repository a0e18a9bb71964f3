"""The co-design record (`costmodel optimize --json`, the main job's section 4) and its plot."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp

from .. import codesign
from ..codesign.problem import batch_costs
from ..io import InputError


UNITS = {
    "latency": "s per step",
    "energy": "J per token",
    "cost": "USD per token",
    "serving": "chip-s per token at the TPOT target",
}
"""Unit of each co-design objective (`codesign.OBJECTIVES`)."""


@eqx.filter_jit
def _fastest_fitting_steps(problem: codesign.Problem, area_logits, placements):
    """Per mix point, the fastest step among the batches of `Problem.batches` that fit
    (inf where none does), in one compiled call."""
    chip = codesign.design_chip(problem, area_logits)

    def point(workload, placement):
        costs = batch_costs(problem, workload, chip, placement)
        return jnp.min(jnp.where(costs.feasible, costs.seconds_per_step, jnp.inf))

    return jax.vmap(point)(problem.workloads, placements)


def _serving_miss(problem: codesign.Problem, result: codesign.Result) -> str:
    """Why a serving design meets no TPOT target, in one line: the mix point whose fastest
    batch that fits is slowest, and that time; or that no batch fits there at all. The
    steps are the problem's own (`sustained` under a power cap), at every batch of
    `Problem.batches`, with the design's placement."""
    fastest = _fastest_fitting_steps(problem, jnp.asarray(result.area_logits), jnp.asarray(result.placements))
    worst = int(jnp.argmax(fastest))
    if not bool(jnp.isfinite(fastest[worst])):
        return f"no batch fits in memory at mix point {worst + 1} of the best design found; use more --chips"
    return (
        f"the best design found takes {float(fastest[worst]) * 1e3:.3g} ms per token at its fastest batch that fits "
        f"(mix point {worst + 1}); expected a larger target or more --chips"
    )


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
        InputError: if no restart found a design that fits (`DesignStatus.infeasible_capacity`),
            or, for the serving objective, one that serves a batch within the TPOT target
            (`DesignStatus.infeasible_target`, naming the mix point and its fastest step).
    """
    result = codesign.optimize(problem, restarts=restarts, steps=steps, seed=seed, refine=refine, progress=progress)
    rounded = result.objective if result.rounded_objective is None else result.rounded_objective
    report: dict[str, Any] = {
        "objective_name": problem.objective,
        "objective_units": UNITS[problem.objective],
        "tpot_target_seconds": float(problem.tpot_target) if problem.objective == "serving" else None,
        "sustained": problem.sustained,
        "mix": names,
        "chips": int(problem.tensor_parallel),
        "budget": budget_text(problem),
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
    if result.status == codesign.DesignStatus.infeasible_target:
        raise InputError(
            f"--tpot-ms {float(problem.tpot_target) * 1e3:g}: no design tried serves any batch within it: "
            + _serving_miss(problem, result)
        )
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


def design_rows(d: dict[str, Any]) -> list[tuple[str, str]]:
    """(label, value) rows of a design (`codesign.describe`) an architect reads."""
    a, m, usd = d["logic_die_mm2"], d["dram"], d["price_usd"]
    return [
        ("logic die (mm²)", f"{a['total']:.0f}"),
        ("  compute / SRAM / I/O+PHYs (mm²)", f"{a['compute']:.0f} / {a['sram']:.0f} / {a['io_and_phys']:.0f}"),
        ("HBM stacks", f"{m['stacks']:.3g} x {m['dies_per_stack']:.0f} dies"),
        ("PIM dies per stack (share)", f"{m['pim_dies_per_stack']:.3g} ({100 * m['pim_share']:.0f}%)"),
        ("PIM / DRAM capacity (GB)", f"{m['pim_capacity_bytes'] / 1e9:.1f} / {m['dram_capacity_bytes'] / 1e9:.1f}"),
        ("PIM logic (DRAM-process mm²)", f"{m['pim_logic_mm2_dram_process']:.0f}"),
        ("$ per good chip", f"{usd['chip']:,.0f}"),
        (
            "  die / stacks / packaging ($)",
            f"{usd['logic_die']:,.0f} / {usd['stacks']:,.0f} / {usd['packaging']:,.0f}",
        ),
    ]


def budget_text(problem: codesign.Problem) -> str:
    """The problem's budget in words: the logic die's area or the dollars, and the stacks."""
    stacks = "stacks co-designed" if problem.stacks == "auto" else f"{float(problem.n_stacks):g} stacks"
    if problem.budget == "usd":
        return f"${float(problem.budget_usd):,.0f} per chip (logic die, stacks, packaging), {stacks}"
    return f"logic die {float(problem.logic_area) * 1e6:g} mm², {stacks}"


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
    parts = ["compute", "sram", "io_and_phys"]
    designs = [("gradient", report["design"])] + (
        [("grid", report["baseline"]["design"])] if "baseline" in report else []
    )
    bottom = [0.0] * len(designs)
    for part in parts:
        vals = [d["logic_die_mm2"][part] for _, d in designs]
        ax2.bar([n for n, _ in designs], vals, bottom=bottom, label=part)
        bottom = [b + v for b, v in zip(bottom, vals)]
    for k, (_, d) in enumerate(designs):
        m = d["dram"]
        ax2.annotate(
            f"{m['stacks']:.0f} stacks, {m['pim_dies_per_stack']:.0f}/{m['dies_per_stack']:.0f} PIM dies\n"
            f"${d['price_usd']['chip']:,.0f}",
            (k, bottom[k]),
            ha="center",
            va="bottom",
            fontsize=8,
        )
    ax2.set_ylabel("logic-die mm²")
    ax2.set_title("logic die split (stacks and PIM above)")
    ax2.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
