"""`costmodel bench`, `costmodel calibrate` and `costmodel import-trace`: the `calibration` package's commands.

Each imports what it needs from the `calibration` top level inside the command, so
`costmodel --help` does not load JAX benchmarks or the fit.
"""

from __future__ import annotations

import math
import os
import shlex
import sys

from ..io import InputError, atomic_write
from ..io.files import check_output_folder, check_output_path


def add_commands(sub) -> None:
    p = sub.add_parser("bench", help="measure a trace (microbenchmarks + flax decode steps) with JAX")
    p.add_argument("--out", required=True, help="trace file to write (.csv or .parquet)")
    p.add_argument("--quick", action="store_true", help="the short plan (< 2 min on a 2-core CPU); as --plan quick")
    p.add_argument(
        "--plan",
        choices=["full", "quick", "gpu"],
        default=None,
        help="what to measure: full (default; sized for a CPU's caches), quick, or gpu (sized for a data-centre "
        "GPU: streams to 8 GiB, Llama-shaped GEMV/GEMM, bf16 attention and bf16 Llama 3.2 1B / Llama 3 8B decode steps)",
    )
    p.add_argument(
        "--device", default=None, help="JAX device: 'cpu', 'gpu', or PLATFORM:INDEX (default jax.devices()[0])"
    )
    p.add_argument(
        "--threads",
        type=int,
        default=None,
        help="CPU only: XLA:CPU intra-op threads (1 = single-threaded kernels, robust on a shared machine)",
    )
    p.add_argument("--kinds", default=None, help="comma-separated kinds to measure (default all)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(func=cmd_bench)

    p = sub.add_parser("calibrate", help="fit the model's physical parameters to measured traces")
    p.add_argument("traces", nargs="+", help="trace files (.csv or .parquet)")
    p.add_argument("--holdout", action="append", default=[], help="kind left out of the fit and predicted (repeatable)")
    p.add_argument("--out", required=True, help="chip TOML file to write (evaluate --chip accepts it)")
    p.add_argument("--plots", default=None, help="folder for residual PNGs (default: next to --out)")
    p.add_argument("--steps", type=int, default=1500, help="Adam steps (then 200 L-BFGS steps)")
    p.add_argument("--dtypes", default=None, help="fit only rows of these comma-separated formats (e.g. f32)")
    p.add_argument(
        "--memory-gb",
        type=float,
        default=None,
        help="the device's memory in GB, the chip file's DRAM capacity (default for a CPU trace: this machine's "
        "memory; required for any other device, e.g. 143.8 for an H200)",
    )
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=cmd_calibrate)

    p = sub.add_parser("import-trace", help="convert llama-bench or vLLM benchmark output to a trace")
    p.add_argument("source", choices=["llama-bench", "vllm"])
    p.add_argument("file", help="llama-bench -o json/jsonl/csv output, or vLLM result JSON")
    p.add_argument("--model", required=True, help="the benchmarked model: preset id, config.json or model TOML")
    p.add_argument("--weights", default=None, help="weight format (llama-bench default: from model_type)")
    p.add_argument("--kv", default=None, help="KV format")
    p.add_argument("--out", required=True, help="trace file to write (.csv or .parquet)")
    p.set_defaults(func=cmd_import)


TRACE_SUFFIXES = (".csv", ".parquet", ".pq")


def _check_out(path: str, what: str = "--out") -> None:
    check_output_path(path, what, TRACE_SUFFIXES)


def cmd_bench(args) -> int:
    _check_out(args.out)
    from calibration import KINDS

    kinds = None
    if args.kinds:
        kinds = tuple(k.strip() for k in args.kinds.split(",") if k.strip())
        for k in kinds:
            if k not in KINDS:
                raise InputError(f"--kinds: {k!r}: expected some of {list(KINDS)}")
    if args.threads is not None:
        if args.threads < 1:
            raise InputError(f"--threads {args.threads}: expected a whole number >= 1")
        from jax._src import xla_bridge

        if xla_bridge.backends_are_initialized():
            print("costmodel: warning: JAX is already initialised; --threads is ignored", file=sys.stderr)
        from calibration import xla_cpu_thread_flags

        os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} {xla_cpu_thread_flags(args.threads)}".strip()
    import jax

    device = jax.devices()[0]
    if args.device:
        platform, _, index = args.device.partition(":")
        try:
            devices = jax.devices(platform)
        except RuntimeError:
            raise InputError(f"--device {args.device!r}: no {platform!r} devices here") from None
        try:
            device = devices[int(index or 0)]
        except (ValueError, IndexError):
            raise InputError(f"--device {args.device!r}: expected an index below {len(devices)}") from None
    from calibration import run_bench, save_trace

    if args.quick and args.plan not in (None, "quick"):
        raise InputError(f"--quick with --plan {args.plan}: give one of them")
    from calibration.measure.plans import named_plan

    the_plan = named_plan(args.plan or ("quick" if args.quick else "full"))
    rows = run_bench(device=device, progress=not args.no_progress, kinds=kinds, the_plan=the_plan)
    if args.threads is not None and device.platform == "cpu":
        for r in rows:
            r["device"] += f", XLA:CPU {args.threads} thread{'s' if args.threads > 1 else ''}"
    path = save_trace(rows, args.out)
    print(f"wrote {len(rows)} points to {path}")
    return 0


