"""Calibration: trace schema and loaders, importers, predictions, fitting, the honest test."""

import contextlib
import io
import json
import math
from pathlib import Path

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import costmodel as cm
from calibration import fit as F
from calibration.fit.data import _kernel_bytes
from calibration.fit.model import _predict
from calibration.importers import import_llama_bench, import_vllm
from calibration.trace import COMMON, load_trace, save_trace
from costmodel.cli import main
from costmodel.io import InputError, chip_info, formats


HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
SHIPPED = ROOT / "data" / "traces" / "cpu.csv"
MB = 2**20


def _micro_row(kind, nbytes, flops, dtype="f32", seconds=1e-3, **extra):
    return {
        "kind": kind,
        "label": f"{kind} test",
        "dtype": dtype,
        "bytes": float(nbytes),
        "working_set": float(nbytes),
        "flops": float(flops),
        "seconds": seconds,
        "spread_seconds": seconds / 20,
        "reps": 11.0,
        "device": "cpu: test",
        "software": "test",
        **extra,
    }


def _decode_row(d_model=256, batch=1, context=256, seconds=1e-3):
    return {
        "kind": "decode_step",
        "label": "decoder",
        "n_layers": 4.0,
        "d_model": float(d_model),
        "n_heads": 4.0,
        "n_kv_heads": 4.0,
        "head_dim": 64.0,
        "d_ff": 3.0 * d_model,
        "vocab": 2048.0,
        "batch": float(batch),
        "context": float(context),
        "weights": "f32",
        "kv": "f32",
        "seconds": seconds,
        "spread_seconds": seconds / 20,
        "reps": 11.0,
        "device": "cpu: test",
        "software": "test",
    }


# --- the trace format -------------------------------------------------------------


@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
def test_trace_round_trip(tmp_path, suffix):
    rows = [_micro_row("stream", 4 * MB, 2 * MB), _micro_row("gemm", 1e6, 1e9, dtype="bf16", m=8.0), _decode_row()]
    path = save_trace(rows, tmp_path / f"t{suffix}")
    back = load_trace(path)
    assert [r["kind"] for r in back] == ["stream", "gemm", "decode_step"]
    for a, b in zip(rows, back):
        for k, v in a.items():
            assert b[k] == (pytest.approx(v) if isinstance(v, float) else v), k
    assert back[2]["ffn_matrices"] == 3.0 and back[2]["tied_embeddings"] == 0.0
    assert back[1]["source"].endswith(":3")


def _write_csv(tmp_path, rows):
    path = tmp_path / "bad.csv"
    save_trace(rows, path)
    return path


@pytest.mark.parametrize(
    "change, message",
    [
        ({"kind": "streaming"}, "column 'kind' = 'streaming'"),
        ({"seconds": "fast"}, "column 'seconds' = 'fast': expected a number"),
        ({"seconds": 0.0}, "expected a number > 0"),
        ({"seconds": -1e-3}, "expected a number > 0"),
        ({"seconds": 1500.0}, "wrong units"),
        ({"reps": 2.5}, "column 'reps'"),
        ({"dtype": "fp12"}, "column 'dtype' = 'fp12'"),
        ({"bytes": None}, "needs column 'bytes'"),
    ],
)
def test_malformed_row_names_file_and_line(tmp_path, change, message):
    rows = [_micro_row("stream", 4 * MB, 2 * MB) for _ in range(3)]
    rows[1].update(change)
    path = _write_csv(tmp_path, rows)
    with pytest.raises(InputError) as e:
        load_trace(path)
    assert f"{path}: line 3" in str(e.value)
    assert message in str(e.value)


def test_missing_column_and_empty_file(tmp_path):
    path = tmp_path / "cols.csv"
    path.write_text("kind,label,seconds\nstream,x,1e-3\n")
    with pytest.raises(InputError, match="line 1: missing column 'spread_seconds'"):
        load_trace(path)
    empty = tmp_path / "empty.csv"
    empty.write_text("")
    with pytest.raises(InputError, match="empty file"):
        load_trace(empty)
    header_only = tmp_path / "header.csv"
    header_only.write_text(",".join(COMMON) + "\n")
    with pytest.raises(InputError, match="no rows"):
        load_trace(header_only)


