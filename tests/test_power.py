"""The DVFS relation: identity below the cap, never above it, implicit gradients."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import costmodel as cm
from costmodel._core.power import MIN_CLOCK, sustained_cost, throttle

from helpers import random_chip, random_model, random_scenario


sustained = eqx.filter_jit(sustained_cost)


def _point(batch, context, cap, model="llama-3-8b"):
    w = cm.Workload(cm.model_preset(model), cm.Scenario(batch=batch, context=context))
    chip = cm.chip_preset("h100-sxm").replace(power_cap=cap)
    return w, chip, cm.policy_placement("dram", cm.lower_traffic(w), chip)


def test_identity_below_the_cap():
    w, chip, p = _point(1, 4096, 700.0)
    s = sustained(w, chip, p)
    assert float(s.clock) == 1.0
    assert float(s.cost.seconds_per_step) == float(s.peak.seconds_per_step)
    assert float(s.cost.joules_per_token) == float(s.peak.joules_per_token)
    assert float(s.sustained_to_peak) == 1.0


@pytest.mark.parametrize("cap", [450.0, 300.0, 250.0])
def test_capped_power_sits_at_the_cap(cap):
    w, chip, p = _point(1024, 512, cap)
    s = sustained(w, chip, p)
    assert float(s.peak.power) > cap  # the premise: at full clock it is over
    assert bool(s.within_cap)
    assert float(s.cost.power) <= cap * (1 + 1e-5)
    assert float(s.cost.power) >= cap * (1 - 1e-3)  # and the clock is not lowered needlessly
    assert MIN_CLOCK < float(s.clock) < 1
    assert float(s.cost.seconds_per_step) > float(s.peak.seconds_per_step)


@pytest.mark.slow
def test_random_configs_never_exceed_the_cap():
    rng = np.random.default_rng(7)
    for _ in range(25):
        w = cm.Workload(random_model(rng), random_scenario(rng))
        chip = random_chip(rng)
        p = cm.soft_placement(jnp.asarray(rng.normal(size=(len(cm.ROWS), 3))))
        peak = cm.decode_cost(w, chip, p)
        cap = float(peak.power) * rng.uniform(0.3, 1.5)
        s = sustained(w, chip.replace(power_cap=cap), p)
        assert 0 < float(s.clock) <= 1
        assert float(s.cost.power) <= float(s.peak.power) * (1 + 1e-5)
        assert float(s.cost.seconds_per_step) >= float(s.peak.seconds_per_step) * (1 - 1e-6)
        if bool(s.within_cap):
            assert float(s.cost.power) <= cap * (1 + 1e-5)
        else:  # only when even the lowest clock is over the cap
            assert float(s.clock) == pytest.approx(MIN_CLOCK)
        if float(s.peak.power) <= cap:
            assert float(s.clock) == 1.0


def test_compute_bound_power_falls_as_the_cube_of_the_clock():
    # With no static, memory or SRAM power and a compute-only step, P(r) = r^3 P(1).
    w = cm.Workload(cm.model_preset("llama-3-8b"), cm.Scenario(batch=4096, context=1))
    chip = cm.make_chip(
        capacity=(0, 0, 1e12), bandwidth=(0, 0, 1e16), peak_flops=1e15, energy_per_flop=1e-12, power_cap=1e9
    )
    p = cm.policy_placement("dram", cm.lower_traffic(w), chip)
    full = cm.decode_cost(w, chip, p)
    half = cm.decode_cost(w, throttle(chip, 0.5), p)
    assert cm.BOUNDS[int(full.bound)] == "compute"
    assert float(half.power) == pytest.approx(float(full.power) / 8, rel=2e-2)
    s = sustained(w, chip.replace(power_cap=float(full.power) / 8), p)
    assert float(s.clock) == pytest.approx(0.5, rel=1e-2)


def test_throttle_leaves_dram_alone():
    chip = cm.chip_preset("hbm-pim-gpu")
    t = throttle(chip, 0.6)
    np.testing.assert_allclose(t.tiers.bandwidth[1:], chip.tiers.bandwidth[1:])
    np.testing.assert_allclose(t.tiers.energy_per_byte[1:], chip.tiers.energy_per_byte[1:])
    np.testing.assert_allclose(t.tiers.bandwidth[0], 0.6 * chip.tiers.bandwidth[0], rtol=1e-6)
    np.testing.assert_allclose(t.energy_per_flop, 0.36 * chip.energy_per_flop, rtol=1e-6)
    assert float(t.pim_bandwidth) == float(chip.pim_bandwidth)


@pytest.mark.slow
def test_gradient_through_the_clock_matches_finite_differences(x64):
    w, chip, p = _point(1024, 512, 300.0)

    def seconds(cap, flops_scale):
        c = chip.replace(power_cap=cap, peak_flops=chip.peak_flops * flops_scale)
        return sustained_cost(w, c, p).cost.seconds_per_step

    g = jax.grad(seconds, argnums=(0, 1))(300.0, 1.0)
    h = 1e-4
    fd_cap = (seconds(300.0 * (1 + h), 1.0) - seconds(300.0 * (1 - h), 1.0)) / (2 * h * 300.0)
    fd_fl = (seconds(300.0, 1 + h) - seconds(300.0, 1 - h)) / (2 * h)
    assert float(g[0]) < 0  # a higher cap is faster
    np.testing.assert_allclose(float(g[0]), float(fd_cap), rtol=2e-3)
    np.testing.assert_allclose(float(g[1]), float(fd_fl), rtol=2e-3)


@pytest.mark.slow
def test_vmap_over_caps():
    w, chip, p = _point(1024, 512, 300.0)
    caps = jnp.asarray([200.0, 300.0, 450.0, 900.0])
    clocks = jax.vmap(lambda c: sustained_cost(w, chip.replace(power_cap=c), p).clock)(caps)
    assert np.all(np.diff(np.asarray(clocks)) >= 0)
    assert float(clocks[-1]) == 1.0
