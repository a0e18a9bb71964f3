"""Gradients of the decode cost against finite differences (float64)."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import costmodel as cm


def _workload():
    return cm.Workload(cm.model_preset("mixtral-8x7b"), cm.Scenario(batch=8, context=6000, prefix=1000))


def _chip():
    # Every term live: three tiers, PIM, two-way tensor and pipeline parallelism.
    return cm.make_chip(
        capacity=(4e9, 30e9, 60e9),
        bandwidth=(20e12, 1e12, 3e12),
        latency=(2e-8, 3e-7, 5e-7),
        energy_per_byte=(1e-12, 2e-11, 3e-11),
        efficiency=(0.9, 0.8, 0.85),
        compute_feed=(0.95, 0.9, 0.6),
        pim_bandwidth=12e12,
        pim_flops=40e12,
        pim_energy_per_byte=4e-12,
        peak_flops=(200e12, 800e12, 1600e12, 1600e12),
        compute_efficiency=0.7,
        attention_efficiency=0.6,
        half_rate_rows=1.5,
        # A step near the model's kernel sizes (mixtral's matrices are 117 MB in bf16,
        # per chip 58 MB), so its gradient is live.
        small_kernel_bytes=40e6,
        small_kernel_efficiency=0.6,
        small_kernel_knee=3.0,
        energy_per_flop=(1.5e-12, 5e-13, 2.5e-13, 1.2e-13),
        static_power=90.0,
        kernel_overhead=3e-6,
        link_bandwidth=400e9,
        link_latency=6e-6,
        hop_latency=2e-6,
        overlap=6.0,
        tensor_parallel=2,
        pipeline_parallel=2,
    )


def _logits():
    return jnp.asarray(np.random.default_rng(0).normal(size=(len(cm.ROWS), 3)))


def _objective(chip, logits, workload):
    cost = cm.decode_cost(workload, chip, cm.soft_placement(logits, 0.7))
    return jnp.log(cost.seconds_per_step) + jnp.log(cost.joules_per_token)


def _fd_log(f, x, h=1e-5):
    """Central difference of f with respect to log(x) for every element of x."""
    flat = np.asarray(x, dtype=np.float64).ravel()
    out = np.zeros_like(flat)
    for i in range(flat.size):
        if flat[i] == 0:
            continue
        up, dn = flat.copy(), flat.copy()
        up[i] *= np.exp(h)
        dn[i] *= np.exp(-h)
        out[i] = (f(jnp.asarray(up.reshape(np.shape(x)))) - f(jnp.asarray(dn.reshape(np.shape(x))))) / (2 * h)
    return out.reshape(np.shape(x))


@pytest.mark.slow
def test_gradient_wrt_every_chip_parameter_matches_finite_differences(x64):
    w, chip, logits = _workload(), _chip(), _logits()
    grads = jax.grad(_objective)(chip, logits, w)
    leaves, treedef = jax.tree.flatten(chip)
    g_leaves = jax.tree.leaves(grads)
    assert len(leaves) == len(g_leaves) >= 20
    for k, (x, g) in enumerate(zip(leaves, g_leaves)):

        def f(v, k=k):
            new = list(leaves)
            new[k] = v
            return float(_objective(jax.tree.unflatten(treedef, new), logits, w))

        fd = _fd_log(f, x)
        analytic = np.asarray(g) * np.asarray(x)  # d f / d log x
        np.testing.assert_allclose(analytic, fd, rtol=2e-4, atol=1e-7, err_msg=f"chip leaf {k}")


@pytest.mark.slow
def test_gradient_wrt_placement_logits_matches_finite_differences(x64):
    w, chip, logits = _workload(), _chip(), _logits()
    g = jax.grad(lambda lg: _objective(chip, lg, w))(logits)
    h = 1e-6
    fd = np.zeros(logits.shape)
    for idx in np.ndindex(logits.shape):
        e = jnp.zeros(logits.shape).at[idx].set(h)
        fd[idx] = (_objective(chip, logits + e, w) - _objective(chip, logits - e, w)) / (2 * h)
    np.testing.assert_allclose(g, fd, rtol=1e-4, atol=1e-8)


@pytest.mark.slow
def test_gradient_wrt_design_matches_finite_differences(x64):
    """Through the two-die model (`design_point`, `chip_from_design`): the design vector
    (compute/SRAM logits, PIM-share logit; the stack logit unused with fixed stacks) and
    the readable split (`design_from_split`: SRAM share, stacks, PIM share)."""
    tech, econ = cm.tech_preset("N5"), cm.economics_preset("N5")
    w = cm.Workload(cm.model_preset("llama-3-8b"), cm.Scenario(batch=16, context=8192))
    x = jnp.asarray([0.3, -0.2, -0.4, 0.1, 0.0])
    placement = cm.soft_placement(_logits(), 1.0)

    def seconds(design):
        chip = cm.chip_from_design(design, tech, overlap=8.0)
        return jnp.log(cm.decode_cost(w, chip, placement).seconds_per_step)

    def f(x):
        return seconds(cm.design_point(x, tech, econ, logic_area=600e-6, n_stacks=4.0))

    g = jax.grad(f)(x)
    h = 1e-6
    fd = [(f(x.at[i].add(h)) - f(x.at[i].add(-h))) / (2 * h) for i in range(5)]
    np.testing.assert_allclose(g, fd, rtol=1e-4, atol=1e-9)
    assert np.all(np.isfinite(g)) and np.all(np.abs(g[:3]) > 0) and np.all(g[3:] == 0)

    def split(v):
        return seconds(cm.design_from_split(600e-6, v[0], v[1], v[2], tech, econ))

    v = jnp.asarray([0.3, 4.0, 0.4])
    g = jax.grad(split)(v)
    fd = [(split(v.at[i].add(h)) - split(v.at[i].add(-h))) / (2 * h) for i in range(3)]
    np.testing.assert_allclose(g, fd, rtol=1e-4, atol=1e-9)
    assert np.all(np.isfinite(g)) and np.all(np.abs(g) > 0)


@pytest.mark.slow
def test_gradients_are_finite_for_empty_classes_and_absent_tiers(x64):
    # A dense model (no experts), no prefix, no sliding layers, a chip without PIM or
    # links: every double-where must keep the gradient finite.
    w = cm.Workload(cm.model_preset("llama-3-8b"), cm.Scenario(batch=1, context=0))
    chip = cm.make_chip(capacity=(0, 0, 80e9), bandwidth=(0, 0, 3e12), peak_flops=1e15, energy_per_byte=(0, 0, 3e-11))
    g = jax.grad(lambda c, lg: _objective(c, lg, w), argnums=(0, 1))(chip, _logits())
    for leaf in jax.tree.leaves(g):
        assert np.all(np.isfinite(leaf))
    # The same with a live small-kernel step, and with the whole history a shared
    # prefix (no private KV): empty classes have zero-byte kernels.
    step = chip.replace(small_kernel_bytes=1e8, small_kernel_efficiency=0.5, tensor_parallel=4)
    shared = cm.Workload(cm.model_preset("llama-3-8b"), cm.Scenario(batch=4, context=512, prefix=512))
    for workload in (w, shared):
        g = eqx.filter_grad(lambda args: _objective(*args))((step, _logits(), workload))
        for leaf in jax.tree.leaves(g):
            assert np.all(np.isfinite(leaf))


@pytest.mark.parametrize("dtype", ["float32"])
def test_float32_agrees_with_float64(dtype):
    w, chip, logits = _workload(), _chip(), _logits()
    f32 = cm.decode_cost(w, chip, cm.soft_placement(logits.astype(dtype), 0.7))
    with jax.enable_x64(True):
        w64 = jax.tree.map(lambda x: jnp.asarray(x, jnp.float64) if eqx.is_inexact_array(x) else x, w)
        c64 = jax.tree.map(lambda x: jnp.asarray(x, jnp.float64) if eqx.is_inexact_array(x) else x, chip)
        f64 = cm.decode_cost(w64, c64, cm.soft_placement(jnp.asarray(logits, jnp.float64), 0.7))
        np.testing.assert_allclose(float(f32.seconds_per_step), float(f64.seconds_per_step), rtol=1e-5)
        np.testing.assert_allclose(float(f32.joules_per_token), float(f64.joules_per_token), rtol=1e-5)
