"""The fitted parameters as a chip file `costmodel evaluate --chip` accepts.

The chip is the fit's own (`to_chip(knobs)`: the outer cache level, per-layer
latencies and overheads), written through the one chip-file schema
(`costmodel.io.chip_table`, `chip_file_text`), with notes on where each number comes
from and how well the trace determines it.
"""

from __future__ import annotations

import math

import costmodel as cm
from costmodel.io import chip_file_text, chip_table

from .knobs import KERNELS_PER_LAYER, knob_values, to_chip
from .optimise import Fit


POWER_CAP_PLACEHOLDER = 1e6
"""W: the chip file's power cap, a placeholder no device reaches (the trace measures no power)."""


def chip_toml(
    fit: Fit,
    result: dict,
    command: str,
    traces: list[str],
    device: str,
    dram_gb: float,
    memory_source: str = "the machine's memory (/proc/meminfo)",
) -> str:
    """The fitted chip as the text of a chip file.

    Args:
        fit: the full model's fit.
        result: `calibrate`'s result (its parameter table gives the uncertainties).
        command: the command line that fitted it (for the file's provenance).
        traces: the trace files fitted.
        device: the device measured (the chip's name).
        dram_gb: the device's memory, GB: the DRAM tier's capacity.
        memory_source: where `dram_gb` comes from, for the chip file's note.

    Returns:
        TOML text: comment lines, then the chip table with its `[sources]` notes.
    """
    v = knob_values(fit.knobs)
    p = result["parameters"]

    def unc(name):
        u = p[name].get("uncertainty_factor")
        return "not fitted" if u is None else ("not determined by the trace" if not math.isfinite(u) else f"x/ {u:.3g}")

    fitted = (
        f"fitted by `{command}` to {', '.join(traces)} (held out: {', '.join(result['holdout_kinds']) or 'none'}; "
        f"train MAPE {result['train_mape']:.3f}"
        + (f", held-out MAPE {result['holdout_mape']:.3f}" if result["holdout_mape"] is not None else "")
        + f"; fit status {result['status']})"
    )
    comments = [
        "Calibrated chip file: the effective parameters of one device, fitted to a measured trace.",
        fitted,
        "Bandwidths and FLOP rates are the sustained effective figures (efficiency 1.0 because",
        "the fitted value already is the sustained rate). Energy, power and link fields are not",
        "measured by the trace (no power counters): they are placeholders, not data.",
    ]
    chip = to_chip(fit.knobs)
    # The fit's DRAM never overflows (`DRAM_CAPACITY`); the file holds the machine's memory.
    chip = chip.replace(
        tiers=chip.tiers.replace(capacity=chip.tiers.capacity.at[cm.TIERS.index("dram")].set(dram_gb * 1e9)),
        power_cap=POWER_CAP_PLACEHOLDER,
    )
    sources = {
        "peak_tflops_f32": f"fitted effective f32 FLOP rate (GEMM/GEMV/attention microbenchmarks), {unc('flops_f32')}",
        "peak_tflops_16": f"fitted: f32 rate x fitted 16-bit ratio {v['flops_16_ratio']:.3g}, {unc('flops_16_over_f32')}",
        "kernel_overhead_us": f"fitted launch overhead per kernel {v['kernel_overhead'] * 1e6:.3g} us ({unc('kernel_overhead')}) x {KERNELS_PER_LAYER:g} kernels per layer (assumption, calibration/fit/knobs.py KERNELS_PER_LAYER)",
        "host_step_us": f"fitted fixed time per call of the measured program (one iteration of the harness's loop; a decode step pays it once), {unc('call_overhead')}",
        "overlap": f"fitted p of the channel p-norm, {unc('overlap_p')}",
        "attention_efficiency": f"fitted FLOP rate of decode attention over that of matmuls, {unc('attention_efficiency')}",
        "half_rate_rows": f"fitted Hockney n-half of matmuls in rows per operand element: a matmul with m rows runs at m / (m + n-half (1 - 1/m)) of the FLOP rate, {unc('half_rate_rows')}; one for every matmul of the trace, so decode attention's (attention_half_rate_rows, left out) is the same",
        "small_kernel_MB": f"fitted operand size below which a kernel streams from the caches beyond the inner level and DRAM at small_kernel_efficiency of the bandwidth, {unc('small_kernel_bytes')}; efficiency {unc('small_kernel_efficiency')}, knee {unc('small_kernel_knee')}",
        "hot_array": f"the single-array microbenchmarks (stream, GEMV, GEMM, attention: one array looped over) stream {1 + v['hot_speedup_m1']:.3g}x ({unc('hot_array_speedup')}) faster than passes over distinct tensors (GEMV chains); a decode step reads distinct tensors, so the bandwidths here are the distinct-tensor ones",
        "energy_pj_per_flop": "not measured: placeholder 0",
        "static_power_w": "not measured: placeholder 0",
        "power_cap_w": "not measured: placeholder (no cap)",
        "knee": f"the fit uses a smooth capacity knee hit(S) = 1/(1 + (S/C)^k) with k = {v['knee']:.3g} ({unc('knee_sharpness')}); a Chip has no field for k, so evaluate uses the hard spill of placement sram",
        "inner_cache": f"the fit also has an inner cache level of {v['inner_capacity'] / 1e6:.3g} MB ({unc('inner_cache_capacity')}) streaming {1 + v['inner_speedup_m1']:.3g}x ({unc('inner_cache_speedup')}) faster than [sram], with no latency; a Chip has one on-chip tier, so this file carries the outer level",
        "latency_ns": f"per layer: the fitted latency per kernel x {KERNELS_PER_LAYER:g} kernels per layer (calibration/fit/knobs.py KERNELS_PER_LAYER)",
        "sram": f"on-chip tier = last-level cache; capacity (knee) {unc('sram_capacity')}, bandwidth {unc('sram_bandwidth')}, latency {unc('sram_latency')}: fitted; energy not measured (placeholder 0)",
        "dram": f"bandwidth {unc('dram_bandwidth')}, latency {unc('dram_latency')}, compute feed {unc('dram_compute_feed')}: fitted; capacity = {memory_source}; energy not measured (placeholder 0)",
    }
    table = chip_table(
        chip, name=f"{device} (calibrated)", source=fitted, placement="sram", max_chips=1, sources=sources
    )
    return chip_file_text(table, comments)
