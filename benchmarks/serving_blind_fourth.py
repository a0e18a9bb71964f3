"""One blind score of the fourth check's serving rows (2026-12-05): the figures of the 40 rows
marked blind = "2026-12-05, fourth check" in data/measurements/serving.toml, the whole
table's summary, and those rows' records, as JSON.

    python benchmarks/serving_blind_fourth.py > benchmarks/serving_blind_fourth_results.json

Run once, after the last change of 2026-12-05 that could move a serving figure; the JSON
beside it is that run's output (at commit a5af89b). Two fixes followed the score, so a run
now gives other figures (BENCHMARKS.md, "Bursts")."""

import json

import costmodel.validate_serving as vs


LABEL = "2026-12-05, fourth check"


def main() -> None:
    results = vs.evaluate_serving_rows(vs.load_serving_rows())
    fourth = [r for r in results if r.row.blind == LABEL and r.row.status == "test"]
    out = {
        "fourth_check": vs.summary(fourth),
        "all": vs.summary(results),
        "rows": [vs.serving_record(r) for r in fourth],
    }
    print(json.dumps(out, indent=1, default=str))


if __name__ == "__main__":
    main()
