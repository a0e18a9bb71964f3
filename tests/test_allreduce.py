"""The tensor-parallel all-reduce: its ring closed form, its two lines by size and its
small-message protocol, and the presets' links taken from published measurements
(`benchmarks/gpu_allreduce_fit.py`)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import costmodel as cm
from costmodel._core.channels import allreduce_seconds
from costmodel.io import chip_info

from helpers import load_script


ROOT = Path(__file__).resolve().parents[1]


def test_ring_closed_form():
    """Two ring all-reduces per layer, each one latency plus 2 (n - 1) / n of the batch's
    activations (one d_model vector of 2 B per sequence) over the link; none on one chip."""
    w = cm.Workload(cm.model_preset("llama-3-8b"), cm.Scenario(batch=4, context=128))
    base = chip_info("l40s").chip
    m = w.model
    message = 4 * float(m.d_model) * 2.0
    for tp in (2, 4):
        chip = base.replace(tensor_parallel=tp)
        want = (
            2
            * float(m.n_layers)
            * (float(chip.link_latency) + 2 * (tp - 1) / tp * message / float(chip.link_bandwidth))
        )
        assert float(allreduce_seconds(w, chip)) == pytest.approx(want, rel=1e-6)
    assert float(allreduce_seconds(w, base.replace(tensor_parallel=1))) == 0.0


def test_l40s_link_is_the_published_fit():
    """The preset's link latency and bandwidth are the least-squares fit of the ring model
    to the published eight-L40S all_reduce_perf times at 1-4 MiB, which it reproduces
    within 1 %; the rows' algbw and busbw agree with their sizes and times."""
    fit = load_script(ROOT / "benchmarks" / "gpu_allreduce_fit.py")
    fit.check_rows("l40s", fit.L40S_ROWS)  # asserts the transcription's consistency
    latency, bandwidth = fit.fit_line(fit.L40S_ROWS, fit.L40S_FIT_SIZES)
    chip = chip_info("l40s").chip
    assert float(chip.link_latency) == pytest.approx(latency, rel=2e-3)
    assert float(chip.link_bandwidth) == pytest.approx(bandwidth, rel=2e-3)
    for size, us, *_ in fit.L40S_ROWS:
        if size in fit.L40S_FIT_SIZES:
            model = latency + 2 * (fit.GPUS - 1) / fit.GPUS * size / bandwidth
            assert model == pytest.approx(us * 1e-6, rel=0.01)


def test_the_published_link_slows_a_tp4_step_and_leaves_one_chip_alone():
    """The published link is slower than the datasheet's: a TP4 step of Llama 3 8B at a batch
    of 64 takes longer with it, and one chip's step does not see the link at all."""
    info = chip_info("l40s")
    old = dataclasses.replace(info, chip=info.chip.replace(link_bandwidth=32e9, link_latency=20e-6))
    model = cm.model_preset("llama-3-8b")
    for tp, changed in ((4, True), (1, False)):
        step = lambda i: float(
            cm.evaluate(model, i, batch=64, context=1024, tensor_parallel=tp, pipeline_parallel=1).cost.seconds_per_step
        )
        assert step(info) >= step(old)
        assert (step(info) > step(old)) == changed