def test_cli_malformed_trace_exits_2(tmp_path, capsys):
    rows = [_micro_row("stream", 4 * MB, 2 * MB), _micro_row("stream", 8 * MB, 4 * MB, seconds=-1.0)]
    path = _write_csv(tmp_path, rows)
    status = main(["calibrate", str(path), "--out", str(tmp_path / "x.toml")])
    err = capsys.readouterr().err
    assert status == 2
    assert f"{path}: line 3" in err and "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert main(["calibrate", str(tmp_path / "nope.csv"), "--out", str(tmp_path / "x.toml")]) == 2
    assert main(["calibrate", str(path), "--holdout", "teapot", "--out", str(tmp_path / "x.toml")]) == 2


# --- importers --------------------------------------------------------------------


def test_llama_bench_json_and_csv():
    rows = import_llama_bench(HERE / "test_calibration_llama_bench.json", "llama-2-7b")
    assert len(rows) == 1  # the pp512 record is prompt processing, not decode
    (r,) = rows
    assert r["weights"] == "q4_0" and r["kv"] == "f16" and r["batch"] == 1.0
    assert r["seconds"] == pytest.approx(1076767880e-9 / 128)
    assert r["context"] == 512 + 64
    assert r["reps"] == 5.0
    rows = import_llama_bench(HERE / "test_calibration_llama_bench.csv", "llama-2-7b")
    assert len(rows) == 1 and rows[0]["weights"] == "q8_0"
    assert rows[0]["seconds"] == pytest.approx(0.25)


def test_vllm_json(tmp_path):
    (r,) = import_vllm(HERE / "test_calibration_vllm.json", "llama-3-8b")
    assert r["batch"] == 16 and r["seconds"] == pytest.approx(0.0205)
    assert r["context"] == pytest.approx(65536 / 64 + 8192 / 64 / 2)
    # The imported rows are a valid trace, and the model predicts them from the core.
    path = save_trace([r], tmp_path / "v.csv")
    (back,) = load_trace(path)
    data = F.make_dataset([back])
    knobs = F.initial_knobs([_micro_row("stream", 4 * MB, 0)])
    assert np.isfinite(np.asarray(F.predict(knobs, data))).all()


def test_cli_import(tmp_path, capsys):
    out = tmp_path / "lb.csv"
    assert (
        main(
            [
                "import-trace",
                "llama-bench",
                str(HERE / "test_calibration_llama_bench.json"),
                "--model",
                "llama-2-7b",
                "--out",
                str(out),
            ]
        )
        == 0
    )
    assert len(load_trace(out)) == 1
    assert (
        main(
            [
                "import-trace",
                "vllm",
                str(HERE / "test_calibration_vllm.json"),
                "--model",
                "no-such-model",
                "--out",
                str(out),
            ]
        )
        == 2
    )


# --- predictions ------------------------------------------------------------------


def _knobs(**over):
    v = dict(
        sram_capacity=32e6,
        knee=2.0,
        sram_bandwidth=80e9,
        dram_bandwidth=10e9,
        sram_latency=5e-9,
        dram_latency=80e-9,
        flops_f32=50e9,
        flops_16_ratio=0.5,
        kernel_overhead=1e-6,
        overlap_m1=1.0,
        inner_capacity=1e6,
        inner_knee=2.0,
        inner_speedup_m1=1e-9,
        hot_speedup_m1=1e-9,
        attention_efficiency=0.5,
        half_rate_rows=1e-9,
        dram_feed=0.6,
        small_kernel_bytes=2e6,
        small_kernel_efficiency=1.0 - 1e-9,
        small_kernel_knee=4.0,
        call_overhead=1e-12,
    )
    v.update(over)
    return F.make_knobs(**v)


