"""jit, eager and vmap agree; new values never retrace."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import costmodel as cm

from helpers import random_chip, random_logits, random_model, random_scenario


def _cases(n, seed=0):
    rng = np.random.default_rng(seed)
    return [
        (cm.Workload(random_model(rng), random_scenario(rng)), random_chip(rng), jnp.asarray(random_logits(rng)))
        for _ in range(n)
    ]


def _cost(w, chip, logits):
    return cm.decode_cost(w, chip, cm.soft_placement(logits, 0.5))


@pytest.mark.slow
def test_jit_equals_eager_equals_vmap():
    cases = _cases(6)
    eager = [_cost(*c) for c in cases]
    jitted = [eqx.filter_jit(_cost)(*c) for c in cases]
    stacked = jax.tree.map(lambda *xs: jnp.stack(xs), *cases)
    vmapped = jax.vmap(_cost)(*stacked)
    for i, (e, j) in enumerate(zip(eager, jitted)):
        for a, b, v in zip(jax.tree.leaves(e), jax.tree.leaves(j), jax.tree.leaves(vmapped)):
            np.testing.assert_allclose(a, b, rtol=2e-5)
            np.testing.assert_allclose(a, v[i], rtol=2e-5)


@pytest.mark.slow
def test_grad_of_vmap_equals_vmap_of_grad():
    cases = _cases(4, seed=1)
    f = lambda w, c, lg: jnp.log(_cost(w, c, lg).seconds_per_step)
    stacked = jax.tree.map(lambda *xs: jnp.stack(xs), *cases)
    per = jax.vmap(jax.grad(f, argnums=(1, 2)))(*stacked)
    summed = jax.grad(lambda w, c, lg: jnp.sum(jax.vmap(f)(w, c, lg)), argnums=(1, 2))(*stacked)
    for a, b in zip(jax.tree.leaves(per), jax.tree.leaves(summed)):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-12)


def test_new_values_do_not_retrace():
    cases = _cases(3, seed=2)

    @eqx.filter_jit
    @eqx.debug.assert_max_traces(max_traces=1)
    def step(w, chip, logits):
        return _cost(w, chip, logits).seconds_per_step

    for c in cases:
        step(*c)


def test_evaluate_compiles_once_across_models_chips_and_scenarios():
    traces = []

    def listener(name, *a, **k):
        if name.endswith("jaxpr_trace_duration"):
            traces.append(name)

    jax.monitoring.register_event_duration_secs_listener(listener)
    try:
        cm.evaluate("llama-3-8b", "h100-sxm", batch=1, context=1000)  # warm: may compile
        before = len(traces)
        for model, chip, batch in (
            ("llama-2-7b", "a100-80gb-sxm", 7),
            ("gemma-2-9b", "h200-sxm", 33),
            ("mixtral-8x7b", "mi300x", 4),
        ):
            cm.evaluate(model, chip, batch=batch, context=1000 * batch)
    finally:
        jax.monitoring.unregister_event_duration_listener(listener)
    assert len(traces) == before, "evaluate retraced for new values"
