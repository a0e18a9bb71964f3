"""Ablation of the all-reduce's small-message protocol, its two measured lines, a static
batch's prefill all-reduces, and the two terms of the session before them.

Terms (2026-12-07, twenty-third session):

- **The small-message protocol** (`Chip.link_latency_small`, `Chip.link_bandwidth_small`,
  `costmodel.allreduce_seconds`: the lesser of two lines) on the H100, H200 and hbm-pim-gpu,
  with their bulk line's latency fitted (`benchmarks/gpu_allreduce_fit.py`). Off ("small
  protocol off"): every chip's `link_bandwidth_small` 0, every all-reduce on the bulk line
  (its 26.5 us latency at any size). Off ("NVLink4 as before"): those three chips' all-reduce as the
  twenty-second session had it: one ring line of 8 us and 283.1 GB/s to a 25.9 MB knee,
  then 447.8 GB/s, no small protocol.

And the twenty-second session's:

- **The second line** (`Chip.link_knee`, `Chip.link_bandwidth_large`,
  `costmodel.ring_seconds`): past a knee an all-reduce's bytes move at a second rate, fitted
  to the same published nccl/rccl-tests runs as the first (`benchmarks/gpu_allreduce_fit.py`).
  Off: every chip's `link_bandwidth_large` 0, every byte at `link_bandwidth`.
- **A static batch's prefill all-reduces** (`costmodel.validate.prefill_seconds`): the
  prompt tokens' activations, twice a layer, over the tensor-parallel group. Off: the
  prefill's compute alone (the model before the twenty-second session).

And the twenty-first session's two, switched off in today's model:

- **The K/V stream free of the weights' bytes in flight** (`costmodel.class_in_flight`).
  Off ("K/V bound kept"): every class, the KV classes too, under `chip_in_flight`.
- **The NVLink and xGMI all-reduces at their measured rates** (`benchmarks/gpu_allreduce_fit.py`).
  Off ("links at line rate"): the H100, H200, A100 and MI300X presets' `link_bandwidth` at
  their links' line rates per direction (450, 450, 300, 448 GB/s) and no second line; the
  L40S keeps its fit (as in that session's ablation).

Each variant is evaluated with the profiles as shipped (fitted with both terms on), not
refitted: the figures say what each term moves, not what a refit without it would reach.
Prints the held-out medians of `costmodel validate` (all variants) and, unless `--decode`,
of `costmodel validate --serving` for every variant but the prefill's (a serving row's prompts
are priced by `costmodel.serving.prompt_seconds`, which had its all-reduces before), each in
a process of its own (a compiled step keeps the term it was traced with); writes
`benchmarks/allreduce_ablation.txt`.

    python benchmarks/allreduce_ablation.py            # ~40 min on 2 cores (six serving runs)
    python benchmarks/allreduce_ablation.py --decode   # ~2 min
"""

from __future__ import annotations

import contextlib
import dataclasses
import subprocess
import sys
from pathlib import Path

import equinox as eqx
import jax.numpy as jnp

import costmodel._core.channels as ch
import costmodel.io
import costmodel.validate as v
import costmodel.validate_serving as vs


OUT = Path(__file__).with_name("allreduce_ablation.txt")


NVLINK4 = ("h100-sxm", "h200-sxm", "hbm-pim-gpu")
"""The presets with the small-message protocol (NVLink4 and NVSwitch)."""


LINE_RATES = {"h100-sxm": 450e9, "h200-sxm": 450e9, "a100-80gb-sxm": 300e9, "a100-40gb-sxm": 300e9, "mi300x": 448e9}
"""The links' line rates per direction, B/s, the presets' `link_bandwidth` until 2026-12-07."""


@contextlib.contextmanager
def _chips(change):
    """Every chip `chip_info` gives with `change(ChipInfo) -> Chip` applied (the loaders of
    `costmodel.validate` and `costmodel.validate_serving` both take it from `costmodel.io`)."""
    original = costmodel.io.chip_info

    def changed(name, *args, **kwargs):
        info = original(name, *args, **kwargs)
        return dataclasses.replace(info, chip=change(info))

    costmodel.io.chip_info, v.chip_info = changed, changed
    try:
        yield
    finally:
        costmodel.io.chip_info, v.chip_info = original, original


