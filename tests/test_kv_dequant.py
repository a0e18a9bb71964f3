"""Unpacking a quantised KV cache: the decode-attention kernels' ALU work on each K/V
element each time a thread block reads it (`costmodel.kv_dequant_seconds`), charged to the
attention classes' compute."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import costmodel as cm
from costmodel._core.channels import kv_dequant_seconds
from costmodel._core.traffic import CLASS_IS_KV

from helpers import bounded_chip


F32_PEAK = 20e12  # FLOP/s: 10e12 lane instructions per second


def _chip(**changes):
    changes.setdefault("peak_flops", (F32_PEAK, 312e12, 624e12, 1248e12))
    changes.setdefault("serial_kernels", 1.0)
    return bounded_chip(bytes_in_flight=0.0, **changes)


def _workload(ops=0.0, batch=64, context=2048, model="llama-2-70b"):
    scenario = cm.Scenario(batch=batch, context=context, kv_bytes=0.53125, kv_dequant_ops=ops)
    return cm.Workload(cm.model_preset(model), scenario)


def _cost(chip, ops=0.0, **kw):
    w = _workload(ops, **kw)
    return cm.decode_cost(w, chip, cm.policy_placement("dram", cm.lower_traffic(w), chip))


def _kv_bytes(w):
    t = cm.lower_traffic(w, buckets=False)
    return float(jnp.sum(jnp.where(jnp.asarray(CLASS_IS_KV), t.read_bytes, 0.0))), t


def test_closed_form_and_the_reads_of_a_group():
    w = _workload(4.6)
    kv, t = _kv_bytes(w)
    elements = kv / 0.53125
    once = float(kv_dequant_seconds(kv, t, w, _chip()))
    assert once == pytest.approx(elements * 4.6 / 10e12, rel=1e-6)
    # One thread block per query head unpacks its group's K/V head once per query head:
    # Llama 2 70B's group of 8 unpacks every element 8 times.
    per_head = float(kv_dequant_seconds(kv, t, w, _chip(attention_kv_rereads=1.0)))
    assert per_head == pytest.approx(8 * once, rel=1e-6)
    assert float(kv_dequant_seconds(kv, t, w, _chip(compute_efficiency=0.5))) == pytest.approx(2 * once, rel=1e-6)
    assert float(kv_dequant_seconds(kv, t, _workload(0.0), _chip())) == 0.0
    no_f32 = _chip(peak_flops=jnp.asarray([0.0, 312e12, 624e12, 1248e12]))
    assert float(kv_dequant_seconds(kv, t, w, no_f32)) == 0.0


def test_an_alu_bound_attention_adds_its_unpacking_to_the_step():
    # Far more unpacking than streaming: each extra instruction per element adds its time
    # to the step (the attention classes' compute, in sequence with the GEMMs).
    chip = _chip(attention_kv_rereads=1.0)
    w = _workload(40.0)
    kv, t = _kv_bytes(w)
    a, b = _cost(chip, 40.0), _cost(chip, 80.0)
    extra = float(kv_dequant_seconds(kv, t, w, chip))  # 40 more instructions per read
    assert float(b.seconds_per_step - a.seconds_per_step) == pytest.approx(extra, rel=2e-3)
    assert float(b.compute_seconds - a.compute_seconds) == pytest.approx(extra, rel=1e-5)


def test_neutral_defaults():
    # No instructions: the FP32 lanes (which nothing else of a 16-bit step uses) move
    # nothing, on the presets as on the test chip; with instructions they do.
    w = cm.Workload(cm.model_preset("llama-3-8b"), cm.Scenario(batch=64, context=1024))
    assert float(w.scenario.kv_dequant_ops) == 0.0
    for p in (cm.chip_preset("h100-sxm"), cm.chip_preset("a100-80gb-sxm"), _chip(attention_kv_rereads=1.0)):
        slow_lanes = p.replace(peak_flops=p.peak_flops.at[0].multiply(0.01))
        place = cm.policy_placement("dram", cm.lower_traffic(w), p)
        assert float(cm.decode_cost(w, p, place).seconds_per_step) == float(
            cm.decode_cost(w, slow_lanes, place).seconds_per_step
        )
        unpacking = cm.Workload(w.model, cm.Scenario(batch=64, context=1024, kv_dequant_ops=4.6))
        assert float(cm.decode_cost(unpacking, slow_lanes, place).seconds_per_step) > float(
            cm.decode_cost(unpacking, p, place).seconds_per_step
        )


@pytest.mark.slow
@pytest.mark.parametrize("rereads", [0.0, 1.0])
def test_monotone(rereads):
    chip = _chip(attention_kv_rereads=rereads)
    ops = jnp.linspace(0.0, 20.0, 11)
    times = np.asarray(jax.vmap(lambda o: _cost(chip, o).seconds_per_step)(ops))
    assert np.all(np.diff(times) >= -1e-12)  # more instructions never speed a step
    peaks = jnp.linspace(5e12, 80e12, 9)

    def at_peak(p):
        return _cost(chip.replace(peak_flops=chip.peak_flops.at[0].set(p)), 6.0).seconds_per_step

    by_peak = np.asarray(jax.vmap(at_peak)(peaks))
    assert np.all(np.diff(by_peak) <= 1e-12)  # more FP32 lanes never slow it


def test_jit_and_vmap_agree():
    chip = _chip(attention_kv_rereads=1.0)
    ops = jnp.asarray([0.0, 2.0, 4.6])
    looped = [float(_cost(chip, float(o)).seconds_per_step) for o in ops]
    mapped = np.asarray(jax.jit(jax.vmap(lambda o: _cost(chip, o).seconds_per_step))(ops))
    np.testing.assert_allclose(mapped, looped, rtol=1e-6)


@pytest.mark.slow
def test_gradients_match_finite_differences(x64):
    base = jax.tree.map(lambda x: jnp.asarray(x, jnp.float64), _chip(attention_kv_rereads=1.0))

    def f(x):
        ops, peak = x
        return _cost(base.replace(peak_flops=base.peak_flops.at[0].set(peak)), ops).seconds_per_step

    x = jnp.asarray([4.6, F32_PEAK], dtype=jnp.float64)
    g = np.asarray(jax.grad(f)(x))
    for i in range(2):
        h = 1e-6 * float(x[i])
        e = jnp.zeros(2, dtype=jnp.float64).at[i].set(h)
        fd = (float(f(x + e)) - float(f(x - e))) / (2 * h)
        assert g[i] == pytest.approx(fd, rel=1e-5, abs=1e-20), i
    assert g[0] > 0 and g[1] < 0


def test_each_chip_unpacks_its_share_and_pim_unpacks_nothing():
    # Tensor parallelism: each chip reads and unpacks 1/tp of every cache.
    chip = _chip(attention_kv_rereads=1.0)
    a, b = _cost(chip, 0.0), _cost(chip, 40.0)
    a2, b2 = _cost(chip.replace(tensor_parallel=2.0), 0.0), _cost(chip.replace(tensor_parallel=2.0), 40.0)
    one = float(b.compute_seconds - a.compute_seconds)
    assert float(b2.compute_seconds - a2.compute_seconds) == pytest.approx(one / 2, rel=1e-5)
    # A cache in PIM is computed on in place: nothing streams to the die to be unpacked.
    pim_chip = cm.make_chip(
        capacity=(40e6, 200e9, 80e9),
        bandwidth=(5e12, 8e12, 2e12),
        peak_flops=(F32_PEAK, 312e12, 624e12, 1248e12),
        pim_flops=50e12,
    ).replace(attention_kv_rereads=1.0)
    w0, w1 = _workload(0.0), _workload(40.0)
    place = cm.policy_placement("pim_kv", cm.lower_traffic(w0), pim_chip)
    c0, c1 = cm.decode_cost(w0, pim_chip, place), cm.decode_cost(w1, pim_chip, place)
    assert float(c1.seconds_per_step) == pytest.approx(float(c0.seconds_per_step), rel=1e-6)


def test_make_scenario_refuses_a_negative_count():
    from costmodel.io import InputError, make_scenario

    with pytest.raises(InputError, match="kv_dequant_ops = -1.0"):
        make_scenario(kv="qoq_kv4", kv_dequant_ops=-1.0)


# --- profiles ------------------------------------------------------------------------


def test_qserve_and_vllm_v0_fp8_unpack_their_caches_and_nothing_else_does():
    from costmodel.io import load_frameworks

    frameworks = load_frameworks()
    q = frameworks["qserve"]
    assert q.kv_dequant("qoq_kv4") == 5.1 and q.kv_dequant("fp8") == 0.0 and q.kv_rereads == 1.0
    # vLLM 0.6's PagedAttention fallback for an FP8 cache (tests/test_cached_rereads.py).
    assert frameworks["vllm-0.6"].kv_dequant_ops == (("fp8", 6.14),)
    assert all(not f.kv_dequant_ops for name, f in frameworks.items() if name not in ("qserve", "vllm-0.6"))


def test_evaluate_and_validate_price_the_unpacking():
    from costmodel import validate as v
    from costmodel.evaluation import apply_framework
    from costmodel.io import chip_info

    e = cm.evaluate(
        "llama-3-8b", "a100-80gb-sxm", batch=64, context=1024, weights="qoq_w4a8", kv="qoq_kv4", framework="qserve"
    )
    assert float(e.workload.scenario.kv_dequant_ops) == pytest.approx(5.1)
    info = dataclasses.replace(apply_framework(chip_info("a100-80gb-sxm"), "qserve"), kv_dequant_ops=())
    free = cm.evaluate("llama-3-8b", info, batch=64, context=1024, weights="qoq_w4a8", kv="qoq_kv4")
    assert float(free.workload.scenario.kv_dequant_ops) == 0.0
    assert float(e.cost.tokens_per_second) < float(free.cost.tokens_per_second)

    row = next(r for r in v.load_rows() if r.id == "b11-qserve-a100-llama3-8b-w4a8kv4-b256-1024-512")
    frameworks = v.load_frameworks()
    with_ops = v.evaluate_rows([row], frameworks)[0].predicted
    frameworks["qserve"] = dataclasses.replace(frameworks["qserve"], kv_dequant_ops=())
    without = v.evaluate_rows([row], frameworks)[0].predicted
    assert with_ops < 0.8 * without  # the A100's CUDA cores bound its KV4 attention


def test_prompt_passes_unpack_nothing_and_decode_steps_do():
    from costmodel.evaluation import apply_framework
    from costmodel.io import chip_info
    from costmodel.serving import prompt_seconds

    info = apply_framework(chip_info("a100-80gb-sxm"), "qserve")
    free = dataclasses.replace(info, kv_dequant_ops=())
    kw = dict(prompt_tokens=1024, batches=np.asarray([8.0]), weights="qoq_w4a8", kv="qoq_kv4")
    # A prompt pass reads no cache: the same time with and without the profile's count.
    assert float(prompt_seconds("llama-3-8b", info, **kw)[0]) == float(prompt_seconds("llama-3-8b", free, **kw)[0])
    step = lambda i: (
        cm.evaluate(  # noqa: E731
            "llama-3-8b", i, batch=128, context=1280, weights="qoq_w4a8", kv="qoq_kv4"
        ).cost.seconds_per_step
    )
    assert float(step(info)) > float(step(free))
