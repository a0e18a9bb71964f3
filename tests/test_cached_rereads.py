"""Decode-attention K/V re-reads the on-chip cache serves (`Chip.attention_rereads_cached`),
and the attention kernel an engine picks by the KV-cache format
(`attention_kv_rereads_by_kv` in data/frameworks.toml: vLLM V0's PagedAttention fallback
for an FP8 cache)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import costmodel as cm
from costmodel._core.channels import class_cached_rereads, class_stream_efficiency
from costmodel._core.chip import SRAM
from costmodel._core.traffic import CLASS_IS_KV
from costmodel.evaluation import apply_framework
from costmodel.io import chip_info
from costmodel.io.frameworks import load_frameworks

from helpers import assert_omitted_at_zero_and_round_trips, assert_profile_edit_is_refused


def _workload(model="llama-3-70b", batch=64, context=4096):
    return cm.Workload(cm.model_preset(model), cm.Scenario(batch=batch, context=context))


def _no_sram():
    """The H100 preset without its SRAM tier (no L2 to serve a re-read)."""
    h100 = cm.chip_preset("h100-sxm")
    tiers = h100.tiers.replace(
        capacity=h100.tiers.capacity.at[SRAM].set(0.0), bandwidth=h100.tiers.bandwidth.at[SRAM].set(0.0)
    )
    return h100.replace(tiers=tiers)


def _step(cached, rereads=1.0, chip=None, model="llama-3-70b"):
    w = _workload(model)
    c = (chip if chip is not None else cm.chip_preset("h100-sxm")).replace(
        attention_kv_rereads=rereads, attention_rereads_cached=cached
    )
    return cm.decode_cost(w, c, cm.policy_placement("dram", cm.lower_traffic(w), c))


def test_cached_rereads_move_bytes_between_tiers_and_lose_none():
    """Per K/V byte, the full-rate bytes streamed from the holding tier (`1 / efficiency`)
    and from the cache (`class_cached_rereads / efficiency`) add up to the `g` reads of a
    kernel with one block per query head, whatever share the cache serves; weights are
    untouched (g = 8 for Llama 3 70B)."""
    t = cm.lower_traffic(_workload(), buckets=False)
    chip = cm.chip_preset("h100-sxm").replace(attention_kv_rereads=1.0)
    g = 8.0
    none = np.asarray(class_stream_efficiency(t, chip))
    kv = np.asarray(CLASS_IS_KV)
    for c in (0.0, 0.25, 1.0):
        cached = chip.replace(attention_rereads_cached=c)
        eff = np.asarray(class_stream_efficiency(t, cached))
        extra = np.asarray(class_cached_rereads(t, cached))
        np.testing.assert_allclose(eff[kv], none[kv] * g / (1.0 + (1.0 - c) * (g - 1.0)), rtol=1e-6)
        np.testing.assert_allclose(extra[kv], c * (g - 1.0) / (1.0 + (1.0 - c) * (g - 1.0)), rtol=1e-6)
        np.testing.assert_allclose((1.0 + extra) / eff, 1.0 / none, rtol=1e-6)
        np.testing.assert_allclose(eff[~kv], none[~kv], rtol=0)
        assert np.all(extra[~kv] == 0.0)


def test_cached_rereads_stream_at_the_sram_rate():
    """With every byte held in DRAM, the SRAM tier's time is the cached re-reads at its
    rate: c (g - 1) times the KV classes' full-rate bytes, over the SRAM bandwidth."""
    base, cached = _step(0.0), _step(1.0)
    assert float(base.tier_seconds[SRAM]) == 0.0
    chip = cm.chip_preset("h100-sxm")
    w = _workload()
    t = cm.lower_traffic(w, buckets=False)
    eff = np.asarray(class_stream_efficiency(t, chip))  # no re-reads: one read per byte
    kv_bytes = np.sum(np.where(np.asarray(CLASS_IS_KV), np.asarray(t.read_bytes + t.writes) / eff, 0.0))
    rate = float(chip.tiers.bandwidth[SRAM] * chip.tiers.efficiency[SRAM])
    assert float(cached.tier_seconds[SRAM]) == pytest.approx(7.0 * kv_bytes / rate, rel=1e-5)


def test_more_cached_rereads_never_slow_a_step_where_the_cache_is_faster():
    times = [float(_step(c).seconds_per_step) for c in (0.0, 0.25, 0.5, 0.75, 1.0)]
    assert all(b < a for a, b in zip(times, times[1:])), times


def test_inert_without_rereads_gqa_or_a_cache():
    # No re-reads (a kernel sharing the group's read), no GQA (Llama 2 7B), or no SRAM tier.
    for kwargs in ({"rereads": 0.0}, {"model": "llama-2-7b"}, {"chip": _no_sram()}):
        a = float(_step(0.0, **kwargs).seconds_per_step)
        b = float(_step(1.0, **kwargs).seconds_per_step)
        assert b == pytest.approx(a, rel=1e-7), kwargs


@pytest.mark.slow
def test_gradient_matches_finite_differences(x64):
    c0, h = 0.4, 1e-5
    f = lambda c: _step(c).seconds_per_step
    grad = float(jax.grad(f)(jnp.asarray(c0)))
    fd = (float(f(c0 + h)) - float(f(c0 - h))) / (2 * h)
    assert grad < 0 and grad == pytest.approx(fd, rel=1e-5)


