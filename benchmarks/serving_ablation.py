"""What each serving term buys: the held-out serving figures of `costmodel validate
--serving` with each part switched off in turn.

    python benchmarks/serving_ablation.py > benchmarks/serving_ablation.txt   (~40 min on 2 cores)
    python benchmarks/serving_ablation.py model "prefill at the decode rate"   (those variants only)

Variants (the rows as they are, every other term unchanged):
- "model": as `costmodel validate --serving` scores them;
- "bursts as a steady state": every `arrival = "burst"` row served as closed-loop clients
  keeping `concurrency` requests in flight (the model before bursts, 2026-12-05);
- "waves as a steady state": closed-loop clients of fixed-length requests (`output_lengths
  = "fixed"` without `arrival`: `ServingRow.waves`) served in a steady state rather than
  in waves, each a burst of `concurrency` requests (the model before 2026-12-06);
- "varied lengths as fixed": a burst's lengths all equal to their mean (no drain);
- "no output caps": a burst's varied lengths geometric whatever its client's `output_cap`
  (the model before 2026-12-07);
- "engines without rows bare": the tgi, vllm-0.5 and lmdeploy-0.1 rows served by the bare
  chip (`native`, as before those profiles carried their family's values);
- "Meta's FP8 as plain fp8": the `fp8-meta` rows (attention and tables in BF16) as `fp8`;
- "vLLM V1 as vllm-0.6": the `vllm-v1` rows with vLLM 0.6's profile (as the fifth check
  scored them);
- "V1 on ROCm as on CUDA": vLLM >= 0.8 on MI300X with the vllm-v1 profile itself, not its
  ROCm variant vllm-v1-rocm (every other term as it is, the chips' prefill efficiency
  among them: the sixth check's score had neither);
- "prefill at the decode rate": every chip's `prefill_efficiency` as 1 (a burst's
  prompts at the chip's own compute efficiency, as before 2026-12-05's calibration);
- "TensorRT-LLM >= 0.7 unbounded": the trt-llm-0.7 profile without its bytes in flight
  (fitted on a sixth-check row after the seventh check's score; every stream at the
  chip's own efficiency, as before);
- "median ITL as mean TPOT": `tpot_statistic` ignored (a burst's mean TPOT compared);
- "engines with all the memory": every profile's `memory_fraction` as 1 (vLLM's 90 %
  of each GPU's memory given to the cache's pool, undone);
- "kernels overlap": every profile's `serial_kernels` absent (the chip's 0: the whole
  step's bytes and FLOPs overlap, as before 2026-12-06; fitted numbers not refitted).
Each line: median and p90 absolute error of the scored figures (TPOT and throughput) over
the held-out rows, over the burst rows alone, over the blind checks' rows, and over the
fourth to tenth blind checks' (the fourth all bursts; the fifth mostly steady loads;
the sixth NIM's closed loops, TensorRT-LLM's and AMD's bursts; the seventh mostly vLLM
0.4-0.7; the eighth bursts of TensorRT-LLM 0.5-0.8 and vLLM 0.6-0.10, scored after
trt-llm-0.7's bytes in flight; the ninth TensorRT-LLM 0.8 static batches on H100/H200,
SGLang 0.5.6 closed loops, vLLM 0.6-0.7 on MI300X and H100, AWQ int4 among them; the
tenth, of 2026-12-07, offline bursts capped at 512 tokens, vLLM 0.4-0.6 closed loops and
vLLM 0.5.4 ShareGPT bursts)."""

import contextlib
import dataclasses
import sys
from unittest import mock

import costmodel.evaluation as evaluation
import costmodel.serving as serving
import costmodel.validate_serving as vs
from costmodel.io.frameworks import PROFILE_FIELDS, UNBOUNDED_IN_FLIGHT_KB, load_frameworks


def _line(name: str, results: list[vs.ServingResult], burst_ids: set[str]) -> str:
    def figs(rs):
        s = vs.summary(rs)["scored"]
        return f"{100 * s['median']:5.1f} % (p90 {100 * s['p90']:5.1f} %, n {s['n']:3d})"

    test = [r for r in results if r.row.status == "test"]
    bursts = [r for r in test if r.row.id in burst_ids]
    blind = [r for r in test if r.row.blind]
    line = f"{name:26s} all {figs(test)}  bursts {figs(bursts)}  blind {figs(blind)}"
    for n, day in (
        *((n, "2026-12-05") for n in ("fourth", "fifth", "sixth", "seventh", "eighth", "ninth")),
        ("tenth", "2026-12-07"),
    ):
        rs = [r for r in test if r.row.blind == f"{day}, {n} check"]
        if rs or n in ("fourth", "fifth", "sixth"):  # the later checks only once their rows exist
            line += f"  {n} check {figs(rs)}"
    return line