def test_nvlink_and_xgmi_links_are_the_published_fits():
    """The H100, H200, A100 and MI300X presets' link bandwidth is the least-squares fit of
    the ring model to the published eight-GPU all_reduce_perf times at 1-32 MiB
    (`benchmarks/gpu_allreduce_fit.py`): its latency fitted too on the H100 and H200, the
    preset's on the others; the rows' algbw and busbw agree with their sizes and times,
    and the fits sit below 0.8 of the links' line rates. The H100's and H200's
    small-message rate is the fit to SGLang's custom all-reduce at 256 KiB-1 MiB, latency
    the preset's."""
    fit = load_script(ROOT / "benchmarks" / "gpu_allreduce_fit.py")
    fit.main()  # asserts the transcription's consistency
    line_rate = {"h100-sxm": 450e9, "mi300x": 448e9, "a100-80gb-sxm": 300e9}
    for preset, (takers, rows) in fit.TABLES.items():
        chip = chip_info(preset).chip
        if preset in fit.TWO_PROTOCOLS:
            latency, bandwidth = fit.fit_line(rows, fit.FIT_SIZES, relative=True)
            small = fit.fit_small(float(chip.link_latency_small))
        else:
            latency, bandwidth, small = float(chip.link_latency), fit.fit(rows, float(chip.link_latency)), 0.0
        assert bandwidth < 0.8 * line_rate[preset]
        for name in takers:
            c = chip_info(name).chip
            assert float(c.link_bandwidth) == pytest.approx(bandwidth, rel=2e-3)
            assert float(c.link_latency) == pytest.approx(latency, rel=2e-3)
            assert float(c.link_bandwidth_small) == pytest.approx(small, rel=2e-3)
    # The ring model meets the measured time in the middle of the fitted range.
    h100 = chip_info("h100-sxm").chip
    assert float(h100.link_latency) + 1.75 * (16 << 20) / float(h100.link_bandwidth) == pytest.approx(
        124.0e-6, rel=0.15
    )


def test_two_lines_closed_form_and_default():
    """`ring_seconds`: the bytes up to the knee at `link_bandwidth`, the rest at
    `link_bandwidth_large`; continuous at the knee; every byte at `link_bandwidth` when
    `link_bandwidth_large` is 0 (every chip without a second line: unchanged)."""
    chip = chip_info("h100-sxm").chip.replace(link_bandwidth=100e9, link_knee=10e6, link_bandwidth_large=400e9)
    for size, want in ((5e6, 5e6 / 100e9), (10e6, 1e-4), (50e6, 1e-4 + 40e6 / 400e9)):
        assert float(cm.ring_seconds(size, chip)) == pytest.approx(want, rel=1e-6)
    below, above = (float(cm.ring_seconds(10e6 * (1 + e), chip)) for e in (-1e-6, 1e-6))
    assert above == pytest.approx(below, rel=1e-5)
    single = chip.replace(link_bandwidth_large=0.0)
    for size in (1e6, 1e9):
        assert float(cm.ring_seconds(size, single)) == pytest.approx(size / 100e9, rel=1e-6)


def test_second_line_never_slows_when_faster():
    """More bandwidth past the knee never slows a TP4 prompt-chunk step's all-reduces."""
    w = cm.Workload(cm.model_preset("llama-3-70b"), cm.Scenario(batch=2048, context=2048))
    base = chip_info("h100-sxm").chip.replace(tensor_parallel=4)
    steps = [float(allreduce_seconds(w, base.replace(link_bandwidth_large=r))) for r in (200e9, 300e9, 447.8e9, 900e9)]
    assert all(a >= b for a, b in zip(steps, steps[1:]))
    assert steps[0] > steps[-1]


LINK_FIELDS = ("link_bandwidth", "link_knee", "link_bandwidth_large")


def _tp4_all_reduces(batch: int):
    """A step's all-reduces on four H100 (Llama 3 70B at `batch`, context 2,048) as a function
    of the float64 vector of `LINK_FIELDS` (call under the `x64` fixture)."""
    w = cm.Workload(cm.model_preset("llama-3-70b"), cm.Scenario(batch=batch, context=2048))
    w = jax.tree.map(
        lambda x: jnp.asarray(x, jnp.float64) if jnp.issubdtype(jnp.asarray(x).dtype, jnp.floating) else x, w
    )
    h100 = chip_info("h100-sxm").chip.replace(tensor_parallel=4, link_bandwidth_small=0.0)  # the ring's lines alone
    base = jax.tree.map(lambda x: jnp.asarray(x, jnp.float64), h100)
    return lambda x: allreduce_seconds(w, base.replace(**dict(zip(LINK_FIELDS, x))))


