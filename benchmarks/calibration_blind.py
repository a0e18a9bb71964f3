"""A blind check of the calibration: decode steps at operating points no one looked at.

The held-out decode steps of `calibration_holdout.py` are unseen by the fit, but the
model and the microbenchmark plan were improved while looking at their errors, so
their MAPE is not a blind estimate. This script measures decode steps of the same five
flax decoders at batch/context points the plan does not contain (default: batch 2 at
context 1024 and batch 16 at context 256), fits on the microbenchmarks of the shipped
trace exactly as `calibration_holdout.py` does, and predicts them once.

Run from the repository root on a quiet machine (about 3 minutes to measure):

    python benchmarks/calibration_blind.py [--trace data/traces/cpu.csv]
        [--out data/traces/cpu_blind.csv] [--measure]

Without --measure it reads the blind steps from --out.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import time
from pathlib import Path


POINTS = ((2, 1024), (16, 256))
"""Batch and context of the blind steps: neither is in `calibration.measure.plan()`'s decode points."""


def measure(out: Path) -> None:
    from calibration.measure import plan, run_bench, xla_cpu_thread_flags

    # One XLA:CPU thread, as `costmodel bench --threads 1` measures the shipped trace.
    os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} {xla_cpu_thread_flags(1)}".strip()
    from calibration import save_trace

    full = plan(quick=False)
    assert not set(POINTS) & set(full.decode_points), "blind points must be new"
    p = dataclasses.replace(full, decode_points=POINTS)
    t0 = time.perf_counter()
    rows = run_bench(the_plan=p, kinds=("decode_step",))
    for r in rows:
        r["device"] += ", XLA:CPU 1 thread"
    save_trace(rows, out)
    print(f"measured {len(rows)} blind decode steps in {time.perf_counter() - t0:.0f} s -> {out}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trace", default="data/traces/cpu.csv", help="trace whose microbenchmarks are fitted")
    ap.add_argument("--out", default="data/traces/cpu_blind.csv", help="blind decode steps (written with --measure)")
    ap.add_argument("--measure", action="store_true", help="measure the blind steps first")
    args = ap.parse_args()
    out = Path(args.out)
    if args.measure:
        measure(out)

    import numpy as np

    from calibration import fit as F, load_trace

    blind = load_trace(out)
    if any(r["kind"] != "decode_step" for r in blind):
        sys.exit(f"{out}: expected decode_step rows only")
    _, fitted, _ = F.calibrate(load_trace(args.trace), ("decode_step",), dtypes=("f32",))
    data = F.make_dataset(blind)
    pred = np.asarray(F.predict(fitted.knobs, data))
    hard = np.asarray(F.predict(fitted.knobs, data, hard=True))
    meas = data.measured
    print(f"fit: microbenchmarks of {args.trace} ({fitted.status_name}); blind decode steps: {out} ({len(blind)})")
    print(
        f"blind MAPE {F.mape(pred, meas):.3f}, rank correlation {F.spearman(pred, meas):.3f}; "
        f"with the chip file's hard placement {F.mape(hard, meas):.3f}"
    )
    for b, c in POINTS:
        idx = [i for i, r in enumerate(blind) if r["batch"] == b and r["context"] == c]
        if idx:
            print(f"  batch {b} context {c}: MAPE {F.mape(pred[idx], meas[idx]):.3f} (n={len(idx)})")
    print(f"{'decode step':<44}{'measured ms':>12}{'model ms':>10}{'error':>8}")
    for r, m, p in zip(blind, meas, pred):
        print(f"{r['label']:<44}{m * 1e3:>12.3f}{p * 1e3:>10.3f}{p / m - 1:>+8.1%}")


if __name__ == "__main__":
    main()
