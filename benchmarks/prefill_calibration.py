"""The chips' `prefill_efficiency` (data/chips.toml) from single requests' time to first
token: the share of the chip's compute efficiency that a pass prefilling one long prompt
alone reaches on the engines that served it.

    python benchmarks/prefill_calibration.py

For each calibration row (one request at a time, a prompt of at least 1,000 tokens, so
the prefill is compute-bound), the measured TTFT against the model's prefill of that
prompt on the row's chip and engine profile (`costmodel.serving.prompt_seconds`, at the
chip's own compute efficiency and a prefill efficiency of 1, as a burst's admissions
are priced); a chip's prefill efficiency is the one at which the median of its rows'
ratios is 1 (Brent's method; not all of a prefill is compute: its all-reduces and the
engine's host step are not, so it is below 1 / the median at 1). TTFT is not a scored
figure; the rows that are bursts of one request are marked `status = "fit"` in
data/measurements/serving.toml, as their scored throughput includes their prefill as
`prompt_seconds` prices it. The steady (closed-loop) rows' scored figures do not use the
value (a steady load's prompts are chunks of its decode steps), and they stay "test":
H100's value comes from two such rows, so no H100 row is fitted by it. Chosen on 2026-12-05 after the sixth blind
check's score, from every single-request row of the table with such a prompt and a TTFT:
two on H100 (NIM 1.8's 5,000-token run, AccelMark's 28,635-token vLLM 0.7.3 run), six on
8 x MI300X (dstack's TGI runs of 1,000-64,000 tokens and its vLLM 0.6.3 run of 10,000)."""

import dataclasses
import math
import statistics

import numpy as np
from scipy.optimize import brentq

import costmodel.validate_serving as vs
from costmodel.io import chip_info
from costmodel.serving import prompt_seconds
from costmodel.validate import PROMPT_PASS_FITS


ROWS = tuple(dict.fromkeys(i for _, rows in PROMPT_PASS_FITS.values() for i in rows))
"""The calibration rows: H100's two, then MI300X's six (`costmodel.validate.PROMPT_PASS_FITS`
names them, for the fitted numbers behind a static batch's figure)."""


def ratio(row: vs.ServingRow, efficiency: float = 1.0) -> float:
    """Measured TTFT over the modelled prefill of the row's one prompt, at a prefill
    efficiency of `efficiency`."""
    assert row.ttft_ms is not None and row.prompt_tokens is not None
    info = vs._row_chip(row)
    own = chip_info(row.chip).chip.compute_efficiency
    info = dataclasses.replace(info, chip=info.chip.replace(compute_efficiency=own), prefill_efficiency=efficiency)
    (seconds,) = prompt_seconds(
        row.model,
        info,
        prompt_tokens=row.prompt_tokens,
        batches=np.array([1.0]),
        tensor_parallel=row.tensor_parallel,
        pipeline_parallel=row.pipeline_parallel,
        weights=row.weights,
        kv=row.kv,
    )
    return row.ttft_ms / 1e3 / float(seconds)


def main() -> None:
    by_id = {r.id: r for r in vs.load_serving_rows()}
    ratios: dict[str, list[float]] = {}
    for i in ROWS:
        row = by_id[i]
        r = ratio(row)
        ratios.setdefault(row.chip, []).append(r)
        print(f"{row.chip:10s} {row.framework:10s} prompt {row.prompt_tokens:8.0f}  TTFT / model {r:5.2f}  {i}")
    for chip, rs in ratios.items():
        rows = [by_id[i] for i in ROWS if by_id[i].chip == chip]
        solve = lambda e: math.log(statistics.median(ratio(r, e) for r in rows))
        e = brentq(solve, 0.05, 1.0, xtol=1e-4)
        print(f"{chip}: median {statistics.median(rs):.3f} over {len(rs)} rows at 1 -> prefill_efficiency = {e:.3f}")


if __name__ == "__main__":
    main()
