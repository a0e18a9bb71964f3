"""`costmodel serve`: the throughput a per-token latency target allows, and the
throughput-versus-interactivity curve."""

from __future__ import annotations

import argparse

from ..io import InputError
from .args import add_inference_arg, add_model_arg, check_inference, context_mix, positive_int, positive_number
from .economics import add_economics_args


def add_commands(sub) -> None:
    p = sub.add_parser(
        "serve",
        help="largest throughput per chip that meets a per-token latency target, over TP x PP splits and batches",
    )
    add_model_arg(p)
    p.add_argument("--chip", default="h100-sxm", help="chip preset id or chip TOML path")
    p.add_argument(
        "--chips", type=positive_int, default=None, help="system size (default: fewest chips that hold the model)"
    )
    p.add_argument("--tpot-ms", type=positive_number, default=None, help="time-per-output-token target, ms")
    p.add_argument(
        "--ttft-ms",
        type=positive_number,
        default=None,
        help="time-to-first-token target, ms (needs --prompt-tokens and --output-tokens)",
    )
    p.add_argument(
        "--prompt-tokens",
        type=positive_number,
        default=None,
        help="mean prompt tokens per request: each step also prefills the prompts of new requests "
        "(chunked prefill under continuous batching; with --output-tokens)",
    )
    p.add_argument(
        "--prefill-chips",
        type=positive_int,
        default=None,
        help="disaggregated serving: prefill on a separate pool of this many chips of the same kind, "
        "the KV sent over the links (default: prefill inside the decode steps)",
    )
    p.add_argument("--output-tokens", type=positive_number, default=None, help="mean output tokens per request")
    p.add_argument(
        "--chunk-tokens",
        type=positive_number,
        default=512,
        help="largest chunk of one prompt prefilled per step (default 512, Sarathi-Serve)",
    )
    p.add_argument("--context", type=positive_number, default=None, help="mean tokens in each KV cache (default 4096)")
    p.add_argument(
        "--context-mix",
        type=context_mix,
        default=None,
        metavar="NAME|TOKENS:SHARE,...",
        help="the batch's contexts as a histogram instead of one --context: a named distribution of real "
        "traffic (data/contexts.toml: sharegpt, azure-conversation, azure-code, long-document, "
        "mooncake-conversation, mooncake-synthetic), or bins such as 1024:0.5,8192:0.4,65536:0.1 (shares of "
        "the sequences, summing to 1); the mean context is their weighted mean",
    )
    p.add_argument("--weights", default="bf16", help="weight format (default bf16)")
    p.add_argument("--kv", default="bf16", help="KV-cache format (default bf16)")
    p.add_argument("--profile", default="dense", help="KV access profile: preset id or TOML path")
    p.add_argument("--framework", default=None, help="serving-framework profile applied to the chip")
    add_inference_arg(p)
    p.add_argument(
        "--plot",
        default=None,
        metavar="OUT.png",
        help="write the throughput-interactivity curves (.png, .pdf, .svg, ...)",
    )
    p.add_argument("--json", action="store_true", help="print one JSON object (the answer and every point)")
    add_economics_args(p)
    p.set_defaults(func=cmd_serve)


