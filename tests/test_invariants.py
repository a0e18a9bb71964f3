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
    return cm.Chip(
        **{
            **{k: getattr(chip, k) for k in chip.__dataclass_fields__},
            "tiers": cm.Tiers(
                **{
                    **{
                        k: getattr(chip.tiers, k)
                        for k in ("capacity", "bandwidth", "latency", "energy_per_byte", "efficiency")
                    },
                    **fields,
                }
            ),
        }
    )


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


@pytest.mark.parametrize("seed", SEEDS)
def test_overflow_never_grows_with_capacity(seed):
    _, w, chip, placement = _random_case(seed, ordered=False)
    base = cm.decode_cost(w, chip, placement).overflow_bytes
    bigger = _with_tiers(chip, capacity=chip.tiers.capacity * 2.0)
    assert cm.decode_cost(w, bigger, placement).overflow_bytes <= base * (1 + 1e-6) + 1e-3


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


@pytest.mark.parametrize("seed", SEEDS)
def test_a_step_is_never_faster_than_bytes_over_bandwidth(seed):
    _, w, chip, placement = _random_case(seed, ordered=False)
    cost = cm.decode_cost(w, chip, placement)
    per_group = cost.tier_bytes / chip.tensor_parallel
    for tier in (0, 2):  # the tiers that stream to the compute die
        assert cost.seconds_per_step >= per_group[tier] / chip.tiers.bandwidth[tier] * (1 - 1e-6)
    assert cost.seconds_per_step >= per_group[1] / chip.pim_bandwidth * (1 - 1e-6)


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
