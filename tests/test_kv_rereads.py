"""Decode attention that streams a GQA group's K/V once per query head
(`Chip.attention_kv_rereads`) or once per block of query heads
(`Chip.attention_heads_per_block`), and a static batch's prefill at the chip's own rate."""

import dataclasses

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import costmodel as cm
import costmodel.validate as v
from costmodel._core.channels import class_stream_efficiency, kv_reads
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


# --- decode attention that splits a GQA group over blocks (`Chip.attention_heads_per_block`)


def _step_h(model, heads_per_block, batch=64, context=2048, chip="h100-sxm"):
    w = cm.Workload(cm.model_preset(model), cm.Scenario(batch=batch, context=context))
    c = cm.chip_preset(chip).replace(attention_heads_per_block=heads_per_block)
    placement = cm.policy_placement("dram", cm.lower_traffic(w), c)
    return cm.decode_cost(w, c, placement).seconds_per_step


@pytest.mark.parametrize("model, g", [("llama-2-70b", 8), ("llama-3-8b", 4), ("llama-2-7b", 1), ("llama-3.1-405b", 16)])
def test_heads_per_block_closed_form(model, g):
    """Each K/V head is streamed g / min(h, g) times (1 at h = 0, the whole group); with
    `attention_kv_rereads` set too, the larger of the two counts."""
    t = cm.lower_traffic(cm.Workload(cm.model_preset(model), cm.Scenario(batch=4, context=512)), buckets=False)
    assert float(t.heads_per_kv_head) == g
    chip = cm.chip_preset("h100-sxm")
    for h, want in ((0.0, 1.0), (1.0, g), (2.0, g / min(2, g)), (4.0, g / min(4, g)), (64.0, 1.0)):
        assert float(kv_reads(t, chip.replace(attention_heads_per_block=h))) == pytest.approx(want), h
    both = chip.replace(attention_heads_per_block=4.0, attention_kv_rereads=0.5)
    assert float(kv_reads(t, both)) == pytest.approx(max(g / min(4, g), 1 + 0.5 * (g - 1)))
    base = np.asarray(class_stream_efficiency(t, chip))
    got = np.asarray(class_stream_efficiency(t, chip.replace(attention_heads_per_block=4.0)))
    want = np.where(np.asarray(CLASS_IS_KV), base / (g / min(4, g)), base)
    np.testing.assert_allclose(got, want, rtol=1e-6)


def test_fewer_heads_per_block_never_speed_a_step():
    """Llama 2 70B (g = 8) at a KV-heavy point: 8, 4, 2, 1 heads per block, slower each
    time; the whole group (0) is the 8-head time; Llama 2 7B (no GQA) is untouched."""
    times = [float(_step_h("llama-2-70b", h, context=8192)) for h in (0.0, 8.0, 4.0, 2.0, 1.0)]
    assert times[0] == pytest.approx(times[1], rel=1e-6)
    assert all(b > a for a, b in zip(times[1:], times[2:]))
    assert float(_step_h("llama-2-7b", 1.0)) == pytest.approx(float(_step_h("llama-2-7b", 0.0)), rel=1e-6)


def test_heads_per_block_gradient_matches_finite_differences(x64):
    h0, d = 3.0, 1e-5
    grad = float(jax.grad(lambda h: _step_h("llama-2-70b", h, context=8192))(jnp.asarray(h0)))
    fd = (float(_step_h("llama-2-70b", h0 + d, context=8192)) - float(_step_h("llama-2-70b", h0 - d, context=8192))) / (
        2 * d
    )
    assert grad < 0 and grad == pytest.approx(fd, rel=1e-5)


def test_heads_per_block_jit_and_vmap_agree():
    w = cm.Workload(cm.model_preset("llama-2-70b"), cm.Scenario(batch=32, context=4096))
    chip = cm.chip_preset("a100-80gb-sxm")
    t = cm.lower_traffic(w)
    placement = cm.policy_placement("dram", t, chip)

    def step(h):
        return cm.decode_cost(w, chip.replace(attention_heads_per_block=h), placement).seconds_per_step

    hs = jnp.asarray([0.0, 1.0, 2.0, 4.0])
    np.testing.assert_allclose(jax.vmap(jax.jit(step))(hs), [float(step(h)) for h in hs], rtol=1e-6)


def test_lmdeploy_profiles_split_a_group_in_fours_and_chip_files_omit_it(tmp_path):
    from costmodel.evaluation import apply_framework

    frameworks = load_frameworks()
    assert frameworks["lmdeploy-0.1"].heads_per_block == frameworks["lmdeploy-0.2"].heads_per_block == 4.0
    assert frameworks["trt-llm"].heads_per_block is None
    assert float(apply_framework(chip_info("a100-80gb-sxm"), "lmdeploy-0.2").chip.attention_heads_per_block) == 4.0
    assert float(chip_info("a100-80gb-sxm").chip.attention_heads_per_block) == 0.0
    assert_omitted_at_zero_and_round_trips(tmp_path, "attention_heads_per_block", values=(0.0, 4.0))


def test_a_profile_heads_per_block_not_a_whole_number_names_the_field(tmp_path):
    old = "attention_heads_per_block = 4  #"
    assert_profile_edit_is_refused(
        tmp_path, old, "attention_heads_per_block = 2.5  #", r"'attention_heads_per_block' = 2\.5"
    )
