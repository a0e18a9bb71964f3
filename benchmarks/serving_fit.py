"""Fits the serving engines' host time and shows what it buys (issue 17).

For each profile of `data/frameworks.toml` that fits `host_step_us` and
`host_per_sequence_us`, refits them on its `fitted_on` rows of
`data/measurements/serving.toml` (`costmodel.validate_serving.fit_host`) and prints the
values beside the file's; the same for a backend variant fitted on serving rows for its
kernel concurrency (`bytes_in_flight_KB`, `costmodel.validate_serving.fit_in_flight`). Then the ablation: every serving row evaluated with the
profiles as they are and with their host time switched off, and the held-out medians
of both. Writes `benchmarks/serving_fit_results.json`.

    python benchmarks/serving_fit.py            # ~5 min on 2 cores
"""

from __future__ import annotations

import dataclasses
import json
import time
from pathlib import Path

from costmodel import validate_serving as vs
from costmodel.io.frameworks import HOST_FIELDS, load_frameworks


OUT = Path(__file__).with_name("serving_fit_results.json")


def main() -> None:
    start = time.time()
    rows = vs.load_serving_rows()
    by_id = {r.id: r for r in rows}
    frameworks = load_frameworks()
    fits = {}
    for name, f in frameworks.items():
        if f.fit == ("bytes_in_flight_KB",) and all(i in by_id for i in f.fitted_on):
            kb = vs.fit_in_flight([by_id[i] for i in f.fitted_on])
            fits[name] = {"file": [f.multipliers[4]], "refit": [kb], "fitted_on": list(f.fitted_on)}
            print(f"{name:<10} file: bytes_in_flight_KB = {f.multipliers[4]:.4g}   refit: {kb:.4g}")
            continue
        if not set(HOST_FIELDS) <= set(f.fit) or f.host is None:
            continue
        served = [i for i in f.fitted_on if i in by_id]  # vllm-0.6 also names two decode rows (its offline fit)
        fitted = vs.fit_host([by_id[i] for i in served])
        fits[name] = {"file": list(f.host), "refit": list(fitted), "fitted_on": served}
        print(
            f"{name:<10} file: host_step_us = {f.host[0]:.5g}, host_per_sequence_us = {f.host[1]:.5g}   "
            f"refit: {fitted[0]:.5g}, {fitted[1]:.5g}"
        )
    with_host = vs.evaluate_serving_rows(rows)
    # off: no host time per step or per sequence, and no tensor-parallel term either
    bare = {k: dataclasses.replace(f, host_tp=None) for k, f in frameworks.items()}
    without = [vs.evaluate_serving_row(r, host_us=(0.0, 0.0), frameworks=bare) for r in rows]
    summaries = {"with host time": vs.summary(with_host), "host time off": vs.summary(without)}
    print(f"\n{'held-out figure':<28}" + "".join(f"{k:>18}" for k in summaries))
    for subset, pick in (("all test rows", lambda s: s), ("blind rows", lambda s: s["blind"])):
        for key, label in (("tpot_ms", "TPOT"), ("output_tokens_per_second", "throughput"), ("scored", "both")):
            cells = "".join(
                f"{pick(s)[key]['median'] * 100:.1f} % (n {pick(s)[key]['n']})".rjust(18) for s in summaries.values()
            )
            print(f"{subset + ', ' + label:<28}{cells}")
    print("\nper row (test rows), TPOT error with / without host time:")
    per_row = []
    for a, b in zip(with_host, without):
        e_a, e_b = a.errors(), b.errors()
        per_row.append({"id": a.row.id, "status": a.row.status, "with": e_a, "without": e_b})
        if a.row.status == "test" and "tpot_ms" in e_a:
            print(f"  {a.row.id:<62} {e_a['tpot_ms'] * 100:+7.1f} %  {e_b['tpot_ms'] * 100:+7.1f} %")
    OUT.write_text(json.dumps({"fits": fits, "summaries": summaries, "rows": per_row}, indent=1) + "\n")
    print(f"\nwrote {OUT} in {time.time() - start:.0f} s")


if __name__ == "__main__":
    main()
