"""Decode attention that streams a GQA group's K/V once per query head
(`Chip.attention_kv_rereads`), and a static batch's prefill at the chip's own rate."""

import dataclasses

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import costmodel as cm
import costmodel.validate as v
from costmodel._core.channels import class_stream_efficiency
from costmodel._core.traffic import CLASS_IS_KV
from costmodel.io import chip_info
from costmodel.io.frameworks import load_frameworks

from helpers import assert_omitted_at_zero_and_round_trips, assert_profile_edit_is_refused


def _step(model, rereads, batch=64, context=2048, chip="h100-sxm"):
    w = cm.Workload(cm.model_preset(model), cm.Scenario(batch=batch, context=context))
    c = cm.chip_preset(chip).replace(attention_kv_rereads=rereads)
    placement = cm.policy_placement("dram", cm.lower_traffic(w), c)
    return cm.decode_cost(w, c, placement).seconds_per_step


def test_kv_stream_efficiency_closed_form():
    """The KV classes stream at `1 / (1 + r (g - 1))` of their rate, g the query heads per
    K/V head (8 for Llama 3 70B); the weight classes are untouched."""
    w = cm.Workload(cm.model_preset("llama-3-70b"), cm.Scenario(batch=16, context=1024))
    t = cm.lower_traffic(w, buckets=False)
    chip = cm.chip_preset("h100-sxm")
    g = 64 / 8
    base = np.asarray(class_stream_efficiency(t, chip))
    for r in (0.5, 1.0):
        got = np.asarray(class_stream_efficiency(t, chip.replace(attention_kv_rereads=r)))
        want = np.where(np.asarray(CLASS_IS_KV), base / (1.0 + r * (g - 1.0)), base)
        np.testing.assert_allclose(got, want, rtol=1e-6)


def test_no_effect_without_gqa_and_never_faster_with_more_rereads():
    # Llama 2 7B has as many K/V heads as query heads: nothing to re-read.
    assert float(_step("llama-2-7b", 1.0)) == pytest.approx(float(_step("llama-2-7b", 0.0)), rel=1e-6)
    times = [float(_step("llama-3-70b", r)) for r in (0.0, 0.25, 0.5, 1.0)]
    assert all(b > a for a, b in zip(times, times[1:]))


def test_presets_default_to_a_shared_read_and_chip_files_omit_it(tmp_path):
    assert float(chip_info("h100-sxm").chip.attention_kv_rereads) == 0.0
    assert_omitted_at_zero_and_round_trips(tmp_path, "attention_kv_rereads")


def test_gradient_matches_finite_differences(x64):
    r0, h = 0.4, 1e-5
    grad = float(jax.grad(lambda r: _step("llama-3-70b", r))(jnp.asarray(r0)))
    fd = (float(_step("llama-3-70b", r0 + h)) - float(_step("llama-3-70b", r0 - h))) / (2 * h)
    assert grad > 0 and grad == pytest.approx(fd, rel=1e-5)


def test_profiles_set_it_by_version():
    """TensorRT-LLM before v0.7 re-reads (one block per query head); v0.7's XQA does not,
    with the same compute efficiency (carried); `apply_framework` sets the chip's field."""
    from costmodel.evaluation import apply_framework

    frameworks = load_frameworks()
    old, new = frameworks["trt-llm"], frameworks["trt-llm-0.7"]
    assert old.kv_rereads == 1.0 and new.kv_rereads is None
    assert new.multipliers[1] == old.multipliers[1] and ("compute_efficiency", "trt-llm") in new.carried
    info = chip_info("h200-sxm")
    assert float(apply_framework(info, "trt-llm").chip.attention_kv_rereads) == 1.0
    assert float(apply_framework(info, "trt-llm-0.7").chip.attention_kv_rereads) == 0.0
    rows = {r.id: r for r in v.load_rows()}
    gqa = rows["trtllm050-h200launch-h200x1-tp1-llama2-70b-fp8-isl2048-osl128-bs64"]
    pre_xqa, xqa = (
        v.evaluate_rows([dataclasses.replace(gqa, framework=n)])[0].predicted for n in ("trt-llm", "trt-llm-0.7")
    )
    assert xqa > pre_xqa


def test_a_profile_rereads_value_outside_zero_one_names_the_field(tmp_path):
    match = r"trt-llm.*'attention_kv_rereads' = 2\.0.*\[0, 1\]"
    assert_profile_edit_is_refused(tmp_path, "attention_kv_rereads = 1.0", "attention_kv_rereads = 2.0", match)


def test_a_static_batch_prefills_at_the_chip_rate():
    """A profile's compute efficiency prices the decode steps only: with no decode step
    left, the prediction does not depend on it; priced the old way it does."""
    row = {r.id: r for r in v.load_rows()}["trtllm-h100-llama-7b-fp8-bs80-2048-128"]
    half = jnp.log(jnp.asarray(v.NEUTRAL_PROFILE)).at[v.COMPUTE].set(jnp.log(0.5))
    neutral = jnp.log(jnp.asarray(v.NEUTRAL_PROFILE))
    for own, depends in ((True, False), (False, True)):
        prepared, _ = v.prepare(row, prefill_at_chip_rate=own)
        prefill_only = eqx.tree_at(lambda p: p.steps, prepared, jnp.asarray(0.0))
        a, b = float(v.predict(prefill_only, neutral)), float(v.predict(prefill_only, half))
        assert (abs(a / b - 1.0) > 0.1) == depends
        # the decode steps follow the profile's efficiency either way (once it binds)
        slow = neutral.at[v.COMPUTE].set(jnp.log(0.005))
        assert float(v.predict(prepared, slow)) < 0.9 * float(v.predict(prepared, neutral))


def test_a_model_without_kv_heads_has_nothing_to_reread():
    """n_kv_heads = 0 (no preset has it, `cm.Model` allows it): one read, finite efficiencies."""
    model = eqx.tree_at(lambda m: m.n_kv_heads, cm.model_preset("llama-3-8b"), jnp.asarray(0.0))
    t = cm.lower_traffic(cm.Workload(model, cm.Scenario(batch=4, context=512)), buckets=False)
    assert float(t.heads_per_kv_head) == 1.0
    chip = cm.chip_preset("h100-sxm").replace(attention_kv_rereads=1.0)
    assert np.all(np.isfinite(np.asarray(class_stream_efficiency(t, chip))))
