"""SGLang 0.4's overlap scheduler, tried on DataCrunch's SGLang rows and not shipped
(BENCHMARKS.md, "A ninth blind check, and SGLang 0.4's overlap tried").

    python benchmarks/sglang_overlap_trial.py        # ~2 min

For the 15 DataCrunch rows (SGLang 0.4's `latest` image of December 2024) and the SGLang
0.3 team's own rows: each steady-load row's TPOT and throughput error with the sglang
profile's host time added to the device step (the shipped model), and with the step the
larger of the two (an overlap scheduler hides the host time behind the device); then the
DataCrunch rows' median APE of the scored figures with the host time and without any.
"""

import jax.numpy as jnp
import numpy as np

import costmodel.validate_serving as vs
from costmodel._core.channels import host_seconds
from costmodel.evaluation import apply_host
from costmodel.io import chip_info
from costmodel.io.frameworks import load_frameworks


def main() -> None:
    rows = [r for r in vs.load_serving_rows() if r.framework == "sglang" and r.status == "test"]
    crunch = [r for r in rows if "datacrunch" in r.id]
    host_us = load_frameworks()["sglang"].host
    assert host_us is not None, "the sglang profile gives its host time"

    def fmt(res, key):
        e = res.errors().get(key)
        return "    -  " if e is None else f"{e:+6.2f}"

    print(f"{'row':72s} {'additive':>16s} {'max(device, host)':>20s}   (TPOT, throughput errors)")
    for r in rows:
        if r.waves:
            continue
        b, tpot, ttft = vs._curve(r, (0.0, 0.0))
        host = np.asarray(host_seconds(jnp.asarray(b), apply_host(chip_info(r.chip).chip, host_us)))
        out = []
        for step in (tpot + host, np.maximum(tpot, host)):
            res = vs._at_load(r, b, step, ttft * step / tpot)
            out.append(f"{fmt(res, 'tpot_ms')} {fmt(res, 'output_tokens_per_second')}")
        print(f"{r.id[:72]:72s} {out[0]:>16s} {out[1]:>20s}", flush=True)
    for name, host in (("with the sglang host time", None), ("with no host time", (0.0, 0.0))):
        results = [vs.evaluate_serving_row(r, host_us=host) for r in crunch]
        s = vs.summary(results)["scored"]
        print(f"DataCrunch rows ({len(crunch)}), {name}: median APE {s['median']:.1%} (p90 {s['p90']:.1%}, n {s['n']})")


if __name__ == "__main__":
    main()