def test_micro_closed_form_without_cache():
    """No cache and p = 1: time = bytes/B_dram + FLOPs/F + latency + overhead."""
    k = _knobs(sram_capacity=1e-12, overlap_m1=1e-9)
    pts = F.MicroPoints(
        jnp.asarray([1e8]),
        jnp.asarray([1e8]),
        jnp.asarray([4e9]),
        jnp.asarray([0]),
        jnp.asarray([0.0]),
        jnp.asarray([1.0]),
        jnp.asarray([1.0]),
        jnp.asarray([1e8]),
    )
    t = float(F.predict_micro(k, pts)[0])
    # FLOPs on operands from DRAM run at the DRAM feed (0.6) of the FLOP rate.
    assert t == pytest.approx(1e8 / 10e9 + 4e9 / (0.6 * 50e9) + 80e-9 + 1e-6, rel=1e-4)
    # An attention kernel's FLOPs run at the attention efficiency (0.5) on top.
    att = eqx.tree_at(lambda p: p.attention, pts, jnp.asarray([1.0]))
    t_att = float(F.predict_micro(k, att)[0])
    assert t_att == pytest.approx(1e8 / 10e9 + 4e9 / (0.5 * 0.6 * 50e9) + 80e-9 + 1e-6, rel=1e-4)
    # A kernel over a small operand streams at the small-kernel efficiency (0.5 well
    # below the 2 MB step): the same bytes take twice as long.
    slow = _knobs(sram_capacity=1e-12, overlap_m1=1e-9, small_kernel_efficiency=0.5, small_kernel_knee=30.0)
    small = eqx.tree_at(lambda p: p.kernel_bytes, pts, jnp.asarray([1e5]))
    t_small = float(F.predict_micro(slow, small)[0])
    assert t_small == pytest.approx(1e8 / (0.5 * 10e9) + 4e9 / (0.6 * 50e9) + 80e-9 + 1e-6, rel=1e-4)
    assert float(F.predict_micro(slow, pts)[0]) == pytest.approx(t, rel=1e-4)  # 100 MB: full rate


def test_call_overhead_is_paid_once_per_call():
    """The per-call floor adds once to a call, however many kernels it runs (the
    per-kernel overhead adds once per kernel), and once to a decode step, where the
    chip file carries it as the host time per step."""
    base = _knobs(sram_capacity=1e-12, overlap_m1=1e-9)
    floor = _knobs(sram_capacity=1e-12, overlap_m1=1e-9, call_overhead=30e-6)
    for kernels in (1.0, 16.0):
        pts = F.MicroPoints(
            *(jnp.asarray([x]) for x in (1e8, 1e8, 4e9)),
            jnp.asarray([0]),
            *(jnp.asarray([x]) for x in (0.0, kernels, 1.0, 1e8 / kernels)),
        )
        added = float(F.predict_micro(floor, pts)[0] - F.predict_micro(base, pts)[0])
        assert added == pytest.approx(30e-6, rel=1e-3), kernels
    data = F.make_dataset([_decode_row(d_model=512, batch=1, context=1024)])
    assert float(F.predict(floor, data)[0] - F.predict(base, data)[0]) == pytest.approx(30e-6, rel=1e-3)
    assert float(F.to_chip(floor).host_step) == pytest.approx(30e-6)
    # Without GEMV chains nothing tells the floor from the per-kernel overhead: untrained, neutral.
    rows = [_micro_row("stream", s, s / 2, seconds=s / 20e9) for s in (1e4, 1e6, 1e8)]
    k0 = F.initial_knobs(rows)
    assert not bool(F.full_spec(rows, k0).log_call_overhead)
    assert float(F.to_chip(k0).host_step) <= 1e-11


