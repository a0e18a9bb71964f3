"""Our own H200 trace's decode steps, predicted side by side by three chips.

`data/traces/h200.csv` holds 10 bf16 decode steps of the flax decoder
(`calibration.measure.transformer`) measured on an H200 with JAX (a small decoder,
Llama 3.2 1B and Llama 3 8B shapes). This script predicts each with
`costmodel.evaluate` on one chip, placement as each chip file says, no framework
profile, for:

1. `h200-sxm`: the hand-entered preset (NVIDIA's datasheet figures);
2. `data/calibrated/h200-sxm-published.toml`: fitted to published microbenchmarks
   (gpu-benches), issue 16;
3. `data/calibrated/h200.toml`: fitted to this trace's own microbenchmarks, the decode
   steps held out (`costmodel calibrate data/traces/h200.csv --holdout decode_step
   --memory-gb 150.8 --out data/calibrated/h200.toml --plots benchmarks/calibration_h200`).

    python benchmarks/calibration_h200.py [--out benchmarks/calibration_h200.txt]

Prints (and writes) a row per step with the measured time and each chip's error, then
the median and largest absolute percentage error per chip.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np


ROOT = Path(__file__).resolve().parents[1]
CHIPS = {
    "preset h200-sxm": "h200-sxm",
    "published fit": str(ROOT / "data/calibrated/h200-sxm-published.toml"),
    "own trace fit": str(ROOT / "data/calibrated/h200.toml"),
}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trace", default=str(ROOT / "data/traces/h200.csv"))
    ap.add_argument("--out", default=None, help="also write the table to this file")
    args = ap.parse_args(argv)

    import costmodel as cm
    from calibration.trace import load_trace
    from costmodel.io import chip_info

    rows = [r for r in load_trace(args.trace) if r["kind"] == "decode_step"]
    chips = {name: chip_info(spec) for name, spec in CHIPS.items()}
    lines = [
        f"{len(rows)} decode steps of {Path(args.trace).name}, predicted by costmodel.evaluate (1 chip, no framework)",
        f"{'step':38s} {'measured ms':>11s} " + " ".join(f"{n:>16s}" for n in CHIPS),
    ]
    errors: dict[str, list[float]] = {n: [] for n in CHIPS}
    for r in rows:
        model = cm.Model(
            **{k: r[k] for k in ("n_layers", "d_model", "n_heads", "n_kv_heads", "head_dim", "d_ff", "vocab")},
            ffn_matrices=r["ffn_matrices"],
            tied_embeddings=r["tied_embeddings"],
        )
        cells = []
        for name, chip in chips.items():
            e = cm.evaluate(
                model, chip, batch=r["batch"], context=r["context"], weights=r["weights"], kv=r["kv"], chips=1
            )
            predicted = float(e.cost.seconds_per_step)
            err = predicted / r["seconds"] - 1
            errors[name].append(abs(err))
            cells.append(f"{predicted * 1e3:8.3f} {err:+6.1%}")
        lines.append(f"{r['label']:38s} {r['seconds'] * 1e3:11.3f} " + " ".join(f"{c:>16s}" for c in cells))
    lines.append("")
    for name, errs in errors.items():
        lines.append(f"{name:16s}: median APE {np.median(errs):6.1%}, max {max(errs):6.1%} ({len(errs)} steps)")
    text = "\n".join(lines)
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
