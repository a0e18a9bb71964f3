"""`costmodel explain`: sensitivities of a design point and the buyer's questions answered."""

from __future__ import annotations

import argparse

from .._core.area import REFERENCE_DIE_AREA
from .._core.placement import POLICIES
from .args import (
    add_model_arg,
    add_scenario_args,
    fraction_vector,
    positive_int,
    positive_number,
    scenario_kwargs,
)
from .economics import add_economics_args


_split = fraction_vector(
    ("compute", "sram"),
    hint="PIM is --pim-share, a share of the DRAM dies; three numbers were the old single-budget split "
    "compute,sram,pim of one die, which is gone",
)


def _share(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected a number in [0, 1]") from None
    if not 0 <= value <= 1:
        raise argparse.ArgumentTypeError(f"{text!r}: expected a number in [0, 1]")
    return value


def add_commands(subparsers) -> None:
    p = subparsers.add_parser(
        "explain",
        help="elasticities of time, energy and cost per token, and the buyer's questions answered",
        description=(
            "Elasticities d log y / d log x (jax.grad) of seconds, joules and USD per token w.r.t. peak FLOP/s, "
            "each tier's bandwidth and capacity and (with --tech) the design's compute and SRAM area, PIM share "
            "and stacks; on-chip byte share, "
            "compute utilisation, sustained-to-peak ratio and cost per token."
        ),
    )
    add_model_arg(p)
    p.add_argument("--chip", default=None, help="chip preset id or chip TOML path (default h100-sxm)")
    p.add_argument("--chips", type=positive_int, default=None, help="system size (default: fewest chips that fit)")
    p.add_argument("--placement", default=None, choices=POLICIES, help="placement policy (default: the chip's own)")
    add_scenario_args(p)
    p.add_argument("--mode", default="peak", choices=("peak", "sustained"), help="which cost to differentiate")
    g = p.add_argument_group("area-designed chip (instead of --chip)")
    g.add_argument(
        "--tech", default=None, help="technology node: design the chip on the two-die model (logic die + HBM stacks)"
    )
    die = REFERENCE_DIE_AREA * 1e6
    g.add_argument(
        "--area",
        type=positive_number,
        default=die,
        help=f"logic die area, mm²: I/O, one PHY per stack, compute and SRAM (default {die:g})",
    )
    g.add_argument(
        "--split",
        type=_split,
        default=(0.9, 0.1),
        help="compute,sram shares of the logic die's free area after I/O and PHYs, each in [0, 1], summing to 1 "
        "(default 0.9,0.1)",
    )
    g.add_argument("--stacks", type=positive_int, default=5, help="HBM stacks (default 5)")
    g.add_argument(
        "--pim-share",
        type=_share,
        default=0.125,
        help="share of the stacks' DRAM dies that are PIM dies, PIM logic on the DRAM dies (default 0.125)",
    )
    g.add_argument("--power-cap", type=positive_number, default=700.0, help="power cap per chip, W (default 700)")
    g.add_argument("--max-chips", type=positive_int, default=8, help="largest system to size to (default 8)")
    add_economics_args(p)
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=cmd_explain)


