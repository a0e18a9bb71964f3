"""Dequantisation: the ALU work that unpacks quantised weights between their loads and
the matmul lengthens each in-flight slot of a latency-bound stream (Little's law)."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import costmodel as cm
from costmodel._core.channels import LITTLE_SHARPNESS
from costmodel._core.chip import DRAM
from costmodel._core.traffic import CLASS_IS_KV

from helpers import bounded_chip


F32_PEAK = 20e12  # FLOP/s: 10e12 lane instructions per second


def _chip(**changes):
    changes.setdefault("peak_flops", (F32_PEAK, 312e12, 624e12, 1248e12))
    changes.setdefault("bytes_in_flight", 6e3)
    return bounded_chip(**changes)


def _workload(ops=0.0, weight_bytes=1.0, batch=1):
    scenario = cm.Scenario(batch=batch, context=512, weight_bytes=weight_bytes, weight_dequant_ops=ops)
    return cm.Workload(cm.model_preset("llama-3-8b"), scenario)


def _cost(chip, ops=0.0, weight_bytes=1.0, batch=1):
    w = _workload(ops, weight_bytes, batch)
    return cm.decode_cost(w, chip, cm.policy_placement("dram", cm.lower_traffic(w), chip))


def test_dequant_seconds_closed_form():
    w = _workload(ops=1.875, weight_bytes=0.625)
    got = float(cm.dequant_seconds(6.25e9, w, _chip()))
    assert got == pytest.approx(1e10 * 1.875 / 10e12, rel=1e-6)  # 1e10 elements
    half = float(cm.dequant_seconds(6.25e9, w, _chip(compute_efficiency=0.5)))
    assert half == pytest.approx(2 * got, rel=1e-6)  # the sustained share of the peak
    assert float(cm.dequant_seconds(6.25e9, _workload(0.0, 0.625), _chip())) == 0.0
    no_f32 = _chip(peak_flops=jnp.asarray([0.0, 312e12, 624e12, 1248e12]))
    assert float(cm.dequant_seconds(6.25e9, w, no_f32)) == 0.0


def test_the_alu_time_lengthens_the_little_bound_and_bounds_the_stream_without_one():
    chip = _chip()
    in_flight = float(cm.chip_in_flight(chip))
    busy = 0.2e-12  # s per byte
    reachable = 2e12 * 0.9

    def soft_min(per_byte):
        return ((1 / reachable) ** LITTLE_SHARPNESS + per_byte**LITTLE_SHARPNESS) ** (-1 / LITTLE_SHARPNESS)

    bw = np.asarray(cm.stream_bandwidth(chip.tiers, in_flight, busy))
    assert bw[DRAM] == pytest.approx(soft_min(4e-7 / in_flight + busy), rel=1e-5)
    # No bytes-in-flight bound: the ALUs' throughput (1 / busy) bounds the stream.
    free = np.asarray(cm.stream_bandwidth(chip.tiers, 0.0, busy))
    assert free[DRAM] == pytest.approx(soft_min(busy), rel=1e-5)
    # A profile's "unbounded" bytes in flight (1e9 kB per unit) reads as no bound.
    huge = np.asarray(cm.stream_bandwidth(chip.tiers, 1e14, busy))
    assert huge[DRAM] == pytest.approx(free[DRAM], rel=1e-4)
    # Neither: the plain stream.
    plain = np.asarray(cm.stream_bandwidth(chip.tiers, 0.0, 0.0))
    np.testing.assert_allclose(plain, np.asarray(chip.tiers.effective_bandwidth), rtol=1e-6)


def test_batched_tiers_take_a_batched_busy_time():
    """The calibration fit streams batched tiers (one row per trace point)."""
    chip = _chip()
    tiers = jax.tree.map(lambda x: jnp.stack([x, x]), chip.tiers)
    tiers = eqx.tree_at(lambda t: t.capacity, tiers, chip.tiers.capacity)
    full_rate = jnp.asarray([[0.0, 0.0, 1e9], [0.0, 0.0, 2e9]])
    t = np.asarray(cm.stream_seconds(full_rate, tiers, 0.0, jnp.asarray([1e-4, 0.0])))
    assert t.shape == (2, 3) and t[0, DRAM] > 1e9 / (2e12 * 0.9) and t[1, DRAM] == pytest.approx(2e9 / 1.8e12)


def test_a_decode_step_on_a_small_case():
    """The DRAM channel streams the weights' bytes at the bound's bandwidth and the K/V's
    at the tier's (`class_in_flight`), the weights' unpacking time spread over them all."""
    chip = _chip()
    ops, wb = 1.0, 1.0
    plain, quant = _cost(chip), _cost(chip, ops, wb)
    w = _workload(ops, wb)
    t = cm.lower_traffic(w, buckets=False)
    # Each class's full-rate bytes, all in DRAM (the same bytes either way).
    full = np.asarray(t.read_bytes + t.writes) / np.asarray(cm.class_stream_efficiency(t, chip))
    kv = np.asarray(CLASS_IS_KV)
    weight_full, kv_full = float(np.sum(full[~kv])), float(np.sum(full[kv]))
    assert weight_full > 0 and kv_full > 0
    in_flight = cm.chip_in_flight(chip)

    def dram(in_flight, per_byte=0.0):
        return float(cm.stream_bandwidth(chip.tiers, in_flight, per_byte)[DRAM])

    assert float(plain.tier_seconds[DRAM]) == pytest.approx(
        weight_full / dram(in_flight) + kv_full / dram(0.0), rel=1e-5
    )
    weight_bytes = float(np.sum(np.where(kv, 0.0, np.asarray(t.read_bytes))))
    busy = float(cm.dequant_seconds(weight_bytes, w, chip))
    assert busy == pytest.approx(weight_bytes / wb * ops / (F32_PEAK / 2), rel=1e-6)
    per_byte = busy / (weight_full + kv_full)
    assert float(quant.tier_seconds[DRAM]) == pytest.approx(
        weight_full / dram(in_flight, per_byte) + kv_full / dram(0.0, per_byte), rel=1e-5
    )
    assert float(quant.tier_seconds[DRAM]) > float(plain.tier_seconds[DRAM])


def test_neutral_defaults():
    """No instructions leave a format as stored; an ALU far faster than the stream leaves
    a step nearly as it was."""
    chip = _chip()
    free = chip.replace(bytes_in_flight=0.0)
    fast_alu = free.replace(peak_flops=jnp.asarray([1e18, 312e12, 624e12, 1248e12]))
    assert float(_cost(fast_alu, 2.0).seconds_per_step) == pytest.approx(float(_cost(free).seconds_per_step), rel=1e-5)
    assert float(_cost(free, 2.0).seconds_per_step) > float(_cost(free).seconds_per_step)
    w = cm.Workload(cm.model_preset("llama-3-8b"), cm.make_scenario(batch=1, context=512, weights="int8"))
    assert float(w.scenario.weight_dequant_ops) == 0.0


def test_each_chip_unpacks_its_share_of_the_weights():
    """Under tensor parallelism each chip streams, and unpacks, 1/tp of the weights."""
    one, two = _chip(), _chip(tensor_parallel=2.0)
    extra = lambda c: float(_cost(c, 1.875, 0.625).tier_seconds[DRAM] - _cost(c, 0.0, 0.625).tier_seconds[DRAM])
    assert extra(two) == pytest.approx(extra(one) / 2, rel=0.05)


@pytest.mark.slow
@pytest.mark.parametrize("batch", [1, 32])
def test_monotone(batch):
    """More instructions never speed a step; more concurrency, less latency or a faster
    ALU never slow one."""
    chip = _chip()
    ops = jnp.linspace(0.0, 4.0, 9)
    times = np.asarray(jax.vmap(lambda o: _cost(chip, o, 0.625, batch).seconds_per_step)(ops))
    assert np.all(np.diff(times) >= -1e-12) and times[-1] > times[0]
    in_flight = jnp.geomspace(1e3, 64e3, 9)
    times = np.asarray(
        jax.vmap(lambda b: _cost(_chip(bytes_in_flight=b), 1.875, 0.625, batch).seconds_per_step)(in_flight)
    )
    assert np.all(np.diff(times) <= 1e-12)
    peaks = jnp.geomspace(5e12, 100e12, 9)

    def at_peak(p):
        return _cost(_chip(peak_flops=jnp.stack([p, 312e12, 624e12, 1248e12])), 1.875, 0.625, batch).seconds_per_step

    times = np.asarray(jax.vmap(at_peak)(peaks))
    assert np.all(np.diff(times) <= 1e-12)
    latency = jnp.geomspace(1e-7, 1e-6, 9)

    def at_latency(lat):
        c = _chip()
        return _cost(c.replace(tiers=c.tiers.replace(latency=jnp.stack([2e-7, 0.0, lat]))), 1.875, 0.625, batch)

    times = np.asarray(jax.vmap(lambda lat: at_latency(lat).seconds_per_step)(latency))
    assert np.all(np.diff(times) >= -1e-12)


@pytest.mark.slow
def test_gradients_match_finite_differences(x64):
    base = jax.tree.map(lambda x: jnp.asarray(x, jnp.float64), _chip())

    def f(x):
        ops, peak, in_flight = x
        chip = base.replace(peak_flops=base.peak_flops.at[0].set(peak), bytes_in_flight=in_flight)
        return _cost(chip, ops, 0.625).seconds_per_step

    x = jnp.asarray([1.875, F32_PEAK, 6e3], dtype=jnp.float64)
    g = np.asarray(jax.grad(f)(x))
    for i in range(3):
        h = 1e-6 * float(x[i])
        e = jnp.zeros(3, dtype=jnp.float64).at[i].set(h)
        fd = (float(f(x + e)) - float(f(x - e))) / (2 * h)
        assert g[i] == pytest.approx(fd, rel=1e-5, abs=1e-20), i
    assert g[0] > 0 and g[1] < 0 and g[2] < 0


# --- profiles ------------------------------------------------------------------------


def test_gpt_fast_unpacks_its_quantised_formats():
    from costmodel.io import load_frameworks

    f = load_frameworks()["gpt-fast"]
    assert f.dequant("int8") == 1.0 and f.dequant("int4_g32") == 1.875 and f.dequant("bf16") == 0.0
    assert f.dequant("int4") == f.dequant("int4_g32")  # one kernel, whatever the group size
    assert load_frameworks()["llama.cpp"].dequant("q4_0") == 0.0


def test_evaluate_with_a_framework_unpacks_and_without_does_not():
    slow = cm.evaluate("llama-2-7b", "a100-80gb-sxm", context=128, weights="int4_g32", framework="gpt-fast")
    assert float(slow.workload.scenario.weight_dequant_ops) == 1.875
    from costmodel.evaluation import apply_framework
    from costmodel.io import chip_info

    info = apply_framework(chip_info("a100-80gb-sxm"), "gpt-fast")
    import dataclasses

    fast = cm.evaluate("llama-2-7b", dataclasses.replace(info, dequant_ops=()), context=128, weights="int4_g32")
    assert float(fast.workload.scenario.weight_dequant_ops) == 0.0
    assert float(slow.cost.tokens_per_second) < float(fast.cost.tokens_per_second)
    bf16 = cm.evaluate("llama-2-7b", "a100-80gb-sxm", context=128, framework="gpt-fast")
    assert float(bf16.workload.scenario.weight_dequant_ops) == 0.0


def test_validate_prices_a_rows_unpacking():
    from costmodel import validate as v

    row = next(r for r in v.load_rows() if r.id == "gptfast-a100-llama2-7b-int4-tp1")
    frameworks = v.load_frameworks()
    with_ops = v.evaluate_rows([row], frameworks)[0].predicted
    import dataclasses

    frameworks["gpt-fast"] = dataclasses.replace(frameworks["gpt-fast"], dequant_ops=())
    without = v.evaluate_rows([row], frameworks)[0].predicted
    assert with_ops < 0.9 * without


@pytest.mark.parametrize("field", ["dequant_ops", "kv_dequant_ops"])
@pytest.mark.parametrize(
    ("table", "needle"),
    [("{ int9 = 1.0 }", "int9"), ("{ int8 = -1.0 }", "-1.0"), ("{ int8 = true }", "True"), ("3", "= 3:")],
)
def test_a_bad_dequant_table_is_one_line(tmp_path, field, table, needle):
    """The weights' and the KV cache's instruction tables are checked alike."""
    from costmodel.io import InputError, load_frameworks

    path = tmp_path / "frameworks.toml"
    path.write_text(
        "[frameworks.x]\nmemory_efficiency = 1.0\ncompute_efficiency = 1.0\nkernel_overhead = 1.0\n"
        f'link_latency = 1.0\n{field} = {table}\nfit = []\nfitted_on = []\nsource = "test"\n'
    )
    with pytest.raises(InputError) as e:
        load_frameworks(path)
    message = str(e.value)
    assert "\n" not in message and f"{field!r}" in message and needle in message and str(path) in message


def test_serve_unpacks_with_the_framework():
    import dataclasses

    from costmodel.evaluation import apply_framework
    from costmodel.io import chip_info, economics_preset
    from costmodel.serving import serve

    info = apply_framework(chip_info("a100-80gb-sxm"), "gpt-fast")
    grid = [1.0, 8.0]

    def tpots(i):
        s = serve("llama-2-7b", i, economics_preset(), chips=1, context=256, weights="int4_g32", batches=grid)
        return [p.tpot for p in s.points]

    slow, fast = tpots(info), tpots(dataclasses.replace(info, dequant_ops=()))
    assert all(a > b for a, b in zip(slow, fast))


def test_the_roofline_unpacks_as_the_step_does():
    """The plot's per-class rates (`class_rates`) price the unpacking: all-DRAM FFN
    weights reach their FLOPs over the step's own DRAM time for them."""
    import dataclasses

    from costmodel.report.roofline import class_rates

    e = cm.evaluate("llama-2-7b", "a100-80gb-sxm", context=128, weights="int4_g32", framework="gpt-fast")
    plain_workload = eqx.tree_at(lambda w: w.scenario.weight_dequant_ops, e.workload, jnp.asarray(0.0))
    plain = dataclasses.replace(e, workload=plain_workload)
    c = cm.CLASSES.index("weights.ffn")
    slow, fast = class_rates(e)[1][c], class_rates(plain)[1][c]
    # The ratio of rates is the ratio of DRAM times of a step that reads only these bytes
    # (the FFN is most of the weights; the unpacking is per weight byte either way).
    ratio = float(e.cost.tier_seconds[DRAM] / cm.decode_cost(plain_workload, e.chip, e.placement).tier_seconds[DRAM])
    assert fast / slow == pytest.approx(ratio, rel=0.03)
    assert fast / slow > 1.1


def test_float32_inputs_stay_float32_under_x64(x64):
    """The busy time takes the stream's dtype (a float32 sweep under float64 mode)."""
    with jax.enable_x64(False):
        chip = _chip()
        full_rate = jnp.asarray([0.0, 0.0, 1e9])
    assert full_rate.dtype == jnp.float32
    out = cm.stream_seconds(full_rate, chip.tiers, cm.chip_in_flight(chip), 1e-4)
    assert out.dtype == jnp.float32
