"""The figures BENCHMARKS.md gives for the share of decode-attention re-reads L2 serves
(`Chip.attention_rereads_cached`) beside the thirteenth blind check: its rows under the
shipped model, with vLLM 0.6's FP8 fallback off, and with the fallback's re-reads priced
from DRAM (ablations after the check's one score); and TensorRT-LLM's pre-XQA rows with
their re-reads from L2 instead of DRAM.

    python benchmarks/rereads_cached_check.py      # ~1 min
"""

from __future__ import annotations

import dataclasses
import statistics

import costmodel.validate as v


BLIND = "2026-12-06, thirteenth check"


def _median(results) -> str:
    return f"{statistics.median(r.ape for r in results) * 100:.1f} %"


def main() -> None:
    shipped = v.load_frameworks()

    def with_vllm(**changes):
        return {k: dataclasses.replace(f, **changes) if k == "vllm-0.6" else f for k, f in shipped.items()}

    variants = {
        "model": shipped,
        "FP8 fallback off": with_vllm(kv_rereads_by_kv=(), kv_dequant_ops=()),
        "re-reads from DRAM": with_vllm(rereads_cached=None),
    }
    rows = v.load_rows()
    blind = [r for r in rows if r.blind == BLIND and r.status == "test"]
    print(f"thirteenth blind check, {len(blind)} scored rows (median APE)")
    for name, frameworks in variants.items():
        res = v.evaluate_rows(blind, frameworks)
        fp8 = [r for r in res if r.row.kv == "fp8" and r.row.chip == "h100-sxm"]
        errors = [r.error * 100 for r in fp8]
        print(
            f"  {name:<20} all {_median(res)}  large batch {_median([r for r in res if r.row.group == 'large-batch'])}"
            f"  H100 FP8 cache ({len(fp8)}) {_median(fp8)} ({min(errors):+.1f} ... {max(errors):+.1f} %)"
        )
    trt = [r for r in rows if r.framework == "trt-llm" and r.status == "test"]
    l2 = {**shipped, "trt-llm": dataclasses.replace(shipped["trt-llm"], rereads_cached=1.0)}
    print(f"trt-llm (pre-XQA), {len(trt)} scored rows: re-reads from DRAM (shipped) {_median(v.evaluate_rows(trt))}")
    print(f"  re-reads from L2, nothing unpacked {_median(v.evaluate_rows(trt, l2))}")


if __name__ == "__main__":
    main()
