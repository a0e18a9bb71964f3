"""Little's law on DRAM streaming: bytes in flight over latency bound the bandwidth."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import costmodel as cm
from costmodel._core.channels import LITTLE_SHARPNESS
from costmodel._core.chip import DRAM, SRAM

from helpers import bounded_chip


def _chip(**changes):
    return bounded_chip(**changes)


def _seconds(chip, batch=1, context=4096):
    w = cm.Workload(cm.model_preset("llama-3-8b"), cm.Scenario(batch=batch, context=context))
    placement = cm.policy_placement("dram", cm.lower_traffic(w), chip)
    return cm.decode_cost(w, chip, placement).seconds_per_step


def test_closed_form_on_a_small_case():
    chip = _chip()
    bound = 100 * 4e3 / 4e-7  # 1e12 B/s
    reachable = 2e12 * 0.9
    expected = (reachable**-LITTLE_SHARPNESS + bound**-LITTLE_SHARPNESS) ** (-1 / LITTLE_SHARPNESS)
    bw = np.asarray(cm.stream_bandwidth(chip.tiers, cm.chip_in_flight(chip)))
    assert bw[DRAM] == pytest.approx(expected, rel=1e-5)
    assert bw[SRAM] == pytest.approx(5e12, rel=1e-6)  # the bound is DRAM's only
    assert bw[DRAM] < min(bound, reachable)


def test_no_bound_is_the_plain_stream():
    """Neutral defaults: no units or no bytes in flight give exactly `bandwidth x efficiency`."""
    for chip in (_chip(parallel_units=0.0), _chip(bytes_in_flight=0.0)):
        bw = np.asarray(cm.stream_bandwidth(chip.tiers, cm.chip_in_flight(chip)))
        np.testing.assert_allclose(bw, np.asarray(chip.tiers.effective_bandwidth), rtol=1e-6)
    preset = cm.chip_preset("h100-pcie")  # has an SM count, no bytes in flight of its own
    assert float(preset.parallel_units) == 114.0 and float(preset.bytes_in_flight) == 0.0
    unbounded = preset.replace(parallel_units=0.0)
    assert float(_seconds(preset)) == float(_seconds(unbounded))


def test_a_kernel_with_little_concurrency_saturates_a_narrow_memory_not_a_wide_one():
    narrow, wide = _chip(), _chip(tiers=_chip().tiers.replace(bandwidth=jnp.asarray([5e12, 0.0, 8e12])))
    slow = float(_seconds(wide)) / float(_seconds(wide.replace(bytes_in_flight=0.0)))
    fast = float(_seconds(narrow)) / float(_seconds(narrow.replace(bytes_in_flight=0.0)))
    assert slow > fast > 1.0  # the wide memory loses more to the same bytes in flight


def test_the_bound_is_the_weights_kernels_and_the_kv_streams_at_the_tiers_rate():
    """`class_in_flight`: the weight classes keep the chip's bytes in flight, the KV
    classes none; so the bound slows the weights' stream and leaves the K/V's alone."""
    from costmodel._core.traffic import CLASS_IS_KV

    chip = _chip()
    kv = np.asarray(CLASS_IS_KV)
    per_class = np.asarray(cm.class_in_flight(chip))
    assert np.all(per_class[kv] == 0.0) and np.all(per_class[~kv] == float(cm.chip_in_flight(chip)))
    # A batch of 64 at 4,096 tokens (it fits), the K/V more than twice the weights: DRAM's
    # time is the weights' bytes at the bound's rate and the K/V's at the tier's.
    w = cm.Workload(cm.model_preset("llama-3-8b"), cm.Scenario(batch=64, context=4096))
    t = cm.lower_traffic(w, buckets=False)
    full = np.asarray(t.read_bytes + t.writes) / np.asarray(cm.class_stream_efficiency(t, chip))
    weight_full, kv_full = float(np.sum(full[~kv])), float(np.sum(full[kv]))
    assert kv_full > 2 * weight_full
    bound = cm.decode_cost(w, chip, cm.policy_placement("dram", t, chip))
    assert bool(bound.feasible)
    free = cm.decode_cost(w, chip.replace(bytes_in_flight=0.0), cm.policy_placement("dram", t, chip))
    reachable = float(np.asarray(chip.tiers.effective_bandwidth)[DRAM])
    little = float(np.asarray(cm.stream_bandwidth(chip.tiers, cm.chip_in_flight(chip)))[DRAM])
    assert float(free.tier_seconds[DRAM]) == pytest.approx((weight_full + kv_full) / reachable, rel=1e-5)
    assert float(bound.tier_seconds[DRAM]) == pytest.approx(weight_full / little + kv_full / reachable, rel=1e-5)


@pytest.mark.slow
@pytest.mark.parametrize("batch", [1, 64])
def test_more_concurrency_or_less_latency_never_slows_a_step(batch):
    in_flight = jnp.geomspace(0.5e3, 64e3, 12)
    times = jax.vmap(lambda b: _seconds(_chip(bytes_in_flight=b), batch))(in_flight)
    assert np.all(np.diff(np.asarray(times)) <= 1e-12)
    units = jnp.geomspace(8.0, 256.0, 12)
    times = jax.vmap(lambda u: _seconds(_chip(parallel_units=u), batch))(units)
    assert np.all(np.diff(np.asarray(times)) <= 1e-12)
    latency = jnp.geomspace(1e-7, 1e-6, 12)
    base = _chip()

    def at(lat):
        return _seconds(base.replace(tiers=base.tiers.replace(latency=jnp.stack([2e-7, 0.0, lat]))), batch)

    times = jax.vmap(at)(latency)
    assert np.all(np.diff(np.asarray(times)) >= -1e-12)


def test_gradients_match_finite_differences(x64):
    base = jax.tree.map(lambda x: jnp.asarray(x, jnp.float64), _chip())

    def f(x):
        units, in_flight, latency = x
        chip = base.replace(parallel_units=units, bytes_in_flight=in_flight)
        chip = chip.replace(tiers=chip.tiers.replace(latency=jnp.stack([2e-7, 0.0, latency])))
        return _seconds(chip)

    x = jnp.asarray([100.0, 4e3, 4e-7], dtype=jnp.float64)
    g = np.asarray(jax.grad(f)(x))
    for i in range(3):
        h = 1e-6 * float(x[i])
        e = jnp.zeros(3, dtype=jnp.float64).at[i].set(h)
        fd = (float(f(x + e)) - float(f(x - e))) / (2 * h)
        assert g[i] == pytest.approx(fd, rel=1e-5, abs=1e-18), i
    assert g[0] < 0 and g[1] < 0 and g[2] > 0


def test_a_profile_sets_the_bytes_in_flight_and_a_chips_own_bound_stays():
    from costmodel.evaluation import NEUTRAL_PROFILE, apply_multipliers

    log = jnp.log(jnp.asarray([*NEUTRAL_PROFILE[:4], 3.0, NEUTRAL_PROFILE[5]], dtype=float))
    free = _chip(bytes_in_flight=0.0)
    assert float(apply_multipliers(free, log).bytes_in_flight) == pytest.approx(3e3, rel=1e-5)
    own = _chip(bytes_in_flight=2e3)
    assert float(apply_multipliers(own, log).bytes_in_flight) == pytest.approx(2e3, rel=1e-5)
    neutral = apply_multipliers(free, jnp.log(jnp.asarray(NEUTRAL_PROFILE, dtype=float)))
    assert float(_seconds(neutral)) == pytest.approx(float(_seconds(free.replace(parallel_units=0.0))), rel=1e-6)


def test_a_bad_bytes_in_flight_in_a_profile_is_one_line(tmp_path):
    from costmodel.io import InputError, load_frameworks

    path = tmp_path / "frameworks.toml"
    path.write_text(
        "[frameworks.x]\nmemory_efficiency = 1.0\ncompute_efficiency = 1.0\nkernel_overhead = 1.0\n"
        'link_latency = 1.0\nbytes_in_flight_KB = -2.0\nfit = []\nfitted_on = []\nsource = "test"\n'
    )
    with pytest.raises(InputError) as e:
        load_frameworks(path)
    message = str(e.value)
    assert "\n" not in message and "bytes_in_flight_KB" in message and "-2" in message and str(path) in message
