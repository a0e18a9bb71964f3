"""Sweep throughput and memory: the compiled, sharded sweep vs per-config loops vs a peer.

Two modes:

    python benchmarks/sweep_bench.py speed  [--n 1000000] [--loop 2000] [--peer-python PY]
    python benchmarks/sweep_bench.py memory [--n 10000000] [--out DIR]

`speed` evaluates the configs of `data/sweeps/llama3-8b-h100.toml` (llama-3-8b decode
on an H100-like chip; batch, context, HBM bandwidth and 16-bit FLOP/s drawn by Latin
hypercube) three ways, side by side in one run, in interleaved rounds (medians):

1. the sweep: one compiled call per chunk, sharded over one CPU device per core,
   that generates the chunk's configs from its first index and evaluates them
   (compile time excluded), and the same end to end through `run_sweep` with Parquet
   writing. For comparison, in the same rounds: the same program compiled with XLA's
   default CPU options (YNNPACK fusions on, `sweep_ynn`), and the previous design
   (`sweep_host_numpy`: configs drawn by a numpy Latin hypercube on the host, padded,
   `device_put` and evaluated by `jit(vmap(...))`, default XLA options; kept here only
   for this comparison; it draws other configs of the same distribution);
2. a per-config Python loop over the same configs: the sweep's own config function
   jitted without `vmap` (`Sweep.single`), and `costmodel.evaluate_policy` with the
   workload and chip pytrees built per config (what a user would write);
3. a peer cost tool from PyPI, `llm-analysis` (`LLMAnalysis(...).inference(...)` with
   `num_tokens_to_generate=1`), in its own virtual environment so that its pins do
   not touch ours:

       python3 -m venv /tmp/sweep-peer-venv && /tmp/sweep-peer-venv/bin/pip install llm-analysis

`memory` runs `run_sweep` over `--n` configs of the same spec into `--out` and samples
the process's resident memory (`/proc/self/status` VmRSS, and the peak VmHWM that
`resource.getrusage` also reports) every second, appending to `OUT/memory.jsonl`, so
a run stopped by a timeout still shows how far it got.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import jax


# One CPU device per core, as `costmodel sweep` does by default (before JAX starts).
if "xla_force_host_platform_device_count" not in os.environ.get("XLA_FLAGS", ""):
    jax.config.update("jax_num_cpu_devices", os.cpu_count() or 1)

import numpy as np

import costmodel as cm
import costmodel.sweep as sw


SPEC = sw.data_sweeps() / "llama3-8b-h100.toml"

PEER = r"""
import json, logging, sys, time
import llm_analysis.analysis as A
from llm_analysis.analysis import LLMAnalysis
from llm_analysis.config import DtypeConfig, GPUConfig, ModelConfig, ParallelismConfig

A.logger.setLevel(logging.ERROR)  # no per-config printing: time the model, not the log
cfg = json.load(sys.stdin)
model = ModelConfig(name="llama-3-8b", num_layers=32, n_head=32, hidden_dim=4096, vocab_size=128256,
                    num_key_value_heads=8, ffn_embed_dim=14336, expansion_ratio=3.5)
out = []
for rnd in range(cfg["rounds"]):
    ok = 0
    t0 = time.perf_counter()
    for b, c, bw, fl in zip(cfg["batch"], cfg["context"], cfg["bw"], cfg["flops"]):
        gpu = GPUConfig(name="h100-like", mem_per_GPU_in_GB=80, hbm_bandwidth_in_GB_per_sec=bw / 1e9,
                        intra_node_bandwidth_in_GB_per_sec=450, intra_node_min_message_latency=8e-6,
                        peak_fp16_TFLOPS=fl / 1e12)
        a = LLMAnalysis(model, gpu, DtypeConfig(), ParallelismConfig(), flops_efficiency=0.7,
                        hbm_memory_efficiency=0.9)
        try:
            r = a.inference(batch_size_per_gpu=max(1, round(b)), seq_len=max(1, round(c)), num_tokens_to_generate=1)
            ok += r["decode_latency"] > 0
        except AssertionError:  # the tool asserts when a config does not fit
            pass
    out.append({"seconds": time.perf_counter() - t0, "n": len(cfg["batch"]), "ok": ok})
