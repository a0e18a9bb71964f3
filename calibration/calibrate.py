"""The calibration pipeline: split a trace, fit the full model and the roofline
baseline, report the errors, write the chip file and the residual plots."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from costmodel.io import InputError

from . import fit as F


def split(rows: list[dict], holdout: tuple[str, ...]) -> tuple[list[dict], list[dict]]:
    train = [r for r in rows if r["kind"] not in holdout]
    held = [r for r in rows if r["kind"] in holdout]
    return train, held


def _metrics(knobs, train_data, held_data, hard: bool = False) -> dict:
    pt = np.asarray(F.predict(knobs, train_data)) if train_data.n else np.zeros(0)
    ph = np.asarray(F.predict(knobs, held_data, hard)) if held_data.n else np.zeros(0)
    return {
        "train_mape": F.mape(pt, train_data.measured),
        "holdout_mape": F.mape(ph, held_data.measured) if held_data.n else None,
        "train_rank_correlation": F.spearman(pt, train_data.measured),
        "holdout_rank_correlation": F.spearman(ph, held_data.measured) if held_data.n else None,
        "_train_pred": pt,
        "_held_pred": ph,
    }


def select_dtypes(rows: list[dict], dtypes: tuple[str, ...] | None) -> list[dict]:
    """Rows whose number format (`dtype`, or `weights` for a decode step) is in `dtypes`."""
    if not dtypes:
        return rows
    return [r for r in rows if (r["weights"] if r["kind"] == "decode_step" else r["dtype"]) in dtypes]


def calibrate(
    rows: list[dict],
    holdout: tuple[str, ...] = (),
    adam_steps: int = 1500,
    lbfgs_steps: int = 200,
    dtypes: tuple[str, ...] | None = None,
):
    """Fits the full model and the roofline baseline on the rows not held out.

    Args:
        rows: trace rows.
        holdout: kinds left out of the fit and predicted.
        adam_steps / lbfgs_steps: optimiser steps.
        dtypes: fit only rows of these number formats (default all).

    Returns:
        (result dict for `--json`, the full `Fit`, per-row predictions for plots).
    """
    n_rows = len(rows)
    rows = select_dtypes(rows, dtypes)
    if not rows:
        raise InputError(f"no rows of formats {list(dtypes or [])} in the trace ({n_rows} rows)")
    train, held = split(rows, holdout)
    if not train:
        raise InputError(f"nothing left to fit: every row is of a held-out kind {list(holdout)}")
    dt, dh = F.make_dataset(train), F.make_dataset(held)
    k0 = F.initial_knobs(train)
    full = F.fit_knobs(dt, k0, F.full_spec(train, k0), adam_steps=adam_steps, lbfgs_steps=lbfgs_steps)
    r0 = F.roofline_knobs(k0)
    base = F.fit_knobs(dt, r0, F.roofline_spec(r0), adam_steps=adam_steps, lbfgs_steps=lbfgs_steps)
    m_full = _metrics(full.knobs, dt, dh)
    m_base = _metrics(base.knobs, dt, dh)
    hard = _metrics(full.knobs, dt, dh, hard=True)
    result = {
        "status": full.status,
        "converged": full.status == "converged",
        "n_train": len(train),
        "n_holdout": len(held),
        "holdout_kinds": list(holdout),
        "dtypes": list(dtypes) if dtypes else "all",
        "n_rows_excluded_by_dtype": n_rows - len(rows),
        "train_mape": m_full["train_mape"],
        "holdout_mape": m_full["holdout_mape"],
        "train_rank_correlation": m_full["train_rank_correlation"],
        "holdout_rank_correlation": m_full["holdout_rank_correlation"],
        "holdout_mape_hard_placement": hard["holdout_mape"],
        "loss": full.loss,
        "gradient_norm": full.grad_norm,
        "steps": full.steps,
        "parameters": F.parameter_table(full),
        "per_kind_mape": _per_kind(rows, train, held, m_full),
        "holdout_by_config": _by_config(held, m_full["_held_pred"]),
        "baseline": {
            "model": "plain roofline: max(bytes / one bandwidth, FLOPs / one FLOP rate)",
            "status": base.status,
            "train_mape": m_base["train_mape"],
            "holdout_mape": m_base["holdout_mape"],
            "train_rank_correlation": m_base["train_rank_correlation"],
            "holdout_rank_correlation": m_base["holdout_rank_correlation"],
            "parameters": {k: v for k, v in F.parameter_table(base).items() if k in ("dram_bandwidth", "flops_f32")},
        },
    }
    if held and m_base["holdout_mape"] is not None:
        result["beats_baseline_on_holdout"] = bool(m_full["holdout_mape"] < m_base["holdout_mape"])
    predictions = {
        "train": (train, m_full["_train_pred"], m_base["_train_pred"]),
        "holdout": (held, m_full["_held_pred"], m_base["_held_pred"]),
    }
    return result, full, predictions


def _per_kind(rows, train, held, m) -> dict:
    out = {}
    for name, part, pred in (("train", train, m["_train_pred"]), ("holdout", held, m["_held_pred"])):
        for kind in sorted({r["kind"] for r in part}):
            idx = [i for i, r in enumerate(part) if r["kind"] == kind]
            out[f"{name}.{kind}"] = {
                "n": len(idx),
                "mape": F.mape(pred[idx], [part[i]["seconds"] for i in idx]),
            }
    return out


def _by_config(held, pred) -> dict:
    """Held-out decode MAPE grouped by model size, batch and context (unseen configs)."""
    out: dict = {}
    dec = [(i, r) for i, r in enumerate(held) if r["kind"] == "decode_step"]
    for key in ("d_model", "batch", "context"):
        groups: dict = {}
        for i, r in dec:
            groups.setdefault(f"{r[key]:g}", []).append(i)
        out[key] = {
            g: {"n": len(ix), "mape": F.mape(pred[ix], [held[i]["seconds"] for i in ix])} for g, ix in groups.items()
        }
    return out


# --- the chip file --------------------------------------------------------------


def _fmt(x: float) -> str:
    return f"{x:.6g}"


def chip_toml(fit: F.Fit, result: dict, command: str, traces: list[str], device: str, dram_gb: float) -> str:
    """The fitted parameters as a chip file `costmodel evaluate --chip` accepts."""
    v = F.knob_values(fit.knobs)
    p = result["parameters"]

    def unc(name):
        u = p[name].get("uncertainty_factor")
        return "not fitted" if u is None else ("not determined by the trace" if not math.isfinite(u) else f"x/ {u:.3g}")

    f32 = v["flops_f32"] / 1e12
    f16 = v["flops_f32"] * v["flops_16_ratio"] / 1e12
    fitted = (
        f"fitted by `{command}` to {', '.join(traces)} (held out: {', '.join(result['holdout_kinds']) or 'none'}; "
        f"train MAPE {result['train_mape']:.3f}"
        + (f", held-out MAPE {result['holdout_mape']:.3f}" if result["holdout_mape"] is not None else "")
        + f"; fit status {result['status']})"
    )
    lines = [
        "# Calibrated chip file: the effective parameters of one device, fitted to a measured trace.",
        f"# {fitted}",
        "# Bandwidths and FLOP rates are the sustained effective figures (efficiency 1.0 because",
        "# the fitted value already is the sustained rate). Energy, power and link fields are not",
        "# measured by the trace (no power counters): they are placeholders, not data.",
        "",
        f'name = "{device} (calibrated)"',
        f'source = "{fitted}"',
        f"peak_tflops_16 = {_fmt(f16)}",
        f"peak_tflops_f32 = {_fmt(f32)}",
        "compute_efficiency = 1.0",
        f"attention_efficiency = {_fmt(v['attention_efficiency'])}",
        f"half_rate_rows = {_fmt(v['half_rate_rows'])}",
        f"small_kernel_MB = {_fmt(v['small_kernel_bytes'] / 1e6)}",
        f"small_kernel_efficiency = {_fmt(v['small_kernel_efficiency'])}",
        f"small_kernel_knee = {_fmt(v['small_kernel_knee'])}",
        "energy_pj_per_flop = 0.0",
        "static_power_w = 0.0",
        "power_cap_w = 1000000.0",
        f"kernel_overhead_us = {_fmt(v['kernel_overhead'] * F.KERNELS_PER_LAYER * 1e6)}",
        "link_bandwidth_GBps = 0.0",
        "link_latency_us = 0.0",
        "hop_latency_us = 0.0",
        f"overlap = {_fmt(1.0 + v['overlap_m1'])}",
        'placement = "sram"',
        "max_chips = 1",
        "",
        "[sources]",
        f'peak_tflops_f32 = "fitted effective f32 FLOP rate (GEMM/GEMV/attention microbenchmarks), {unc("flops_f32")}"',
        f'peak_tflops_16 = "fitted: f32 rate x fitted 16-bit ratio {v["flops_16_ratio"]:.3g}, {unc("flops_16_over_f32")}"',
        f'kernel_overhead_us = "fitted launch overhead per kernel {v["kernel_overhead"] * 1e6:.3g} us ({unc("kernel_overhead")}) x {F.KERNELS_PER_LAYER:g} kernels per layer (assumption, calibration/fit.py KERNELS_PER_LAYER)"',
        f'overlap = "fitted p of the channel p-norm, {unc("overlap_p")}"',
        f'attention_efficiency = "fitted FLOP rate of decode attention over that of matmuls, {unc("attention_efficiency")}"',
        f'half_rate_rows = "fitted Hockney n-half of matmuls in rows per operand element: a matmul with m rows runs at m / (m + n-half (1 - 1/m)) of the FLOP rate, {unc("half_rate_rows")}"',
        f'small_kernel_MB = "fitted operand size below which a kernel streams from the caches beyond the inner level and DRAM at small_kernel_efficiency of the bandwidth, {unc("small_kernel_bytes")}; efficiency {unc("small_kernel_efficiency")}, knee {unc("small_kernel_knee")}"',
        f'hot_array = "the single-array microbenchmarks (stream, GEMV, GEMM, attention: one array looped over) stream {1 + v["hot_speedup_m1"]:.3g}x ({unc("hot_array_speedup")}) faster than passes over distinct tensors (GEMV chains); a decode step reads distinct tensors, so the bandwidths here are the distinct-tensor ones"',
        'energy_pj_per_flop = "not measured: placeholder 0"',
        'static_power_w = "not measured: placeholder 0"',
        'power_cap_w = "not measured: placeholder (no cap)"',
        f'knee = "the fit uses a smooth capacity knee hit(S) = 1/(1 + (S/C)^k) with k = {v["knee"]:.3g} ({unc("knee_sharpness")}); a Chip has no field for k, so evaluate uses the hard spill of placement sram"',
        f'inner_cache = "the fit also has an inner cache level of {v["inner_capacity"] / 1e6:.3g} MB ({unc("inner_cache_capacity")}) streaming {1 + v["inner_speedup_m1"]:.3g}x ({unc("inner_cache_speedup")}) faster than [sram], with no latency; a Chip has one on-chip tier, so this file carries the outer level"',
        f'latency_ns = "per layer: the fitted latency per kernel x {F.KERNELS_PER_LAYER:g} kernels per layer (calibration/fit.py KERNELS_PER_LAYER)"',
        "",
        "[sram]",
        f"capacity_MB = {_fmt(v['sram_capacity'] / 1e6)}",
        f"bandwidth_GBps = {_fmt(v['sram_bandwidth'] / 1e9)}",
        f"latency_ns = {_fmt(v['sram_latency'] * F.KERNELS_PER_LAYER * 1e9)}",
        "energy_pj_per_byte = 0.0",
        "efficiency = 1.0",
        f'source = "on-chip tier = last-level cache; capacity (knee) {unc("sram_capacity")}, bandwidth {unc("sram_bandwidth")}, latency {unc("sram_latency")}: fitted; energy not measured (placeholder 0)"',
        "",
        "[dram]",
        f"capacity_GB = {_fmt(dram_gb)}",
        f"bandwidth_GBps = {_fmt(v['dram_bandwidth'] / 1e9)}",
        f"compute_feed = {_fmt(v['dram_feed'])}",
        f"latency_ns = {_fmt(v['dram_latency'] * F.KERNELS_PER_LAYER * 1e9)}",
        "energy_pj_per_byte = 0.0",
        "efficiency = 1.0",
        f'source = "bandwidth {unc("dram_bandwidth")}, latency {unc("dram_latency")}, compute feed {unc("dram_compute_feed")}: fitted; capacity = the machine\'s memory (/proc/meminfo); energy not measured (placeholder 0)"',
        "",
    ]
    return "\n".join(lines)


def residual_plots(predictions: dict, out_dir: Path, title: str = "") -> list[Path]:
    """Measured vs predicted and relative residuals vs working set / step, as PNGs."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.5))
    markers = {"stream": "o", "gemv": "s", "gemm": "D", "attention_decode": "^", "decode_step": "*"}
    for part, (rows, full, base) in predictions.items():
        for kind in sorted({r["kind"] for r in rows}):
            idx = [i for i, r in enumerate(rows) if r["kind"] == kind]
            meas = np.array([rows[i]["seconds"] for i in idx])
            label = f"{kind} ({part})"
            axes[0].loglog(meas, full[idx], markers[kind], ms=6 if kind == "decode_step" else 4, label=label, alpha=0.8)
            axes[1].semilogx(meas, full[idx] / meas - 1, markers[kind], ms=6 if kind == "decode_step" else 4, alpha=0.8)
            if part == "holdout":
                axes[1].semilogx(meas, base[idx] / meas - 1, "x", color="gray", label=f"{kind} roofline baseline")
    lo = min(min(r["seconds"] for r in rows) for rows, _, _ in predictions.values() if rows)
    hi = max(max(r["seconds"] for r in rows) for rows, _, _ in predictions.values() if rows)
    axes[0].plot([lo, hi], [lo, hi], "k--", lw=0.8)
    axes[0].set_xlabel("measured (s)")
    axes[0].set_ylabel("predicted (s)")
    axes[0].legend(fontsize=7)
    axes[1].axhline(0, color="k", lw=0.8)
    axes[1].axhspan(-0.15, 0.15, color="green", alpha=0.08)
    axes[1].set_xlabel("measured (s)")
    axes[1].set_ylabel("predicted / measured - 1")
    axes[1].legend(fontsize=7)
    fig.suptitle(title or "calibration residuals")
    fig.tight_layout()
    p = out_dir / "residuals.png"
    fig.savefig(p, dpi=110)
    plt.close(fig)
    paths.append(p)

    stream = [(r, f) for rows, full, _ in predictions.values() for r, f in zip(rows, full) if r["kind"] == "stream"]
    if stream:
        fig, ax = plt.subplots(figsize=(6, 4))
        ws = np.array([r["working_set"] for r, _ in stream])
        order = np.argsort(ws)
        meas_bw = np.array([r["bytes"] / r["seconds"] for r, _ in stream])[order]
        pred_bw = np.array([r["bytes"] / f for r, f in stream])[order]
        ax.semilogx(ws[order], meas_bw / 1e9, "o", label="measured")
        ax.semilogx(ws[order], pred_bw / 1e9, "-", label="fitted model")
        ax.set_xlabel("working set (B)")
        ax.set_ylabel("bandwidth (GB/s)")
        ax.legend()
        ax.set_title("stream bandwidth vs working set")
        fig.tight_layout()
        p = out_dir / "stream_bandwidth.png"
        fig.savefig(p, dpi=110)
        plt.close(fig)
        paths.append(p)
    return paths