def _design(args):
    """(ChipInfo, AreaDesign or None, economics, pricing note) from the arguments."""
    import dataclasses

    from .._core.area import MIN_FREE_AREA, fixed_area
    from ..explain import AreaDesign
    from ..io import ChipInfo, InputError, chip_info, tech_preset
    from ..io.chips import check_power
    from .economics import economics_from_args

    if args.tech is None:
        name = args.chip or "h100-sxm"
        info = chip_info(name)
        if args.placement is not None:
            info = dataclasses.replace(info, placement=args.placement)
        econ, _, note = economics_from_args(args, name)
        return info, None, econ, note
    if args.chip is not None:
        raise InputError(f"--chip {args.chip!r} and --tech {args.tech!r}: give one (a preset, or an area design)")
    tech = tech_preset(args.tech)
    fixed = float(fixed_area(tech, float(args.stacks))) * 1e6
    if args.area - fixed < MIN_FREE_AREA * 1e6:
        raise InputError(
            f"--area {args.area:g}: expected a logic die at least {MIN_FREE_AREA * 1e6:g} mm² larger than its "
            f"fixed I/O and {args.stacks} HBM PHYs ({fixed:.1f} mm² at {args.tech})"
        )
    args.node = args.node or args.tech
    econ, _, note = economics_from_args(args, "area-design")
    design = AreaDesign.from_split(
        tech, econ, args.area * 1e-6, args.split, float(args.stacks), args.pim_share, power_cap=args.power_cap
    )
    split = ",".join(f"{s:g}" for s in args.split)
    label = (
        f"{args.area:g} mm² logic die at {args.tech}, compute,sram {split}, "
        f"{args.stacks} stacks, PIM share {args.pim_share:g}"
    )
    chip = design.chip()
    check_power(float(chip.static_power), args.power_cap, f"area design ({label})", ("static_power_w", "--power-cap"))
    info = ChipInfo(chip, args.placement or "greedy", args.max_chips, "area-design", "", label)
    return info, design, econ, note


def cmd_explain(args: argparse.Namespace) -> int:
    from ..evaluation import evaluate
    from ..explain import explain
    from ..report import dumps

    info, design, econ, note = _design(args)
    e = evaluate(
        args.model,
        info,
        **scenario_kwargs(args),
        chips=args.chips,
    )
    e.require_fit()
    x = explain(e.workload, e.chip, econ, policy=e.info.placement, mode=args.mode, area=design)
    s = e.workload.scenario
    record = {
        "model": e.model_name,
        "chip": info.name,
        "label": info.label,
        "tensor_parallel": e.tensor_parallel,
        "pipeline_parallel": e.pipeline_parallel,
        "batch": float(s.batch),
        "context": float(s.context),
        "pricing": note,
        **x.record,
        "answers": x.answers,
    }
    if args.json:
        print(dumps(record))
    else:
        _print(record)
    return 0


def _print(r) -> None:
    from rich.console import Console
    from rich.table import Table

    from ..report import headline, si

    console = Console()
    console.print(headline(r, r["label"] or r["chip"], f"placement {r['policy']}", f"{r['mode']} mode"))
    t = Table("figure", "value")
    t.add_row("time per token (one sequence)", si(r["seconds_per_token"], "s"))
    t.add_row("tokens/s (all sequences)", f"{r['tokens_per_second']:.4g}")
    t.add_row("energy per token", si(r["joules_per_token"], "J"))
    t.add_row("bound", r["bound"])
    t.add_row(
        "bytes on-chip / in PIM / from DRAM",
        f"{r['onchip_byte_share']:.1%} / {r['pim_byte_share']:.1%} / {r['dram_byte_share']:.1%}",
    )
    t.add_row("compute utilisation (of peak)", f"{r['compute_utilisation']:.1%}")
    t.add_row("sustained / peak (clock)", f"{r['sustained_to_peak']:.3f} ({r['sustained_clock']:.2f})")
    t.add_row("power per chip: peak / cap", f"{r['peak_power_watts_per_chip']:.0f} W / {r['power_cap_watts']:.0f} W")
    c = r["cost_sustained"]
    t.add_row("USD per million tokens (sustained)", f"{c['usd_per_million_tokens']:.4g}  ({r['pricing']})")
    console.print(t)
    t = Table("parameter", "s/token", "J/token", "USD/token", title="elasticities d log y / d log x")
    by = r["elasticities_by_objective"]
    for k in by["seconds_per_token"]:
        t.add_row(k, *(f"{by[o][k]:+.3f}" for o in ("seconds_per_token", "joules_per_token", "usd_per_token")))
    console.print(t)
    console.print(f"[dim]capacity and area: {r['capacity_method']}[/]")
    for a in r["answers"]:
        console.print(f"• {a}")