def main() -> None:
    rows = vs.load_serving_rows()
    burst_ids = {r.id for r in rows if r.arrival == "burst"}
    variants = {
        "model": rows,
        "bursts as a steady state": [
            dataclasses.replace(r, arrival="closed", output_lengths="") if r.arrival == "burst" else r for r in rows
        ],
        "waves as a steady state": [
            dataclasses.replace(r, output_lengths="") if r.arrival == "closed" else r for r in rows
        ],
        "varied lengths as fixed": [
            dataclasses.replace(r, output_lengths="fixed") if r.arrival == "burst" else r for r in rows
        ],
        "no output caps": [dataclasses.replace(r, output_cap=None) for r in rows],
        "engines without rows bare": [
            dataclasses.replace(r, framework="native") if r.framework in ("tgi", "vllm-0.5", "lmdeploy-0.1") else r
            for r in rows
        ],
        "Meta's FP8 as plain fp8": [
            dataclasses.replace(r, weights="fp8") if r.weights == "fp8-meta" else r for r in rows
        ],
        "vLLM V1 as vllm-0.6": [
            dataclasses.replace(r, framework="vllm-0.6") if r.framework == "vllm-v1" else r for r in rows
        ],
        "V1 on ROCm as on CUDA": rows,
        "prefill at the decode rate": rows,
        "TensorRT-LLM >= 0.7 unbounded": rows,
        "median ITL as mean TPOT": [
            dataclasses.replace(r, tpot_statistic="mean") if r.tpot_statistic == "median_itl" else r for r in rows
        ],
        "engines with all the memory": rows,
        "kernels overlap": rows,
    }
    only = sys.argv[1:]
    unknown = sorted(set(only) - set(variants))
    if unknown:
        raise SystemExit(f"serving_ablation.py: unknown variant(s) {unknown}: expected some of {list(variants)}")
    print(f"{len(rows)} rows, {len(burst_ids)} of them bursts")
    for name, rs in variants.items():
        if only and name not in only:
            continue
        with (
            _all_the_memory(name == "engines with all the memory"),
            _v1_as_on_cuda(name == "V1 on ROCm as on CUDA"),
            _prefill_at_decode_rate(name == "prefill at the decode rate"),
            _unbounded("trt-llm-0.7", name == "TensorRT-LLM >= 0.7 unbounded"),
            _kernels_overlap(name == "kernels overlap"),
        ):
            results = vs.evaluate_serving_rows(rs)
        print(_line(name, results, burst_ids), flush=True)


def _patched(on: bool, target, name: str, wrap):
    """`target.name` replaced by `wrap(original)` while on (a null context when off)."""
    if not on:
        return contextlib.nullcontext()
    return mock.patch.object(target, name, wrap(getattr(target, name)))


def _all_the_memory(on: bool):
    """Every framework profile as resolved with `memory_fraction = 1` while on."""
    return _patched(
        on,
        evaluation,
        "resolve_framework",
        lambda original: lambda *a, **k: dataclasses.replace(original(*a, **k), memory_fraction=1.0),
    )


def _kernels_overlap(on: bool):
    """Every framework profile as resolved without `serial_kernels` while on."""
    return _patched(
        on,
        evaluation,
        "resolve_framework",
        lambda original: lambda *a, **k: dataclasses.replace(original(*a, **k), serial_kernels=None),
    )


def _unbounded(framework: str, on: bool):
    """`framework` resolved with no bytes-in-flight bound (`UNBOUNDED_IN_FLIGHT_KB`) while on."""

    def wrap(original):
        def resolve(*a, **k):
            f = original(*a, **k)
            if f.name != framework:
                return f
            m = list(f.multipliers)
            m[PROFILE_FIELDS.index("bytes_in_flight_KB")] = UNBOUNDED_IN_FLIGHT_KB
            return dataclasses.replace(f, multipliers=tuple(m))

        return resolve

    return _patched(on, evaluation, "resolve_framework", wrap)


def _v1_as_on_cuda(on: bool):
    """vllm-v1 resolved to itself on every chip (no ROCm variant) while on."""
    return _patched(
        on,
        evaluation,
        "resolve_framework",
        lambda original: (
            lambda name, chip_name, frameworks=None: (
                load_frameworks()[name] if name == "vllm-v1" else original(name, chip_name, frameworks)
            )
        ),
    )


def _prefill_at_decode_rate(on: bool):
    """`costmodel.serving.prompt_seconds` with the chip's prefill efficiency as 1 while on."""
    return _patched(
        on,
        serving,
        "prompt_seconds",
        lambda original: (
            lambda model, chip, **kw: original(model, dataclasses.replace(chip, prefill_efficiency=1.0), **kw)
        ),
    )


if __name__ == "__main__":
    main()
