"""GPU calibration from published microbenchmarks: the traces, the fits and the side-by-side.

We have no GPU of our own, so the GPU presets are calibrated on figures other people
published (`data/traces/published/`, documented in `data/traces/README.md`). Run from
the repository root:

    python benchmarks/calibration_gpu.py --enter GPU_BENCHES ML_ENGINEERING
    python benchmarks/calibration_gpu.py --fit a100-80gb-sxm   # h100-pcie, h200-sxm
    python benchmarks/calibration_gpu.py                       # -> benchmarks/calibration_gpu.txt

* `--enter` rewrites the trace files from git checkouts of te42kyfo/gpu-benches and
  stas00/ml-engineering at the commits in `GPU_BENCHES_COMMIT` / `ML_ENGINEERING_COMMIT`
  (it reads their published result files; every row cites its file and line).
* `--fit PRESET` calibrates one preset. It is `costmodel calibrate` (the same start,
  loss, optimisers, uncertainty and chip-file writer, `calibration.fit`) in two rounds:
  the first is the CLI's fit as is; every knob it leaves undetermined (uncertainty
  factor above 2, or trained on no row that sees it) and that has a counterpart in the
  preset is then held at the preset's value and the rest refitted. The CLI has no
  option to hold a knob, hence this script. Fields a microbenchmark trace cannot
  measure (DRAM capacity, links, power, energy, 8- and 4-bit rates, system size) are
  taken from the preset. The chip file says which is which.
* Without arguments: every validation row (`costmodel validate`) on a calibrated
  preset, predicted with the hand-entered preset and with the calibrated chip under
  the same framework profile, per-row errors and median / p90 APE, printed and written
  to `benchmarks/calibration_gpu.txt`.
"""

from __future__ import annotations

import dataclasses
import math
import re
import shlex
import sys
import tempfile
import tomllib
from pathlib import Path

import numpy as np


ROOT = Path(__file__).resolve().parent.parent
TRACES = ROOT / "data" / "traces" / "published"
CALIBRATED = ROOT / "data" / "calibrated"
PLOTS = ROOT / "benchmarks" / "calibration_gpu"
OUT = ROOT / "benchmarks" / "calibration_gpu.txt"

GPU_BENCHES_COMMIT = "1c36d509ee717dca9215c27135fa1e611bb03ed1"
ML_ENGINEERING_COMMIT = "744d01e18b79512572f64a6bbd8b5f4a725203a7"
GPU_BENCHES_URL = f"github.com/te42kyfo/gpu-benches/blob/{GPU_BENCHES_COMMIT[:8]}"
ML_ENGINEERING_URL = f"github.com/stas00/ml-engineering/blob/{ML_ENGINEERING_COMMIT[:8]}"

GPUS = {
    # preset: the traces fitted and the formats kept (the fit has one 16-bit rate and
    # ties the 8-bit one to it, so FP8 rows are entered but not fitted)
    "a100-80gb-sxm": (("gpu-benches-a100-80gb.csv", "mamf-a100-sxm.csv"), ("f32", "bf16")),
    "h100-pcie": (("gpu-benches-h100-pcie.csv",), ("f32", "bf16")),
    "h200-sxm": (("gpu-benches-h200.csv", "mamf-h100-sxm.csv", "mamf-h200-sxm.csv"), ("f32", "bf16")),
}

UNDETERMINED = 2.0
"""A knob whose fitted value is known only within a factor above this is undetermined."""

KiB = 1024.0


# --- entering the published figures -------------------------------------------------


def _lines(repo: Path, path: str) -> list[tuple[int, list[str]]]:
    """(line number, whitespace tokens) of a published result file, blank lines dropped."""
    text = (repo / path).read_text()
    return [(i, line.split()) for i, line in enumerate(text.splitlines(), 1) if line.strip()]


def _gpu_benches_device(gpu: str) -> tuple[str, str]:
    device = {
        "a100_80": "gpu: NVIDIA A100 80GB, SXM4 assumed (gpu-benches a100_80)",
        "h100_pcie": "gpu: NVIDIA H100 PCIe 80GB (gpu-benches h100_pcie)",
        "h200": "gpu: NVIDIA H200 (gpu-benches h200)",
    }[gpu]
    return device, f"CUDA (version not stated), gpu-benches {GPU_BENCHES_COMMIT[:8]}"


SMS = {"a100_80": 108, "h100_pcie": 114, "h200": 132}
"""Streaming multiprocessors of each gpu-benches device (gpu-cache runs one block on each)."""

L2_CACHE_BLOCKS = 100_000
"""Thread blocks of one gpu-l2-cache call, each reading 512 KiB: the count that reproduces
the printed exec times (e.g. A100 1,732 GB/s -> 30 ms; main.cu reads 200,000 at the commit
that last rewrote the A100 and H200 files, 3088b33)."""


L2_CACHE_RUNS = {"a100_80": 11.0, "h200": 11.0, "h100_pcie": 7.0}
"""Runs per gpu-l2-cache point (the bandwidth is from their minimum time): the loop count
of main.cu at each file's last commit (3088b33: 11; f54baaa, the H100 PCIe file's: 7)."""