def cmd_serve(args: argparse.Namespace) -> int:
    import dataclasses

    from ..evaluation import apply_framework
    from ..io import chip_info
    from ..io.files import check_output_path
    from ..serving import serve, unmet_target_message
    from .economics import economics_from_args

    if args.plot is not None:
        check_output_path(args.plot, "--plot")
    check_inference(args)
    info = chip_info(args.chip)
    if args.framework is not None:
        info = apply_framework(info, args.framework, inference=args.inference, kv=args.kv)
    econ, _, note = economics_from_args(args, args.chip)
    mix, context = None, 4096.0 if args.context is None else args.context
    contexts = f"context {context:g}"
    if args.context_mix is not None:
        if args.context is not None:
            raise InputError(f"--context {args.context:g} and --context-mix: give one (the mix sets the mean context)")
        from .._core.workload import ContextMix

        if isinstance(args.context_mix, str):
            from ..io import context_distribution

            named = context_distribution(args.context_mix)
            lengths, shares = named.lengths, named.shares
            label = f"{named.name} mix"
        else:
            lengths, shares = args.context_mix
            label = f"{len(lengths)}-bin mix"
        context = sum(n * s for n, s in zip(lengths, shares))
        mix = ContextMix.of(lengths, shares)
        contexts = f"contexts: {label}, mean {context:,.0f}"
    tpot = None if args.tpot_ms is None else args.tpot_ms * 1e-3
    ttft = None if args.ttft_ms is None else args.ttft_ms * 1e-3
    s = serve(
        args.model,
        info,
        econ,
        chips=args.chips,
        tpot=tpot,
        context=context,
        mix=mix,
        weights=args.weights,
        kv=args.kv,
        profile=args.profile,
        prompt_tokens=args.prompt_tokens,
        output_tokens=args.output_tokens,
        chunk_tokens=args.chunk_tokens,
        ttft=ttft,
        prefill_chips=args.prefill_chips,
    )
    if s.best is None:
        raise InputError(
            unmet_target_message(s)
            if s.tpot_target is not None or s.ttft_target is not None
            else f"{s.model} on {s.chips} x {s.chip}: no batch fits in memory on any split"
        )
    if args.plot:
        from ..report.serving_plot import serving_plot

        serving_plot([s], args.plot)
    if args.json:
        from ..report import dumps

        print(
            dumps(
                {
                    "model": s.model,
                    "chip": s.chip,
                    "chips": s.chips,
                    "tpot_target_seconds": s.tpot_target,
                    "ttft_target_seconds": s.ttft_target,
                    "context": context,
                    "context_mix": None if mix is None else args.context_mix,
                    "best": None if s.best is None else dataclasses.asdict(s.best),
                    "economics": note,
                    "points": [dataclasses.asdict(p) for p in s.points],
                }
            )
        )
    else:
        _print(s, note, contexts)
    return 0


def _print(s, note: str, contexts: str) -> None:
    from rich.console import Console
    from rich.table import Table

    from ..serving import meets

    console = Console()
    target = "no TPOT target" if s.tpot_target is None else f"TPOT <= {s.tpot_target * 1e3:g} ms"
    if s.ttft_target is not None:
        target += f", TTFT <= {s.ttft_target * 1e3:g} ms"
    console.print(f"[bold]{s.model}[/bold] on {s.chips} x {s.chip}, {contexts}, {target} ({note})")
    t = Table(
        "split",
        "best batch",
        "micro-batches",
        "TPOT",
        "TTFT",
        "tok/s per chip",
        "tok/s per user",
        "J/token",
        "$/M tokens",
    )
    for tp, pp in s.splits:
        curve = [p for p in s.curve(tp, pp) if meets(p, s.tpot_target, s.ttft_target)]
        if not curve:
            t.add_row(f"TP {tp} x PP {pp}", "none meets the target", "", "", "", "", "", "", "")
            continue
        p = max(curve, key=lambda p: p.tokens_per_second_per_chip)
        mark = " *" if p == s.best else ""
        t.add_row(
            f"TP {tp} x PP {pp}{mark}",
            f"{p.batch:g}",
            f"{p.micro_batches:g}",
            f"{p.tpot * 1e3:.3g} ms",
            "" if p.ttft is None else f"{p.ttft * 1e3:.3g} ms",
            f"{p.tokens_per_second_per_chip:.4g}",
            f"{p.tokens_per_second_per_user:.4g}",
            f"{p.joules_per_token:.3g}",
            f"{p.usd_per_million_tokens:.3g}",
        )
    console.print(t)
    console.print(
        "* the answer: most tokens/s per chip within the target; $ = manufacturing cost and energy, no margin"
    )