def test_jit_and_vmap_agree():
    shares = jnp.asarray([0.0, 0.3, 1.0])
    h100 = cm.chip_preset("h100-sxm")  # loaded outside the trace
    f = lambda c: _step(c, chip=h100).seconds_per_step
    eager = np.asarray([float(f(c)) for c in shares])
    np.testing.assert_allclose(np.asarray(jax.jit(jax.vmap(f))(shares)), eager, rtol=1e-6)


def test_chip_files_omit_it_at_zero_and_presets_default_to_none(tmp_path):
    assert float(chip_info("h100-sxm").chip.attention_rereads_cached) == 0.0
    assert_omitted_at_zero_and_round_trips(tmp_path, "attention_rereads_cached", values=(0.0, 0.5))


def test_vllm_v0_picks_its_attention_kernel_by_the_cache_format():
    """vLLM 0.6 reads a 16-bit cache with FlashAttention (one read per group) and an FP8 one
    with its PagedAttention kernel (a block per query head, the group's re-reads served by
    L2, each read unpacked); the ROCm variant is left as it was."""
    f = load_frameworks()["vllm-0.6"]
    assert f.rereads("fp8") == 1.0 and f.rereads("bf16") is None and f.rereads() is None
    assert f.kv_dequant("fp8") > 0 and f.kv_dequant("bf16") == 0
    info = chip_info("h100-sxm")
    fp8 = apply_framework(info, "vllm-0.6", kv="fp8").chip
    assert float(fp8.attention_kv_rereads) == 1.0 and float(fp8.attention_rereads_cached) == 1.0
    for kv in ("bf16", "f16", None):
        assert float(apply_framework(info, "vllm-0.6", kv=kv).chip.attention_kv_rereads) == 0.0
    rocm = apply_framework(chip_info("mi300x"), "vllm-0.6", kv="fp8")
    assert float(rocm.chip.attention_kv_rereads) == 0.0
    # The fallback is slower than FlashAttention at a long context (Llama 3 8B: 4 query heads per K/V head).
    fast, paged = (
        cm.evaluate("llama-3-8b", "h100-sxm", batch=64, context=3072, weights="fp8", kv=kv, framework="vllm-0.6")
        for kv in ("bf16", "fp8")
    )
    assert float(paged.cost.seconds_per_step) > float(fast.cost.seconds_per_step)


def test_a_profile_rereads_table_outside_zero_one_or_of_an_unknown_format_names_the_field(tmp_path):
    old = "attention_kv_rereads_by_kv = { fp8 = 1.0 }"
    assert_profile_edit_is_refused(
        tmp_path,
        old,
        "attention_kv_rereads_by_kv = { fp8 = 1.5 }",
        r"'attention_kv_rereads_by_kv': fp8 = 1\.5.*\[0, 1\]",
    )
    assert_profile_edit_is_refused(
        tmp_path, old, "attention_kv_rereads_by_kv = { fp9 = 1.0 }", r"'attention_kv_rereads_by_kv' has 'fp9'"
    )
    assert_profile_edit_is_refused(
        tmp_path, "attention_rereads_cached = 1.0", "attention_rereads_cached = -0.5", r"'attention_rereads_cached'"
    )


def test_kernels_in_sequence_pay_the_cached_rereads_too():
    """With a layer's kernels in sequence (`serial_kernels`, every GPU engine's) each class
    is timed on its own channels: the KV classes' cached re-reads must be among them, so
    the step is never shorter than the SRAM tier's time, here the longest channel (an L2
    slower than DRAM, so the re-reads it serves bind)."""
    h100 = cm.chip_preset("h100-sxm")
    slow_cache = h100.replace(
        serial_kernels=1.0, tiers=h100.tiers.replace(bandwidth=h100.tiers.bandwidth.at[SRAM].set(1e12))
    )
    cost = _step(1.0, chip=slow_cache)
    assert float(cost.tier_seconds[SRAM]) > float(cost.tier_seconds[-1])  # the cache binds
    assert float(cost.seconds_per_step) >= float(cost.tier_seconds[SRAM])
    assert float(cost.seconds_per_step) > float(_step(0.0, chip=slow_cache).seconds_per_step)


def test_the_roofline_streams_the_cached_rereads():
    """The plot's per-class rates (`class_rates`) time the cached re-reads as the step
    does: with them the KV class reaches less than with no re-reads at all."""
    import dataclasses

    from costmodel.report.roofline import class_rates

    e = cm.evaluate("llama-3-70b", "h100-sxm", batch=64, context=8192, weights="fp8", kv="fp8")
    kv = cm.CLASSES.index(next(c for c in cm.CLASSES if c.startswith("kv")))

    def rate(rereads, cached):
        chip = e.chip.replace(attention_kv_rereads=rereads, attention_rereads_cached=cached)
        return float(class_rates(dataclasses.replace(e, chip=chip))[1][kv])

    shared, from_cache, from_dram = rate(0.0, 0.0), rate(1.0, 1.0), rate(1.0, 0.0)
    assert from_dram < from_cache < shared