def test_kernel_bytes_of_microbenchmarks():
    """The operand of one kernel: the matrix of a GEMV (chain), one layer's K (or V) of
    attention (chain), the array of a stream."""
    fmts = formats()
    chain = _micro_row("gemv", 8 * (128 * 512 + 129) * 4, 0, kernels=8.0, m=1.0, k=128.0, n=512.0)
    assert _kernel_bytes(chain, fmts) == 128 * 512 * 4
    bf16 = _micro_row("gemm", 0, 0, "bf16", m=4.0, k=1024.0, n=2048.0)
    assert _kernel_bytes(bf16, fmts) == 1024 * 2048 * 2
    kv = 8 * 2 * 4 * 4 * 64 * 512 * 4.0  # 8 layers of K and V: batch 4, 4 KV heads, context 512
    att = _micro_row("attention_decode", kv, 0, kernels=8.0) | {"working_set": kv}
    assert _kernel_bytes(att, fmts) == 4 * 4 * 64 * 512 * 4
    assert _kernel_bytes(_micro_row("stream", 3e6, 0), fmts) == 3e6
    # A chain without its shape: the bytes of one of its kernels.
    assert _kernel_bytes(_micro_row("gemv", 8e6, 0, kernels=8.0), fmts) == 1e6


def test_small_kernel_step_spares_the_inner_level():
    """A small kernel whose working set the inner cache holds streams at the inner rate;
    the same kernel streamed from the outer level pays the small-kernel efficiency."""
    k = _knobs(
        sram_capacity=1e9,
        knee=8.0,
        inner_capacity=2e6,
        inner_knee=30.0,
        inner_speedup_m1=1.0,
        kernel_overhead=1e-15,
        sram_latency=1e-15,
        small_kernel_efficiency=0.5,
        small_kernel_knee=30.0,
        small_kernel_bytes=4e6,
    )
    s = jnp.asarray([0.5e6, 64e6])
    kernel = jnp.asarray([0.5e6, 0.5e6])  # small kernels: a chain of 0.5 MB matrices
    pts = F.MicroPoints(s, s, jnp.zeros(2), jnp.zeros(2, jnp.int32), jnp.zeros(2), s / kernel, jnp.ones(2), kernel)
    bw = np.asarray(s / F.predict_micro(k, pts))
    assert bw[0] == pytest.approx(2 * 80e9, rel=0.02)  # inner level: 2x, no step
    assert bw[1] == pytest.approx(0.5 * 80e9, rel=0.02)  # outer level: half rate
    # The decode path's chip carries the same dilution.
    assert float(F.to_chip(k, jnp.asarray(0.5e6)).small_kernel_efficiency) == pytest.approx(1.0, abs=1e-3)
    assert float(F.to_chip(k, jnp.asarray(64e6)).small_kernel_efficiency) == pytest.approx(0.5, abs=1e-3)
    assert float(F.to_chip(k).small_kernel_efficiency) == pytest.approx(0.5, abs=1e-6)


def test_hit_fraction_knee_and_monotone():
    k = _knobs()
    s = jnp.geomspace(1e3, 1e11, 50)
    h = F.hit_fraction(k, s)
    assert float(F.hit_fraction(k, jnp.asarray(32e6))) == pytest.approx(0.5)
    assert bool(jnp.all(jnp.diff(h) <= 0)) and float(h[0]) > 0.99 and float(h[-1]) < 0.01
    assert float(F.hit_fraction(k, jnp.asarray(16e6))) > 0.7 > 0.3 > float(F.hit_fraction(k, jnp.asarray(64e6)))
    # Bandwidth vs working set falls from the SRAM rate to the DRAM rate.
    pts = F.MicroPoints(
        s, s, jnp.zeros_like(s), jnp.zeros(s.shape, jnp.int32), jnp.zeros_like(s), jnp.ones_like(s), jnp.ones_like(s), s
    )
    bw = s / F.predict_micro(_knobs(kernel_overhead=1e-15, sram_latency=1e-15, dram_latency=1e-15), pts)
    assert float(bw[-1]) == pytest.approx(10e9, rel=0.02) and float(bw[0]) == pytest.approx(80e9, rel=0.02)


