"""The GPU plan of `costmodel bench` and our own H200 trace (`data/traces/h200.csv`).

No GPU is needed: the plan's rows are checked without measuring, and the shipped trace
(measured on an H200 through the device tool; `data/traces/README.md`) is fitted on
the CPU as `BENCHMARKS.md` gives it.
"""

from __future__ import annotations

import contextlib
import io
import json
import tomllib
from pathlib import Path

import jax
import pytest

from calibration.measure import plan_points
from calibration.measure.plans import PLANS, gpu_plan, named_plan, plan
from calibration.trace import KINDS, load_trace
from costmodel.cli import main


ROOT = Path(__file__).resolve().parents[1]
H200 = ROOT / "data" / "traces" / "h200.csv"


def test_gpu_plan_rows_are_bf16_and_beyond_the_l2():
    points = plan_points(gpu_plan(), KINDS, jax.devices()[0])
    rows = [p.row for p in points]
    assert len(rows) == 99 and len({r["label"] for r in rows}) == 99
    streams = [r["bytes"] for r in rows if r["kind"] == "stream"]
    assert min(streams) == 64 * 2**10 and max(streams) >= 8e9  # far beyond a 60 MB L2
    attention = [r for r in rows if r["kind"] == "attention_decode"]
    assert {r["dtype"] for r in attention} == {"bf16"} and all(r["label"].endswith("bf16") for r in attention)
    one = next(r for r in attention if r.get("kernels", 1) == 1 and r["batch"] == 1 and r["context"] == 1024)
    # K and V caches of 1 x 1024 tokens x 8 KV heads x 128, 2 bytes each
    assert one["working_set"] == 2 * 1024 * 8 * 128 * 2
    decode = [r for r in rows if r["kind"] == "decode_step"]
    assert {(r["weights"], r["kv"]) for r in decode} == {("bf16", "bf16")} and len(decode) == 12
    assert any(r["d_model"] == 4096 and r["n_layers"] == 32 and r["vocab"] == 128256 for r in decode)


def test_cpu_plans_keep_their_f32_rows():
    for quick in (True, False):
        p = plan(quick)
        assert (p.attention_dtype, p.decode_dtype) == ("f32", "f32")
        rows = [q.row for q in plan_points(p, ("attention_decode", "decode_step"), jax.devices()[0])]
        assert all(r.get("dtype", r.get("weights")) == "f32" for r in rows)
        assert all("f32)" in r["label"] for r in rows if r["kind"] == "decode_step")
    assert named_plan("quick") == plan(True) and named_plan("full") == plan(False) and "gpu" in PLANS


def test_bench_refuses_quick_with_another_plan(tmp_path, capsys):
    assert main(["bench", "--quick", "--plan", "gpu", "--out", str(tmp_path / "t.csv")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--quick with --plan gpu" in err[0]
    assert main(["bench", "--plan", "tpu", "--out", str(tmp_path / "t.csv")]) == 2
    assert not (tmp_path / "t.csv").exists()


def test_shipped_h200_trace():
    rows = load_trace(H200)
    assert {r["device"] for r in rows} == {"gpu: NVIDIA H200"}
    decode = [r for r in rows if r["kind"] == "decode_step"]
    assert len(rows) == 97 and len(decode) == 10
    # The 8 GiB stream reaches most of the datasheet's 4.8 TB/s; no point beats it.
    stream = max((r for r in rows if r["kind"] == "stream"), key=lambda r: r["bytes"])
    assert 3.8e12 < stream["bytes"] / stream["seconds"] < 4.8e12
    # A batch-1 Llama 3 8B step reads its 16 GB of bf16 weights: never faster than HBM.
    step = next(r for r in decode if r["d_model"] == 4096 and r["batch"] == 1 and r["context"] == 1024)
    assert step["seconds"] > 16.06e9 / 4.8e12


def test_gpu_trace_calibration_needs_the_device_memory(tmp_path, capsys):
    out = tmp_path / "h200.toml"
    assert main(["calibrate", str(H200), "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and str(H200) in err[0] and "'gpu: NVIDIA H200'" in err[0] and "--memory-gb" in err[0]
    assert main(["calibrate", str(H200), "--memory-gb", "-3", "--out", str(out)]) == 2
    assert "--memory-gb -3" in capsys.readouterr().err
    assert not out.exists()


@pytest.mark.slow
def test_h200_fit_reproduces_the_benchmarks_figures(tmp_path):
    """`BENCHMARKS.md`: fitted on the microbenchmarks, 16.7 % held-out on the 10 decode
    steps (the roofline: 120 %), the DRAM capacity the one given, and the loop's per-call
    floor (26-38 µs per iteration in the trace) carried as the chip's host time per step."""
    out = tmp_path / "h200.toml"
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        argv = ["calibrate", str(H200), "--holdout", "decode_step", "--memory-gb", "150.8"]
        assert main([*argv, "--out", str(out), "--plots", str(tmp_path / "plots"), "--json"]) == 0
    r = json.loads(buf.getvalue())
    assert r["status"] == "converged" and (r["n_train"], r["n_holdout"]) == (87, 10)
    assert r["holdout_mape"] == pytest.approx(0.167, abs=0.01)
    assert 20.0 < r["parameters"]["call_overhead"]["value"] < 40.0  # µs
    assert r["baseline"]["holdout_mape"] > 1.0 and r["holdout_rank_correlation"] > 0.9
    chip = tomllib.loads(out.read_text())
    assert chip["dram"]["capacity_GB"] == 150.8 and "--memory-gb" in chip["dram"]["source"]
    shipped = tomllib.loads((ROOT / "data" / "calibrated" / "h200.toml").read_text())
    assert chip["dram"]["bandwidth_GBps"] == pytest.approx(shipped["dram"]["bandwidth_GBps"], rel=0.02)
    assert chip["host_step_us"] == pytest.approx(shipped["host_step_us"], rel=0.02)
