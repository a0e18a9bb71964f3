"""Ablation of the validation's physical terms: each switched off in turn, the profiles
refitted on the same rows, and the held-out errors compared side by side.

    python benchmarks/validate_ablation.py            # prints, and writes validate_ablation.txt

Terms:

- **Little's law** (`costmodel.stream_bandwidth`): a framework's weight kernels keep
  `bytes_in_flight_KB` per SM in flight, so DRAM streams the weights at most `SMs x
  bytes in flight / DRAM latency` (the attention kernels' K/V is not bound:
  `costmodel.class_in_flight`). Off: the profiles fit a `memory_efficiency` multiplier on
  the same rows instead (the model before issue 16).
- **The GEMMs' half-rate length** (`half_rate_rows` of a profile, `costmodel.hockney`):
  a weight matmul over m rows runs at `m / (m + n½ (1 - 1/m))` of the FLOP rate. No
  shipped profile sets it; the last variants give TensorRT-LLM (both profiles) 64 to 512 rows (one
  128-row GEMM tile and either side; its compute efficiency refitted), which
  BENCHMARKS.md explains is not shipped.
- **Prefill at the chip's rate** (`costmodel.validate.Prepared`): a static batch's
  prefill at the chip's own compute efficiency, the profile's being fitted on decode
  steps. Off: at the profile's (the model before 2026-12-04).
- **The prompt pass's efficiency** (`ChipInfo.prefill_efficiency`): that prefill at
  the share of the chip's compute efficiency a pass of prompts alone reaches (calibrated
  on the serving table's long-prompt time to first token: 0.755 on the H100 and H200,
  0.41 on the MI300X; 0.748 and 0.392 before 2026-12-07, 0.768 and 0.428 before its all-reduce's second line). Off: at all of it (the model before 2026-12-06).
- **Kernels in sequence** (`Chip.serial_kernels`, every GPU engine's profile): each
  block class's kernel overlaps only its own memory and compute, and the classes' times
  add. Off: the whole step's bytes and FLOPs overlap (the model before 2026-12-06).
- **K/V re-reads of TensorRT-LLM before v0.7** (`Chip.attention_kv_rereads`, the
  `trt-llm` profile's `attention_kv_rereads = 1`): its attention streams a GQA group's
  K/V once per query head. Off: once per K/V head.
- **TurboMind's heads per block** (`Chip.attention_heads_per_block`, the `lmdeploy-0.1`
  and `lmdeploy-0.2` profiles' 4): its attention streams each K/V head once per block of
  4 query heads (twice for Llama 2 70B's group of 8). Off: once per K/V head.
- **Dequantisation** (`costmodel.dequant_seconds`, a profile's `dequant_ops`): gpt-fast's
  kernels spend 1 (int8) and 1.875 (int4, group 32) ALU instructions per weight element
  unpacking it, which lengthens each in-flight slot of the latency-bound stream. Off: the
  formats used as stored (the model before 2026-12-05). With Little's law off it still
  acts, as the ALUs' throughput limit on the stream.
- **KV unpacking** (`costmodel.kv_dequant_seconds`, a profile's `kv_dequant_ops`):
  QServe's decode attention spends 5.1 FP32-lane slots per K/V element each time one of
  its per-query-head thread blocks reads its 4-bit cache, compute time of the attention
  classes. Off: the cache used as stored. "qserve as native": its rows under the
  identity profile, as the eleventh blind check scored them (no re-reads, no unpacking,
  the whole step overlapped).
- **vLLM V0's host time by mode and layout** (`Framework.host_offline`,
  `Chip.host_per_sequence_tp`, fitted in closed form on two rows: `costmodel.validate.fit_engine_host`):
  an engine run offline has its own host time per sequence (30.2 µs against the
  served 170 µs), and a step on more than one tensor-parallel chip adds 60.3 µs per sequence.
  "offline host off": those rows at the served value (the tensor-parallel term kept);
  "TP host off": no tensor-parallel term; "engine host off": neither (the model before
  2026-12-06's fifteenth session). Not refitted: the pair is fitted together.
- **vLLM V0's attention kernel by cache format** (`attention_kv_rereads_by_kv`,
  `Chip.attention_rereads_cached`, the vllm-0.6 profile's `kv_dequant_ops`): over an FP8
  cache vLLM 0.6 falls back from FlashAttention to its PagedAttention kernel, one thread
  block per query head, whose re-reads L2 serves and whose every read unpacks and
  multiplies on the CUDA cores (6.14 FP32-lane slots per element). "FP8 fallback off":
  FlashAttention assumed, none of the three (the model before 2026-12-06's sixteenth
  session); "re-reads
  from DRAM": the fallback's re-reads streamed from DRAM (`attention_rereads_cached` 0),
  its unpacking kept. "KV unpacking off" removes its unpacking with QServe's.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np

import costmodel.validate as v
from costmodel.io.frameworks import IN_FLIGHT, UNBOUNDED_IN_FLIGHT_KB, with_carried


OUT = Path(__file__).with_name("validate_ablation.txt")


def _little_off(frameworks):
    out = {}
    for name, f in frameworks.items():
        fit = tuple("memory_efficiency" if k == IN_FLIGHT else k for k in f.fit)
        m = (*f.multipliers[:4], UNBOUNDED_IN_FLIGHT_KB, f.multipliers[5])
        out[name] = dataclasses.replace(f, fit=fit, multipliers=m)
    return out


TRT_TILE_ROWS = (64.0, 128.0, 256.0, 512.0)
"""TensorRT-LLM GEMM half-rate lengths tried: 128 rows is one thread-block tile of
CUTLASS's and cuBLAS's common GEMM tiles, the others bracket it."""


def _trt_tile(frameworks, rows):
    names = ("trt-llm", "trt-llm-0.7")
    return {
        **frameworks,
        **{n: dataclasses.replace(frameworks[n], multipliers=(*frameworks[n].multipliers[:5], rows)) for n in names},
    }


def _rereads_off(frameworks):
    return {k: dataclasses.replace(f, kv_rereads=None) for k, f in frameworks.items()}


def _heads_off(frameworks):
    return {k: dataclasses.replace(f, heads_per_block=None) for k, f in frameworks.items()}


def _serial_off(frameworks):
    return {k: dataclasses.replace(f, serial_kernels=None) for k, f in frameworks.items()}


def _dequant_off(frameworks):
    return {k: dataclasses.replace(f, dequant_ops=()) for k, f in frameworks.items()}


def _kv_dequant_off(frameworks):
    return {k: dataclasses.replace(f, kv_dequant_ops=()) for k, f in frameworks.items()}


def _engine_host_off(frameworks, offline=True, tp=True):
    out = {}
    for k, f in frameworks.items():
        drop = {"host_per_sequence_offline_us"} if offline else set()
        drop |= {"host_per_sequence_tp_us"} if tp else set()
        out[k] = dataclasses.replace(
            f,
            host_offline=None if offline else f.host_offline,
            host_tp=None if tp else f.host_tp,
            fit=tuple(x for x in f.fit if x not in drop),
            carried=tuple(c for c in f.carried if c[0] not in drop),
        )
    return out


def _fp8_fallback_off(frameworks):
    """FlashAttention assumed over every cache: no re-reads by format and none of the
    fallback's unpacking (the profiles that read a cache by format unpack only there)."""
    return {
        k: dataclasses.replace(f, kv_rereads_by_kv=(), kv_dequant_ops=() if f.kv_rereads_by_kv else f.kv_dequant_ops)
        for k, f in frameworks.items()
    }


