"""The honest calibration test, as a benchmark: fit on microbenchmarks, predict decode steps.

Run from the repository root (a few seconds to fit; measuring a new trace takes minutes):

    python benchmarks/calibration_holdout.py [TRACE.csv] [--measure]

With --measure it first runs `costmodel bench --threads 1 --out TRACE` on this machine.
Prints train / held-out MAPE and rank correlation of the full model and of the plain
roofline baseline, the held-out error per unseen configuration, and which fitted
parameters moved from their starting point and by how much.
"""

import subprocess
import sys
import time
from pathlib import Path

from calibration import calibrate, load_trace


def main() -> None:
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    trace = Path(args[0] if args else "data/traces/cpu.csv")
    if "--measure" in sys.argv:
        subprocess.run(["costmodel", "bench", "--threads", "1", "--out", str(trace)], check=True)
    rows = load_trace(trace)
    t0 = time.perf_counter()
    # bf16 rows are measured but left out: XLA:CPU bf16 dots are not roofline kernels.
    r, _, preds = calibrate(rows, ("decode_step",), dtypes=("f32",))
    fit_seconds = time.perf_counter() - t0
    b = r["baseline"]
    print(f"trace {trace}: {r['n_train']} microbenchmark points (train), {r['n_holdout']} decode steps (held out)")
    print(f"fit: {r['status']} in {fit_seconds:.1f} s (full model and baseline, compile included)")
    print(f"{'model':<20}{'train MAPE':>12}{'held-out MAPE':>15}{'held-out rank corr':>20}")
    print(f"{'full':<20}{r['train_mape']:>12.3f}{r['holdout_mape']:>15.3f}{r['holdout_rank_correlation']:>20.3f}")
    print(
        f"{'roofline baseline':<20}{b['train_mape']:>12.3f}{b['holdout_mape']:>15.3f}{b['holdout_rank_correlation']:>20.3f}"
    )
    print(
        f"held-out MAPE with the chip file's hard placement (evaluate --chip): {r['holdout_mape_hard_placement']:.3f}"
    )
    print("held-out MAPE by unseen configuration:")
    for key, groups in r["holdout_by_config"].items():
        print(f"  {key:<8}" + "  ".join(f"{g}: {v['mape']:.3f} (n={v['n']})" for g, v in groups.items()))
    print("per kind:", ", ".join(f"{k} {v['mape']:.3f} (n={v['n']})" for k, v in r["per_kind_mape"].items()))
    print(f"{'parameter':<24}{'start':>12}{'fitted':>12}{'unit':>9}{'moved x':>10}{'uncert. x/':>12}")
    for name, p in r["parameters"].items():
        u = p.get("uncertainty_factor", float("nan"))
        print(f"{name:<24}{p['initial']:>12.4g}{p['value']:>12.4g}{p['unit']:>9}{p['change_factor']:>10.3g}{u:>12.3g}")
    held, full, base = preds["holdout"]
    print(f"{'decode step':<44}{'measured ms':>12}{'model ms':>10}{'roofline ms':>12}")
    for row, f, g in zip(held, full, base):
        print(f"{row['label']:<44}{row['seconds'] * 1e3:>12.3f}{f * 1e3:>10.3f}{g * 1e3:>12.3f}")


if __name__ == "__main__":
    main()
