"""Micro-batches in flight through a pipeline (`Scenario.micro_batches`)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import costmodel as cm
from costmodel.io import InputError


def _cost(batch, groups, tp=1, pp=4, model="llama-3-8b", chip="h100-sxm", context=4096):
    w = cm.Workload(cm.model_preset(model), cm.Scenario(batch=batch, context=context, micro_batches=groups))
    c = cm.chip_preset(chip).replace(tensor_parallel=tp, pipeline_parallel=pp)
    return cm.decode_cost(w, c, cm.policy_placement("dram", cm.lower_traffic(w), c))


def test_one_group_is_the_whole_batch_in_one_pass():
    """`micro_batches = 1` is the step of the batch through the stages one after another."""
    c = _cost(32, 1)
    w = cm.Workload(cm.model_preset("llama-3-8b"), cm.Scenario(batch=32, context=4096))
    chip = cm.chip_preset("h100-sxm").replace(pipeline_parallel=4)
    ref = cm.decode_cost(w, chip, cm.policy_placement("dram", cm.lower_traffic(w), chip))
    for a, b in zip(jax.tree.leaves(c), jax.tree.leaves(ref)):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def test_up_to_one_group_per_stage_a_step_is_one_groups_pass():
    for groups in (2, 4):
        c = _cost(32, groups)
        one = _cost(32 / groups, 1)  # the pass of one group alone
        assert float(c.seconds_per_step) == pytest.approx(float(one.seconds_per_step), rel=1e-6)
        assert float(c.tokens_per_second) == pytest.approx(32 / float(one.seconds_per_step), rel=1e-6)
        # Bytes, FLOPs and dynamic energy are those of every group's pass.
        np.testing.assert_allclose(np.asarray(c.tier_bytes), groups * np.asarray(one.tier_bytes), rtol=1e-6)
        assert float(c.compute_joules) == pytest.approx(groups * float(one.compute_joules), rel=1e-6)
        # What is stored is the whole batch's KV cache.
        np.testing.assert_allclose(np.asarray(c.stored_bytes), np.asarray(_cost(32, 1).stored_bytes), rtol=1e-6)


def test_more_groups_than_stages_queue_at_each_stage():
    c, one = _cost(64, 8, pp=2), _cost(8, 1, pp=2)
    assert float(c.seconds_per_step) == pytest.approx(4 * float(one.seconds_per_step), rel=1e-6)
    assert float(cm.pipelined_seconds(1.0, 8.0, 2.0)) == 4.0
    assert float(cm.pipelined_seconds(1.0, 2.0, 8.0)) == 1.0


def test_energy_adds_up_over_the_step():
    c = _cost(48, 3)
    total = float(jnp.sum(c.tier_joules) + c.compute_joules + c.static_joules)
    assert float(c.joules_per_token) * 48 == pytest.approx(total, rel=1e-6)
    assert float(c.power) * 4 * float(c.seconds_per_step) == pytest.approx(total, rel=1e-6)


@pytest.mark.parametrize("stages", [2, 4, 8])
def test_more_stages_with_enough_micro_batches_never_lower_throughput(stages):
    """Groups of 8 sequences: a pipeline of k stages with k groups in flight gives at least
    one stage's tokens per step (it adds only the hops)."""
    base = _cost(8, 1, pp=1)
    piped = _cost(8 * stages, stages, pp=stages)
    hops = (stages - 1) * float(cm.chip_preset("h100-sxm").hop_latency)
    assert float(piped.tokens_per_second) >= float(base.tokens_per_second) * 0.999
    assert float(piped.seconds_per_step) == pytest.approx(float(base.seconds_per_step) + hops, rel=1e-3)


@pytest.mark.slow
def test_gradients_match_finite_differences(x64):
    def f(x):
        batch, groups = x
        w = cm.Workload(cm.model_preset("llama-3-8b"), cm.Scenario(batch=batch, context=4096, micro_batches=groups))
        chip = jax.tree.map(
            lambda a: jnp.asarray(a, jnp.float64), cm.chip_preset("h100-sxm").replace(pipeline_parallel=4)
        )
        return cm.decode_cost(w, chip, cm.policy_placement("dram", cm.lower_traffic(w), chip)).joules_per_token

    for x in (jnp.asarray([48.0, 3.0]), jnp.asarray([64.0, 6.0])):  # within and beyond one group per stage
        g = np.asarray(jax.grad(f)(x))
        for i in range(2):
            h = 1e-6 * float(x[i])
            e = jnp.zeros(2).at[i].set(h)
            fd = (float(f(x + e)) - float(f(x - e))) / (2 * h)
            assert g[i] == pytest.approx(fd, rel=1e-5), (x, i)


def test_evaluate_auto_gives_one_group_per_stage():
    e = cm.evaluate("llama-3-70b", "h100-sxm", batch=64, tensor_parallel=2, pipeline_parallel=4, micro_batches="auto")
    assert float(e.workload.scenario.micro_batches) == 4.0
    one = cm.evaluate("llama-3-70b", "h100-sxm", batch=64, tensor_parallel=2, pipeline_parallel=4)
    assert float(e.cost.tokens_per_second) > float(one.cost.tokens_per_second)
    small = cm.evaluate(
        "llama-3-70b", "h100-sxm", batch=2, tensor_parallel=2, pipeline_parallel=4, micro_batches="auto"
    )
    assert float(small.workload.scenario.micro_batches) == 2.0  # at most one group per sequence


@pytest.mark.parametrize("groups", [0.5, 100, "two", True])
def test_bad_micro_batches_is_one_line(groups):
    with pytest.raises(InputError) as e:
        cm.evaluate("llama-3-8b", "h100-sxm", batch=8, micro_batches=groups)
    assert "\n" not in str(e.value) and "micro_batches" in str(e.value)
