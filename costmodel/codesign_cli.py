"""`costmodel optimize`: gradient co-design of area split and placement, against a grid."""

from __future__ import annotations

import argparse
import math
from pathlib import Path
from typing import Any


UNITS = {"latency": "s per step", "energy": "J per token", "cost": "USD per token"}
MAX_SYSTEM_CHIPS = 64
DRAM_HEADROOM = 1.3
"""Default system size: the fewest chips whose HBM holds the largest mix point x 1.3."""


def add_commands(sub) -> None:
    from .cli import _positive_int, _positive_number, add_scenario_args
    from .codesign import OBJECTIVES

    p = sub.add_parser(
        "optimize",
        help="co-design a die's area split and the KV/weight placement by gradient, against a grid baseline",
    )
    p.add_argument("--model", default="llama-3-8b", help="model preset id or config.json path")
    add_scenario_args(p)
    p.add_argument(
        "--mix", default=None, help="a workload-mix TOML ([[workloads]] as data/workloads.toml) instead of one point"
    )
    p.add_argument("--area-mm2", type=_positive_number, default=814.0, help="die area budget in mm² (default 814)")
    p.add_argument("--tech", default="N5", help="technology node in data/tech.toml (default N5)")
    p.add_argument("--stacks", type=_positive_int, default=5, help="HBM stacks per chip (default 5)")
    p.add_argument(
        "--chips", type=_positive_int, default=None, help="chips per system (default: fewest that hold the mix)"
    )
    p.add_argument(
        "--system", default="h100-sxm", help="chip preset whose links, overheads and efficiencies the design shares"
    )
    p.add_argument("--objective", choices=OBJECTIVES, default="latency")
    p.add_argument(
        "--power-cap", type=_positive_number, default=None, help="W per chip: optimise the sustained figures under it"
    )
    p.add_argument("--restarts", type=_positive_int, default=6)
    p.add_argument("--steps", type=_positive_int, default=50)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--grid-step", type=_positive_number, default=0.02, help="simplex step of the baseline grid (default 0.02)"
    )
    p.add_argument("--no-baseline", action="store_true", help="skip the grid baseline")
    p.add_argument("--plot", default=None, help="PNG of the objective along the run and of the area split")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=cmd_optimize)


def _mix(args) -> list[tuple[str, Any, float]]:
    """(name, workload, weight) per mix point."""
    from . import io
    from ._core.workload import Workload

    if args.mix is not None:
        points = io.load_mix(args.mix)
        return [
            (
                pt.name,
                Workload(
                    io.load_model(pt.model),
                    io.make_scenario(
                        batch=pt.batch,
                        context=pt.context,
                        prefix=pt.prefix,
                        weights=pt.weights,
                        kv=pt.kv,
                        where=pt.name,
                    ),
                ),
                pt.weight,
            )
            for pt in points
        ]
    scenario = io.make_scenario(
        batch=args.batch, context=args.context, prefix=args.prefix, weights=args.weights, kv=args.kv
    )
    return [(args.model, Workload(io.load_model(args.model), scenario), 1.0)]


def build_problem(args):
    """The `Problem` the arguments describe, with its infeasible cases as `InputError`s."""
    import jax.numpy as jnp

    from . import io
    from ._core.area import fixed_area
    from ._core.traffic import lower_traffic
    from .codesign import make_problem
    from .io import economics_preset

    if args.grid_step <= 0 or args.grid_step > 0.5 or not math.isclose(1 / args.grid_step, round(1 / args.grid_step)):
        raise io.InputError(f"--grid-step {args.grid_step!r}: expected 1/N for a whole N >= 2 (e.g. 0.02)")
    mix = _mix(args)
    tech = io.tech_preset(args.tech)
    budget = args.area_mm2 * 1e-6
    fixed = float(fixed_area(tech, args.stacks))
    if budget <= fixed:
        raise io.InputError(
            f"--area-mm2 {args.area_mm2:g}: expected more than the fixed I/O and {args.stacks} HBM PHYs "
            f"({fixed * 1e6:.1f} mm² at {args.tech})"
        )
    system = io.chip_info(args.system).chip
    if args.power_cap is not None:
        system = system.replace(power_cap=args.power_cap)
    stored = max(float(jnp.sum(lower_traffic(w).stored_bytes)) for _, w, _ in mix)
    per_chip = args.stacks * float(tech.stack_capacity)
    # The all-compute design's DRAM must hold the largest point, with 30% headroom:
    # PIM area displaces DRAM capacity, and the optimiser should be free to buy some.
    chips = args.chips or math.ceil(stored / per_chip * DRAM_HEADROOM)
    if chips > MAX_SYSTEM_CHIPS or stored > chips * per_chip:
        raise io.InputError(
            f"model and KV cache: {stored / 1e9:.1f} GB fit nowhere: {chips} chips x {args.stacks} stacks x "
            f"{float(tech.stack_capacity) / 1e9:g} GB hold {chips * per_chip / 1e9:.1f} GB"
            + (f" (at most {MAX_SYSTEM_CHIPS} chips)" if chips > MAX_SYSTEM_CHIPS else "; use more --chips or --stacks")
        )
    problem = make_problem(
        [w for _, w, _ in mix],
        [wt for _, _, wt in mix],
        tech,
        budget=budget,
        n_stacks=args.stacks,
        tensor_parallel=chips,
        system=system,
        econ=economics_preset(args.tech),
        objective=args.objective,
        sustained=args.power_cap is not None,
    )
    return problem, [name for name, _, _ in mix]


