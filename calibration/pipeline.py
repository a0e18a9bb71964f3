"""The calibration stage of the main job: fit on the shipped CPU trace.

`costmodel run` passes `calibrate_shipped` to `costmodel.report.main_job.run_main_job`
as its `calibrate_stage` (the report layer does not import `calibration`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from costmodel.io import data_dir

from .fit import calibrate, residual_plots
from .trace import load_trace


def calibrate_shipped(out: Path) -> dict[str, Any]:
    """Fits the model on the shipped CPU trace's microbenchmarks, predicts its held-out
    decode steps, and writes residual plots to `out`.

    Returns:
        The `calibrate --json` record plus a `markdown` summary.
    """
    trace = data_dir() / "traces" / "cpu.csv"
    rows = load_trace(trace)
    # bf16 rows are measured but not fitted: XLA:CPU's bf16 dots are not roofline kernels.
    result, _, predictions = calibrate(rows, ("decode_step",), dtypes=("f32",))
    residual_plots(predictions, out, title="calibration on data/traces/cpu.csv")
    b = result["baseline"]
    result["markdown"] = (
        f"Trace `data/traces/cpu.csv`: {result['n_train']} microbenchmark points fitted, "
        f"{result['n_holdout']} end-to-end decode steps held out.\n\n"
        "| model | train MAPE | held-out MAPE | held-out rank correlation |\n|---|---|---|---|\n"
        f"| full model | {result['train_mape']:.3f} | {result['holdout_mape']:.3f} | "
        f"{result['holdout_rank_correlation']:.3f} |\n"
        f"| plain roofline | {b['train_mape']:.3f} | {b['holdout_mape']:.3f} | {b['holdout_rank_correlation']:.3f} |\n"
    )
    return result
