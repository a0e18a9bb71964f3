"""A layer's kernels in sequence (`Chip.serial_kernels`): each block class overlaps only
its own memory and compute channels, and the classes' times add."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import costmodel as cm
import costmodel.validate as v
from costmodel._core.traffic import CLASSES
from costmodel.evaluation import apply_framework
from costmodel.io import chip_info
from costmodel.io.frameworks import load_frameworks

from helpers import (
    assert_omitted_at_zero_and_round_trips,
    assert_profile_edit_is_refused,
    random_chip,
    random_logits,
    random_model,
    random_scenario,
)


BANDWIDTH, PEAK = 2e12, 100e12


def _ideal_chip(serial: float, overlap: float = 1e4) -> cm.Chip:
    """One chip, no latency, overhead or kernel losses: a class's time is the larger of
    its bytes over the bandwidth and its FLOPs over the peak (p = 1e4 is the max to
    0.01 %)."""
    return cm.make_chip(
        capacity=(0.0, 0.0, 1e12), bandwidth=(0.0, 0.0, BANDWIDTH), peak_flops=PEAK, overlap=overlap
    ).replace(serial_kernels=serial)


def _workload(batch: float = 512.0, context: float = 2048.0) -> cm.Workload:
    return cm.Workload(cm.model_preset("llama-2-7b"), cm.Scenario(batch=batch, context=context))


def _step(workload: cm.Workload, chip: cm.Chip):
    placement = cm.policy_placement("dram", cm.lower_traffic(workload), chip)
    return cm.decode_cost(workload, chip, placement).seconds_per_step


def test_closed_form_sum_of_class_rooflines():
    """At 1 the step is the sum over classes of max(bytes / bandwidth, FLOPs / peak); at
    0 the max of the sums; in between the blend. At batch 512 the weight GEMMs are
    compute-bound and attention memory-bound, so the two differ by a fifth."""
    w = _workload()
    t = cm.lower_traffic(w, buckets=False)
    moved = np.asarray(t.read_bytes + t.writes) / BANDWIDTH
    work = np.asarray(t.flops) / PEAK
    by_class = float(np.sum(np.maximum(moved, work)))
    overlapped = max(float(np.sum(moved)), float(np.sum(work)))
    assert by_class > 1.15 * overlapped
    for k in (0.0, 0.3, 1.0):
        want = (1 - k) * overlapped + k * by_class
        assert float(_step(w, _ideal_chip(k))) == pytest.approx(want, rel=2e-3)
    # one memory-bound class (attention) and compute-bound weight classes: both count
    names = [c for c, m, f in zip(CLASSES, moved, work) if m > 0 or f > 0]
    assert "kv.global" in names and "weights.ffn" in names


def test_no_effect_with_fully_serial_channels_or_a_memory_bound_step():
    """At overlap 1 the channels already add; at batch 1 each class is memory-bound, and
    the sum of class maxima is the max of the sums."""
    w = _workload()
    a, b = (float(_step(w, _ideal_chip(k, overlap=1.0))) for k in (0.0, 1.0))
    assert b == pytest.approx(a, rel=1e-6)
    one = _workload(batch=1.0, context=512.0)
    a, b = (float(_step(one, _ideal_chip(k))) for k in (0.0, 1.0))
    assert b == pytest.approx(a, rel=2e-3)


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(6))
def test_more_serial_never_speeds_a_step(seed):
    """By Minkowski's inequality each class's p-norm summed is at least the p-norm of the
    sums, so the blend never falls as the share rises (any chip, workload, placement)."""
    rng = np.random.default_rng(seed)
    w = cm.Workload(random_model(rng), random_scenario(rng))
    chip = random_chip(rng)
    placement = cm.soft_placement(jnp.asarray(random_logits(rng)), rng.uniform(0.2, 2.0))
    cost = lambda k: float(cm.decode_cost(w, chip.replace(serial_kernels=k), placement).seconds_per_step)
    times = [cost(k) for k in (0.0, 0.25, 0.5, 0.75, 1.0)]
    assert all(b >= a * (1 - 1e-6) for a, b in zip(times, times[1:])), times


def test_gradient_matches_finite_differences(x64):
    chip = chip_info("h100-sxm").chip
    w = _workload(batch=256.0, context=1024.0)
    f = lambda k: _step(w, chip.replace(serial_kernels=k))
    k0, h = 0.4, 1e-5
    grad = float(jax.grad(f)(jnp.asarray(k0)))
    fd = (float(f(k0 + h)) - float(f(k0 - h))) / (2 * h)
    assert grad > 0 and grad == pytest.approx(fd, rel=1e-5)
    # and through the serial path, the gradient with respect to the DRAM bandwidth
    g = lambda bw: _step(w, chip.replace(serial_kernels=1.0, tiers=chip.tiers.replace(bandwidth=bw)))
    bw0 = np.asarray(chip.tiers.bandwidth)
    grad_bw = np.asarray(jax.grad(lambda b: g(b))(jnp.asarray(bw0)))
    e = np.zeros(3)
    e[2] = bw0[2] * 1e-6
    fd_bw = (float(g(bw0 + e)) - float(g(bw0 - e))) / (2 * e[2])
    assert grad_bw[2] < 0 and grad_bw[2] == pytest.approx(fd_bw, rel=1e-4)


def test_jit_and_vmap_agree_with_single_calls():
    chip = chip_info("h100-sxm").chip
    w = _workload(batch=256.0, context=1024.0)
    ks = jnp.asarray([0.0, 0.5, 1.0])
    batched = jax.jit(jax.vmap(lambda k: _step(w, chip.replace(serial_kernels=k))))(ks)
    single = [float(_step(w, chip.replace(serial_kernels=float(k)))) for k in ks]
    np.testing.assert_allclose(np.asarray(batched), single, rtol=1e-6)


def test_gpu_engines_run_kernels_in_sequence_and_presets_do_not():
    """Every GPU engine's profile sets 1 (one stream: NanoFlow's observation); `native`
    (the SRAM machines' own stacks) and every chip preset keep 0; `apply_framework` sets
    the field on the chip."""
    frameworks = load_frameworks()
    assert frameworks["native"].serial_kernels is None
    assert all(f.serial_kernels == 1.0 for n, f in frameworks.items() if n != "native")
    info = chip_info("h100-sxm")
    assert float(info.chip.serial_kernels) == 0.0
    assert float(apply_framework(info, "trt-llm").chip.serial_kernels) == 1.0
    assert float(apply_framework(info, "native").chip.serial_kernels) == 0.0


def test_a_large_batch_row_is_slower_in_sequence():
    """A TensorRT-LLM static batch at batch 768 (compute-bound GEMMs, memory-bound
    attention) is priced slower with the kernels in sequence, the profile otherwise the
    same."""
    row = {r.id: r for r in v.load_rows()}["trtllm-h100-llama-7b-fp8-bs768-128-128"]
    frameworks = load_frameworks()
    overlapped = {**frameworks, "trt-llm": dataclasses.replace(frameworks["trt-llm"], serial_kernels=0.0)}
    (seq,), (ovl,) = v.evaluate_rows([row], frameworks), v.evaluate_rows([row], overlapped)
    assert seq.predicted < 0.8 * ovl.predicted


def test_a_profile_value_outside_zero_one_names_the_field(tmp_path):
    match = r"frameworks\..*'serial_kernels' = 1\.5.*\[0, 1\]"
    assert_profile_edit_is_refused(tmp_path, "serial_kernels = 1", "serial_kernels = 1.5", match)


def test_chip_files_omit_it_at_zero_and_round_trip(tmp_path):
    assert_omitted_at_zero_and_round_trips(tmp_path, "serial_kernels")