def run_optimize(args, progress=None) -> dict[str, Any]:
    """Optimises, runs the baseline, and returns the JSON-ready report."""
    from . import codesign

    problem, names = build_problem(args)
    result = codesign.optimize(problem, restarts=args.restarts, steps=args.steps, seed=args.seed, progress=progress)
    rounded = result.objective if result.rounded_objective is None else result.rounded_objective
    report: dict[str, Any] = {
        "objective_name": args.objective,
        "objective_units": UNITS[args.objective],
        "sustained": args.power_cap is not None,
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
    if not result.feasible:
        from .io import InputError

        raise InputError("no feasible design: the model and KV cache overflow DRAM in every restart; use more --chips")
    if not args.no_baseline:
        base = codesign.grid_baseline(problem, step=args.grid_step)
        report["baseline"] = {
            "objective": base.objective,
            "evaluations": base.evaluations,
            "seconds": base.seconds,
            "design": codesign.describe(problem, base, names),
        }
        report["gap"] = result.objective / base.objective - 1.0
        report["evaluation_ratio"] = base.evaluations / result.evaluations
    return report


def plot_report(report: dict[str, Any], path: str | Path) -> None:
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


def cmd_optimize(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.progress import Progress

    from .report import dumps

    console = Console(stderr=True)
    with Progress(console=console, transient=True, disable=args.json and not console.is_terminal) as bar:
        task = bar.add_task("optimising area split and placement", total=args.steps)
        report = run_optimize(args, progress=lambda done: bar.update(task, completed=done))
    if args.plot:
        plot_report(report, args.plot)
    if args.json:
        from .provenance import provenance, shipped_inputs, user_files

        report["provenance"] = provenance([*user_files(args.mix, args.model, args.system), *shipped_inputs()])
        print(dumps(report))
        return 0
    _print(report)
    return 0


def _print(r: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    from .report import si

    console = Console()
    console.print(
        f"[bold]{r['objective_name']}[/] ({r['objective_units']}) over {', '.join(r['mix'])}, {r['chips']} chip(s)"
    )
    t = Table("", "gradient design", "grid baseline")
    base = r.get("baseline")
    t.add_row("objective", f"{r['objective']:.5g}", f"{base['objective']:.5g}" if base else "—")
    t.add_row("evaluations", str(r["evaluations"]), str(base["evaluations"]) if base else "—")
    t.add_row("seconds", f"{r['seconds']:.2f}", f"{base['seconds']:.2f}" if base else "—")
    for part in ("compute", "sram", "pim", "fixed_io"):
        t.add_row(
            f"area {part} (mm²)",
            f"{r['design']['area_mm2'][part]:.1f}",
            f"{base['design']['area_mm2'][part]:.1f}" if base else "—",
        )
    for tier in ("sram", "pim", "dram"):
        t.add_row(
            f"{tier} capacity",
            si(r["design"]["tiers"][tier]["capacity_bytes"], "B"),
            si(base["design"]["tiers"][tier]["capacity_bytes"], "B") if base else "—",
        )
    console.print(t)
    console.print(
        f"soft-to-hard gap {100 * r['soft_to_hard_gap']:+.2f}%"
        + (f", placement polished by policy {r['polished_by']!r}" if r["polished_by"] else "")
    )
    if base:
        console.print(f"gap to baseline {100 * r['gap']:+.2f}% with {r['evaluation_ratio']:.1f}x fewer evaluations")
