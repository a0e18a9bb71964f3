"""What serving bursts as bursts buys: the held-out serving figures of
`costmodel validate --serving` with each part of the burst model switched off in turn.

    python benchmarks/serving_ablation.py > benchmarks/serving_ablation.txt   (~8 min on 2 cores)

Variants (the rows as they are, every other term unchanged):
- "model": as `costmodel validate --serving` scores them;
- "bursts as a steady state": every `arrival = "burst"` row served as closed-loop clients
  keeping `concurrency` requests in flight (the model before bursts, 2026-12-05);
- "varied lengths as fixed": a burst's lengths all equal to their mean (no drain).
Each line: median and p90 absolute error of the scored figures (TPOT and throughput) over
the held-out rows, over the burst rows alone, over the blind checks' rows, and over the
fourth blind check's (gathered after bursts were modelled, all of them bursts)."""

import dataclasses

import costmodel.validate_serving as vs


def _line(name: str, results: list[vs.ServingResult], burst_ids: set[str]) -> str:
    def figs(rs):
        s = vs.summary(rs)["scored"]
        return f"{100 * s['median']:5.1f} % (p90 {100 * s['p90']:5.1f} %, n {s['n']:3d})"

    test = [r for r in results if r.row.status == "test"]
    bursts = [r for r in test if r.row.id in burst_ids]
    blind = [r for r in test if r.row.blind]
    fourth = [r for r in test if r.row.blind == "2026-12-05, fourth check"]
    return f"{name:26s} all {figs(test)}  bursts {figs(bursts)}  blind {figs(blind)}  fourth check {figs(fourth)}"


def main() -> None:
    rows = vs.load_serving_rows()
    burst_ids = {r.id for r in rows if r.arrival == "burst"}
    variants = {
        "model": rows,
        "bursts as a steady state": [dataclasses.replace(r, arrival="closed") for r in rows],
        "varied lengths as fixed": [
            dataclasses.replace(r, output_lengths="fixed") if r.arrival == "burst" else r for r in rows
        ],
    }
    print(f"{len(rows)} rows, {len(burst_ids)} of them bursts")
    for name, rs in variants.items():
        results = vs.evaluate_serving_rows(rs)
        print(_line(name, results, burst_ids), flush=True)


if __name__ == "__main__":
    main()