@pytest.mark.slow
def test_decode_prediction_is_the_core():
    """A decode row is priced by costmodel.decode_cost on to_chip(knobs)."""
    k = _knobs()
    row = _decode_row(d_model=512, batch=4, context=1024)
    data = F.make_dataset([row])
    model = cm.Model(n_layers=4, d_model=512, n_heads=4, n_kv_heads=4, head_dim=64, d_ff=1536, vocab=2048)
    w = cm.Workload(model, cm.make_scenario(batch=4, context=1024, weights="f32", kv="f32"))
    traffic = cm.lower_traffic(w)
    expected = cm.decode_cost(w, F.to_chip(k), F.decode_placement(k, traffic)).seconds_per_step
    assert float(F.predict(k, data)[0]) == pytest.approx(float(expected), rel=1e-5)
    # Hard placement: what `evaluate --chip` does with the written chip file.
    hard = cm.decode_cost(w, F.to_chip(k), cm.policy_placement("sram", traffic, F.to_chip(k))).seconds_per_step
    assert float(F.predict(k, data, hard=True)[0]) == pytest.approx(float(hard), rel=1e-5)


@pytest.mark.slow
def test_loss_gradients_finite_and_match_finite_differences(x64):
    rows = [_micro_row("stream", s, s / 2, seconds=s / 20e9) for s in (1e4, 1e6, 1e8, 1e9)]
    rows += [_micro_row("gemm", 3e6, 2e9, seconds=0.05, m=8.0), _decode_row(seconds=2e-3)]
    data = F.make_dataset(rows)
    meas = jnp.asarray(data.measured)
    k = _knobs(small_kernel_efficiency=0.5, small_kernel_bytes=3e7, call_overhead=5e-6)  # a live step and floor
    loss = jax.jit(lambda k: jnp.mean((jnp.log(_predict(k, data)) - jnp.log(meas)) ** 2))
    g = jax.jit(jax.grad(loss))(k)
    for name in F.KNOB_NAMES:
        gv = float(getattr(g, name))
        assert math.isfinite(gv), name
        eps = 1e-5
        up = eqx.tree_at(lambda t: getattr(t, name), k, getattr(k, name) + eps)
        dn = eqx.tree_at(lambda t: getattr(t, name), k, getattr(k, name) - eps)
        fd = (float(loss(up)) - float(loss(dn))) / (2 * eps)
        assert gv == pytest.approx(fd, rel=1e-3, abs=1e-7), name


# --- fitting ----------------------------------------------------------------------


def _synthetic_rows():
    from calibration.measure import plan

    p = plan(quick=False)
    rows = [_micro_row("stream", s, s / 2) for s in p.stream_sizes]
    for dt, b in (("f32", 4), ("bf16", 2)):
        rows += [
            _micro_row("gemv", (k * n + k + n) * b, 2 * k * n, dt, k=float(k), n=float(n)) for k, n in p.gemv_shapes
        ]
        rows += [
            _micro_row("gemm", (m * k + k * n + m * n) * b, 2 * m * k * n, dt, m=float(m), k=float(k), n=float(n))
            for m, k, n in p.gemm_shapes
        ]
    for k, n, c in p.chains:
        row = _micro_row("gemv", c * (k * n + k + 1) * 4, 2 * c * k * n)
        rows.append(row | {"kernels": float(c), "m": 1.0, "k": float(k), "n": float(n)})
    hd = p.head_dim
    for b, t, h, kvh in p.attention:
        row = _micro_row("attention_decode", 8.0 * b * t * kvh * hd, 4.0 * b * h * hd * t)
        rows.append(row | {"n_heads": float(h), "n_kv_heads": float(kvh)})
    return rows