def cmd_calibrate(args) -> int:
    check_output_path(args.out, "--out", (".toml",))
    if args.plots is not None:
        check_output_folder(args.plots, "--plots")
    if args.steps < 1:
        raise InputError(f"--steps {args.steps}: expected a whole number >= 1")
    from pathlib import Path

    from calibration import KINDS, calibrate, chip_toml, load_traces, residual_plots

    from ..report import dumps

    for k in args.holdout:
        if k not in KINDS:
            raise InputError(f"--holdout {k!r}: expected one of {list(KINDS)}")
    rows = load_traces(args.traces)
    device = rows[0]["device"].split(",")[0] or "device"
    if args.memory_gb is not None:
        if not (math.isfinite(args.memory_gb) and args.memory_gb > 0):
            raise InputError(f"--memory-gb {args.memory_gb}: expected the device's memory in GB, a number > 0")
        memory_gb, memory_source = args.memory_gb, f"{args.memory_gb:g} GB (--memory-gb)"
    elif device.startswith("cpu"):
        memory_gb, memory_source = _memory_gb(), "the machine's memory (/proc/meminfo)"
    else:
        raise InputError(
            f"{args.traces[0]}: device {device!r} is not this machine's CPU: give its memory with --memory-gb "
            "(the chip file's DRAM capacity)"
        )
    dtypes = None
    if args.dtypes:
        from ..io import formats

        dtypes = tuple(d.strip() for d in args.dtypes.split(",") if d.strip())
        for d in dtypes:
            if d not in formats():
                raise InputError(f"--dtypes: {d!r}: expected formats among {sorted(formats())}")
    result, fit, predictions = calibrate(rows, tuple(args.holdout), adam_steps=args.steps, dtypes=dtypes)
    out = Path(args.out)
    command = "costmodel calibrate " + " ".join(shlex.quote(a) for a in sys.argv[2:]) if len(sys.argv) > 2 else ""
    command = command or f"costmodel calibrate {' '.join(args.traces)} --out {args.out}"
    out.parent.mkdir(parents=True, exist_ok=True)
    traces = [Path(t).as_posix() for t in args.traces]
    text = chip_toml(fit, result, command, traces, device, memory_gb, memory_source)
    atomic_write(out, text)
    plots = Path(args.plots) if args.plots else out.with_suffix("")
    result["plots"] = [str(p) for p in residual_plots(predictions, plots, f"{device}: {result['status']}")]
    result["chip_file"] = str(out)
    if args.json:
        print(dumps(_clean(result)))
    else:
        _print(result)
    return 0 if result["status"] != "nonfinite" else 1


def _clean(x):
    """JSON-safe: numpy scalars to floats, inf/nan to null (strict JSON has neither)."""
    import math

    if isinstance(x, dict):
        return {k: _clean(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_clean(v) for v in x]
    if isinstance(x, bool) or x is None or isinstance(x, str):
        return x
    try:
        f = float(x)
    except (TypeError, ValueError):
        return str(x)
    if isinstance(x, int):
        return x
    return f if math.isfinite(f) else None


def _memory_gb() -> float:
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    return round(int(line.split()[1]) * 1024 / 1e9, 1)
    except OSError:
        pass
    return 16.0


def _print(r: dict) -> None:
    from rich.console import Console
    from rich.table import Table

    c = Console()
    if r["status"] != "converged":
        c.print(
            f"[bold red]fit did not converge: {r['status']}[/] (gradient norm {r['gradient_norm']:.3g}); "
            "the figures below are from where it stopped"
        )
    c.print(f"n_train {r['n_train']}, n_holdout {r['n_holdout']} (held out: {', '.join(r['holdout_kinds']) or 'none'})")
    t = Table("model", "train MAPE", "held-out MAPE", "held-out rank corr.")
    fmt = lambda x: "-" if x is None else f"{x:.3f}"
    t.add_row("full", fmt(r["train_mape"]), fmt(r["holdout_mape"]), fmt(r["holdout_rank_correlation"]))
    b = r["baseline"]
    t.add_row("roofline baseline", fmt(b["train_mape"]), fmt(b["holdout_mape"]), fmt(b["holdout_rank_correlation"]))
    c.print(t)
    t = Table("parameter", "value", "unit", "start", "moved x", "uncertainty x/", title="fitted parameters")
    for name, p in r["parameters"].items():
        u = p.get("uncertainty_factor")
        t.add_row(
            name,
            f"{p['value']:.4g}",
            p["unit"],
            f"{p['initial']:.4g}",
            f"{p['change_factor']:.3g}",
            "-" if u is None else f"{u:.3g}",
        )
    c.print(t)
    c.print(f"chip file: {r['chip_file']}; plots: {', '.join(r['plots'])}")


def cmd_import(args) -> int:
    _check_out(args.out)
    from calibration import import_llama_bench, import_vllm, save_trace

    if args.source == "llama-bench":
        rows = import_llama_bench(args.file, args.model, args.weights, args.kv)
    else:
        rows = import_vllm(args.file, args.model, args.weights or "bf16", args.kv)
    path = save_trace(rows, args.out)
    print(f"wrote {len(rows)} decode_step rows to {path}")
    return 0
