"""vLLM's own GPTQ and AWQ kernels (formats gptq and awq: a 16-bit copy of the weights
above their rows, their unpacking, GPTQ's dot products on the CUDA cores), switched off
in turn on the serving rows that ran them, and the whole table's median with each.

    costmodel validate --serving --json > serving.json     # ~6 min on 2 cores
    python benchmarks/weight_copy_ablation.py serving.json  # ~1 min

The variants change only the rows whose weights are gptq or awq, so every other row's
figures are taken from `serving.json` (a run of the same model) and the whole table's
scored median is exact. Variants:

- as shipped;
- copy off: no `dequant_copy_rows` in any profile (every step over the stored 4-bit
  weights: GPTQ's dot products on the CUDA cores at any batch, and both kernels'
  unpacking once per tile of rows, `dequant_rows`, at any batch);
- copy and unpacking off: no `dequant_copy_rows`, and no `dequant_ops` for gptq and awq;
- as int4: the rows priced as the `int4` format they were scored as before 2026-12-08
  (4.25 bits, no copy, no unpacking, GEMMs at the 4-bit class: Marlin's pricing).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
from pathlib import Path

import numpy as np

import costmodel.validate_serving as vs
from costmodel.io import load_frameworks


FORMATS = ("gptq", "awq")
FIGURES = ("tpot_ms", "output_tokens_per_second")


def _copy_off(frameworks, unpack=True):
    out = {}
    for k, f in frameworks.items():
        ops = f.dequant_ops if unpack else tuple(x for x in f.dequant_ops if x[0] not in FORMATS)
        out[k] = dataclasses.replace(f, copy_rows=(), dequant_ops=ops)
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("run", help="a `costmodel validate --serving --json` file of the shipped model")
    args = p.parse_args()
    rows = vs.load_serving_rows()
    forced = [r for r in rows if r.weights in FORMATS]
    shipped = load_frameworks()
    variants = {
        "as shipped": (forced, shipped),
        "copy off": (forced, _copy_off(shipped)),
        "copy and unpacking off": (forced, _copy_off(shipped, unpack=False)),
        "as int4": ([dataclasses.replace(r, weights="int4") for r in forced], shipped),
    }
    others = {}
    by_id = {r.id: r for r in rows}
    for rec in json.loads(Path(args.run).read_text())["rows"]:
        row = by_id.get(rec["id"])
        if row is None or row.status != "test" or row.weights in FORMATS:
            continue
        for key in FIGURES:
            e = rec["errors"].get(key)
            if e is not None and vs._scored(row, key):
                others[(row.id, key)] = abs(e)
    print(f"{len(forced)} rows with weights gptq or awq; {len(others)} other scored figures from {args.run}\n")
    width = max(len(r.id) for r in forced)
    table = {}
    for name, (vrows, frameworks) in variants.items():
        results = vs.evaluate_serving_rows(vrows, frameworks=frameworks)
        errs = {}
        for res in results:
            for key in FIGURES:
                e = res.errors().get(key)
                if e is not None and res.row.status == "test" and vs._scored(res.row, key):
                    errs[(res.row.id, key)] = e
        table[name] = errs
    header = f"{'row':<{width}}  {'figure':<24}" + "".join(f"{n:>24}" for n in variants)
    print(header)
    for key in sorted(table["as shipped"]):
        cells = "".join(f"{table[n][key]:>+24.1%}" for n in variants)
        print(f"{key[0]:<{width}}  {key[1]:<24}{cells}")
    print()
    for n in variants:
        mine = [abs(e) for e in table[n].values()]
        pooled = list(others.values()) + mine
        print(
            f"{n:<24} these rows' figures: median {np.median(mine):6.1%} (n {len(mine)});"
            f" whole table: median {np.median(pooled):6.2%} (n {len(pooled)}), p90 {np.percentile(pooled, 90):6.1%}"
        )


if __name__ == "__main__":
    main()
