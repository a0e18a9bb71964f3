"""The fitted parameters as a chip file `costmodel evaluate --chip` accepts."""

from __future__ import annotations

import math

from .knobs import KERNELS_PER_LAYER, knob_values
from .optimise import Fit


def _fmt(x: float) -> str:
    return f"{x:.6g}"


def chip_toml(fit: Fit, result: dict, command: str, traces: list[str], device: str, dram_gb: float) -> str:
    """The fitted parameters as a chip file `costmodel evaluate --chip` accepts."""
    v = knob_values(fit.knobs)
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
        f"kernel_overhead_us = {_fmt(v['kernel_overhead'] * KERNELS_PER_LAYER * 1e6)}",
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
        f'kernel_overhead_us = "fitted launch overhead per kernel {v["kernel_overhead"] * 1e6:.3g} us ({unc("kernel_overhead")}) x {KERNELS_PER_LAYER:g} kernels per layer (assumption, calibration/fit.py KERNELS_PER_LAYER)"',
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
        f'latency_ns = "per layer: the fitted latency per kernel x {KERNELS_PER_LAYER:g} kernels per layer (calibration/fit.py KERNELS_PER_LAYER)"',
        "",
        "[sram]",
        f"capacity_MB = {_fmt(v['sram_capacity'] / 1e6)}",
        f"bandwidth_GBps = {_fmt(v['sram_bandwidth'] / 1e9)}",
        f"latency_ns = {_fmt(v['sram_latency'] * KERNELS_PER_LAYER * 1e9)}",
        "energy_pj_per_byte = 0.0",
        "efficiency = 1.0",
        f'source = "on-chip tier = last-level cache; capacity (knee) {unc("sram_capacity")}, bandwidth {unc("sram_bandwidth")}, latency {unc("sram_latency")}: fitted; energy not measured (placeholder 0)"',
        "",
        "[dram]",
        f"capacity_GB = {_fmt(dram_gb)}",
        f"bandwidth_GBps = {_fmt(v['dram_bandwidth'] / 1e9)}",
        f"compute_feed = {_fmt(v['dram_feed'])}",
        f"latency_ns = {_fmt(v['dram_latency'] * KERNELS_PER_LAYER * 1e9)}",
        "energy_pj_per_byte = 0.0",
        "efficiency = 1.0",
        f'source = "bandwidth {unc("dram_bandwidth")}, latency {unc("dram_latency")}, compute feed {unc("dram_compute_feed")}: fitted; capacity = the machine\'s memory (/proc/meminfo); energy not measured (placeholder 0)"',
        "",
    ]
    return "\n".join(lines)
