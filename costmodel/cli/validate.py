"""`costmodel validate`: the model against published decode measurements."""

from __future__ import annotations

import argparse


def add_commands(subparsers) -> None:
    p = subparsers.add_parser(
        "validate",
        help="predicted vs measured for every published decode measurement, with the error per group",
    )
    p.add_argument("--json", action="store_true", help="print median_ape, p90_ape and the rows as JSON")
    p.add_argument(
        "--plot",
        metavar="OUT.png",
        default=None,
        help="write a log-log parity plot to this file (.png, .pdf, .svg, ...)",
    )
    p.add_argument("--table", default=None, help="measurement table (default data/measurements/measurements.toml)")
    p.add_argument(
        "--frameworks", default=None, help="framework profiles (default data/frameworks.toml; also for --serving)"
    )
    p.add_argument(
        "--pim",
        action="store_true",
        help="the published PIM results instead: each paper's headline ratio against its own baseline "
        "(data/measurements/pim.toml; with --table, another PIM table)",
    )
    p.add_argument(
        "--serving",
        action="store_true",
        help="the published serving benchmarks instead: TPOT, throughput and TTFT under a concurrency or request "
        "rate, chunked prefill in the steps (data/measurements/serving.toml; with --table, another serving table)",
    )
    p.add_argument(
        "--check",
        action="store_true",
        help="exit 1 if a held-out group misses its target (median APE 15%% batch-1 GPU and Apple, "
        "25%% large batch; SRAM machines within 2x)",
    )
    p.set_defaults(func=cmd_validate)


def cmd_validate(args: argparse.Namespace) -> int:
    import sys

    from .. import validate as v
    from ..io.files import check_output_path
    from ..report import dumps

    if args.plot is not None:
        check_output_path(args.plot, "--plot")
    if args.pim and args.serving:
        from ..io import InputError

        raise InputError("--pim and --serving: expected one table")
    if args.pim:
        if args.frameworks is not None:
            from ..io import InputError

            raise InputError(f"--frameworks {args.frameworks}: the PIM table compares papers' own ratios, no profile")
        return _cmd_validate_pim(args)
    if args.serving:
        return _cmd_validate_serving(args)
    rows = v.load_rows(args.table)
    frameworks = v.load_frameworks(args.frameworks)
    results = v.evaluate_rows(rows, frameworks)
    summary = v.summarize(results, frameworks)
    if args.plot:
        from ..report.parity import parity_plot

        parity_plot(results, args.plot)
    if args.json:
        print(dumps({**summary, "rows": [v.result_record(r) for r in results]}))
    else:
        _print(results, summary)
        if args.plot:
            print(f"parity plot: {args.plot}")
    missed = v.missed_targets(summary)
    if args.check and missed:
        print("costmodel validate: targets missed: " + "; ".join(missed), file=sys.stderr)
        return 1
    return 0


def _cmd_validate_pim(args: argparse.Namespace) -> int:
    import sys

    from .. import validate_pim as vp
    from ..report import dumps

    results = vp.evaluate_pim_rows(vp.load_pim_rows(args.table))
    missed = [r.row.id for r in results if not r.within]
    if args.json:
        print(dumps({"target": vp.TARGET, "missed": missed, "rows": [vp.pim_record(r) for r in results]}))
    else:
        from rich.console import Console
        from rich.table import Table

        t = Table("row", "quantity", "paper", "model", "error", "PIM system", "baseline", "source", title="PIM results")
        for r in results:
            layout = lambda s, x: f"{s.chip} x{x.tensor_parallel * x.pipeline_parallel} b{s.batch:g}"
            t.add_row(
                r.row.id,
                r.row.quantity,
                f"{r.row.value:.3g}",
                f"{r.predicted:.3g}",
                f"{r.error:+.1%}",
                layout(r.row.pim, r.pim),
                layout(r.row.baseline, r.baseline),
                r.row.where.split(":")[0].split(" (")[0],
            )
        Console(width=200).print(t)
        print(
            f"{len(results) - len(missed)} of {len(results)} rows within {vp.TARGET:.0%}; the notes of each row "
            "(data/measurements/pim.toml) give the reason for a miss"
        )
    if args.check and missed:
        print(f"costmodel validate --pim: rows outside {vp.TARGET:.0%}: " + ", ".join(missed), file=sys.stderr)
        return 1
    return 0


