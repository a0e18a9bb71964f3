"""Refits every framework profile on its `fitted_on` rows, the host times of an engine run
offline (`costmodel.validate.fit_engine_host`) and the two fitted SRAM-machine latencies,
and prints the numbers that data/frameworks.toml and data/chips.toml carry.

    python benchmarks/validate_fit.py
"""

import time

import costmodel.validate as v
from costmodel.io.frameworks import ENGINE_HOST_FIELDS


def main() -> None:
    rows = v.load_rows()
    by_id = {r.id: r for r in rows}
    start = time.perf_counter()
    fitted = v.fit_all(rows)
    for name, m in fitted.items():
        print(f"[frameworks.{name!r}]")
        for key, value in zip(v.PROFILE_FIELDS, m):
            print(f"{key} = {value:.4g}")
    print(f"fit time {time.perf_counter() - start:.1f} s")
    frameworks = v.load_frameworks()
    for name, f in frameworks.items():
        if set(f.fit) >= set(ENGINE_HOST_FIELDS):
            rows_of = [by_id[i] for i in f.fitted_on if i in by_id]
            one = next(r for r in rows_of if r.tensor_parallel == 1)
            many = next(r for r in rows_of if (r.tensor_parallel or 1) > 1)
            seq, tp = v.fit_engine_host(one, many, f)
            print(f"[frameworks.{name!r}] host_per_sequence_offline_us = {seq:.5g}, host_per_sequence_tp_us = {tp:.5g}")
    groq = v.fit_serial_latency(by_id[v.SERIAL_LATENCY_FITS["groq-lpu"][0]], "kernel_overhead")
    ovh = v.fit_serial_latency(by_id[v.SERIAL_LATENCY_FITS["cerebras-wse3"][0]], "kernel_overhead")
    print(f"groq-lpu kernel_overhead_us = {groq * 1e6:.4g}")
    print(f"cerebras-wse3 kernel_overhead_us = {ovh * 1e6:.4g}")


if __name__ == "__main__":
    main()
