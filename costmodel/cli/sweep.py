"""`costmodel sweep` and `costmodel pareto`: design-space sweeps on the command line."""

from __future__ import annotations

import argparse
import os

from ..io import InputError
from .args import nonneg_int, positive_int


def _column_goal(text: str) -> tuple[str, bool]:
    """`COL`, `COL:min` or `COL:max` -> (column, maximise)."""
    name, _, goal = text.rpartition(":") if text.endswith((":min", ":max")) else (text, "", "min")
    if not name:
        raise argparse.ArgumentTypeError(f"{text!r}: expected COLUMN, COLUMN:min or COLUMN:max")
    return name, goal == "max"


def add_commands(subparsers) -> None:
    p = subparsers.add_parser(
        "sweep",
        help="evaluate a sweep spec (TOML) in compiled, sharded chunks, streamed to Parquet",
        description=(
            "Evaluates every config of a sweep spec with one jit(vmap(...)) program per chunk, "
            "sharded over the local devices, and writes each finished chunk atomically to "
            "OUT/chunk-XXXXXXXX.parquet, recording its config range, rows and SHA-256 in "
            "OUT/sweep.json. OUT must be new or empty unless --resume, which keeps the chunks that "
            "verify and recomputes the rest (missing, cut short, changed or copied ones): the final "
            "folder equals an uninterrupted run byte for byte. One run writes into OUT at a time "
            "(a second exits 2; a killed run's lock is released with it). Under jax.distributed "
            "(--distributed, or --coordinator/--num-processes/--process-id) each process "
            "evaluates its contiguous share of the chunks into the same OUT."
        ),
    )
    p.add_argument("spec", help="sweep spec TOML file (see data/sweeps/default.toml)")
    p.add_argument("--out", required=True, help="output folder (Parquet chunks and sweep.json)")
    p.add_argument(
        "--resume",
        action="store_true",
        help="continue the sweep in --out: keep the chunks that verify, recompute the rest",
    )
    p.add_argument("--chunk", type=positive_int, default=None, help="configs per compiled call (default: spec's)")
    p.add_argument(
        "--cpu-devices",
        type=nonneg_int,
        default=None,
        help="split the CPU into this many JAX devices to shard over (default: one per core; 0 leaves JAX's default)",
    )
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("--distributed", action="store_true", help="jax.distributed.initialize() from the environment")
    p.add_argument("--coordinator", default=None, help="jax.distributed coordinator HOST:PORT")
    p.add_argument("--num-processes", type=positive_int, default=None, help="jax.distributed process count")
    p.add_argument("--process-id", type=nonneg_int, default=None, help="jax.distributed index of this process")
    p.set_defaults(func=cmd_sweep)

    p = subparsers.add_parser(
        "pareto",
        help="Pareto front of a finished sweep over two columns, plotted to PNG",
        description=(
            "Extracts the configs no other config beats in both columns. Each column is "
            "COLUMN[:min|:max] (default :min), e.g. --x tokens_per_second_per_sequence:max "
            "--y joules_per_token:min. Only feasible rows count unless --all (the `infeasible` "
            "column says why a row is not). Every chunk is verified against sweep.json first: a "
            "missing, damaged or duplicated one is an error naming it."
        ),
    )
    p.add_argument("dir", help="a sweep folder written by `costmodel sweep`")
    p.add_argument("--x", required=True, type=_column_goal, help="x column, COLUMN[:min|:max]")
    p.add_argument("--y", required=True, type=_column_goal, help="y column, COLUMN[:min|:max]")
    p.add_argument("--out", default=None, help="write the plot to this PNG")
    p.add_argument("--csv", default=None, help="write the front's rows to this CSV")
    p.add_argument("--all", action="store_true", help="include infeasible rows")
    p.add_argument("--json", action="store_true", help="print the front as JSON records")
    p.set_defaults(func=cmd_pareto)


def _set_cpu_devices(n: int | None) -> None:
    """Splits the host CPU into `n` JAX devices, before the JAX backend starts.

    XLA runs one device's program on one core at a time here, so sharding a chunk
    over one CPU device per core is what uses every core.
    """
    if n == 0 or "xla_force_host_platform_device_count" in os.environ.get("XLA_FLAGS", ""):
        return
    import jax

    try:
        jax.config.update("jax_num_cpu_devices", n or os.cpu_count() or 1)
    except RuntimeError:  # the backend already started (an embedding program): keep it
        pass