def _cache_rows(repo: Path, bench: str, gpu: str, max_kib: float | None = None) -> list[dict]:
    """gpu-cache rows (one block per SM re-reading one buffer of doubles: L1, then L2) or
    gpu-l2-cache rows (100,000 blocks each reading 512 KiB of a data set: L2, then HBM).

    `bytes` is the traffic of one call as the benchmark's main.cu computes the bandwidth
    from it (gpu-cache at a7dc559, the files' commit: buffer x SMs x (1e8 / doubles + 2)
    iterations; gpu-l2-cache: `L2_CACHE_BLOCKS` x 512 KiB), `seconds` = bytes / the
    published bandwidth, so the rate is exactly the published one (the printed exec times,
    rounded to 1 ms, agree with these seconds).
    """
    device, software = _gpu_benches_device(gpu)
    rows = []
    path = f"{bench}/{gpu}.txt"
    for line, t in _lines(repo, path):
        if t[0] == "data":  # header
            continue
        if bench == "gpu-l2-cache":  # block kB, data set kB, time, spread, bw
            data_kib, ms, spread, bw = float(t[2]), t[4], t[5], float(t[6])
            nbytes = L2_CACHE_BLOCKS * 512 * KiB
        else:  # data set kB, time, spread, bw
            data_kib, ms, spread, bw = float(t[0]), t[2], t[3], float(t[4])
            doubles = data_kib * KiB / 8
            nbytes = data_kib * KiB * SMS[gpu] * (100_000_000 // doubles + 2)
        if max_kib is not None and data_kib > max_kib:
            continue
        seconds = nbytes / (bw * 1e9)
        rows.append(
            {
                "kind": "stream",
                "label": f"{bench} {data_kib:.0f} kB",
                "seconds": seconds,
                "spread_seconds": float(spread.removesuffix("%")) / 100 * seconds,
                "reps": L2_CACHE_RUNS[gpu] if bench == "gpu-l2-cache" else 15.0,
                "device": device,
                "software": software,
                "dtype": "f32",
                "bytes": nbytes,
                "working_set": data_kib * KiB,
                "flops": 0.0,
                "source": f"{GPU_BENCHES_URL}/{path} line {line}: data set {data_kib:.0f} kB, {bw:g} GB/s "
                f"(exec time {ms}, spread {spread} = (max - min) / mean of the runs)",
            }
        )
    return rows


GPU_CACHE_MAX_KIB = 256.0
"""Largest gpu-cache data set entered (KiB): the L1 plateau and its edge (A100 192 KiB,
H100 256 KiB of L1 per SM). Beyond it gpu-cache reads L2 with every SM on the same
buffer, 15-20 % faster than gpu-l2-cache's distinct blocks; with both in the trace the
fit explains the gap (the two benchmarks move different bytes per call) as a
millisecond launch overhead. gpu-l2-cache carries L2 and HBM."""

SMALL_KERNEL_MAX = 2 * 1024 * KiB
"""Largest small-kernel volume entered (B): up to here the per-kernel time is mostly the
launch overhead. Larger SCALE kernels read and write; the model does not separate writes
from reads, and the read-only gpu-l2-cache rows carry the L2 and HBM bandwidths."""


def _small_kernel_rows(repo: Path, gpu: str) -> list[dict]:
    """gpu-small-kernels with CUDA graphs: back-to-back SCALE kernels over d doubles
    (A = 0.25 B, then B = 0.25 A); bandwidth = 16 d B / median time per kernel, at the
    best block size (the maximum over the columns, as the repository's plot.py takes it)."""
    device, software = _gpu_benches_device(gpu)
    path = f"gpu-small-kernels/{gpu}_graph.txt"
    rows = []
    for line, t in _lines(repo, path):
        d = float(t[0])
        volume = 16.0 * d
        if volume > SMALL_KERNEL_MAX:
            continue
        bw = max(float(x) for x in t[2:])
        seconds = volume / (bw * 1e9)
        rows.append(
            {
                "kind": "stream",
                "label": f"small kernel (graph) {volume / KiB:.0f} kB",
                "seconds": seconds,
                "spread_seconds": 0.0,
                "reps": 3.0,
                "device": device,
                "software": software,
                "dtype": "f32",
                "bytes": volume,
                "working_set": volume,
                "flops": 0.0,
                "source": f"{GPU_BENCHES_URL}/{path} line {line}: d = {d:g} doubles, best block size {bw:g} GB/s "
                "(time per kernel = 16 d B / bandwidth)",
            }
        )
    return rows


MAMF_README = "compute/accelerator/README.md"
MAMF_ROWS = {
    # file: [(table name, dtype, device)]
    "mamf-a100-sxm.csv": [("NVIDIA A100 SXM", "bf16", "gpu: NVIDIA A100 SXM")],
    "mamf-a100-pcie.csv": [("NVIDIA A100 PCIe", "bf16", "gpu: NVIDIA A100 PCIe")],
    "mamf-h100-sxm.csv": [
        ("NVIDIA H100 SXM", "bf16", "gpu: NVIDIA H100 SXM"),
        ("NVIDIA H100 SXM", "fp8", "gpu: NVIDIA H100 SXM"),
    ],
    "mamf-h200-sxm.csv": [("NVIDIA H200 SXM", "fp8", "gpu: NVIDIA H200 SXM")],
    "mamf-mi300x.csv": [("AMD MI300X", "bf16", "gpu: AMD MI300X")],
}


def _mamf_tables(repo: Path) -> dict[tuple[str, str], tuple[int, list[str]]]:
    """(accelerator, dtype) -> (README line, cells) of the MAMF comparison tables."""
    out = {}
    dtype = None
    for line, raw in enumerate((repo / MAMF_README).read_text().splitlines(), 1):
        if raw.startswith("**BF16**"):
            dtype = "bf16"
        elif raw.startswith("**FP8"):
            dtype = "fp8"
        elif raw.startswith("#"):
            dtype = None
        elif dtype and raw.startswith("|"):
            cells = [c.strip() for c in raw.strip("|").split("|")]
            if cells[0] and cells[1] and re.fullmatch(r"[\d.]+", cells[1]):
                out[(cells[0], dtype)] = (line, cells)
    return out


def _mamf_rows(repo: Path, entries) -> list[dict]:
    """MAMF rows: `torch.mm` (BF16) or `torch._scaled_mm` (FP8) of [M, K] x [K, N] at the
    best shape, the L2 flushed before each call (mamf-finder.py), mean of 100 timed
    calls after 50 warm-up: `seconds` = 2 M N K / the published TFLOPS."""
    tables = _mamf_tables(repo)
    rows = []
    for name, dtype, device in entries:
        line, cells = tables[(name, dtype)]
        tflops = float(cells[1])
        m, n, k = (float(x) for x in cells[4].split("x"))  # the table's "Best Shape MxNxK"
        width = 2.0 if dtype == "bf16" else 1.0  # FP8 writes its output in FP8 too (out=C)
        nbytes = (m * k + k * n + m * n) * width
        flops = 2.0 * m * n * k
        rows.append(
            {
                "kind": "gemm",
                "label": f"MAMF {dtype} {cells[4]}",
                "seconds": flops / (tflops * 1e12),
                "spread_seconds": 0.0,
                "reps": 100.0,
                "device": device,
                "software": f"torch {cells[5]}",
                "dtype": dtype,
                "bytes": nbytes,
                "working_set": nbytes,
                "flops": flops,
                "m": m,
                "k": k,
                "n": n,
                "source": f"{ML_ENGINEERING_URL}/{MAMF_README} line {line} (Maximum Achievable Matmul FLOPS table, "
                f"{dtype.upper()}): {name} {tflops:g} TFLOPS at {cells[4]} (MxNxK), mean of 100 iterations",
            }
        )
    return rows


def enter(gpu_benches: Path, ml_engineering: Path) -> None:
    """Writes `data/traces/published/*.csv` from the two repositories' result files."""
    from calibration.trace import load_trace, save_trace

    files = {
        "gpu-benches-a100-80gb.csv": _cache_rows(gpu_benches, "gpu-cache", "a100_80", GPU_CACHE_MAX_KIB)
        + _cache_rows(gpu_benches, "gpu-l2-cache", "a100_80")
        + _small_kernel_rows(gpu_benches, "a100_80"),
        "gpu-benches-h100-pcie.csv": _cache_rows(gpu_benches, "gpu-cache", "h100_pcie", GPU_CACHE_MAX_KIB)
        + _cache_rows(gpu_benches, "gpu-l2-cache", "h100_pcie"),
        "gpu-benches-h200.csv": _cache_rows(gpu_benches, "gpu-l2-cache", "h200")
        + _small_kernel_rows(gpu_benches, "h200"),
    }
    files.update({name: _mamf_rows(ml_engineering, entries) for name, entries in MAMF_ROWS.items()})
    for name, rows in files.items():
        path = save_trace(rows, TRACES / name)
        print(f"{path.relative_to(ROOT)}: {len(load_trace(path))} rows")


# --- fitting -------------------------------------------------------------------------


def preset_knobs(preset: str) -> dict[str, float]:
    """The knob values (SI, `calibration.fit.make_knobs` names) that reproduce the
    preset's fields through `calibration.fit.to_chip`: efficiencies folded into the
    rates, per-layer latencies and overhead per kernel."""
    import costmodel as cm
    from calibration.fit import KERNELS_PER_LAYER
    from costmodel.io import chip_info

    c = chip_info(preset).chip
    s, d = cm.TIERS.index("sram"), cm.TIERS.index("dram")
    f32, b16 = cm.PRECISIONS.index("f32"), cm.PRECISIONS.index("16")
    t = c.tiers
    return {
        "sram_capacity": float(t.capacity[s]),
        "sram_bandwidth": float(t.bandwidth[s] * t.efficiency[s]),
        "dram_bandwidth": float(t.bandwidth[d] * t.efficiency[d]),
        "sram_latency": float(t.latency[s]) / KERNELS_PER_LAYER,
        "dram_latency": float(t.latency[d]) / KERNELS_PER_LAYER,
        "flops_f32": float(c.peak_flops[f32] * c.compute_efficiency),
        "flops_16_ratio": float(c.peak_flops[b16] / c.peak_flops[f32]),
        "kernel_overhead": float(c.kernel_overhead) / KERNELS_PER_LAYER,
        "overlap_m1": float(c.overlap) - 1.0,
        "attention_efficiency": float(c.attention_efficiency),
        # A preset's 0 is the knob's "none" (stored as a log: a negligible positive).
        "half_rate_rows": max(float(c.half_rate_rows), 1e-6),
        "dram_feed": float(t.compute_feed[d]),
    }


FREEZE_ORDER = (
    "overlap_m1",
    "half_rate_rows",
    "dram_feed",
    "attention_efficiency",
    "dram_latency",
    "sram_latency",
    "kernel_overhead",
    "flops_f32",
    "flops_16_ratio",
    "sram_capacity",
    "sram_bandwidth",
    "dram_bandwidth",
)
"""The knobs with a preset counterpart, in the order they are held when the traces
leave several undetermined: shape parameters (overlap, Hockney n-half, DRAM feed)
before latencies, latencies before rates, so that the rates a benchmark measures most
directly are the last to be taken from the preset."""

PRIOR_FOR_UNCERTAINTY = 1e-9
"""The prior weight when judging what the traces determine. The fit's own uncertainty
(`calibration.fit.uncertainty` at the fit's prior 1e-4) counts the prior as data: with
residuals of a few per cent, a knob no row sees comes out known within a factor ~1.5.
With a negligible prior such a knob's uncertainty is unbounded, as it should be."""


def _uncertainty_factors(fit, spec, data) -> dict[str, float]:
    """Trained knob (make_knobs name) -> the factor its value is known within, from the data alone."""
    from calibration.fit import knob_values, uncertainty

    values = knob_values(fit.knobs)
    out = {}
    for name, sd in uncertainty(fit.knobs, spec, data, PRIOR_FOR_UNCERTAINTY).items():
        short = name.removeprefix("log_").removeprefix("logit_")
        if name.startswith("logit_"):
            sd *= 1.0 - values[short]  # d log f = (1 - f) d logit f
        out[short] = math.exp(sd) if math.isfinite(sd) and sd < 50 else float("inf")
    return out


def _held_spec(train, knobs, frozen):
    """`full_spec` with the held knobs untrained."""
    import equinox as eqx

    from calibration.fit import KNOB_NAMES, full_spec

    spec = full_spec(train, knobs)
    full = {n.removeprefix("log_").removeprefix("logit_"): n for n in KNOB_NAMES}
    if not frozen:
        return spec
    return eqx.tree_at(lambda s: tuple(getattr(s, full[k]) for k in frozen), spec, (False,) * len(frozen))


def fit_preset(preset: str, steps: int = 1500) -> Path:
    """Calibrates `preset` on its published traces and writes `data/calibrated/PRESET-published.toml`."""
    from calibration import load_traces
    from calibration.fit import (
        PARAMETERS,
        calibrate,
        chip_toml,
        fit_knobs,
        initial_knobs,
        knob_values,
        make_dataset,
        make_knobs,
        mape,
        parameter_table,
        predict,
        residual_plots,
        select_dtypes,
    )
    from costmodel.io import chip_file_text, chip_info, chip_presets

    names, dtypes = GPUS[preset]
    traces = [TRACES / n for n in names]
    rel = [t.relative_to(ROOT).as_posix() for t in traces]
    out = CALIBRATED / f"{preset}-published.toml"
    cli = f"costmodel calibrate {' '.join(rel)} --dtypes {','.join(dtypes)} --out {out.relative_to(ROOT).as_posix()}"
    rows = load_traces(traces)
    train = select_dtypes(rows, dtypes)
    data = make_dataset(train)
    # Round 1: exactly the CLI's fit.
    result, fit, predictions = calibrate(rows, (), adam_steps=steps, dtypes=dtypes)
    print(f"{preset}: CLI fit {result['status']}, train MAPE {result['train_mape']:.3f} on {len(train)} rows")
    free = knob_values(fit.knobs)
    preset_values = preset_knobs(preset)
    start = knob_values(initial_knobs(train))
    # knob -> (free-fit value, uncertainty factor; None: no row trains it)
    frozen: dict[str, tuple[float, float | None]] = {}
    factors = _uncertainty_factors(fit, _held_spec(train, fit.knobs, frozen), data)
    _print_parameters(fit, factors)
    # A knob no row trains stays at the fit's neutral start (e.g. a 16-bit rate equal to
    # the f32 one without 16-bit rows): it takes the preset's value instead.
    untrained = [k for k in FREEZE_ORDER if k not in factors]
    for knob in untrained:
        frozen[knob] = (free[knob], None)
        start[knob] = preset_values[knob]
    if any(not math.isclose(free[k], preset_values[k], rel_tol=1e-6) for k in untrained):
        print(f"{preset}: untrained knobs at the preset: {', '.join(untrained)}")
        k0 = make_knobs(**start)
        fit = fit_knobs(data, k0, _held_spec(train, k0, frozen), adam_steps=steps)
    while True:
        factors = _uncertainty_factors(fit, _held_spec(train, fit.knobs, frozen), data)
        _print_parameters(fit, factors)
        held = [k for k in FREEZE_ORDER if k not in frozen and factors.get(k, 0.0) > UNDETERMINED]
        if not held:
            break
        # Hold the first undetermined knob at the preset, refit the rest from the same start.
        knob = held[0]
        frozen[knob] = (free[knob], factors[knob])
        print(f"{preset}: holding {knob} at the preset ({preset_values[knob]:.4g}; x/ {factors[knob]:.3g} free)")
        if knob == "flops_f32" and "flops_16_ratio" not in frozen:
            # The 16-bit rate is f32 rate x ratio: keep its start (and the weak prior's
            # centre) where the CLI put it, or the prior would pull the 16-bit rate
            # towards the preset's f32 one, against the GEMM rows.
            start["flops_16_ratio"] *= start["flops_f32"] / preset_values[knob]
        start[knob] = preset_values[knob]
        k0 = make_knobs(**start)
        fit = fit_knobs(data, k0, _held_spec(train, k0, frozen), adam_steps=steps)
    pred = np.asarray(predict(fit.knobs, data))
    parameters = parameter_table(fit)
    renamed = {
        "overlap_m1": "overlap_p",
        "inner_speedup_m1": "inner_cache_speedup",
        "hot_speedup_m1": "hot_array_speedup",
    }
    for knob, (name, _, _) in PARAMETERS.items():  # the data-only uncertainty in the chip file's notes
        short = knob.removeprefix("log_").removeprefix("logit_")
        if short in factors:
            parameters[renamed.get(short, name)]["uncertainty_factor"] = factors[short]
    result = {**result, "status": fit.status_name, "train_mape": mape(pred, data.measured), "parameters": parameters}
    predictions = {"train": (train, pred, predictions["train"][2]), "holdout": predictions["holdout"]}
    print(f"{preset}: final fit {result['status']}, train MAPE {result['train_mape']:.3f}")

    info = chip_info(preset)
    dram_gb = float(info.chip.tiers.capacity[-1]) / 1e9
    table = tomllib.loads(chip_toml(fit, result, cli, rel, rows[0]["device"].split(",")[0], dram_gb))
    command = f"python benchmarks/calibration_gpu.py --fit {preset}"
    table = _complete(table, preset, chip_presets()[preset], frozen, factors, command, cli)
    comments = [
        f"Calibrated chip file: {preset} fitted to published microbenchmarks (data/traces/README.md, ## published/).",
        f"Written by `{command}`: the fit of `{cli}`",
        f"(calibration.fit: same start, loss, {steps} Adam + 200 L-BFGS steps, chip-file writer), then refitted with",
        "the knobs in [sources].held_at_preset held at the preset's values, one at a time, while the published",
        "traces leave them undetermined (the CLI has no option to hold a knob); [sources].from_preset lists the",
        "fields a microbenchmark trace cannot measure, copied from the preset.",
        f"Train MAPE {result['train_mape']:.3f} on {len(train)} rows ({_by_benchmark(train, pred)});",
        f"fit status {result['status']}. Bandwidths and FLOP rates are sustained effective figures (efficiency 1.0:",
        "the fitted value already is the sustained rate).",
    ]
    out.write_text(chip_file_text(table, comments))
    chip_info(str(out))  # it loads as a chip
    plots = residual_plots(predictions, PLOTS / preset, f"{preset} (published traces): {result['status']}")
    plots = [p for p in plots if p.name != "stream_bandwidth.png"]  # one line through every benchmark
    plots.append(_bandwidth_plot(train, pred, PLOTS / preset / "stream_bandwidth.png", preset))
    print(f"wrote {out.relative_to(ROOT)}; plots: {', '.join(str(p.relative_to(ROOT)) for p in plots)}")
    return out


def _benchmark(row: dict) -> str:
    """The published benchmark a trace row comes from (its label's first words)."""
    label = row["label"]
    return "MAMF" if label.startswith("MAMF") else label.rsplit(" ", 2)[0]


def _by_benchmark(rows: list[dict], pred) -> str:
    """Train MAPE per benchmark, e.g. "gpu-cache 0.8 % (n 60), ..."."""
    from calibration.fit import mape

    groups: dict[str, list[int]] = {}
    for i, r in enumerate(rows):
        groups.setdefault(_benchmark(r), []).append(i)
    return ", ".join(
        f"{name} {mape(pred[ix], [rows[i]['seconds'] for i in ix]):.1%} (n {len(ix)})" for name, ix in groups.items()
    )


def _bandwidth_plot(rows: list[dict], pred, path: Path, preset: str) -> Path:
    """Published vs fitted rate against working set, one series per benchmark."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    groups: dict[str, list[int]] = {}
    for i, r in enumerate(rows):
        if r["kind"] == "stream":
            groups.setdefault(_benchmark(r), []).append(i)
    for n, (name, ix) in enumerate(groups.items()):
        ix = sorted(ix, key=lambda i: rows[i]["working_set"])
        ws = np.array([rows[i]["working_set"] for i in ix])
        moved = np.array([rows[i]["bytes"] for i in ix])
        measured = moved / np.array([rows[i]["seconds"] for i in ix])
        ax.loglog(ws, measured / 1e9, "o", ms=3, color=f"C{n}", label=f"{name} (published)")
        ax.loglog(ws, moved / pred[ix] / 1e9, "-", color=f"C{n}", label=f"{name} (fitted model)")
    ax.set_xlabel("working set (B)")
    ax.set_ylabel("bandwidth (GB/s): bytes / time")
    ax.set_title(f"{preset}: published streams and the calibrated model")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


FITTED_TOP = (
    "name",
    "source",
    "peak_tflops_16",
    "peak_tflops_f32",
    "peak_tflops_8",
    "peak_tflops_4",
    "compute_efficiency",
    "kernel_overhead_us",
    "overlap",
    "attention_efficiency",
    "half_rate_rows",
    "attention_half_rate_rows",
    "host_step_us",
    "small_kernel_MB",
    "small_kernel_efficiency",
    "small_kernel_knee",
)
"""Top-level chip-file fields the fit sets (or `_complete` derives from it). Every other
top-level field of the preset (energy, power, links, SM count, system size, area, ...)
is one a microbenchmark trace cannot measure: it is copied from the preset."""

KNOB_FIELDS = {
    # knob -> the chip-file fields it sets (section, key)
    "sram_capacity": [("sram", "capacity_MB")],
    "sram_bandwidth": [("sram", "bandwidth_GBps")],
    "dram_bandwidth": [("dram", "bandwidth_GBps")],
    "sram_latency": [("sram", "latency_ns")],
    "dram_latency": [("dram", "latency_ns")],
    "flops_f32": [(None, "peak_tflops_f32")],
    "flops_16_ratio": [(None, "peak_tflops_16")],
    "kernel_overhead": [(None, "kernel_overhead_us")],
    "overlap_m1": [(None, "overlap")],
    "attention_efficiency": [(None, "attention_efficiency")],
    "half_rate_rows": [(None, "half_rate_rows"), (None, "attention_half_rate_rows")],
    "call_overhead": [(None, "host_step_us")],
    "dram_feed": [("dram", "compute_feed")],
}


def _round6(x: float) -> float:
    return float(f"{x:.6g}")


def _rate16(t: dict) -> float:
    """A chip table's sustained 16-bit rate, TFLOPS: its peak times its compute efficiency."""
    return t["peak_tflops_16"] * t.get("compute_efficiency", 1.0)


def prompt_pass_share(p: dict, table: dict) -> float:
    """The preset `p`'s `prefill_efficiency` (a share of its sustained 16-bit rate,
    calibrated on time-to-first-token rows) as a share of the calibrated chip `table`'s
    rate: the prompt pass keeps the rate those rows measured (capped at 1)."""
    return _round6(min(1.0, p["prefill_efficiency"] * _rate16(p) / _rate16(table)))


def _complete(table: dict, preset: str, p: dict, frozen: dict, factors: dict, command: str, cli: str) -> dict:
    """The fitted chip table with what the traces cannot measure copied from the preset
    `p` (its `data/chips.toml` table) and a note on every field saying which it is."""
    from calibration.fit import KERNELS_PER_LAYER

    def note(knob: str) -> str:
        if knob in frozen:
            u = frozen[knob][1]
            why = "no row of the traces sees it" if u is None else f"the traces leave it undetermined (x/ {u:.3g} free)"
            return f"preset {preset} value, held in the fit: {why}"
        u = factors.get(knob)
        return (
            "not fitted (no row of the traces sees it): neutral, as the preset" if u is None else f"fitted, x/ {u:.3g}"
        )

    old = table.get("sources", {})
    preset_sources = p.get("sources", {})
    sources: dict = {}
    copied = [k for k, v in p.items() if k not in FITTED_TOP and not isinstance(v, dict)]
    for key in copied:
        table[key] = p[key]
        why = f": {preset_sources[key]}" if isinstance(preset_sources.get(key), str) else ""
        sources[key] = f"preset {preset} (data/chips.toml), not measured by a microbenchmark trace{why}"
    if "prefill_efficiency" in p:
        table["prefill_efficiency"] = prompt_pass_share(p, table)
        sources["prefill_efficiency"] = (
            f"preset {preset}'s {p['prefill_efficiency']:g} of its sustained 16-bit rate ({_rate16(p):g} TFLOPS), "
            f"restated as a share of this file's ({_rate16(table):g} TFLOPS): the same prompt-pass rate, which "
            "single long-prompt time-to-first-token rows measured (data/chips.toml) and a microbenchmark trace does not"
        )
    # `costmodel calibrate` writes placement "sram" (fill the cache first), right for a
    # step whose bytes stay in cache; a GPU's L2 is a hardware-managed cache that a
    # decode step's GB of weights stream through, and the fit's own knee gives such a
    # step no L2 hits either, so the system's policy stays the preset's.
    sources["placement"] = (
        f"preset {preset}'s policy ({p['placement']!r}): the L2 is a hardware-managed cache that a decode step's "
        "multi-GB weight stream passes through (the fit's capacity knee gives such a step no L2 hits), not a "
        "scratchpad to place weights in"
    )
    # The fit ties the 8- and 4-bit rates to the 16-bit one; the preset's ratios scale it.
    for bits in ("8", "4"):
        key = f"peak_tflops_{bits}"
        ratio = p.get(key, p.get("peak_tflops_8", p["peak_tflops_16"])) / p["peak_tflops_16"]
        table[key] = _round6(table["peak_tflops_16"] * ratio)
        sources[key] = (
            f"fitted 16-bit rate x the preset's {key} / peak_tflops_16 = {ratio:g} (datasheet ratio: the fit has "
            "no separate 8- or 4-bit rate)"
        )
    sources["peak_tflops_f32"] = f"f32 rate: {note('flops_f32')}"
    sources["peak_tflops_16"] = f"16-bit rate = f32 rate x the 16-bit ratio ({note('flops_16_ratio')})" + (
        "" if "flops_16_ratio" in frozen else ": the 16-bit GEMM rows of the traces"
    )
    sources["kernel_overhead_us"] = (
        f"launch overhead per kernel x {KERNELS_PER_LAYER:g} kernels per layer "
        f"(calibration/fit/knobs.py KERNELS_PER_LAYER): {note('kernel_overhead')}"
    )
    sources["overlap"] = f"p of the channel p-norm: {note('overlap_m1')}"
    sources["half_rate_rows"] = f"Hockney n-half of matmuls: {note('half_rate_rows')}"
    sources["attention_efficiency"] = f"decode-attention FLOP rate over the matmuls': {note('attention_efficiency')}"
    # The fit's logit keeps the efficiency just below 1; the step is off, so write it off.
    table["small_kernel_efficiency"] = 1.0
    sources["small_kernel_MB"] = "small-kernel step: not fitted (the traces have no GEMV chains): none, as the preset"
    for key in ("knee", "inner_cache"):
        if key in old:
            sources[key] = old[key]
    sources["latency_ns"] = (
        f"per layer: the latency per kernel x {KERNELS_PER_LAYER:g} kernels per layer (KERNELS_PER_LAYER)"
    )
    sections = {
        "sram": ("L2, the fit's on-chip tier", "sram_capacity", "sram_bandwidth", "sram_latency", None),
        "dram": ("HBM", None, "dram_bandwidth", "dram_latency", "dram_feed"),
    }
    for section, (what, capacity, bandwidth, latency, feed) in sections.items():
        t = table[section]
        parts = [what]
        if capacity:
            parts.append(f"capacity (the knee of the L2-to-HBM transition): {note(capacity)}")
        else:
            t["capacity_GB"] = p[section]["capacity_GB"]
            parts.append(f"capacity: preset {preset} (the device's memory, not measured)")
        parts += [f"bandwidth: {note(bandwidth)}", f"latency: {note(latency)}"]
        if feed:
            parts.append(f"compute feed: {note(feed)}")
        if "energy_pj_per_byte" in p.get(section, {}):
            t["energy_pj_per_byte"] = p[section]["energy_pj_per_byte"]
            parts.append(f"energy_pj_per_byte: preset {preset} (not measured)")
        t["source"] = "; ".join(parts)
    held = [
        f"{knob} -> {', '.join(k if s is None else f'{s}.{k}' for s, k in KNOB_FIELDS[knob])} "
        + ("(no row trains it)" if u is None else f"(free fit {value:.4g} SI, x/ {u:.3g})")
        for knob, (value, u) in frozen.items()
    ]
    sources["held_at_preset"] = (
        f"knobs held at preset {preset}'s values (data/chips.toml through calibration.fit.to_chip), one at a "
        "time in the order of FREEZE_ORDER (benchmarks/calibration_gpu.py) while the published traces left "
        "them undetermined: " + ("; ".join(held) if held else "none")
    )
    sources["from_preset"] = (
        f"not measured by a microbenchmark trace, copied from preset {preset} (data/chips.toml): "
        + ", ".join(
            [*(k for k in copied if k != "prefill_efficiency"), "dram.capacity_GB", "sram/dram.energy_pj_per_byte"]
        )
        + ("; prefill_efficiency restated at the preset's prompt-pass rate" if "prefill_efficiency" in copied else "")
    )
    table["sources"] = sources
    table["source"] = f"`{command}`: the fit of `{cli}` with the knobs of [sources].held_at_preset held at the preset"
    table["name"] = f"{p['name']} (calibrated on published microbenchmarks)"
    return table


def _print_parameters(fit, factors: dict[str, float]) -> None:
    from calibration.fit import knob_values

    for name, value in knob_values(fit.knobs).items():
        u = factors.get(name)
        print(f"  {name:<26}{value:>12.4g}  " + ("not trained" if u is None else f"x/ {u:.3g}"))


# --- the side-by-side ------------------------------------------------------------------


def _summary(apes: list[float]) -> str:
    if not apes:
        return "n 0"
    return f"n {len(apes)}, median APE {np.percentile(apes, 50):.1%}, p90 APE {np.percentile(apes, 90):.1%}"


def side_by_side() -> str:
    """Validation rows on each calibrated preset: hand-entered preset vs calibrated chip."""
    from costmodel.io import chip_file_text, chip_presets
    from costmodel.io.frameworks import load_frameworks
    from costmodel.io.measurements import load_rows
    from costmodel.validate import evaluate_rows

    rows = load_rows()
    frameworks = load_frameworks()
    done = [g for g in GPUS if (CALIBRATED / f"{g}-published.toml").exists()]
    # A backend variant listing a preset applies to its calibrated chip too.
    fw = {
        n: dataclasses.replace(f, chips=(*f.chips, *(f"{g}-published" for g in done if g in f.chips)))
        for n, f in frameworks.items()
    }
    refit = _refit_profiles(rows, fw, done)
    lines = [
        "GPU calibration from published microbenchmarks (python benchmarks/calibration_gpu.py).",
        "Every `costmodel validate` row on a calibrated preset, predicted with the hand-entered preset",
        "(data/chips.toml, column `preset`) and with the chip calibrated on published traces",
        "(data/calibrated/PRESET-published.toml), under the row's framework profile as data/frameworks.toml",
        "has it (column `calibr.`: the profiles were fitted on the hand-entered presets) and with the profiles",
        "refitted on the calibrated chips from the same fitted_on rows and fields (column `refit`).",
        "error = predicted / measured - 1; APE = |error|; `fit` rows trained a profile, `test` rows are held out.",
        "The traces, the fit procedure and the chip files were fixed before the first of these side-by-sides",
        "(2026-12-03) computed its errors, and were not refitted after looking at them (an earlier, uncommitted",
        "draft of this script had the side-by-side too; no calibrated chip file existed from it). On 2026-12-05,",
        "after a re-run's figures were seen, the refit was made to apply each profile's fields outside its",
        "vector (K/V re-reads, dequantisation) as the predictions do. On 2026-12-06, after the figures were",
        "seen, the chip files were re-written by their own commands (the H200's then carried the preset's",
        "prompt-pass rate, restated as a share of its fitted 16-bit rate) and a profile that carries a value",
        "takes its source's refitted one (`with_carried`). `overhead@preset` is a diagnostic, not",
        "a shipped chip: the calibrated chip with the preset's kernel_overhead_us.",
        "",
    ]
    everything: dict[str, list[float]] = {"preset": [], "calibrated": [], "refit": []}
    tests: dict[str, list[float]] = {"preset": [], "calibrated": [], "refit": []}
    for preset in GPUS:
        calibrated = f"{preset}-published"
        if not (CALIBRATED / f"{calibrated}.toml").exists():
            lines += [f"{preset}: no calibrated chip file (run --fit {preset})", ""]
            continue
        mine = [r for r in rows if r.chip == preset]
        if not mine:
            lines += [f"{preset} -> {calibrated}: no validation rows on this preset", ""]
            continue
        hand = evaluate_rows(mine, fw)
        moved = [dataclasses.replace(r, chip=calibrated) for r in mine]
        cal = evaluate_rows(moved, fw)
        cal_refit = evaluate_rows(moved, refit)
        lines.append(f"{preset} -> {calibrated} ({len(mine)} rows)")
        lines += _fields(preset, calibrated)
        lines.append(
            f"  {'row':<48}{'status':<10}{'framework':<11}{'measured':>10}{'preset':>10}{'err':>8}"
            f"{'calibr.':>10}{'err':>8}{'refit':>10}{'err':>8}"
        )
        for h, c, r in zip(hand, cal, cal_refit):
            lines.append(
                f"  {h.row.id:<48}{h.row.status:<10}{h.framework:<11}{h.row.value:>10.4g}{h.predicted:>10.4g}"
                f"{h.error:>+8.1%}{c.predicted:>10.4g}{c.error:>+8.1%}{r.predicted:>10.4g}{r.error:>+8.1%}"
            )
        for name, res in (("preset", hand), ("calibrated", cal), ("refit", cal_refit)):
            test = [r.ape for r in res if r.row.status == "test"]
            lines.append(f"  {name:<11} all rows: {_summary([r.ape for r in res])}; test rows: {_summary(test)}")
            everything[name] += [r.ape for r in res]
            tests[name] += test
        # Diagnostic, not a shipped chip: the calibrated chip with the preset's launch
        # overhead, to show how much of the difference the measured launch floor makes.
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / f"{calibrated}-overhead-at-preset.toml"
            table = tomllib.loads((CALIBRATED / f"{calibrated}.toml").read_text())
            table["kernel_overhead_us"] = chip_presets()[preset]["kernel_overhead_us"]
            path.write_text(chip_file_text(table, []))
            diag = evaluate_rows([dataclasses.replace(r, chip=str(path)) for r in mine], fw)
        test = [r.ape for r in diag if r.row.status == "test"]
        lines.append(
            f"  {'overhead@preset':<11} all rows: {_summary([r.ape for r in diag])}; test rows: {_summary(test)} "
            "(diagnostic, profiles as in `calibr.`)"
        )
        lines.append("")
    lines.append("all calibrated presets together:")
    for name, apes in everything.items():
        lines.append(f"  {name:<11} all rows: {_summary(apes)}; test rows: {_summary(tests[name])}")
    lines += ["", "framework profiles refitted on the calibrated chips (same fitted_on rows and fields):"]
    for name, f in refit.items():
        if f.multipliers != fw[name].multipliers:
            was = ", ".join(f"{x:.4g}" for x in fw[name].multipliers)
            now = ", ".join(f"{x:.4g}" for x in f.multipliers)
            lines.append(f"  {name}: ({was}) -> ({now})")
    return "\n".join(lines) + "\n"


def _fields(preset: str, calibrated: str) -> list[str]:
    """The fields the calibration moved, hand preset vs calibrated chip (effective figures)."""
    import costmodel as cm
    from costmodel.io import chip_info

    s, d, b16 = cm.TIERS.index("sram"), cm.TIERS.index("dram"), cm.PRECISIONS.index("16")

    def figures(c) -> list[float]:
        t = c.tiers
        return [
            float(t.bandwidth[d] * t.efficiency[d]) / 1e9,
            float(t.bandwidth[s] * t.efficiency[s]) / 1e9,
            float(t.capacity[s]) / 1e6,
            float(c.peak_flops[b16] * c.compute_efficiency) / 1e12,
            float(c.kernel_overhead) * 1e6,
            float(t.latency[d]) * 1e9,
            float(c.overlap),
        ]

    names = ["HBM GB/s", "L2 GB/s", "L2 MB", "16-bit TF", "overhead us/layer", "HBM latency ns", "overlap p"]
    hand, cal = figures(chip_info(preset).chip), figures(chip_info(calibrated).chip)
    width = max(len(n) for n in names) + 2
    return [
        f"  {'':<12}" + "".join(f"{n:>{width}}" for n in names),
        *(
            f"  {label:<12}" + "".join(f"{x:>{width}.4g}" for x in values)
            for label, values in (("preset", hand), ("calibrated", cal))
        ),
    ]


def _refit_profiles(rows, frameworks: dict, done: list[str]) -> dict:
    """Every profile fitted on a row of a calibrated preset, refitted on the same rows and
    fields with those rows moved to the calibrated chip (`costmodel.validate.fit_framework`);
    a profile that carries a value (`Framework.carried`) takes its source's refitted one
    (`with_carried`: lmdeploy's NCCL latency follows gpt-fast's)."""
    from costmodel.io.frameworks import with_carried
    from costmodel.validate import fit_framework

    by_id = {r.id: r for r in rows}
    out = dict(frameworks)
    for name in sorted(out, key=lambda n: bool(out[n].carried)):
        f = with_carried(out)[name]
        fitted = [by_id[i] for i in f.fitted_on if i in by_id]
        if not any(r.chip in done for r in fitted):
            continue
        moved = [dataclasses.replace(r, chip=f"{r.chip}-published") if r.chip in done else r for r in fitted]
        # The profile's fields outside its vector (K/V re-reads, dequantisation) apply in
        # the fit as in the prediction.
        m = fit_framework(moved, f.fit, fixed=f.multipliers, profile=f)
        out[name] = dataclasses.replace(f, multipliers=tuple(m))
    return with_carried(out)


def main(argv: list[str]) -> int:
    if argv[:1] == ["--enter"] and len(argv) == 3:
        enter(Path(argv[1]), Path(argv[2]))
    elif argv[:1] == ["--fit"] and len(argv) == 2 and argv[1] in GPUS:
        fit_preset(argv[1])
    elif not argv:
        text = side_by_side()
        print(text, end="")
        OUT.write_text(text)
    else:
        print(
            f"usage: {shlex.join(['python', 'benchmarks/calibration_gpu.py'])} [--enter GPU_BENCHES ML_ENGINEERING"
            f" | --fit {{{','.join(GPUS)}}}]",
            file=sys.stderr,
        )
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
