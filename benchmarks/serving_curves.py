"""Throughput-versus-interactivity curves of three kinds of chip for llama-3-70b (issue 17):
an HBM GPU, an SRAM machine and the HBM-PIM preset, side by side.

    python benchmarks/serving_curves.py     # writes serving_curves.png and serving_curves.txt

Each system is the fewest chips that hold the model at batch 1 for the SRAM machine
(`costmodel.evaluate`'s sizing) and 8 for the GPUs (one HGX board); every tensor x pipeline
split of them over 48 batches, one micro-batch per pipeline stage in flight
(`costmodel.serving.serve`), at a 50 ms TPOT target, context 4096, int8 weights (as the Groq row of `costmodel
validate` assumes: in bf16 the model does not fit 576 Groq chips) and a bf16 KV cache.
"""

from __future__ import annotations

import time
from pathlib import Path

import costmodel as cm
from costmodel.report.serving_plot import serving_plot
from costmodel.serving import serve


HERE = Path(__file__).parent
SYSTEMS = (("h100-sxm", 8), ("groq-lpu", None), ("hbm-pim-gpu", 8))
TPOT = 0.05


def main() -> None:
    econ = cm.economics_preset("N5")
    servings, lines = [], []
    lines.append(
        f"# llama-3-70b, context 4096, int8 weights, bf16 KV, TPOT target {TPOT * 1e3:g} ms; $ = manufacturing cost + energy (N5 economics)"
    )
    lines.append(
        f"{'chip':<14} {'chips':>5} {'split':>12} {'batch':>6} {'groups':>6} {'TPOT ms':>8} "
        f"{'tok/s/chip':>11} {'tok/s/user':>11} {'J/token':>8} {'$/Mtok':>8} {'eval s':>7}"
    )
    for chip, chips in SYSTEMS:
        start = time.perf_counter()
        s = serve("llama-3-70b", chip, econ, chips=chips, tpot=TPOT, weights="int8")
        seconds = time.perf_counter() - start
        servings.append(s)
        for label, p in (("best", s.best), ("batch 1", _batch_one(s))):
            if p is None:
                lines.append(f"{chip:<14} {s.chips:>5} no point meets the target")
                continue
            lines.append(
                f"{chip:<14} {s.chips:>5} {f'TP{p.tensor_parallel}xPP{p.pipeline_parallel}':>12} {p.batch:>6g} "
                f"{p.micro_batches:>6g} {p.tpot * 1e3:>8.3g} {p.tokens_per_second_per_chip:>11.4g} "
                f"{p.tokens_per_second_per_user:>11.4g} {p.joules_per_token:>8.3g} {p.usd_per_million_tokens:>8.3g} "
                f"{seconds:>7.1f}  {label}"
            )
    serving_plot(
        servings, HERE / "serving_curves.png", title="llama-3-70b: tokens/s per chip against tokens/s per user"
    )
    text = "\n".join(lines) + "\n"
    (HERE / "serving_curves.txt").write_text(text)
    print(text, end="")


def _batch_one(s):
    """The fastest batch-1 point (the interactivity end of the curve)."""
    ones = [p for p in s.points if p.feasible and p.batch == 1]
    return min(ones, key=lambda p: p.tpot) if ones else None


if __name__ == "__main__":
    main()
