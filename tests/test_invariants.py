"""Physical invariants of the decode cost on seeded random configurations."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import costmodel as cm

from helpers import random_chip, random_logits, random_model, random_scenario


SEEDS = range(40)


def _random_case(seed, ordered=True):
    rng = np.random.default_rng(seed)
    w = cm.Workload(random_model(rng), random_scenario(rng))
    chip = random_chip(rng, ordered=ordered)
    placement = cm.soft_placement(jnp.asarray(random_logits(rng)), rng.uniform(0.2, 2.0))
    return rng, w, chip, placement


def _with_tiers(chip, **fields):
    return chip.replace(tiers=chip.tiers.replace(**fields))


@pytest.mark.slow
@pytest.mark.parametrize("seed", SEEDS)
def test_more_bandwidth_never_slows_a_step(seed):
    _, w, chip, placement = _random_case(seed, ordered=False)
    base = cm.decode_cost(w, chip, placement).seconds_per_step
    for tier in range(3):
        faster = _with_tiers(chip, bandwidth=chip.tiers.bandwidth.at[tier].multiply(1.7))
        assert cm.decode_cost(w, faster, placement).seconds_per_step <= base * (1 + 1e-6)
    for field in ("pim_bandwidth", "pim_flops", "link_bandwidth"):
        faster = chip.replace(**{field: getattr(chip, field) * 1.7})
        assert cm.decode_cost(w, faster, placement).seconds_per_step <= base * (1 + 1e-6)
    faster = chip.replace(peak_flops=chip.peak_flops * 1.7)
    assert cm.decode_cost(w, faster, placement).seconds_per_step <= base * (1 + 1e-6)


@pytest.mark.slow
@pytest.mark.parametrize("seed", SEEDS)
def test_more_capacity_never_raises_cost_at_a_fixed_placement(seed):
    # With serial channels (p = 1) keeping a byte in a faster, cheaper tier always
    # helps. (With overlapped channels, a placement that over-asks a fast tier can make
    # that tier the bottleneck once it fits: a bad placement, not a model error; the
    # overflow itself still never grows, checked below for every p.)
    _, w, chip, placement = _random_case(seed)
    chip = chip.replace(overlap=1.0, pim_flops=1e20)
    base = cm.decode_cost(w, chip, placement)
    for tier in range(3):
        bigger = _with_tiers(chip, capacity=chip.tiers.capacity.at[tier].multiply(3.0))
        cost = cm.decode_cost(w, bigger, placement)
        assert cost.seconds_per_step <= base.seconds_per_step * (1 + 1e-5)
        assert cost.joules_per_token <= base.joules_per_token * (1 + 1e-5)
        assert cost.overflow_bytes <= base.overflow_bytes * (1 + 1e-6) + 1e-3


@pytest.mark.slow
@pytest.mark.parametrize("seed", SEEDS)
def test_overflow_never_grows_with_capacity(seed):
    _, w, chip, placement = _random_case(seed, ordered=False)
    base = cm.decode_cost(w, chip, placement).overflow_bytes
    bigger = _with_tiers(chip, capacity=chip.tiers.capacity * 2.0)
    assert cm.decode_cost(w, bigger, placement).overflow_bytes <= base * (1 + 1e-6) + 1e-3


@pytest.mark.slow
@pytest.mark.parametrize("seed", SEEDS)
def test_placement_rows_sum_to_one(seed):
    _, w, chip, placement = _random_case(seed)
    traffic = cm.lower_traffic(w)
    hard = cm.harden_placement(placement, traffic, chip)
    for p in [placement, hard, cm.spill(placement, traffic, chip)] + [
        cm.policy_placement(policy, traffic, chip) for policy in cm.POLICIES
    ]:
        np.testing.assert_allclose(jnp.sum(p, axis=-1), 1.0, rtol=1e-5)
        assert jnp.all(p >= 0)


@pytest.mark.slow
@pytest.mark.parametrize("seed", SEEDS)
def test_hard_placement_never_exceeds_a_capacity(seed):
    _, w, chip, placement = _random_case(seed, ordered=False)
    traffic = cm.lower_traffic(w)
    for hard in [cm.harden_placement(placement, traffic, chip)] + [
        cm.policy_placement(policy, traffic, chip) for policy in cm.POLICIES
    ]:
        held = hard.T @ traffic.stored_bytes / chip.n_chips
        assert held[0] <= chip.tiers.capacity[0] * (1 + 1e-5)
        assert held[1] <= chip.tiers.capacity[1] * (1 + 1e-5)
        # Whole blocks: every class holds an integer number of blocks in SRAM and PIM.
        blocks = hard[:, :2] * jnp.ceil(traffic.count)[:, None]
        np.testing.assert_allclose(blocks, jnp.round(blocks), atol=2e-3 * jnp.maximum(1, blocks).max())
        # A hard placement that fits is not changed by spilling.
        np.testing.assert_allclose(cm.spill(hard, traffic, chip), hard, atol=1e-5)


@pytest.mark.slow
@pytest.mark.parametrize("seed", SEEDS)
def test_a_step_is_never_faster_than_bytes_over_bandwidth(seed):
    _, w, chip, placement = _random_case(seed, ordered=False)
    cost = cm.decode_cost(w, chip, placement)
    per_group = cost.tier_bytes / chip.tensor_parallel
    for tier in (0, 2):  # the tiers that stream to the compute die
        assert cost.seconds_per_step >= per_group[tier] / chip.tiers.bandwidth[tier] * (1 - 1e-6)
    assert cost.seconds_per_step >= per_group[1] / chip.pim_bandwidth * (1 - 1e-6)


@pytest.mark.slow
@pytest.mark.parametrize("seed", SEEDS)
def test_costs_are_finite_and_positive(seed):
    _, w, chip, placement = _random_case(seed, ordered=False)
    cost = cm.decode_cost(w, chip, placement)
    for leaf in jax.tree.leaves(cost):
        assert jnp.all(jnp.isfinite(leaf))
    assert cost.seconds_per_step > 0 and cost.joules_per_token > 0


def test_batch1_llama3_8b_bf16_on_h100_is_memory_bound():
    e = cm.evaluate("llama-3-8b", "h100-sxm", batch=1, context=4096)
    assert cm.BOUNDS[int(e.cost.bound)] == "memory"
    # and no faster than its bytes over the HBM bandwidth (3.35 TB/s)
    bytes_per_step = float(jnp.sum(cm.lower_traffic(e.workload).read_bytes))
    assert float(e.cost.seconds_per_step) >= bytes_per_step / 3.35e12


def test_large_batch_short_context_becomes_compute_bound():
    e = cm.evaluate("llama-3-8b", "h100-sxm", batch=1024, context=128)
    assert cm.BOUNDS[int(e.cost.bound)] == "compute"


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(20))
def test_slower_kernels_never_speed_a_step(seed):
    """Less compute feed from DRAM, a lower attention efficiency, more half-rate rows,
    a lower small-kernel efficiency or a higher small-kernel step never makes a step
    faster (and each is felt where its FLOPs or bytes are)."""
    _, w, chip, placement = _random_case(seed)
    base = float(cm.decode_cost(w, chip, placement).seconds_per_step)
    feed = chip.tiers.compute_feed
    slower = [
        chip.replace(tiers=chip.tiers.replace(compute_feed=feed.at[2].multiply(0.5))),
        chip.replace(attention_efficiency=chip.attention_efficiency * 0.5),
        chip.replace(half_rate_rows=chip.half_rate_rows + 2.0),
        chip.replace(attention_half_rate_rows=chip.attention_half_rate_rows + 2.0),
        chip.replace(small_kernel_efficiency=chip.small_kernel_efficiency * 0.5),
        chip.replace(small_kernel_bytes=chip.small_kernel_bytes * 4.0 + 1e6),
    ]
    for c in slower:
        assert float(cm.decode_cost(w, c, placement).seconds_per_step) >= base * (1 - 1e-6)


def test_compute_time_closed_form_with_kernel_fields():
    """All in DRAM, serial channels: the compute die's time is, per class, FLOPs over
    peak x efficiency x (attention efficiency on KV) x m/(m + m½) x DRAM feed, with m
    the batch for weights and the query heads per KV head for attention, and m½ the
    weight matmuls' (`half_rate_rows`) or attention's (`attention_half_rate_rows`)."""
    model = cm.Model(n_layers=4, d_model=1024, n_heads=16, n_kv_heads=4, head_dim=64, d_ff=4096, vocab=32000)
    w = cm.Workload(model, cm.Scenario(batch=8, context=2048))
    chip = cm.make_chip(
        capacity=(0, 0, 1e12),
        bandwidth=(0, 0, 1e12),
        peak_flops=100e12,
        compute_efficiency=0.8,
        attention_efficiency=0.5,
        half_rate_rows=3.0,
        attention_half_rate_rows=5.0,
        compute_feed=(1.0, 1.0, 0.25),
        overlap=1.0,
    )
    traffic = cm.lower_traffic(w)
    cost = cm.decode_cost(w, chip, cm.policy_placement("dram", traffic, chip))
    flops = np.asarray(traffic.flops, dtype=float)
    rows = np.where(np.asarray(cm.IS_KV), 16 / 4, 8.0)
    kernel = np.where(np.asarray(cm.IS_KV), 0.5, 1.0)
    half = np.where(np.asarray(cm.IS_KV), 5.0, 3.0)
    expected = np.sum(flops / (100e12 * 0.8 * kernel * rows / (rows + half * (1 - 1 / rows)) * 0.25))
    assert float(cost.compute_seconds) == pytest.approx(expected, rel=1e-5)
    # The defaults (feed 1, attention efficiency 1, half-rate rows 0) are the plain rate.
    plain = cm.make_chip(capacity=(0, 0, 1e12), bandwidth=(0, 0, 1e12), peak_flops=100e12, compute_efficiency=0.8)
    cost0 = cm.decode_cost(w, plain, cm.policy_placement("dram", traffic, plain))
    assert float(cost0.compute_seconds) == pytest.approx(flops.sum() / 80e12, rel=1e-5)


def test_kernel_efficiency_closed_form():
    """1 - (1 - e) / (1 + (S/S_small)**k): e far below the step, 1 far above, the
    midpoint at it, and 1 everywhere with no step (S_small = 0)."""
    chip = cm.make_chip(
        capacity=(0, 0, 1e12),
        bandwidth=(0, 0, 1e12),
        peak_flops=1e12,
        small_kernel_bytes=2e6,
        small_kernel_efficiency=0.4,
        small_kernel_knee=3.0,
    )
    sizes = jnp.asarray([0.0, 2e3, 1e6, 2e6, 4e6, 2e9])
    got = np.asarray(cm.kernel_efficiency(sizes, chip))
    s = np.maximum(np.asarray(sizes), 1.0)
    expected = 1 - 0.6 / (1 + (s / 2e6) ** 3.0)
    np.testing.assert_allclose(got, expected, rtol=1e-6)
    assert got[3] == pytest.approx(0.7)
    none = chip.replace(small_kernel_bytes=0.0)
    np.testing.assert_allclose(np.asarray(cm.kernel_efficiency(sizes, none)), 1.0)


def test_small_kernel_stream_closed_form():
    """All in DRAM, every class read at its kernel efficiency: the DRAM channel's time
    is sum(bytes / efficiency) / bandwidth, with the operand sizes of `lower_traffic`
    (a weight matrix, one layer's K of the batch) split over the tensor-parallel chips."""
    model = cm.Model(n_layers=4, d_model=1024, n_heads=16, n_kv_heads=4, head_dim=64, d_ff=4096, vocab=32000)
    w = cm.Workload(model, cm.Scenario(batch=8, context=2048, weight_bytes=2.0, kv_bytes=2.0))
    traffic = cm.lower_traffic(w)
    kb = np.asarray(traffic.kernel_bytes, dtype=float)
    q_o, k_v = 1024 * 16 * 64 * 2.0, 1024 * 4 * 64 * 2.0
    attention = np.exp((q_o * np.log(q_o) + k_v * np.log(k_v)) / (q_o + k_v))
    np.testing.assert_allclose(kb[:2], [attention, 1024 * 4096 * 2.0], rtol=1e-6)
    assert kb[3] == pytest.approx(32000 * 1024 * 2.0)
    assert kb[4] == pytest.approx(8 * 2048 * 4 * 64 * 2.0)  # one layer's K for the batch
    chip = cm.make_chip(
        capacity=(0, 0, 1e12),
        bandwidth=(0, 0, 1e12),
        peak_flops=1e18,
        small_kernel_bytes=16e6,
        small_kernel_efficiency=0.5,
        overlap=1.0,
        tensor_parallel=2,
    )
    cost = cm.decode_cost(w, chip, cm.policy_placement("dram", traffic, chip))
    moved = np.asarray(cm.class_sum(traffic.read_bytes + traffic.writes), dtype=float)  # per class
    s = np.maximum(kb / 2, 1.0)
    eff = 1 - 0.5 / (1 + (s / 16e6) ** 4.0)
    assert float(cost.tier_seconds[2]) == pytest.approx(np.sum(moved / eff) / 2 / 1e12, rel=1e-5)
    # Bytes (and so energy) are the true bytes, not the slowed ones.
    assert float(cost.tier_bytes[2]) == pytest.approx(moved.sum(), rel=1e-6)


def test_kernel_bytes_of_moe_prefix_and_window_classes():
    """Experts: one expert's matrix; KV with a shared prefix: one layer's K of the
    prefix and the batch's private history together; sliding layers: the window."""
    model = cm.Model(
        n_layers=6,
        d_model=512,
        n_heads=8,
        n_kv_heads=2,
        head_dim=64,
        d_ff=1024,
        vocab=1000,
        n_experts=4,
        top_k=2,
        n_sliding_layers=2,
        window=128,
    )
    w = cm.Workload(model, cm.Scenario(batch=4, context=1000, prefix=200, weight_bytes=1.0, kv_bytes=2.0))
    kb = np.asarray(cm.lower_traffic(w).kernel_bytes, dtype=float)
    per_token = 2 * 64 * 2.0
    assert kb[2] == pytest.approx(512 * 1024 * 1.0)
    assert kb[4] == pytest.approx((4 * 800 + 200) * per_token)
    assert kb[5] == pytest.approx(kb[4])
    assert kb[6] == pytest.approx(4 * 128 * per_token)


def test_hockney_fraction():
    assert float(cm.hockney(jnp.asarray(4.0), 4.0)) == pytest.approx(4 / 7)  # m / (m + n½ (1 - 1/m))
    assert float(cm.hockney(jnp.asarray(1e6), 4.0)) == pytest.approx(1e6 / (1e6 + 4.0))  # Hockney for large m
    assert float(cm.hockney(jnp.asarray(1.0), 4.0)) == 1.0  # a GEMV runs at the full rate
    assert float(cm.hockney(jnp.asarray(8.0), 0.0)) == 1.0
    assert float(cm.hockney(jnp.asarray(0.0), 2.0)) == 1.0  # no rows: no FLOPs to slow


def test_on_chip_operands_never_feed_slower_than_dram():
    """A chip file may say the SRAM feed is below DRAM's; the core takes the on-chip feed
    as at least DRAM's, so more SRAM capacity still never slows a step."""
    w = cm.Workload(cm.model_preset("llama-3-8b"), cm.Scenario(batch=64, context=2048))
    times = []
    for cap in (1e6, 1e9, 20e9):
        chip = cm.make_chip(
            capacity=(cap, 0, 80e9),
            bandwidth=(10e12, 0, 3e12),
            peak_flops=100e12,
            compute_feed=(0.3, 1.0, 0.8),
            overlap=1.0,
        )
        placement = cm.policy_placement("sram", cm.lower_traffic(w), chip)
        times.append(float(cm.decode_cost(w, chip, placement).seconds_per_step))
    assert times[0] >= times[1] >= times[2], times