@pytest.mark.slow
def test_recovery_within_uncertainty():
    """A synthetic trace from known parameters plus 3% noise: the fit recovers them."""
    truth = _knobs(
        sram_capacity=20e6,
        knee=1.5,
        overlap_m1=0.3,
        inner_capacity=2e6,
        inner_speedup_m1=2.0,
        hot_speedup_m1=0.5,
        half_rate_rows=1.5,
        small_kernel_bytes=3e6,
        small_kernel_efficiency=0.5,
        small_kernel_knee=8.0,
        flops_f32=200e9,  # as measured here: the in-cache streams memory-bound, so B_sram shows
        call_overhead=3e-6,  # a floor per call, beside the 1 µs per kernel
    )
    rows = _synthetic_rows()
    clean = np.asarray(F.predict(truth, F.make_dataset(rows)))
    noise = np.exp(np.random.default_rng(0).normal(0, 0.03, len(rows)))
    for r, t in zip(rows, clean * noise):
        r["seconds"] = float(t)
    data = F.make_dataset(rows)
    k0 = F.initial_knobs(rows)
    # A weak prior: the default one (1e-4) holds knobs a real trace cannot see near
    # their physical start, which biases a recovery by more than the noise does.
    fit = F.fit_knobs(data, k0, F.full_spec(rows, k0), prior=1e-6)
    assert fit.status == F.FitStatus.converged and fit.status_name == "converged"
    checked = []
    for name in F.KNOB_NAMES:
        sd = fit.log_std[name]
        err = abs(float(getattr(fit.knobs, name)) - float(getattr(truth, name)))
        if math.isfinite(sd) and sd < 0.5:
            assert err <= 3 * sd + 0.01, (name, err, sd)
            checked.append(name)
    for must in ("log_sram_capacity", "log_sram_bandwidth", "log_dram_bandwidth", "log_flops_f32", "log_call_overhead"):
        assert must in checked, (must, fit.log_std[must])
    # Residuals of the recovered model are at the noise level.
    pred = np.asarray(F.predict(fit.knobs, data))
    assert F.mape(pred, data.measured) < 0.05


@pytest.mark.slow
def test_unconverged_fit_says_so():
    rows = _synthetic_rows()[:20]
    data = F.make_dataset(rows)
    k0 = F.initial_knobs(rows)
    fit = F.fit_knobs(data, k0, F.full_spec(rows, k0), adam_steps=2, lbfgs_steps=0)
    assert fit.status == F.FitStatus.max_steps_reached and fit.status_name == "max_steps_reached"


def test_filter_spec_freezes_leaves():
    rows = _synthetic_rows()[:30]
    data = F.make_dataset(rows)
    k0 = F.roofline_knobs(F.initial_knobs(rows))
    fit = F.fit_knobs(data, k0, F.roofline_spec(k0), adam_steps=50, lbfgs_steps=0)
    assert fit.trained == ("log_dram_bandwidth", "log_flops_f32")
    for name in F.KNOB_NAMES:
        if name not in fit.trained:
            assert float(getattr(fit.knobs, name)) == float(getattr(k0, name)), name


# --- the honest test on the shipped CPU trace ---------------------------------------


@pytest.fixture(scope="module")
def shipped_result(tmp_path_factory):
    if not SHIPPED.exists():
        pytest.skip("no shipped trace")
    out = tmp_path_factory.mktemp("cal") / "cpu.toml"
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        status = main(
            ["calibrate", str(SHIPPED), "--holdout", "decode_step", "--dtypes", "f32", "--out", str(out), "--json"]
        )
    assert status == 0
    return json.loads(buf.getvalue()), out


@pytest.mark.slow
def test_holdout_decode_steps_on_shipped_trace(shipped_result):
    """Fit on microbenchmarks only; predict the end-to-end decode steps."""
    r, _ = shipped_result
    assert r["status"] == "converged"
    assert r["n_holdout"] >= 10 and r["n_train"] >= 40
    assert r["per_kind_mape"].keys() >= {"holdout.decode_step", "train.stream"}
    # Measured on a shared 2-core VM (see data/traces/README.md): the ranking of unseen
    # decode configurations is right and the full model beats the plain roofline by
    # far (the 15% goal is the test below).
    assert r["holdout_rank_correlation"] >= 0.97
    assert r["holdout_mape"] < 0.5 * r["baseline"]["holdout_mape"]
    assert r["train_mape"] < 0.5 * r["baseline"]["train_mape"]
    assert r["beats_baseline_on_holdout"] is True
    for name in ("sram_bandwidth", "dram_bandwidth", "sram_capacity", "flops_f32", "overlap_p"):
        p = r["parameters"][name]
        assert p["unit"] and p["value"] > 0 and "uncertainty_factor" in p