def cmd_sweep(args) -> int:
    if args.distributed or args.coordinator is not None:
        import jax

        if args.coordinator is not None and (args.num_processes is None or args.process_id is None):
            raise InputError("--coordinator: expected --num-processes and --process-id with it")
        if args.process_id is not None and args.num_processes is not None and args.process_id >= args.num_processes:
            raise InputError(f"--process-id = {args.process_id}: expected < --num-processes ({args.num_processes})")
        _set_cpu_devices(args.cpu_devices)
        jax.distributed.initialize(
            coordinator_address=args.coordinator, num_processes=args.num_processes, process_id=args.process_id
        )
    else:
        _set_cpu_devices(args.cpu_devices)
    from rich.console import Console

    from ..report.provenance import provenance, shipped_inputs, user_files
    from ..sweep import load_spec, run_sweep

    spec = load_spec(args.spec)
    record = provenance([*user_files(*spec.input_files()), *shipped_inputs()])
    stats = run_sweep(
        spec, args.out, chunk=args.chunk, resume=args.resume, progress=not args.no_progress, provenance=record
    )
    import jax

    if stats.recomputed:
        shown = "; ".join(f"chunk {k} {why}" for k, why in sorted(stats.recomputed.items())[:5])
        more = f"; and {len(stats.recomputed) - 5} more" if len(stats.recomputed) > 5 else ""
        Console(stderr=True).print(
            f"sweep {args.out}: recomputed {len(stats.recomputed)} chunk(s) that failed verification: {shown}{more}",
            markup=False,
        )
    Console(stderr=True).print(
        f"sweep {args.spec}: {stats.n_configs} configs in {args.out}; process {jax.process_index()} of "
        f"{jax.process_count()} on {len(jax.local_devices())} devices: chunks {stats.chunks.start}..{stats.chunks.stop - 1}, evaluated "
        f"{stats.evaluated}, skipped {stats.skipped} already written, {stats.configs_per_second:,.0f} configs/s"
    )
    if args.distributed or args.coordinator is not None:
        jax.distributed.shutdown()
    return 0


def cmd_pareto(args) -> int:
    from ..report import dumps
    from ..sweep import flatten_table, pareto_front, read_manifest

    (x, max_x), (y, max_y) = args.x, args.y
    manifest = read_manifest(args.dir)
    front, xs, ys, considered = pareto_front(
        args.dir,
        x,
        y,
        maximize_x=max_x,
        maximize_y=max_y,
        feasible_only=not args.all,
        sample=20000 if args.out else 0,
    )
    if considered == 0:
        raise InputError(f"{args.dir}: no feasible rows; pass --all to include infeasible ones")
    if args.out:
        from ..report.sweep_plots import plot_pareto

        title = f"{front.num_rows} of {considered:,} {'' if args.all else 'feasible '}configs on the front"
        plot_pareto(front, xs, ys, x, y, args.out, title)
    if args.csv:
        front.to_pandas().to_csv(args.csv, index=False)
    records = front.to_pylist()
    if args.json:
        print(dumps(records))
        return 0
    from rich.console import Console
    from rich.table import Table

    cols = [c for c in front.column_names if c not in ("feasible",)]
    axes = set(flatten_table(manifest["spec"].get("axes", {}))) | {x, y}
    shown = ["config"] + [c for c in cols if c in axes and c not in (x, y, "config")] + [x, y]
    table = Table(*shown, title=f"Pareto front: {x} ({'max' if max_x else 'min'}) vs {y} ({'max' if max_y else 'min'})")
    for r in records[:40]:
        table.add_row(*[f"{r[c]:.4g}" if isinstance(r[c], float) else str(r[c]) for c in shown])
    console = Console()
    console.print(table)
    more = " (first 40 shown; --csv for all)" if len(records) > 40 else ""
    console.print(
        f"{len(records)} configs on the front of {considered:,}{more}" + (f"; plot: {args.out}" if args.out else "")
    )
    return 0
