"""The class layout: one placement row per class, the heat buckets summed (issue 14's
sweep throughput).

`lower_traffic(workload, buckets=False)` gives each history class one row; a placement
with `len(CLASSES)` rows makes `decode_cost` use it. It must give the bucketed model's
figures wherever the buckets of a class share their tiers: exactly under a DRAM
placement (any profile), and to block rounding under a dense profile (any policy). The
sweep takes it in those cases (`Sweep.buckets` False).
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import costmodel as cm
import costmodel.sweep as sw
from costmodel._core.traffic import N_CLASSES, class_sum, lower_traffic
from costmodel.evaluation import system_placement


PROFILES = ("dense", "topk", "window-sinks", "heavy-hitters", "speculative", "idle-multiturn")
FIELDS = ("seconds_per_step", "joules_per_token", "tier_bytes", "stored_bytes", "flops", "overflow_bytes")


def _costs(model, chip, profile, policy, **scenario):
    e = cm.evaluate(model, chip, profile=profile, **scenario)
    both = []
    for buckets in (True, False):
        t = lower_traffic(e.workload, buckets)
        placement = system_placement(policy, t, e.chip)
        both.append((t, placement, cm.decode_cost(e.workload, e.chip, placement)))
    return both


@pytest.mark.slow
@pytest.mark.parametrize("profile", PROFILES)
@pytest.mark.parametrize("model", ["llama-3-8b", "gemma-2-9b", "mixtral-8x7b"])
def test_class_traffic_is_the_buckets_summed(x64, model, profile):
    e = cm.evaluate(model, "h100-sxm", batch=4, context=16384, prefix=1000, profile=profile)
    bucketed, classes = lower_traffic(e.workload), lower_traffic(e.workload, buckets=False)
    assert classes.count.shape == (N_CLASSES,)
    for field in ("stored_bytes", "read_bytes", "writes", "flops"):
        np.testing.assert_allclose(getattr(classes, field), class_sum(getattr(bucketed, field)), rtol=1e-12, atol=1e-6)
    np.testing.assert_allclose(classes.kernel_bytes, bucketed.kernel_bytes, rtol=1e-12)
    # In the class layout the per-class sum is the row itself.
    np.testing.assert_array_equal(class_sum(classes.flops), classes.flops)


@pytest.mark.slow
@pytest.mark.parametrize("profile", PROFILES)
@pytest.mark.parametrize("chip", ["h100-sxm", "hbm-pim-gpu", "sn40l"])
def test_dram_placement_is_exact_for_every_profile(x64, chip, profile):
    for scenario in (dict(batch=1, context=4096), dict(batch=4, context=16384, prefix=1000)):
        (_, _, a), (_, p, b) = _costs("gemma-2-9b", chip, profile, "dram", **scenario)
        assert p.shape == (N_CLASSES, len(cm.TIERS))
        for f in FIELDS:
            np.testing.assert_allclose(getattr(b, f), getattr(a, f), rtol=1e-12, atol=1e-9, err_msg=f)


@pytest.mark.slow
@pytest.mark.parametrize("policy", ["greedy", "sram", "pim_kv", "pim"])
@pytest.mark.parametrize("chip", ["hbm-pim-gpu", "groq-lpu", "a100-40gb-sxm"])
def test_dense_profile_is_the_same_to_block_rounding(x64, chip, policy):
    for scenario in (dict(batch=1, context=4096), dict(batch=16, context=32768, prefix=1000)):
        try:
            (ta, _, a), (_, _, b) = _costs("gemma-2-9b", chip, "dense", policy, **scenario)
        except cm.InputError:
            continue
        block = float(jnp.max(ta.block_bytes))
        assert np.all(np.abs(np.asarray(b.stored_bytes) - np.asarray(a.stored_bytes)) <= block)
        np.testing.assert_allclose(b.seconds_per_step, a.seconds_per_step, rtol=1e-5)
        np.testing.assert_allclose(b.joules_per_token, a.joules_per_token, rtol=1e-5)


@pytest.mark.slow
def test_gradients_agree_between_layouts_under_dram(x64):
    """d seconds / d (context, top-k budget, recent fraction): the same through both layouts."""
    e = cm.evaluate("llama-3-8b", "h100-sxm", batch=8, context=16384, profile="topk")

    def seconds(x, buckets):
        context, budget, recent = x
        w = eqx.tree_at(
            lambda w: (w.scenario.context, w.profile.budget_tokens, w.profile.recent_fraction),
            e.workload,
            (context, budget, recent),
        )
        p = system_placement("dram", lower_traffic(w, buckets), e.chip)
        return cm.decode_cost(w, e.chip, p).seconds_per_step

    # Context off the bucket edges (powers of two x 256), where the bucketed overlaps have kinks.
    x = jnp.array([16000.0, float(e.workload.profile.budget_tokens), 0.01])
    g_buckets = jax.grad(seconds)(x, True)
    g_classes = jax.grad(seconds)(x, False)
    assert np.all(np.isfinite(g_classes)) and np.any(g_classes != 0)
    np.testing.assert_allclose(g_classes, g_buckets, rtol=1e-9, atol=1e-18)


def _rows(spec: dict, buckets: bool | None):
    s = sw.Sweep(sw.parse_spec(spec), chunk=64)
    chosen = s.buckets
    if buckets is not None:
        s.buckets = buckets  # read when the program is traced, on the first call
    return chosen, s.table(0, min(64, s.n_configs)).to_pydict()


SPECS = {
    "dram, top-k swept": (
        {
            "sweep": {"sampling": "random", "samples": 64, "seed": 3},
            "base": {"model": "llama-3-8b", "chip": "h100-sxm", "placement": "dram", "chips": 1},
            "axes": {
                "batch": {"min": 1, "max": 256, "scale": "log"},
                "context": {"min": 128, "max": 131072, "scale": "log"},
                "profile": ["dense", "topk", "window-sinks"],
                "profile.budget_tokens": {"min": 256, "max": 8192, "scale": "log"},
            },
        },
        False,
        1e-6,
    ),
    "dram on a PIM chip and an SRAM machine": (
        {
            "sweep": {"sampling": "random", "samples": 64, "seed": 4},
            "base": {"model": "gemma-2-9b", "placement": "dram", "profile": "heavy-hitters"},
            "axes": {
                "batch": {"min": 1, "max": 64, "scale": "log"},
                "context": {"min": 1024, "max": 65536, "scale": "log"},
                "chip": ["hbm-pim-gpu", "sn40l", "h100-sxm"],
            },
        },
        False,
        1e-6,
    ),
    "dense, greedy keeps the buckets (block rounding per bucket, as evaluate)": (
        {
            "sweep": {"sampling": "grid"},
            "base": {"model": "gemma-2-9b", "chip": "hbm-pim-gpu"},
            "axes": {"batch": [1, 16], "context": [4096, 65536], "placement": ["greedy", "dram"]},
        },
        True,
        0.0,
    ),
    "top-k with greedy keeps the buckets": (
        {
            "sweep": {"sampling": "grid"},
            "base": {"model": "llama-3-8b", "chip": "hbm-pim-gpu", "profile": "topk", "placement": "greedy"},
            "axes": {"batch": [1, 16], "context": [4096, 65536]},
        },
        True,
        0.0,
    ),
}


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(SPECS))
def test_sweep_takes_the_class_layout_only_where_it_is_the_same(name):
    spec, buckets, rtol = SPECS[name]
    chosen, fast = _rows(spec, None)
    assert chosen == buckets
    if buckets:
        return
    _, slow = _rows(spec, True)
    for key in ("seconds_per_step", "joules_per_token", "tokens_per_second", "overflow_bytes_per_chip"):
        np.testing.assert_allclose(fast[key], slow[key], rtol=rtol, atol=1e-30, err_msg=key)
    for key in ("feasible", "infeasible", "bound", "tensor_parallel", "pipeline_parallel"):
        assert fast[key] == slow[key], key