@pytest.mark.slow
def test_holdout_goal_15_percent(shipped_result):
    """The issue's goal: held-out MAPE <= 15% on the shipped CPU trace (0.142 measured).
    The fitted small-kernel step sits between the 2 MB matrices the chains stream at half
    rate and the 3 MB ones they stream at full rate."""
    r, _ = shipped_result
    assert r["holdout_mape"] <= 0.15
    p = r["parameters"]
    assert 2.0 <= p["small_kernel_bytes"]["value"] <= 3.2  # MB
    assert 0.4 <= p["small_kernel_efficiency"]["value"] <= 0.7


@pytest.mark.slow
def test_written_chip_file_evaluates(shipped_result):
    r, out = shipped_result
    info = chip_info(str(out))
    assert info.placement == "sram" and info.max_chips == 1
    dram = float(info.chip.tiers.bandwidth[2]) / 1e9
    assert dram == pytest.approx(r["parameters"]["dram_bandwidth"]["value"], rel=1e-3)
    # The kernel fields the fit adds reach the chip that `evaluate --chip` builds.
    p = r["parameters"]
    assert float(info.chip.attention_efficiency) == pytest.approx(p["attention_efficiency"]["value"], rel=1e-3)
    assert float(info.chip.half_rate_rows) == pytest.approx(p["half_rate_rows"]["value"], rel=1e-3)
    assert float(info.chip.tiers.compute_feed[2]) == pytest.approx(p["dram_compute_feed"]["value"], rel=1e-3)
    # The small-kernel step: MB in the report and the chip file, bytes in the Chip.
    assert float(info.chip.small_kernel_bytes) == pytest.approx(p["small_kernel_bytes"]["value"] * 1e6, rel=1e-3)
    assert float(info.chip.small_kernel_efficiency) == pytest.approx(p["small_kernel_efficiency"]["value"], rel=1e-3)
    assert float(info.chip.small_kernel_knee) == pytest.approx(p["small_kernel_knee"]["value"], rel=1e-3)
    assert all(Path(p).exists() for p in r["plots"])


def test_chip_file_holds_the_fitted_chip(tmp_path):
    """The chip file is `to_chip(knobs)` (DRAM capacity: the machine's memory) through the
    chip-file schema: every leaf reads back to six significant digits."""
    k = _knobs(small_kernel_bytes=3e6, small_kernel_efficiency=0.5)
    spec = jax.tree_util.tree_map(lambda _: True, k)
    fit = F.Fit(k, k, spec, F.FitStatus.converged, 0.01, 0.0, 1, F.KNOB_NAMES, {n: 0.1 for n in F.KNOB_NAMES})
    assert fit.status_name == "converged"
    result = {"parameters": F.parameter_table(fit), "holdout_kinds": [], "train_mape": 0.1, "holdout_mape": None}
    result["status"] = fit.status_name
    path = tmp_path / "chip.toml"
    path.write_text(F.chip_toml(fit, result, "costmodel calibrate t.csv", ["t.csv"], "cpu: test", 16.0))
    assert path.read_text().startswith("# Calibrated chip file")
    info = chip_info(str(path))
    assert info.placement == "sram" and info.max_chips == 1 and "fit status converged" in info.source
    expected = F.to_chip(k)
    expected = expected.replace(
        tiers=expected.tiers.replace(capacity=expected.tiers.capacity.at[2].set(16e9)), power_cap=1e6
    )
    for got, want in zip(jax.tree_util.tree_leaves(info.chip), jax.tree_util.tree_leaves(expected)):
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=5e-6)