def test_two_lines_gradients_match_finite_differences(x64):
    """The all-reduce's gradients in both rates and the knee match float64 central differences."""
    f = _tp4_all_reduces(batch=2048)  # 32 MiB messages, past the knee
    x = jnp.asarray([283.1e9, 25.9e6, 447.8e9], dtype=jnp.float64)
    g = np.asarray(jax.grad(f)(x))
    for i in range(3):
        h = 1e-6 * float(x[i])
        e = jnp.zeros(3, dtype=jnp.float64).at[i].set(h)
        fd = (float(f(x + e)) - float(f(x - e))) / (2 * h)
        assert g[i] == pytest.approx(fd, rel=1e-5, abs=1e-18), LINK_FIELDS[i]
    assert g[0] < 0 and g[2] < 0 and g[1] > 0  # a later knee keeps more bytes on the slower line


def test_second_lines_are_the_published_fits():
    """The knee and the rate past it of the H100, H200, A100, MI300X and L40S presets are
    `gpu_allreduce_fit.py`'s fits to the same runs' 8 MiB-1 GiB times (first line kept), which
    the two lines reproduce within 7 % from 32 MiB on, where the first line alone misses by
    more than 25 % at 1 GiB; the NVLink and xGMI rates rise past the knee, the L40S's falls."""
    fit = load_script(ROOT / "benchmarks" / "gpu_allreduce_fit.py")
    tables = {preset: (takers, rows) for preset, (takers, rows) in fit.TABLES.items()}
    tables["l40s"] = (("l40s",), fit.L40S_ROWS)
    for preset, (takers, rows) in tables.items():
        chip = chip_info(preset).chip
        latency, bandwidth = float(chip.link_latency), float(chip.link_bandwidth)
        knee, large = fit.fit_knee(rows, latency, bandwidth)
        for name in takers:
            c = chip_info(name).chip
            assert float(c.link_knee) == pytest.approx(knee, rel=5e-3)
            assert float(c.link_bandwidth_large) == pytest.approx(large, rel=5e-3)
        assert (large > bandwidth) == (preset != "l40s")
        for size, us, *_ in rows:
            if size >= 32 << 20:
                assert fit.two_lines(size, latency, bandwidth, knee, large) == pytest.approx(us * 1e-6, rel=0.07)
        one_line = latency + 1.75 * (1 << 30) / bandwidth
        assert abs(one_line / (rows[-1][1] * 1e-6) - 1) > 0.25


def test_two_lines_gradients_are_finite_and_zero_where_the_second_line_is_off(x64):
    """Without a second line (`link_bandwidth_large` 0), or with every message under the knee,
    the all-reduce does not depend on the knee or the second rate: their gradients are 0 and
    finite, and the first rate's matches a central difference."""
    f = _tp4_all_reduces(batch=64)  # 1 MiB messages, under the knee
    for point in ([283.1e9, 25.9e6, 0.0], [283.1e9, 25.9e6, 447.8e9]):  # no second line; under the knee
        x = jnp.asarray(point, dtype=jnp.float64)
        g = np.asarray(jax.grad(f)(x))
        assert np.all(np.isfinite(g)) and g[1] == 0.0 and g[2] == 0.0
        h = 1e-6 * float(x[0])
        e = jnp.zeros(3, dtype=jnp.float64).at[0].set(h)
        assert g[0] == pytest.approx((float(f(x + e)) - float(f(x - e))) / (2 * h), rel=1e-5)


def _per_allreduce(batch: int, tp: int, **fields) -> float:
    """One all-reduce of Llama 3 70B's step at `batch` on `tp` H100 (the preset, `fields`
    replaced), s."""
    w = cm.Workload(cm.model_preset("llama-3-70b"), cm.Scenario(batch=batch, context=2048))
    chip = chip_info("h100-sxm").chip.replace(tensor_parallel=tp, **fields)
    return float(allreduce_seconds(w, chip)) / (2 * int(w.model.n_layers))


