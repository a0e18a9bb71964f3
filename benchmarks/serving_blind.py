"""One blind score of a blind check's serving rows: the figures of the rows of
data/measurements/serving.toml marked `blind = LABEL`, by engine profile and together,
the whole table's summary, and those rows' records, as JSON.

    python benchmarks/serving_blind.py "2026-12-05, fifth check" > benchmarks/serving_blind_fifth_results.json

Run once per check, after the last change that could move a serving figure; the JSON
beside it is that run's output and says at which commit (BENCHMARKS.md records each
check's one score and any change made after it). The third and fourth checks keep their
own scripts, as run (`serving_blind_third.py`, `serving_blind_fourth.py`)."""

import argparse
import json
import subprocess

import costmodel.validate_serving as vs


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("label", help='the rows\' `blind` field, e.g. "2026-12-05, fifth check"')
    label = p.parse_args().label
    results = vs.evaluate_serving_rows(vs.load_serving_rows())
    check = [r for r in results if r.row.blind == label and r.row.status == "test"]
    if not check:
        raise SystemExit(f"serving_blind.py: no test row of data/measurements/serving.toml has blind = {label!r}")
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    out = {
        "label": label,
        "commit": commit or None,
        "check": vs.summary(check),
        "by_framework": {
            f: vs.summary([r for r in check if r.row.framework == f]) for f in sorted({r.row.framework for r in check})
        },
        "all": vs.summary(results),
        "rows": [vs.serving_record(r) for r in check],
    }
    print(json.dumps(out, indent=1, default=str))


if __name__ == "__main__":
    main()
