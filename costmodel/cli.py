"""The `costmodel` command line.

Every failure the user can cause ends in one line on stderr naming the file, field,
value and expectation, and exit status 2; never a traceback.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Callable, Sequence

from ._core.placement import POLICIES
from .io import InputError


EXIT_BAD_INPUT = 2

COMMAND_MODULES = (
    "calibration.commands",
    "costmodel.codesign_cli",
    "costmodel.sweep_cli",
    "costmodel.validate_cli",
    "costmodel.explain_cli",
)
"""Modules that add subcommands: each has `add_commands(subparsers)`, which adds its
parsers with `set_defaults(func=...)`; a func returns the exit status and raises
`InputError` for bad input. Heavy imports belong inside the funcs, not at the top."""


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # argparse's own errors: one line, exit 2
        raise InputError(f"{self.prog}: {message}")


def whole_number(lowest: int) -> Callable[[str], int]:
    """An argparse type: a whole number >= `lowest`, or a one-line error."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r}: expected a whole number >= {lowest}") from None
        if value < lowest:
            raise argparse.ArgumentTypeError(f"{text!r}: expected a whole number >= {lowest}")
        return value

    return parse


_positive_int = whole_number(1)


def _nonneg_number(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected a number >= 0") from None
    if not value >= 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"{text!r}: expected a finite number >= 0")
    return value


def _positive_number(text: str) -> float:
    value = _nonneg_number(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{text!r}: expected a number > 0")
    return value


def add_scenario_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--batch", type=_positive_number, default=1, help="sequences per step (default 1)")
    p.add_argument("--context", type=_nonneg_number, default=4096, help="tokens in each KV cache (default 4096)")
    p.add_argument("--prefix", type=_nonneg_number, default=0, help="shared-prefix tokens, read once per step")
    p.add_argument("--weights", default="bf16", help="weight format (see `costmodel presets`)")
    p.add_argument("--kv", default="bf16", help="KV-cache format")


def cmd_presets(args) -> int:
    from . import io
    from ._core.placement import POLICIES

    data = {
        "models": sorted(io.model_presets()),
        "chips": sorted(io.chip_presets()),
        "calibrated_chips": sorted(io.calibrated_chips()),
        "formats": sorted(io.formats()),
        "tech_nodes": io.tech_nodes(),
        "placement_policies": list(POLICIES),
    }
    if args.json:
        from .report import dumps

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


def cmd_evaluate(args) -> int:
    from .evaluation import evaluate
    from .report import cost_record, dumps

    e = evaluate(
        args.model,
        args.chip,
        batch=args.batch,
        context=args.context,
        prefix=args.prefix,
        weights=args.weights,
        kv=args.kv,
        chips=args.chips,
        placement=args.placement,
        framework=args.framework,
    )
    record = cost_record(e.require_fit())
    mode = getattr(args, "mode", "peak")
    if mode == "sustained":
        import dataclasses

        import equinox as eqx

        from ._core.power import sustained_cost

        s = eqx.filter_jit(sustained_cost)(e.workload, e.chip, e.placement)
        e = dataclasses.replace(e, cost=s.cost)
        record = cost_record(e)
        record["sustained_clock"] = float(s.clock)
        record["sustained_to_peak"] = float(s.sustained_to_peak)
        record["within_power_cap"] = bool(s.within_cap)
    record["mode"] = mode
    record["power_cap_watts_per_chip"] = float(e.chip.power_cap)
    if getattr(args, "plot", None):
        from .explain import roofline_plot

        roofline_plot(e, args.plot, title=f"{record['model']} on {record['chip']} ({mode})")
    if args.json:
        print(dumps(record))
    else:
        _print_evaluation(record)
    return 0


def _print_evaluation(r) -> None:
    from rich.console import Console
    from rich.table import Table

    from .report import headline, si

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


def cmd_run(args) -> int:
    from .pipeline import run_main_job

    return run_main_job(out=args.out)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="costmodel", description="What it costs a chip to decode one token of an LLM.")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    p = sub.add_parser("presets", help="list model, chip, format and technology presets")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_presets)

    p = sub.add_parser("evaluate", help="cost of one decode step of a model on a chip")
    p.add_argument("--model", default="llama-3-8b", help="model preset id or config.json path")
    p.add_argument("--chip", default="h100-sxm", help="chip preset id or chip TOML path")
    p.add_argument("--chips", type=_positive_int, default=None, help="system size (default: fewest chips that fit)")
    p.add_argument("--placement", default=None, choices=POLICIES, help="placement policy (default: the chip's own)")
    p.add_argument(
        "--framework", default=None, help="serving-framework profile: llama.cpp, gpt-fast, trt-llm, vllm, native"
    )
    add_scenario_args(p)
    p.add_argument(
        "--mode", default="peak", choices=("peak", "sustained"), help="full clock, or clock lowered to the power cap"
    )
    p.add_argument("--plot", default=None, metavar="OUT.png", help="write a roofline and time-breakdown plot")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=cmd_evaluate)

    p = sub.add_parser("run", help="the main job: evaluate every chip preset on the default workload mix")
    p.add_argument("--out", default="report", help="report folder (default ./report)")
    p.set_defaults(func=cmd_run)

    for name in COMMAND_MODULES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as e:
            if e.name == name:
                continue
            raise
        module.add_commands(sub)
    return parser


_LINE_BREAKS = {ord(c): repr(c)[1:-1] for c in "\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029"}
"""What `str.splitlines` breaks at, mapped to its escape."""


def _one_line(text: str) -> str:
    """A message with line breaks a user typed (in a value it quotes) escaped: one line."""
    return text.translate(_LINE_BREAKS)


def main(argv: Sequence[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
        func: Callable[..., int] = args.func
        return func(args)
    except InputError as e:
        print(f"costmodel: error: {_one_line(str(e))}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        print("costmodel: interrupted", file=sys.stderr)
        return 130
    except OSError as e:  # a path the user gave cannot be read or written
        if e.filename is None or os.environ.get("COSTMODEL_DEBUG"):
            raise
        print(f"costmodel: error: {e.filename}: {e.strerror or e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except Exception as e:  # noqa: BLE001 - the CLI never shows a bare traceback
        if os.environ.get("COSTMODEL_DEBUG"):
            raise
        print(
            f"costmodel: internal error: {type(e).__name__}: {e} (set COSTMODEL_DEBUG=1 for a traceback)",
            file=sys.stderr,
        )
        return 1


if __name__ == "__main__":
    sys.exit(main())
