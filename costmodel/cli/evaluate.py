"""`costmodel presets` and `costmodel evaluate`: the presets, and one decode step of a model on a chip."""

from __future__ import annotations

import argparse
from typing import Any

from .._core.placement import POLICIES
from .args import (
    add_inference_arg,
    add_model_arg,
    add_scenario_args,
    check_inference,
    micro_batches_arg,
    positive_int,
    scenario_kwargs,
)


def add_commands(sub) -> None:
    p = sub.add_parser("presets", help="list model, chip, format and technology presets")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_presets)

    p = sub.add_parser("evaluate", help="cost of one decode step of a model on a chip")
    add_model_arg(p)
    p.add_argument("--chip", default="h100-sxm", help="chip preset id or chip TOML path")
    p.add_argument("--chips", type=positive_int, default=None, help="system size (default: fewest chips that fit)")
    p.add_argument("--placement", default=None, choices=POLICIES, help="placement policy (default: the chip's own)")
    p.add_argument(
        "--framework",
        default=None,
        help="serving-framework profile of data/frameworks.toml (e.g. vllm-0.6, sglang, trt-llm-0.7, tgi, llama.cpp)",
    )
    add_inference_arg(p)
    add_scenario_args(p)
    p.add_argument(
        "--micro-batches",
        type=micro_batches_arg,
        default=1,
        metavar="G|auto",
        help="groups the batch is split into through the pipeline stages (auto: one per stage)",
    )
    p.add_argument(
        "--mode", default="peak", choices=("peak", "sustained"), help="full clock, or clock lowered to the power cap"
    )
    p.add_argument(
        "--plot",
        default=None,
        metavar="OUT.png",
        help="write a roofline and time-breakdown plot (.png, .pdf, .svg, ...)",
    )
    p.add_argument(
        "--history-plot",
        default=None,
        metavar="OUT.png",
        help="write step time and J/token against SRAM capacity (hot history filled first), knee marked",
    )
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=cmd_evaluate)


def cmd_presets(args: argparse.Namespace) -> int:
    from .. import io

    data = {
        "models": sorted(io.model_presets()),
        "chips": sorted(io.chip_presets()),
        "calibrated_chips": sorted(io.calibrated_chips()),
        "formats": sorted(io.formats()),
        "tech_nodes": io.tech_nodes(),
        "placement_policies": list(POLICIES),
    }
    if args.json:
        from ..report import dumps

        print(dumps(data))
        return 0
    from rich.console import Console
    from rich.table import Table

    console = Console()
    table = Table("chip", "name", "placement", "max chips", title="chip presets")
    for name, t in sorted(io.chip_presets().items()):
        table.add_row(name, t.get("name", ""), t.get("placement", "dram"), str(t.get("max_chips", "")))
    console.print(table)
    table = Table("model", "source", title="model presets")
    for name, t in sorted(io.model_presets().items()):
        table.add_row(name, t.get("source", ""))
    console.print(table)
    console.print("formats: " + ", ".join(data["formats"]))
    console.print("technology nodes: " + ", ".join(data["tech_nodes"]))
    return 0


def cmd_evaluate(args: argparse.Namespace) -> int:
    from ..evaluation import evaluate
    from ..io.files import check_output_path
    from ..report import cost_record, dumps

    for option, path in (("--plot", args.plot), ("--history-plot", args.history_plot)):
        if path is not None:
            check_output_path(path, option)
    check_inference(args)

    e = evaluate(
        args.model,
        args.chip,
        **scenario_kwargs(args),
        chips=args.chips,
        placement=args.placement,
        framework=args.framework,
        micro_batches=args.micro_batches,
        inference=args.inference,
    )
    record = cost_record(e.require_fit())
    record["micro_batches"] = float(e.workload.scenario.micro_batches)
    mode = getattr(args, "mode", "peak")
    if mode == "sustained":
        import dataclasses

        import equinox as eqx

        from .._core.power import sustained_cost

        s = eqx.filter_jit(sustained_cost)(e.workload, e.chip, e.placement)
        e = dataclasses.replace(e, cost=s.cost)
        record = cost_record(e)
        record["sustained_clock"] = float(s.clock)
        record["sustained_to_peak"] = float(s.sustained_to_peak)
        record["within_power_cap"] = bool(s.within_cap)
    record["mode"] = mode
    record["power_cap_watts_per_chip"] = float(e.chip.power_cap)
    from ..explain.history import hot_history

    record["history"] = hot_history(e.workload, e.chip, e.placement)
    if getattr(args, "plot", None):
        from ..report.roofline import roofline_plot

        roofline_plot(e, args.plot, title=f"{record['model']} on {record['chip']} ({mode})")
    if getattr(args, "history_plot", None):
        from ..report.history_plot import history_plot

        curve = history_plot(e, args.history_plot)
        record["history"]["sram_knee_bytes_per_chip"] = curve.knee
    if args.json:
        print(dumps(record))
    else:
        _print_evaluation(record)
    return 0


def _print_evaluation(r: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    from ..report import headline, si

    console = Console()
    console.print(headline(r, r["chip"], f"placement {r['placement_policy']}"))
    t = Table("figure", "value")
    t.add_row("time per step", si(r["seconds_per_step"], "s"))
    t.add_row("tokens/s (all sequences)", f"{r['tokens_per_second']:.4g}")
    t.add_row("tokens/s per sequence", f"{r['tokens_per_second_per_sequence']:.4g}")
    t.add_row("energy per token", si(r["joules_per_token"], "J"))
    t.add_row("power per chip", si(r["power_watts_per_chip"], "W"))
    t.add_row("bound", r["bound"])
    if r.get("mode") == "sustained":
        t.add_row("sustained clock / speed vs peak", f"{r['sustained_clock']:.2f} / {r['sustained_to_peak']:.3f}")
    console.print(t)
    b = r["breakdown"]
    t = Table("channel", "bytes/step", "time", "energy", "held per chip", title="breakdown per step")
    for tier, v in b["tiers"].items():
        t.add_row(
            tier, si(v["bytes"], "B"), si(v["seconds"], "s"), si(v["joules"], "J"), si(v["stored_bytes_per_chip"], "B")
        )
    c = b["compute"]
    t.add_row("compute", si(c["flops"], "FLOP"), si(c["seconds"], "s"), si(c["joules"], "J"), "")
    t.add_row("serial (latency, launch, links)", "", si(b["serial_seconds"], "s"), "", "")
    t.add_row("static", "", "", si(b["static_joules"], "J"), "")
    console.print(t)
    h = r["history"]
    t = Table("KV history", "value", title=f"hot history (profile {r['profile']})")
    t.add_row("KV stored / read per step", f"{si(h['kv_stored_bytes'], 'B')} / {si(h['kv_read_bytes'], 'B')}")
    t.add_row("KV reads served on chip (SRAM + PIM), as placed", f"{h['on_chip_read_share']:.1%}")
    for share, need in h["capacity_for_share"].items():
        t.add_row(f"on-chip bytes per chip for {float(share):.0%} of KV reads", si(need, "B"))
    t.add_row("SRAM + PIM per chip", si(h["onchip_capacity_bytes_per_chip"], "B"))
    t.add_row(
        "one more MB of SRAM (filled by access density)",
        f"{h['marginal_seconds_per_byte'] * 1e12:+.4g} µs/step, {h['marginal_joules_per_token_per_byte'] * 1e9:+.4g} mJ/token",
    )
    if "sram_knee_bytes_per_chip" in h:
        t.add_row("knee of step time against SRAM capacity", si(h["sram_knee_bytes_per_chip"], "B"))
    console.print(t)