def _cmd_validate_serving(args: argparse.Namespace) -> int:
    import sys

    from .. import validate_serving as vs
    from ..io.frameworks import load_frameworks
    from ..report import dumps

    frameworks = None if args.frameworks is None else load_frameworks(args.frameworks)
    results = vs.evaluate_serving_rows(vs.load_serving_rows(args.table, frameworks), frameworks)
    summary = vs.summary(results)
    if args.json:
        print(dumps({**summary, "rows": [vs.serving_record(r) for r in results]}))
    else:
        from rich.console import Console
        from rich.table import Table

        t = Table(
            "row",
            "status",
            "load",
            "batch",
            "TPOT ms",
            "model",
            "tok/s",
            "model",
            "TTFT ms",
            "model",
            title="serving benchmarks: measured vs model",
        )
        for r in results:
            rec, e = vs.serving_record(r), r.errors()

            def cell(key, measured, fmt):
                if measured is None:
                    return "-"
                return f"{getattr(r, key):{fmt}} ({e[key]:+.0%})"

            t.add_row(
                r.row.id,
                r.row.status + (" (blind)" if r.row.blind else ""),
                rec["load"],
                f"{r.batch:.1f}" + ("*" if r.overloaded else ""),
                "-" if r.row.tpot_ms is None else f"{r.row.tpot_ms:.3g}",
                cell("tpot_ms", r.row.tpot_ms, ".3g"),
                "-" if r.row.output_tokens_per_second is None else f"{r.row.output_tokens_per_second:.4g}",
                cell("output_tokens_per_second", r.row.output_tokens_per_second, ".4g"),
                "-" if r.row.ttft_ms is None else f"{r.row.ttft_ms:.4g}",
                cell("ttft_ms", r.row.ttft_ms, ".4g"),
            )
        Console(width=220).print(t)
        sc, tp, th = summary["scored"], summary["tpot_ms"], summary["output_tokens_per_second"]
        print(
            f"{summary['test_rows']} test rows: TPOT median APE {tp['median']:.1%} (n {tp['n']}), throughput "
            f"{th['median']:.1%} (n {th['n']}), both {sc['median']:.1%} (p90 {sc['p90']:.1%}); target "
            f"{vs.TARGET:.0%}. TTFT is shown, not scored (queueing is not modelled). * = the load exceeds what "
            "the instance holds or keeps up with"
        )
        b = summary["blind"]
        if b["test_rows"]:
            print(
                f"of which {b['test_rows']} rows of the blind checks (gathered without running the model, all scored since; "
                f"each check's one blind score and the changes made after it are in BENCHMARKS.md): TPOT "
                f"{b['tpot_ms']['median']:.1%} (n {b['tpot_ms']['n']}), throughput "
                f"{b['output_tokens_per_second']['median']:.1%} (n {b['output_tokens_per_second']['n']}), both "
                f"{b['scored']['median']:.1%} (p90 {b['scored']['p90']:.1%})"
            )
    if args.check and not summary["scored"]["median"] <= vs.TARGET:
        print(
            f"costmodel validate --serving: median APE {summary['scored']['median']:.1%} above {vs.TARGET:.0%}",
            file=sys.stderr,
        )
        return 1
    return 0


def _print(results, summary) -> None:
    from rich.console import Console
    from rich.table import Table

    from ..validate import GROUPS, SRAM_FACTOR, TARGETS

    console = Console(width=200)
    t = Table("row", "status", "chip", "framework", "layout", "measured", "predicted", "error", title="rows")
    for r in results:
        t.add_row(
            r.row.id,
            r.row.status,
            r.row.chip,
            r.framework,
            f"TP{r.tensor_parallel} PP{r.pipeline_parallel}",
            f"{r.row.value:.4g}",
            f"{r.predicted:.4g}",
            f"{r.error:+.1%}",
        )
    console.print(t)
    t = Table(
        "group",
        "held-out rows",
        "median APE",
        "p90 APE",
        "worst factor",
        "target",
        "fit rows (median APE)",
        "fitted numbers / on rows",
        title="error per group (held-out rows only; fit rows apart)",
    )
    for g in GROUPS:
        target = f"median <= {TARGETS[g]:.0%}" if g in TARGETS else f"within {SRAM_FACTOR:g}x"
        fit = summary["fit"][g]
        t.add_row(
            g,
            str(summary["n_test"][g]),
            f"{summary['median_ape'][g]:.1%}",
            f"{summary['p90_ape'][g]:.1%}",
            f"{summary['max_factor'][g]:.2f}",
            target,
            f"{fit['n']} ({fit['median_ape']:.1%})",
            f"{summary['fitted'][g]['parameters']} / {summary['fitted'][g]['rows']}",
        )
    console.print(t)
    for g, checks in summary["blind"].items():
        for check, b in checks.items():
            print(
                f"{g}: {b['n']} held-out rows gathered for the blind check '{check}' (without running the model; "
                f"its one blind score is in BENCHMARKS.md): median APE {b['median_ape']:.1%}, p90 {b['p90_ape']:.1%}"
            )