def test_shipped_calibrated_chip_loads():
    path = ROOT / "data" / "calibrated" / "cpu.toml"
    if not path.exists():
        pytest.skip("no calibrated chip shipped")
    info = chip_info("cpu")
    assert float(info.chip.tiers.capacity[0]) > 0 and "fitted" in info.source


# --- measuring (a tiny plan) --------------------------------------------------------


def test_plan_points_describe_the_rows_without_measuring():
    """Each benchmark family's function returns its points' rows before anything is timed."""
    from calibration.measure import plan, plan_points
    from calibration.trace import KINDS

    for quick, n in ((True, 35), (False, 142)):
        points = plan_points(plan(quick), KINDS, jax.devices()[0])
        assert len(points) == n and len({p.row["label"] for p in points}) == n
        assert not any({"seconds", "spread_seconds", "reps"} & p.row.keys() for p in points)
    points = plan_points(plan(True), ("gemm",), jax.devices()[0])
    assert {p.row["kind"] for p in points} == {"gemm"}


@pytest.mark.parametrize(
    "old, new, name",
    [
        ("calibration.bench", "calibration.measure", "run_bench"),
        ("calibration.transformer", "calibration.measure.transformer", "Config"),
        ("calibration.calibrate", "calibration.fit", "calibrate"),
    ],
)
def test_old_module_paths_warn_and_reexport(old, new, name):
    import importlib
    import sys

    import calibration

    with pytest.warns(DeprecationWarning, match=old):
        module = importlib.reload(sys.modules[old]) if old in sys.modules else importlib.import_module(old)
    assert getattr(module, name) is getattr(importlib.import_module(new), name)
    if old == "calibration.calibrate":
        # The package attribute `calibration.calibrate` is now the old module: it still calls the fit.
        assert calibration.calibrate is module and callable(module)


def test_bench_tiny_plan():
    from calibration.measure import Config, Plan, run_bench

    p = Plan(
        stream_sizes=(64 * 1024,),
        gemv_shapes=((256, 256),),
        gemm_shapes=((4, 128, 128),),
        chains=((64, 128, 3),),
        dtypes=("f32",),
        attention=((1, 64, 2, 1),),
        head_dim=16,
        decode_models=(Config("t", 1, 32, 2, 1, 16, 64, 64),),
        decode_points=((1, 16),),
        reps=4,
        target_seconds=0.001,
        passes=2,
        attention_chains=((2, 32, 2, 1, 3),),
    )
    rows = run_bench(the_plan=p, progress=False)
    kinds = ["stream", "gemv", "gemv", "gemm", "attention_decode", "attention_decode", "decode_step"]
    assert [r["kind"] for r in rows] == kinds
    assert rows[1]["kernels"] == 3.0 and rows[1]["bytes"] == 3 * (64 * 128 + 64 + 1) * 4
    # The attention chain: 3 layers' caches (K and V of batch 2, context 32, 1 KV head).
    assert rows[5]["kernels"] == 3.0 and rows[5]["working_set"] == 3 * 2 * 2 * 32 * 1 * 16 * 4
    assert all(r["seconds"] > 0 and r["spread_seconds"] >= 0 and r["reps"] == 4.0 for r in rows)
    assert rows[-1]["n_kv_heads"] == 1.0 and rows[0]["device"].startswith("cpu")
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        assert len(load_trace(save_trace(rows, Path(d) / "t.csv"))) == len(rows)


def test_flax_decoder_has_the_cost_model_parameter_count():
    from calibration.measure.transformer import Config, init

    cfg = Config("t", 2, 64, 4, 2, 16, 96, 128)
    _, params, *_ = init(cfg, 1, 8)
    norms = sum(
        x.size for path, x in jax.tree_util.tree_leaves_with_path(params) if "norm" in jax.tree_util.keystr(path)
    )
    total = sum(x.size for x in jax.tree_util.tree_leaves(params))
    model = cm.Model(n_layers=2, d_model=64, n_heads=4, n_kv_heads=2, head_dim=16, d_ff=96, vocab=128)
    assert total - norms == cfg.n_params == int(model.n_params)
