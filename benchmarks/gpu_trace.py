"""Measure `costmodel bench --plan gpu` point by point, saving the trace after each.

A device machine is lent for minutes, not hours: this driver measures the points of
the GPU plan (`calibration.measure.plans.gpu_plan`) in plan order, microbenchmarks
first and the largest decoder last, and rewrites the trace after every point, so a
run cut off at its time limit keeps every point it finished. Each point's wall time
(compile, operands, timing) goes to stderr.

    python benchmarks/gpu_trace.py --out trace.csv [--kinds stream,gemv] [--budget-s 420]

`--budget-s` stops before a point once that many seconds have passed (the trace holds
what was done). The rows are those `costmodel bench --plan gpu` writes.
"""

from __future__ import annotations

import argparse
import sys
import time


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="trace file (.csv or .parquet), rewritten after each point")
    ap.add_argument("--kinds", default=None, help="comma-separated kinds (default all)")
    ap.add_argument("--budget-s", type=float, default=None, help="start no point after this many seconds")
    ap.add_argument("--match", default=None, help="only points whose description contains this text")
    ap.add_argument("--plan", default="gpu", help="plan name (gpu, quick or full; quick for a CPU dry run)")
    args = ap.parse_args(argv)

    import jax

    from calibration.measure import device_description, median_and_spread, plan_points, software_description
    from calibration.measure.plans import named_plan
    from calibration.trace import KINDS, save_trace

    kinds = tuple(k for k in args.kinds.split(",") if k) if args.kinds else KINDS
    p = named_plan(args.plan)
    device = jax.devices()[0]
    common = {"device": device_description(device), "software": software_description()}
    points = [q for q in plan_points(p, kinds, device) if args.match is None or args.match in q.description]
    print(f"{len(points)} points on {common['device']} ({common['software']})", file=sys.stderr, flush=True)
    start = time.perf_counter()
    rows: list[dict] = []
    for i, point in enumerate(points):
        if args.budget_s is not None and time.perf_counter() - start > args.budget_s:
            print(f"budget of {args.budget_s:g} s spent: {len(points) - i} points left out", file=sys.stderr)
            break
        t0 = time.perf_counter()
        times = point.measure()
        seconds, spread = median_and_spread(times)
        rows.append({**point.row, "seconds": seconds, "spread_seconds": spread, "reps": float(len(times)), **common})
        save_trace(rows, args.out)
        print(
            f"[{i + 1}/{len(points)}] {point.description}: {seconds * 1e6:.2f} us "
            f"(IQR {spread * 1e6:.2f}; wall {time.perf_counter() - t0:.1f} s)",
            file=sys.stderr,
            flush=True,
        )
    print(f"wrote {len(rows)} points to {args.out} in {time.perf_counter() - start:.0f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