def test_small_message_protocol_closed_form():
    """With a small-message protocol an all-reduce takes the lesser of two lines: its
    latency plus 2 (n - 1) / n of the message at its rate, and the ring's latency and
    rates; without one (`link_bandwidth_small` 0) the ring's alone, whatever its latency."""
    fields = dict(link_latency=30e-6, link_bandwidth=300e9, link_bandwidth_large=0.0, link_latency_small=8e-6)
    for batch, tp in ((1, 2), (16, 8), (64, 4), (512, 8)):
        message = batch * 8192 * 2.0
        share = 2 * (tp - 1) / tp
        ring = 30e-6 + share * message / 300e9
        small = 8e-6 + share * message / 70e9
        assert _per_allreduce(batch, tp, link_bandwidth_small=70e9, **fields) == pytest.approx(
            min(small, ring), rel=1e-5
        )
        assert _per_allreduce(batch, tp, link_bandwidth_small=0.0, **fields) == pytest.approx(ring, rel=1e-5)
    # Small messages take the small protocol, large ones the ring.
    assert _per_allreduce(1, 8, link_bandwidth_small=70e9, **fields) < 30e-6
    assert _per_allreduce(512, 8, link_bandwidth_small=70e9, **fields) == pytest.approx(
        30e-6 + 1.75 * 512 * 8192 * 2 / 300e9, rel=1e-5
    )


def test_small_message_protocol_never_slows_and_leaves_one_chip_alone():
    """A small-message protocol never makes an all-reduce slower than the ring's line, a
    faster one never slower than a slower one, and one chip has no all-reduce at all."""
    for batch in (1, 8, 64, 256, 2048):
        ring = _per_allreduce(batch, 8, link_bandwidth_small=0.0)
        times = [_per_allreduce(batch, 8, link_bandwidth_small=r) for r in (10e9, 71.5e9, 200e9, 1e12)]
        assert all(t <= ring * (1 + 1e-6) for t in times)
        assert all(a >= b for a, b in zip(times, times[1:]))
        assert _per_allreduce(batch, 1) == 0.0


def test_small_message_protocol_gradients_match_finite_differences(x64):
    """The all-reduce's gradients in the small protocol's latency and rate match float64
    central differences where that protocol is the cheaper (8 sequences on four H100), and
    are zero and finite where the ring is (2,048 sequences)."""
    fields = ("link_latency_small", "link_bandwidth_small")

    def step(batch):
        w = cm.Workload(cm.model_preset("llama-3-70b"), cm.Scenario(batch=batch, context=2048))
        w = jax.tree.map(
            lambda x: jnp.asarray(x, jnp.float64) if jnp.issubdtype(jnp.asarray(x).dtype, jnp.floating) else x, w
        )
        base = jax.tree.map(
            lambda x: jnp.asarray(x, jnp.float64), chip_info("h100-sxm").chip.replace(tensor_parallel=4)
        )
        return lambda x: allreduce_seconds(w, base.replace(**dict(zip(fields, x))))

    x = jnp.asarray([8e-6, 71.5e9], dtype=jnp.float64)
    f = step(8)
    g = np.asarray(jax.grad(f)(x))
    for i in range(2):
        h = 1e-6 * float(x[i])
        e = jnp.zeros(2, dtype=jnp.float64).at[i].set(h)
        assert g[i] == pytest.approx((float(f(x + e)) - float(f(x - e))) / (2 * h), rel=1e-5), fields[i]
    assert g[0] > 0 and g[1] < 0
    g = np.asarray(jax.grad(step(2048))(x))
    assert np.all(np.isfinite(g)) and np.all(g == 0.0)
    g = np.asarray(jax.grad(step(8))(jnp.asarray([8e-6, 0.0], dtype=jnp.float64)))  # no small protocol
    assert np.all(np.isfinite(g)) and np.all(g == 0.0)