print(json.dumps(out))
"""


class HostNumpySweep:
    """The sweep as it was before configs moved into the program (for comparison only).

    A numpy Latin hypercube on the host (a keyed uint64 Feistel permutation with
    splitmix64 rounds, cycle-walked), padded to the chunk, `device_put` over the mesh
    and evaluated by `jit(vmap(Sweep._row))` with default XLA options.
    """

    M1, M2, GOLD = np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB), np.uint64(0x9E3779B97F4A7C15)

    def __init__(self, sweep: sw.Sweep):
        self.sweep, self.chunk = sweep, sweep.chunk
        self.program = jax.jit(jax.vmap(sweep._row), in_shardings=sweep.sharding, out_shardings=sweep.sharding)

    def _mix(self, x):
        x = np.asarray(x, dtype=np.uint64)
        x = (x ^ (x >> np.uint64(30))) * self.M1
        x = (x ^ (x >> np.uint64(27))) * self.M2
        return x ^ (x >> np.uint64(31))

    def _key(self, *parts):
        h = np.zeros(1, dtype=np.uint64)
        for p in parts:
            h = self._mix(h ^ (np.asarray([p], dtype=np.uint64) + self.GOLD))
        return h

    def _permute(self, index, n, key):
        half = max(1, -(-((n - 1).bit_length()) // 2))
        mask, shift = np.uint64((1 << half) - 1), np.uint64(half)
        rounds = [self._mix(key ^ np.uint64(r + 1)) for r in range(4)]

        def once(x):
            left, right = x >> shift, x & mask
            for k in rounds:
                left, right = right, left ^ (self._mix(right ^ k) & mask)
            return (left << shift) | right

        y = once(np.asarray(index, dtype=np.uint64))
        bad = y >= np.uint64(n)
        while bad.any():
            y[bad] = once(y[bad])
            bad = y >= np.uint64(n)
        return y.astype(np.int64)

    def configs(self, start, stop):
        spec, n = self.sweep.spec, self.sweep.n_configs
        index = np.arange(start, stop, dtype=np.int64)
        out = {}
        for dim, axis in enumerate(spec.axes):
            stratum = self._permute(index, n, self._key(spec.seed, dim, 1))
            bits = self._mix(index.astype(np.uint64) * self.GOLD ^ self._key(spec.seed, dim, 2)) >> np.uint64(11)
            u = (stratum + bits.astype(np.float64) * 2.0**-53) / n
            lo, hi = np.log(axis.low), np.log(axis.high)  # the benchmark spec: log ranges only
            out[axis.name] = np.exp(lo + u * (hi - lo))
        return out

    def dispatch(self, start, stop):
        host = self.configs(start, stop)
        pad = self.sweep.padded - (stop - start)
        inputs = {k: np.pad(v.astype(np.float32), (0, pad), mode="edge") for k, v in host.items()}
        return host, self.program(jax.device_put(inputs, self.sweep.sharding))


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # kB on Linux


def proc_status() -> dict[str, float]:
    out = {}
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(("VmRSS", "VmHWM")):
            key, value = line.split(":")
            out[key] = float(value.split()[0]) / 1024  # MB
    return out


def time_sweep_chunks(sweep, n: int) -> float:
    """Configs/s of the chunk calls over configs [0, n), config generation included
    (one chunk in flight while the next is dispatched)."""
    t0 = time.perf_counter()
    pending = None
    for k in range(-(-n // sweep.chunk)):
        start, stop = k * sweep.chunk, min((k + 1) * sweep.chunk, n)
        res = sweep.dispatch(start, stop)
        if pending is not None:
            jax.block_until_ready(pending)
        pending = res
    jax.block_until_ready(pending)
    return n / (time.perf_counter() - t0)


def time_single_loop(sweep: sw.Sweep, configs: dict[str, np.ndarray], m: int) -> float:
    """Configs/s of the same config function, jitted, called once per config."""
    rows = [{k: np.float32(v[i]) for k, v in configs.items()} for i in range(m)]
    jax.block_until_ready(sweep.single(rows[0]))  # compile outside the timing
    t0 = time.perf_counter()
    for r in rows:
        jax.block_until_ready(sweep.single(r)["seconds_per_step"])
    return m / (time.perf_counter() - t0)


def time_evaluate_loop(configs: dict[str, np.ndarray], m: int) -> float:
    """Configs/s of `evaluate_policy` with pytrees built per config."""
    model = cm.model_preset("llama-3-8b")
    base = cm.chip_preset("h100-sxm")

    def one(i):
        w = cm.Workload(model, cm.Scenario(batch=configs["batch"][i], context=configs["context"][i]))
        tiers = base.tiers
        tiers = tiers.replace(bandwidth=tiers.bandwidth.at[2].set(configs["chip.tiers.bandwidth.dram"][i]))
        chip = base.replace(tiers=tiers, peak_flops=base.peak_flops.at[1].set(configs["chip.peak_flops.16"][i]))
        cost, _ = cm.evaluate_policy(w, chip, "dram")
        return float(cost.seconds_per_step)

    one(0)
    t0 = time.perf_counter()
    for i in range(m):
        one(i)
    return m / (time.perf_counter() - t0)


def time_peer(python: str, configs: dict[str, np.ndarray], m: int, rounds: int) -> dict:
    payload = {
        "rounds": rounds,
        "batch": configs["batch"][:m].tolist(),
        "context": configs["context"][:m].tolist(),
        "bw": configs["chip.tiers.bandwidth.dram"][:m].tolist(),
        "flops": configs["chip.peak_flops.16"][:m].tolist(),
    }
    res = subprocess.run([python, "-c", PEER], input=json.dumps(payload), capture_output=True, text=True, timeout=1800)
    if res.returncode != 0:
        raise RuntimeError(f"peer failed: {res.stderr[-2000:]}")
    runs = json.loads(res.stdout.strip().splitlines()[-1])
    rates = [r["n"] / r["seconds"] for r in runs]
    return {"rates": rates, "ok": runs[0]["ok"]}


def speed(args) -> dict:
    load_before = list(os.getloadavg())
    spec = sw.load_spec(SPEC)
    spec = dataclasses.replace(spec, samples=args.n)
    sweep = sw.cached_sweep(spec, args.chunk)
    t0 = time.perf_counter()
    jax.block_until_ready(sweep.dispatch(0, min(sweep.chunk, args.n))[1])
    compile_s = time.perf_counter() - t0
    configs = sweep.configs(0, args.loop)
    feasible = sweep.table(0, min(sweep.chunk, args.n)).column("feasible").to_numpy().mean()
    have_peer = Path(args.peer_python).exists()
    # The same program with XLA's default CPU options (YNNPACK fusions on).
    ynn = sw.Sweep(spec, args.chunk, compiler_options={})
    jax.block_until_ready(ynn.dispatch(0, min(sweep.chunk, args.n)))
    a, b = sweep.table(0, sweep.chunk).to_pandas(), ynn.table(0, sweep.chunk).to_pandas()
    cols = list(sw.RESULTS)
    rel = np.nanmax(np.abs(a[cols].to_numpy() - b[cols].to_numpy()) / np.maximum(np.abs(a[cols].to_numpy()), 1e-30))
    same_flags = bool((a.feasible == b.feasible).all() and (a.bound == b.bound).all())
    host_numpy = HostNumpySweep(sweep)
    jax.block_until_ready(host_numpy.dispatch(0, min(sweep.chunk, args.n))[1])
    res: dict[str, list[float]] = {
        "sweep": [],
        "sweep_ynn": [],
        "sweep_host_numpy": [],
        "sweep_parquet": [],
        "single": [],
        "evaluate": [],
        "peer": [],
    }
    peer_ok = None
    for rnd in range(args.rounds):
        res["sweep"].append(time_sweep_chunks(sweep, args.n))
        res["sweep_ynn"].append(time_sweep_chunks(ynn, args.n))
        res["sweep_host_numpy"].append(time_sweep_chunks(host_numpy, args.n))
        with tempfile.TemporaryDirectory() as d:
            stats = sw.run_sweep(spec, d, chunk=args.chunk)
            res["sweep_parquet"].append(stats.configs_per_second)
        res["single"].append(time_single_loop(sweep, configs, args.loop))
        res["evaluate"].append(time_evaluate_loop(configs, args.loop // 4))
        if have_peer:
            p = time_peer(args.peer_python, configs, args.loop, 1)
            res["peer"] += p["rates"]
            peer_ok = p["ok"]
        print(f"round {rnd}: " + ", ".join(f"{k} {v[-1]:,.0f}/s" for k, v in res.items() if v), flush=True)
    med = {k: float(np.median(v)) for k, v in res.items() if v}
    summary = {
        "spec": str(SPEC),
        "n": args.n,
        "chunk": sweep.chunk,
        "devices": [str(d) for d in sweep.devices],
        "cpu_count": os.cpu_count(),
        "compile_seconds": compile_s,
        "feasible_fraction_first_chunk": float(feasible),
        "median_configs_per_second": med,
        "rounds": res,
        "ynn_max_rel_diff": float(rel),
        "ynn_same_feasible_and_bound": same_flags,
        "ratio_sweep_vs_ynn": med["sweep"] / med["sweep_ynn"],
        "ratio_sweep_vs_host_numpy": med["sweep"] / med["sweep_host_numpy"],
        "xla_options": sw.COMPILER_OPTIONS,
        "load_average_before": load_before,
        "load_average_after": list(os.getloadavg()),
        "ratio_sweep_vs_single_loop": med["sweep"] / med["single"],
        "ratio_sweep_vs_evaluate_loop": med["sweep"] / med["evaluate"],
        "peak_rss_mb": peak_rss_mb(),
        "jax": jax.__version__,
    }
    if "peer" in med:
        summary["ratio_sweep_vs_peer"] = med["sweep"] / med["peer"]
        summary["ratio_sweep_parquet_vs_peer"] = med["sweep_parquet"] / med["peer"]
        summary["ratio_sweep_host_numpy_vs_peer"] = med["sweep_host_numpy"] / med["peer"]
        summary["peer"] = (
            "llm-analysis "
            + subprocess.run(
                [args.peer_python, "-c", "import importlib.metadata as m; print(m.version('llm-analysis'))"],
                capture_output=True,
                text=True,
            ).stdout.strip()
        )
        summary["peer_configs_that_ran"] = peer_ok
    return summary


def memory(args) -> dict:
    spec = dataclasses.replace(sw.load_spec(SPEC), samples=args.n)
    out = Path(args.out)
    if out.exists() and not args.resume:
        shutil.rmtree(out)
    out.mkdir(parents=True, exist_ok=True)
    log = out / "memory.jsonl"
    stop = threading.Event()
    t0 = time.perf_counter()

    def sample():
        with open(log, "a") as f:
            while not stop.wait(1.0):
                rec = {"t": round(time.perf_counter() - t0, 1), "chunks": len(list(out.glob("chunk-*.parquet")))}
                rec.update(proc_status())
                f.write(json.dumps(rec) + "\n")
                f.flush()

    thread = threading.Thread(target=sample, daemon=True)
    before = proc_status()
    thread.start()
    stats = sw.run_sweep(spec, out, chunk=args.chunk, resume=args.resume, progress=args.progress)
    stop.set()
    thread.join()
    samples = [json.loads(line) for line in log.read_text().splitlines()]
    size = sum(p.stat().st_size for p in out.glob("chunk-*.parquet"))
    return {
        "n": args.n,
        "chunk": stats.chunks and sw.read_manifest(out)["chunk"],
        "evaluated": stats.evaluated,
        "seconds": stats.seconds,
        "configs_per_second": stats.configs_per_second,
        "rss_mb_before_run": before.get("VmRSS"),
        "rss_mb_max_sampled": max((s.get("VmRSS", 0) for s in samples), default=None),
        "rss_mb_median_sampled": float(np.median([s.get("VmRSS", 0) for s in samples])) if samples else None,
        "peak_rss_mb_getrusage": peak_rss_mb(),
        "parquet_bytes": size,
        "devices": len(jax.local_devices()),
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="mode", required=True)
    s = sub.add_parser("speed")
    s.add_argument("--n", type=int, default=1_000_000, help="configs of the sweep timing")
    s.add_argument("--loop", type=int, default=2000, help="configs of the per-config loops and the peer")
    s.add_argument("--rounds", type=int, default=3)
    s.add_argument("--chunk", type=int, default=None)
    s.add_argument("--peer-python", default="/tmp/sweep-peer-venv/bin/python")
    m = sub.add_parser("memory")
    m.add_argument("--n", type=int, default=10_000_000)
    m.add_argument("--chunk", type=int, default=None)
    m.add_argument("--out", default="/tmp/sweep-memory-bench")
    m.add_argument("--resume", action="store_true")
    m.add_argument("--progress", action="store_true")
    for q in (s, m):
        q.add_argument("--json", default=None, help="also write the summary to this file")
    args = p.parse_args()
    summary = speed(args) if args.mode == "speed" else memory(args)
    text = json.dumps(summary, indent=1)
    print(text)
    if args.json:
        Path(args.json).write_text(text + "\n")


if __name__ == "__main__":
    sys.exit(main())
