"""One blind score of the third check's serving rows (2026-12-05): the figures of the 35 rows
marked blind = "2026-12-05, third check" in data/measurements/serving.toml, the whole
table's summary, and those rows' records, as JSON.

    python benchmarks/serving_blind_third.py > benchmarks/serving_blind_third_results.json

Run once, after the last change of 2026-12-05 that could move a serving figure; the JSON
beside it is that run's output (at commit bcaf862). Bursts were modelled afterwards, so a
run now gives other figures (BENCHMARKS.md, "Bursts")."""

import json

import costmodel.validate_serving as vs


LABEL = "2026-12-05, third check"


def main() -> None:
    results = vs.evaluate_serving_rows(vs.load_serving_rows())
    third = [r for r in results if r.row.blind == LABEL and r.row.status == "test"]
    out = {
        "third_check": vs.summary(third),
        "all": vs.summary(results),
        "rows": [vs.serving_record(r) for r in third],
    }
    print(json.dumps(out, indent=1, default=str))


if __name__ == "__main__":
    main()
