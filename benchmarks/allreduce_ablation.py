"""Ablation of the all-reduce's two measured lines and of a static batch's prefill all-reduces.

Terms (2026-12-07, twenty-second session):

- **The second line** (`Chip.link_knee`, `Chip.link_bandwidth_large`,
  `costmodel.ring_seconds`): past a knee an all-reduce's bytes move at a second rate, fitted
  to the same published nccl/rccl-tests runs as the first (`benchmarks/gpu_allreduce_fit.py`).
  Off: every chip's `link_bandwidth_large` 0, every byte at `link_bandwidth`.
- **A static batch's prefill all-reduces** (`costmodel.validate.prefill_seconds`): the
  prompt tokens' activations, twice a layer, over the tensor-parallel group. Off: the
  prefill's compute alone (the model before this session).

Each variant is evaluated with the profiles as shipped (fitted with both terms on), not
refitted: the figures say what each term moves, not what a refit without it would reach.
Prints the held-out medians of `costmodel validate` (all variants) and, unless `--decode`,
of `costmodel validate --serving` as shipped and with the second line off; writes
`benchmarks/allreduce_ablation.txt`.

    python benchmarks/allreduce_ablation.py            # ~13 min on 2 cores (two serving runs)
    python benchmarks/allreduce_ablation.py --decode   # ~1 min
"""

from __future__ import annotations

import contextlib
import dataclasses
import sys
from pathlib import Path

import equinox as eqx

import costmodel.io
import costmodel.validate as v
import costmodel.validate_serving as vs


OUT = Path(__file__).with_name("allreduce_ablation.txt")


@contextlib.contextmanager
def second_line_off():
    """Every chip `chip_info` gives without its all-reduce's second line (the loaders of
    `costmodel.validate` and `costmodel.validate_serving` both take it from `costmodel.io`)."""
    original = costmodel.io.chip_info

    def one_line(name, *args, **kwargs):
        info = original(name, *args, **kwargs)
        return dataclasses.replace(info, chip=info.chip.replace(link_bandwidth_large=0.0))

    costmodel.io.chip_info, v.chip_info = one_line, one_line
    try:
        yield
    finally:
        costmodel.io.chip_info, v.chip_info = original, original


@contextlib.contextmanager
def prefill_all_reduce_off():
    """A static batch's prefill without its all-reduces (its compute alone). The jitted
    `predict` is wrapped afresh on the way in and out: a compiled one keeps the term."""
    original, compiled = v.allreduce_seconds, v._predict_jit
    v.allreduce_seconds = lambda workload, chip: 0.0
    v._predict_jit = eqx.filter_jit(lambda prepared, logm: v.predict(prepared, logm))  # a new cache
    try:
        yield
    finally:
        v.allreduce_seconds, v._predict_jit = original, compiled


def decode(label: str) -> str:
    frameworks = v.load_frameworks()
    s = v.summarize(v.evaluate_rows(v.load_rows(), frameworks), frameworks)
    m, p = s["median_ape"], s["p90_ape"]
    return (
        f"{label:<40} batch-1 GPU {m['batch1-gpu']:.1%} (p90 {p['batch1-gpu']:.1%}), "
        f"large batch {m['large-batch']:.1%} (p90 {p['large-batch']:.1%}), Apple {m['apple']:.1%}"
    )


def serving(label: str) -> str:
    frameworks = costmodel.io.load_frameworks()
    s = vs.summary(vs.evaluate_serving_rows(vs.load_serving_rows(None, frameworks), frameworks))
    return (
        f"{label:<40} scored {s['scored']['median']:.1%} on {s['scored']['n']} figures "
        f"(p90 {s['scored']['p90']:.1%}; TPOT {s['tpot_ms']['median']:.1%}, "
        f"throughput {s['output_tokens_per_second']['median']:.1%}), {s['test_rows']} rows"
    )


def main() -> None:
    lines = ["costmodel validate (decode table), held-out medians, profiles as shipped:"]
    lines.append(decode("as shipped"))
    with second_line_off():
        lines.append(decode("second line off"))
    with prefill_all_reduce_off():
        lines.append(decode("prefill all-reduces off"))
    with second_line_off(), prefill_all_reduce_off():
        lines.append(decode("both off"))
    if "--decode" not in sys.argv[1:]:
        lines.append("costmodel validate --serving, held-out medians, profiles as shipped:")
        lines.append(serving("as shipped"))
        with second_line_off():
            lines.append(serving("second line off"))
    text = "\n".join(lines) + "\n"
    print(text, end="")
    if "--decode" not in sys.argv[1:]:
        OUT.write_text(text)


if __name__ == "__main__":
    main()
