"""The serving stack's unhidden host time (`costmodel.host_seconds`): a serial term per
step and per sequence, set by a framework profile, fitted on serving rows."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import costmodel as cm
from costmodel import validate_serving as vs
from costmodel.evaluation import apply_framework, apply_host
from costmodel.io import InputError, chip_info, chip_presets
from costmodel.io.frameworks import ENGINE_HOST_FIELDS, HOST_FIELDS, load_frameworks

from helpers import load_script


def _cost(chip, batch=16, context=2048, groups=1.0):
    w = cm.Workload(cm.model_preset("llama-3-8b"), cm.Scenario(batch=batch, context=context, micro_batches=groups))
    return cm.decode_cost(w, chip, cm.policy_placement("dram", cm.lower_traffic(w), chip))


def _profile_file(tmp_path, field: str):
    """A one-profile frameworks file with `field` (a TOML line) among its numbers."""
    path = tmp_path / "frameworks.toml"
    path.write_text(
        "[frameworks.x]\nmemory_efficiency = 1.0\ncompute_efficiency = 1.0\nkernel_overhead = 1.0\n"
        f'link_latency = 1.0\n{field}\nsource = "t"\n'
    )
    return path


def test_closed_form_on_a_small_case(x64):
    """host_step + host_per_sequence x batch adds to the step, and the static power
    runs through it; bytes, FLOPs and dynamic energy are unchanged."""
    chip = cm.chip_preset("h100-sxm")
    base = _cost(chip)
    hosted = _cost(chip.replace(host_step=2e-3, host_per_sequence=1e-4))
    added = 2e-3 + 1e-4 * 16
    assert float(hosted.seconds_per_step - base.seconds_per_step) == pytest.approx(added, rel=1e-12)
    assert float(hosted.serial_seconds - base.serial_seconds) == pytest.approx(added, rel=1e-12)
    assert float(hosted.static_joules - base.static_joules) == pytest.approx(float(chip.static_power) * added, rel=1e-9)
    np.testing.assert_array_equal(np.asarray(hosted.tier_bytes), np.asarray(base.tier_bytes))
    assert float(hosted.flops) == float(base.flops)
    assert float(cm.host_seconds(16.0, chip.replace(host_step=2e-3, host_per_sequence=1e-4))) == pytest.approx(added)


def test_per_pass_with_micro_batches(x64):
    """With G groups on P >= G stages a step is one pass: the host time of one group's
    sequences (batch / G) is in it once."""
    chip = cm.chip_preset("h100-sxm").replace(pipeline_parallel=4)
    base = _cost(chip, batch=16, groups=4.0)
    hosted = _cost(chip.replace(host_step=1e-3, host_per_sequence=1e-4), batch=16, groups=4.0)
    assert float(hosted.seconds_per_step - base.seconds_per_step) == pytest.approx(1e-3 + 1e-4 * 4, rel=1e-9)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["h100-sxm", "groq-lpu", "hbm-pim-gpu", "m2-max-30c"])
def test_more_host_time_never_speeds_a_step(name):
    chip = cm.chip_preset(name)
    times = [
        float(_cost(chip.replace(host_step=h, host_per_sequence=p)).seconds_per_step)
        for h, p in ((0, 0), (1e-4, 0), (1e-4, 1e-5), (1e-3, 1e-5), (1e-3, 1e-4))
    ]
    assert all(b >= a for a, b in zip(times, times[1:])), times


def test_gradients_match_finite_differences(x64):
    chip = cm.chip_preset("a100-80gb-sxm").replace(host_step=1e-3, host_per_sequence=5e-5)

    def seconds(h):
        return _cost(chip.replace(host_step=h[0], host_per_sequence=h[1]), batch=24).seconds_per_step

    h = jnp.asarray([1e-3, 5e-5])
    grad = np.asarray(jax.grad(seconds)(h))
    eps = 1e-7
    fd = [(float(seconds(h.at[i].add(eps))) - float(seconds(h.at[i].add(-eps)))) / (2 * eps) for i in range(2)]
    np.testing.assert_allclose(grad, fd, rtol=1e-6)
    np.testing.assert_allclose(grad, [1.0, 24.0], rtol=1e-9)


def test_neutral_by_default():
    """No preset has host time; the batch-1 profiles (fitted before the term) add none,
    so `costmodel validate` is unchanged by it."""
    for name in chip_presets():
        chip = cm.chip_preset(name)
        assert float(chip.host_step) == 0.0 and float(chip.host_per_sequence) == 0.0, name
    frameworks = load_frameworks()
    for name in ("native", "gpt-fast", "llama.cpp", "trt-llm", "vllm"):
        assert frameworks[name].host is None
        chip = apply_framework(chip_info("h100-sxm"), name).chip
        assert float(chip.host_step) == 0.0 and float(chip.host_per_sequence) == 0.0


def test_serving_profiles_carry_their_fitted_host_time():
    frameworks = load_frameworks()
    rows = {r.id: r for r in vs.load_serving_rows()}
    for name in ("vllm-0.6", "sglang", "nim"):
        f = frameworks[name]
        # vllm-0.6 also fits its offline engine's host times on two decode rows (tests/test_engine_host.py)
        assert set(f.fit) - set(HOST_FIELDS) <= set(ENGINE_HOST_FIELDS) and set(HOST_FIELDS) <= set(f.fit)
        served = [i for i in f.fitted_on if i in rows]
        assert len(served) == 2 and len(f.fitted_on) == 2 + 2 * bool(set(f.fit) & set(ENGINE_HOST_FIELDS))
        assert all(rows[i].status == "fit" and rows[i].framework == name for i in served)
        chip = apply_framework(chip_info("a100-80gb-sxm"), name).chip
        assert float(chip.host_step) == pytest.approx(f.host[0] * 1e-6)
        assert float(chip.host_per_sequence) == pytest.approx(f.host[1] * 1e-6)
    # Every fit row is named by its framework's profile or by the chips' prefill
    # calibration (benchmarks/prefill_calibration.py), and no test row is.
    from pathlib import Path

    calibration = load_script(Path(__file__).resolve().parents[1] / "benchmarks" / "prefill_calibration.py")
    fitted = {i for f in frameworks.values() for i in f.fitted_on} | set(calibration.ROWS)
    assert {r.id for r in rows.values() if r.status == "fit"} <= fitted
    # its bursts are fit (their throughput prices their prefill); its steady rows are not
    assert all(rows[i].status == "fit" for i in calibration.ROWS if rows[i].arrival == "burst")


@pytest.mark.slow
@pytest.mark.parametrize(
    ("name", "chip", "family"),
    [
        ("tgi", "h100-sxm", "vllm"),
        ("tgi", "mi300x", "vllm-0.6-rocm"),
        ("vllm-0.5", "a100-80gb-sxm", "vllm"),
        ("lmdeploy-0.1", "a100-80gb-sxm", "lmdeploy-0.2"),
    ],
)
def test_engines_without_rows_carry_their_familys_values_and_are_never_faster_than_the_bare_chip(name, chip, family):
    """A profile that fits nothing takes its kernel concurrency from its engine family
    (on the chip's backend), and its host time where it gives one; like every profiled
    engine it is no faster than the bare chip (the ideal engine)."""
    frameworks = load_frameworks()
    assert not frameworks[name].fit and not frameworks[name].fitted_on
    own = apply_framework(chip_info(chip), name).chip
    assert float(own.bytes_in_flight) == pytest.approx(frameworks[family].value("bytes_in_flight_KB") * 1e3)
    bare = chip_info(chip).chip
    for batch in (1, 64):
        assert float(_cost(own, batch=batch).seconds_per_step) >= float(_cost(bare, batch=batch).seconds_per_step)


def test_the_fit_shortcut_is_the_full_evaluation():
    """`with_host` (host time added to a curve computed without it) equals serving
    the row with the host time in the chip, TPOT, TTFT and batch."""
    row = next(r for r in vs.load_serving_rows() if r.id == "sglang030-a100-llama31-8b-bf16-sharegpt-rps8")
    host = (1500.0, 200.0)
    quick = vs._at_load(row, *vs.with_host(row, vs._curve(row, (0.0, 0.0)), host))
    full = vs._at_load(row, *vs._curve(row, host))
    assert quick.tpot_ms == pytest.approx(full.tpot_ms, rel=1e-5)
    assert quick.ttft_ms == pytest.approx(full.ttft_ms, rel=1e-5)
    assert quick.batch == pytest.approx(full.batch, rel=1e-5)


def test_apply_host_replaces_the_chips_own():
    chip = cm.chip_preset("h100-sxm").replace(host_step=9e-3)
    out = apply_host(chip, (100.0, 10.0))
    assert float(out.host_step) == pytest.approx(1e-4) and float(out.host_per_sequence) == pytest.approx(1e-5)
    # A profile without host fields leaves the chip's own (`vllm`: fitted at batch 1).
    info = dataclasses.replace(chip_info("h100-sxm"), chip=chip)
    assert float(apply_framework(info, "vllm").chip.host_step) == pytest.approx(9e-3)


@pytest.mark.slow
def test_an_engines_memory_fraction_holds_fewer_sequences(tmp_path):
    """vLLM allocates 90 % of each GPU's memory (--gpu-memory-utilization): the DRAM
    tier's capacity, and nothing else, is scaled, so the largest batch that fits is
    smaller than on the bare chip; a fraction outside (0, 1] is a one-line error."""
    from costmodel.io import economics_preset
    from costmodel.serving import serve

    frameworks = load_frameworks()
    assert frameworks["vllm-0.6"].memory_fraction == 0.9 and frameworks["sglang"].memory_fraction == 1.0
    bare = chip_info("h100-sxm")
    own = apply_framework(bare, "vllm-0.6")
    np.testing.assert_allclose(np.asarray(own.chip.tiers.capacity), np.asarray(bare.chip.tiers.capacity) * [1, 1, 0.9])
    batches = np.arange(1.0, 257.0)
    largest = {}
    for name, info in (("bare", bare), ("vllm", dataclasses.replace(own, max_batch=None))):
        s = serve("llama-3-70b", info, economics_preset(), chips=4, context=4096, batches=batches)
        largest[name] = max(p.batch for p in s.curve(4, 1))
    assert largest["vllm"] < largest["bare"]
    for value in ("0.0", "1.5"):
        with pytest.raises(InputError, match=f"field 'memory_fraction' = {value}") as e:
            load_frameworks(_profile_file(tmp_path, f"memory_fraction = {value}"))
        assert "\n" not in str(e.value)


def test_bad_host_fields_and_unknown_serving_frameworks_are_one_line(tmp_path):
    for field, needle in (("host_step_us = -5", "host_step_us"), ('fit = ["host_time"]', "host_time")):
        with pytest.raises(InputError, match=needle):
            load_frameworks(_profile_file(tmp_path, field))
    rows = vs.serving_table_path().read_text()
    table = tmp_path / "serving.toml"
    table.write_text(rows.replace('framework = "sglang"', 'framework = "sglang-9"', 1))
    with pytest.raises(InputError, match=r"field 'framework' = 'sglang-9'"):
        vs.load_serving_rows(table)


def test_chip_files_write_the_host_fields():
    from costmodel.io.chips import chip_table

    chip = cm.chip_preset("h100-sxm").replace(host_step=1.5e-3, host_per_sequence=2e-4)
    table = chip_table(chip, name="t", source="test", placement="dram", max_chips=8)
    assert table["host_step_us"] == pytest.approx(1500.0) and table["host_per_sequence_us"] == pytest.approx(200.0)
    plain = chip_table(cm.chip_preset("h100-sxm"), name="t", source="test", placement="dram", max_chips=8)
    assert "host_step_us" not in plain and "host_per_sequence_us" not in plain  # at 0: left out, as before


@pytest.mark.slow
def test_an_engines_batch_cap_bounds_the_served_batch():
    """vLLM runs at most `--max-num-seqs` (256) sequences per step: `serve` keeps no
    larger batch, and a load beyond it is served at the cap, overloaded."""
    from costmodel.serving import serve

    info = apply_framework(chip_info("h100-sxm"), "vllm-0.6")
    assert info.max_batch == 256 and apply_framework(chip_info("h100-sxm"), "sglang").max_batch is None
    smaller = dataclasses.replace(chip_info("h100-sxm"), max_batch=64)
    assert apply_framework(smaller, "vllm-0.6").max_batch == 64  # the smaller cap holds
    econ = cm.economics_preset("N5")
    s = serve("llama-3-8b", info, econ, chips=1, context=512, batches=[64, 256, 512])
    assert {p.batch: p.feasible for p in s.points} == {64.0: True, 256.0: True, 512.0: False}
    uncapped = serve("llama-3-8b", chip_info("h100-sxm"), econ, chips=1, context=512, batches=[512])
    assert uncapped.points[0].feasible  # the memory holds it: only the engine's cap refuses it
    row = next(r for r in vs.load_serving_rows() if r.id == "dstack-h100x8-tp8-vllm063-llama31-405b-fp8-sharegpt-rps32")
    result = vs.evaluate_serving_row(row)
    assert result.overloaded and result.batch <= 256


def test_a_bad_batch_cap_is_one_line(tmp_path):
    with pytest.raises(InputError, match="max_batch"):
        load_frameworks(_profile_file(tmp_path, "max_batch = 0.5"))
