"""`costmodel optimize`: gradient co-design of a chip (logic die, DRAM stacks with PIM
dies) and its placement, against a grid over the same design variables."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import Any

from .._core.area import REFERENCE_DIE_AREA
from .args import add_model_arg, add_scenario_args, positive_int, positive_number, scenario_kwargs, whole_number


def stacks_arg(text: str) -> int | str:
    """`--stacks`: a whole number >= 1, or `auto`."""
    if text.strip().lower() == "auto":
        return "auto"
    return positive_int(text)


def add_commands(sub) -> None:
    from ..codesign import OBJECTIVES

    p = sub.add_parser(
        "optimize",
        help="co-design a chip (logic die, HBM stacks, PIM share) and the KV/weight placement by gradient, "
        "against a grid baseline",
    )
    add_model_arg(p)
    add_scenario_args(p)
    p.add_argument(
        "--mix", default=None, help="a workload-mix TOML ([[workloads]] as data/workloads.toml) instead of one point"
    )
    die = REFERENCE_DIE_AREA * 1e6
    budget = p.add_mutually_exclusive_group()
    budget.add_argument(
        "--logic-area-mm2",
        type=positive_number,
        default=None,
        help=f"logic die area at the --tech node, mm²: I/O, HBM PHYs, compute and SRAM (default {die:g})",
    )
    budget.add_argument(
        "--budget-usd",
        type=positive_number,
        default=None,
        help="one dollar budget per chip, shared by the logic die (wafer price, yield), the HBM stacks "
        "(PIM premium included) and packaging",
    )
    budget.add_argument(
        "--area-mm2", type=positive_number, default=None, help="deprecated: the old single budget; use --logic-area-mm2"
    )
    p.add_argument("--tech", default="N5", help="technology node in data/tech.toml (default N5)")
    p.add_argument(
        "--stacks",
        type=stacks_arg,
        default="auto",
        help="HBM stacks per chip, or auto to co-design their count (default auto)",
    )
    p.add_argument(
        "--chips", type=positive_int, default=None, help="chips per system (default: fewest that hold the mix)"
    )
    p.add_argument(
        "--system", default="h100-sxm", help="chip preset whose links, overheads and efficiencies the design shares"
    )
    p.add_argument(
        "--objective",
        choices=OBJECTIVES,
        default="latency",
        help="latency (s per step), energy (J per token), cost (USD per token), or serving: the most tokens/s "
        "per chip within --tpot-ms, each mix point at its best batch (default latency)",
    )
    p.add_argument(
        "--tpot-ms",
        type=positive_number,
        default=None,
        help="the serving objective's time-per-output-token target, ms",
    )
    p.add_argument(
        "--power-cap", type=positive_number, default=None, help="W per chip: optimise the sustained figures under it"
    )
    p.add_argument("--restarts", type=positive_int, default=6)
    p.add_argument("--steps", type=positive_int, default=45, help="joint Adam steps per restart (default 45)")
    p.add_argument(
        "--refine",
        type=whole_number(0),
        default=25,
        help="Adam steps on the area alone with the greedy fill after the joint run (default 25)",
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--grid-step", type=positive_number, default=0.02, help="simplex step of the baseline grid (default 0.02)"
    )
    p.add_argument("--no-baseline", action="store_true", help="skip the grid baseline")
    p.add_argument(
        "--plot", default=None, help="plot of the objective along the run and of the area split (.png, .pdf, .svg, ...)"
    )
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=cmd_optimize)


def run_optimize(args: argparse.Namespace, progress: Callable[[int], None] | None = None) -> dict[str, Any]:
    """The co-design record the arguments ask for (`codesign.build_problem`, then
    `report.codesign.codesign_report`), with bad arguments as `InputError`s."""
    from .. import codesign
    from ..io import InputError
    from ..report.codesign import codesign_report

    if not codesign.is_grid_step(args.grid_step):
        raise InputError(f"--grid-step {args.grid_step!r}: expected 1/N for a whole N >= 2 (e.g. 0.02)")
    if args.chips is not None:
        _check_chips(args)
    logic_area = args.logic_area_mm2
    deprecated = args.area_mm2 is not None
    if deprecated:
        logic_area = args.area_mm2
    try:
        problem, names = codesign.build_problem(
            args.model,
            mix=args.mix,
            **scenario_kwargs(args),
            logic_area=(REFERENCE_DIE_AREA if logic_area is None else logic_area * 1e-6),
            budget_usd=args.budget_usd,
            tech=args.tech,
            n_stacks=args.stacks,
            chips=args.chips,
            system=args.system,
            objective=args.objective,
            power_cap=args.power_cap,
            tpot_target=None if args.tpot_ms is None else args.tpot_ms * 1e-3,
        )
    except InputError as e:
        # One line, as every error: the deprecation goes into it.
        raise InputError(
            f"{e} (--area-mm2 is deprecated and read as --logic-area-mm2)" if deprecated else str(e)
        ) from e
    report = codesign_report(
        problem,
        names,
        restarts=args.restarts,
        steps=args.steps,
        refine=args.refine,
        seed=args.seed,
        grid_step=args.grid_step,
        baseline=not args.no_baseline,
        progress=progress,
    )
    if deprecated:
        print(
            f"costmodel optimize: --area-mm2 is deprecated; read as --logic-area-mm2 {args.area_mm2:g} (the logic die: "
            "I/O, HBM PHYs, compute and SRAM; PIM logic now lives on the DRAM dies, set by the PIM share)",
            file=sys.stderr,
        )
    return report


def _check_chips(args: argparse.Namespace) -> None:
    """`--chips N`: a co-designed system splits every layer over its N chips (tensor
    parallelism N), so N must divide each model's query and KV heads
    (`evaluation.layout_problem`) and be at most `MAX_SYSTEM_CHIPS`."""
    from ..evaluation import MAX_SYSTEM_CHIPS, layout_problem
    from ..io import InputError, load_mix, load_model

    if args.chips > MAX_SYSTEM_CHIPS:
        raise InputError(f"--chips {args.chips}: expected at most {MAX_SYSTEM_CHIPS} chips for a co-designed system")
    names = [args.model] if args.mix is None else sorted({pt.model for pt in load_mix(args.mix)})
    for name in names:
        problem = layout_problem(load_model(name), args.chips, 1)
        if problem is not None:
            raise InputError(f"--chips {args.chips} (TP {args.chips} x PP 1) for model {name!r}: {problem}")


def cmd_optimize(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.progress import Progress

    from ..io.files import check_output_path
    from ..report import dumps

    if args.plot is not None:
        check_output_path(args.plot, "--plot")
    console = Console(stderr=True)
    with Progress(console=console, transient=True, disable=args.json and not console.is_terminal) as bar:
        task = bar.add_task("optimising area split and placement", total=args.steps)
        report = run_optimize(args, progress=lambda done: bar.update(task, completed=done))
    if args.plot:
        from ..report.codesign import plot_codesign

        plot_codesign(report, args.plot)
    if args.json:
        from ..report.provenance import provenance, shipped_inputs, user_files

        report["provenance"] = provenance([*user_files(args.mix, args.model, args.system), *shipped_inputs()])
        print(dumps(report))
        return 0
    _print(report)
    return 0


def _print(r: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    from ..report import si
    from ..report.codesign import design_rows

    console = Console()
    console.print(
        f"[bold]{r['objective_name']}[/] ({r['objective_units']}) over {', '.join(r['mix'])}, {r['chips']} chip(s), "
        f"budget: {r['budget']}"
    )
    t = Table("", "gradient design", "grid baseline")
    base = r.get("baseline")
    rows = design_rows(r["design"])
    base_rows = design_rows(base["design"]) if base else None
    t.add_row("objective", f"{r['objective']:.5g}", f"{base['objective']:.5g}" if base else "—")
    if r["objective_name"] == "serving":  # chip-seconds per token: its inverse is what a buyer reads
        rate = lambda x: f"{1 / x:,.0f}" if x > 0 else "—"
        t.add_row("  tokens/s per chip", rate(r["objective"]), rate(base["objective"]) if base else "—")
    t.add_row("evaluations", str(r["evaluations"]), str(base["evaluations"]) if base else "—")
    t.add_row("seconds", f"{r['seconds']:.2f}", f"{base['seconds']:.2f}" if base else "—")
    for k, (label, value) in enumerate(rows):
        t.add_row(label, value, base_rows[k][1] if base_rows else "—")
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