def _cache_off(frameworks):
    return {k: dataclasses.replace(f, rereads_cached=None) for k, f in frameworks.items()}


def _qserve_native(frameworks):
    return {**frameworks, "qserve": dataclasses.replace(frameworks["native"], name="qserve")}


def _refit(rows, frameworks, prefill_at_chip_rate=True, prompt_pass_efficiency=True):
    """Every profile refitted on its fit rows among `rows` (a serving engine's host time
    is fitted on serving rows, not these), the profiles that carry a value after its
    source, with the source's refitted value (`with_carried`)."""
    by_id = {r.id: r for r in rows}
    out = dict(frameworks)
    for name in sorted(out, key=lambda n: bool(out[n].carried)):
        f = with_carried(out)[name]
        fitted = [by_id[i] for i in f.fitted_on if i in by_id]
        m = (
            v.fit_framework(
                fitted,
                f.fit,
                fixed=f.multipliers,
                profile=f,
                prefill_at_chip_rate=prefill_at_chip_rate,
                prompt_pass_efficiency=prompt_pass_efficiency,
            )
            if fitted
            else f.multipliers
        )
        out[name] = dataclasses.replace(f, multipliers=tuple(m))
    return with_carried(out)


def main() -> None:
    rows = v.load_rows()
    shipped = v.load_frameworks()
    variants = {
        "full model": _refit(rows, shipped),
        "Little's law off": _refit(rows, _little_off(shipped)),
        "prefill at profile": _refit(rows, shipped, prefill_at_chip_rate=False),
        "prompt pass at 1": _refit(rows, shipped, prompt_pass_efficiency=False),
        "kernels overlap": _refit(rows, _serial_off(shipped)),
        "both new off": _refit(rows, _serial_off(shipped), prompt_pass_efficiency=False),
        "K/V re-reads off": _refit(rows, _rereads_off(shipped)),
        "both off": _refit(rows, _rereads_off(shipped), prefill_at_chip_rate=False),
        "heads per block off": _refit(rows, _heads_off(shipped)),
        "dequant off": _refit(rows, _dequant_off(shipped)),
        "KV unpacking off": _refit(rows, _kv_dequant_off(shipped)),
        "qserve as native": _refit(rows, _qserve_native(shipped)),
        "offline host off": _refit(rows, _engine_host_off(shipped, tp=False)),
        "TP host off": _refit(rows, _engine_host_off(shipped, offline=False)),
        "engine host off": _refit(rows, _engine_host_off(shipped)),
        "FP8 fallback off": _refit(rows, _fp8_fallback_off(shipped)),
        "re-reads from DRAM": _refit(rows, _cache_off(shipped)),
        **{f"trt-llm n-half {n:g}": _refit(rows, _trt_tile(shipped, n)) for n in TRT_TILE_ROWS},
    }
    own_rate = {k: not k.startswith(("prefill at profile", "both off")) for k in variants}
    pass_rate = {k: not k.startswith(("prompt pass at 1", "both new off")) for k in variants}
    results = {
        k: v.evaluate_rows(rows, f, prefill_at_chip_rate=own_rate[k], prompt_pass_efficiency=pass_rate[k])
        for k, f in variants.items()
    }
    lines = ["# held-out error per group (median / p90 APE), profiles refitted on the same fit rows", ""]
    lines.append(f"{'variant':<20} " + " ".join(f"{g:>22}" for g in v.GROUPS))
    for name, res in results.items():
        s = v.summarize(res)
        cells = [
            f"{s['median_ape'][g] * 100:6.1f}% / {s['p90_ape'][g] * 100:5.1f}% (n={s['n_test'][g]})" for g in v.GROUPS
        ]
        lines.append(f"{name:<20} " + " ".join(f"{c:>22}" for c in cells))
    lines += [
        "",
        "# profile fields (memory_efficiency, compute_efficiency, kernel_overhead, link_latency, KB in flight,"
        " half-rate rows; 1e+09 KB: unbounded, 1e-09 rows: the chip's own)",
    ]
    for name, fw in variants.items():
        for f in fw.values():
            if f.fit:
                lines.append(f"{name:<20} {f.name:<16} " + ", ".join(f"{x:.4g}" for x in f.multipliers))
    lines += ["", "# per-row error (held-out and fit rows that differ by more than 0.5 point)"]
    lines.append(f"{'row':<48} {'status':<9} " + " ".join(f"{k:>18}" for k in results))
    first = next(iter(results.values()))
    for i, r in enumerate(first):
        errors = [res[i].error for res in results.values()]
        if np.ptp(errors) > 0.005:
            lines.append(f"{r.row.id:<48} {r.row.status:<9} " + " ".join(f"{e * 100:+17.1f}%" for e in errors))
    text = "\n".join(lines) + "\n"
    OUT.write_text(text)
    print(text, end="")


if __name__ == "__main__":
    main()