@contextlib.contextmanager
def _term(module, name: str, replacement):
    """`module.name` replaced, with `costmodel.validate`'s jitted predictor wrapped afresh on
    the way in and restored on the way out (a compiled one keeps the term it was traced with)."""
    original, compiled = getattr(module, name), v._predict_jit
    setattr(module, name, replacement)
    v._predict_jit = eqx.filter_jit(lambda prepared, logm: v.predict(prepared, logm))  # a new cache
    try:
        yield
    finally:
        setattr(module, name, original)
        v._predict_jit = compiled


def small_protocol_off():
    """Every chip without a small-message protocol: every all-reduce on the ring's line."""
    return _chips(lambda info: info.chip.replace(link_bandwidth_small=0.0))


def nvlink4_as_before():
    """The NVLink4 presets' all-reduce as before the twenty-third session (`NVLINK4`)."""
    return _chips(
        lambda info: (
            info.chip.replace(
                link_latency=8e-6,
                link_bandwidth=283.1e9,
                link_knee=25.9e6,
                link_bandwidth_large=447.8e9,
                link_bandwidth_small=0.0,
            )
            if info.name in NVLINK4
            else info.chip
        )
    )


def second_line_off():
    """Every chip without its all-reduce's second line."""
    return _chips(lambda info: info.chip.replace(link_bandwidth_large=0.0))


def prefill_all_reduce_off():
    """A static batch's prefill without its all-reduces (its compute alone)."""
    return _term(v, "allreduce_seconds", lambda workload, chip: 0.0)


def kv_bound_kept():
    """Every block class, the KV classes too, under the weights' bytes in flight."""
    every = lambda chip: jnp.where(jnp.asarray(ch.CLASS_IS_KV), ch.chip_in_flight(chip), ch.chip_in_flight(chip))
    return _term(ch, "class_in_flight", every)


def line_rate_links():
    """The NVLink and xGMI presets at their links' line rates, one line (`LINE_RATES`), the
    NVLink4 ones with their small-message latency (their one latency then)."""
    return _chips(
        lambda info: (
            info.chip.replace(
                link_bandwidth=LINE_RATES[info.name],
                link_bandwidth_large=0.0,
                link_bandwidth_small=0.0,
                link_latency=info.chip.link_latency_small if info.name in NVLINK4 else info.chip.link_latency,
            )
            if info.name in LINE_RATES
            else info.chip
        )
    )


VARIANTS = {
    "as shipped": contextlib.nullcontext,
    "small protocol off": small_protocol_off,
    "NVLink4 as before": nvlink4_as_before,
    "second line off": second_line_off,
    "prefill all-reduces off": prefill_all_reduce_off,
    "K/V bound kept": kv_bound_kept,
    "links at line rate": line_rate_links,
}
SERVING_VARIANTS = (
    "as shipped",
    "small protocol off",
    "NVLink4 as before",
    "second line off",
    "K/V bound kept",
    "links at line rate",
)


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
    if sys.argv[1:2] == ["--serving-variant"]:  # one serving run, in a process of its own
        label = sys.argv[2]
        with VARIANTS[label]():
            print(serving(label))
        return
    lines = ["costmodel validate (decode table), held-out medians, profiles as shipped:"]
    for label, variant in VARIANTS.items():
        with variant():
            lines.append(decode(label))
    with second_line_off(), prefill_all_reduce_off():
        lines.append(decode("second line and prefill all-reduces off"))
    if "--decode" not in sys.argv[1:]:
        lines.append("costmodel validate --serving, held-out medians, profiles as shipped:")
        for label in SERVING_VARIANTS:
            run = [sys.executable, __file__, "--serving-variant", label]
            lines.append(subprocess.run(run, capture_output=True, text=True, check=True).stdout.strip())
    text = "\n".join(lines) + "\n"
    print(text, end="")
    if "--decode" not in sys.argv[1:]:
        OUT.write_text(text)


if __name__ == "__main__":
    main()
