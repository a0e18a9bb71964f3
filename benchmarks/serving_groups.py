"""Held-out serving medians by subset and group, from `costmodel validate --serving --json`
runs saved to files, side by side (one column per file).

    git checkout 7de8bfc && costmodel validate --serving --json > before.json   # ~6 min each
    git checkout main && costmodel validate --serving --json > after.json
    python benchmarks/serving_groups.py before.json after.json --without "fifteenth check" "sixteenth check"

Prints the scored figures' median (the figures `costmodel validate --serving` scores: TPOT
and throughput, a per-stream TPOT counted once as its throughput) over the test rows of
every file, over those rows without the blind checks named by `--without` (matched
against the end of each row's `blind` field in data/measurements/serving.toml), TPOT and
throughput apart, and by chip and count (one chip or several) and, for the H100 and H200
on several, by engine profile. A row missing from a file (a row added later) is left out
of that file's column and of the subsets' counts; the subsets take the rows of the first
file.
"""

from __future__ import annotations

import argparse
import json
import re
from collections import defaultdict
from pathlib import Path

import numpy as np

import costmodel.validate_serving as vs


FIGURES = ("tpot_ms", "output_tokens_per_second")


def figures(path: str, rows: dict) -> dict:
    """(row id, figure) -> (absolute error, JSON row) of every scored figure of a test row
    (`costmodel.validate_serving`'s rule; `rows`: its table's rows by id)."""
    out = {}
    for r in json.loads(Path(path).read_text())["rows"]:
        if r["status"] != "test" or r["id"] not in rows:
            continue
        for key in FIGURES:
            error = r["errors"].get(key)
            if error is not None and vs._scored(rows[r["id"]], key):
                out[(r["id"], key)] = (abs(error), r)
    return out


def group(row: dict) -> tuple[str, str]:
    """('h100-sxm several', 'trt-llm-0.7') from the JSON row's system and framework."""
    count, chip = re.match(r"(\d+) x (\S+)", row["system"]).groups()
    return f"{chip} {'several' if int(count) > 1 else 'one'}", row["framework"]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("runs", nargs="+", help="files of `costmodel validate --serving --json`")
    p.add_argument("--without", nargs="*", default=[], help="blind checks to leave out, e.g. 'sixteenth check'")
    args = p.parse_args()
    rows = {r.id: r for r in vs.load_serving_rows()}
    runs = [figures(path, rows) for path in args.runs]
    first = runs[0]
    kept = [k for k in first if not any(rows[k[0]].blind.endswith(w) for w in args.without)]

    def line(label: str, keys: list) -> None:
        cells = []
        for run in runs:
            errs = [run[k][0] for k in keys if k in run]
            cells.append(f"{np.median(errs):6.1%} (n {len(errs):3d})" if errs else " " * 15)
        print(f"{label:<44} " + "  ".join(cells))

    print(f"{'':<44} " + "  ".join(f"{Path(a).name:<15}" for a in args.runs))
    line("the first file's scored figures", list(first))
    line("without " + ", ".join(args.without) if args.without else "(no --without)", kept)
    for key in FIGURES:
        line(f"  {key}", [k for k in kept if k[1] == key])
    by_chip, by_engine = defaultdict(list), defaultdict(list)
    for k in kept:
        chip, engine = group(first[k][1])
        by_chip[chip].append(k)
        if chip in ("h100-sxm several", "h200-sxm several"):
            by_engine[f"{chip}, {engine}"].append(k)
    for name, keys in sorted(by_chip.items(), key=lambda kv: -len(kv[1])):
        if len(keys) >= 5:
            line(f"  {name}", keys)
    for name, keys in sorted(by_engine.items()):
        line(f"  {name}", keys)


if __name__ == "__main__":
    main()
