"""Numerical safety: thousands of seeded random configs through the cost and its gradient.

Configs span the presets' ranges and beyond: models from a 1-layer toy to Llama-3.1
405B (presets and random GQA/MoE/sliding-window models), batch 1…4096, context
1…1M tokens (with shared prefixes), every chip preset, random chips, two-die designs
from a logic die short of its fixed I/O area to 8x a reticle with extreme design
logits, tensor/pipeline parallel 1…64, and soft placements at temperatures from 1
down to 1e-6. Everything is evaluated in one `jit(vmap(...))` call per quantity:

* `decode_cost` and `sustained_cost`: every figure finite, for every config;
* the gradient of seconds and joules per token w.r.t. the chip (every leaf), the
  placement logits, batch and context: finite for every config;
* a config that does not fit is flagged by `feasible` (with `overflow_bytes > 0`),
  never by a NaN;
* float32 agrees with float64 within `F32_RTOL` on every feasible config.
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import jax.tree_util as jtu
import numpy as np
import pytest

import costmodel as cm
from costmodel import io

from helpers import random_chip, random_model


N_CONFIGS = 4096
SEED = 20260
F32_RTOL = 1e-4
"""float32 vs float64 relative tolerance on seconds, joules and tokens per second of
every feasible config (measured worst case over this sweep: 2.0e-5, median 3e-8)."""
TEMPERATURES = np.array([1.0, 0.3, 0.1, 1e-2, 1e-3, 1e-6])


def _stack(trees):
    return jtu.tree_map(lambda *x: jnp.stack(x), *trees)


def _take(tree, i):
    return jtu.tree_map(lambda x: x[i], tree)


def _models(rng: np.random.Generator) -> list[cm.Model]:
    presets = [cm.model_preset(name) for name in sorted(io.model_presets())]
    toy = cm.Model(n_layers=1, d_model=64, n_heads=1, d_ff=64, vocab=256)
    return [toy, *presets, *(random_model(rng) for _ in range(16))]


def _chips(rng: np.random.Generator) -> list[cm.Chip]:
    presets = [io.chip_info(name).chip for name in sorted(io.chip_presets())]
    randoms = [random_chip(rng, ordered=bool(i % 2)) for i in range(16)]
    tech = io.tech_preset("N5")
    econ = io.economics_preset("N5")
    fixed = float(cm.fixed_area(tech, 5.0))
    areas = []
    # A logic die short of its I/O and PHYs (the MIN_FREE_AREA sliver), just above them .. 8 reticles;
    # design vectors (compute, SRAM, PIM-share logits) at and far off the middle.
    for budget in (fixed * 0.9, fixed * 1.001, fixed * 1.1, 814e-6, 8 * 858e-6):
        for logits in ([0.0, 0.0, 0.0], [30.0, -30.0, -30.0], [-30.0, 30.0, -30.0], [-30.0, -30.0, 30.0]):
            x = jnp.asarray([*logits, 0.0, 0.0])
            design = cm.design_point(x, tech, econ, logic_area=budget, n_stacks=5.0)
            areas.append(cm.chip_from_design(design, tech))
    chips = [*presets, *randoms, *areas]
    # Every chip in one pytree structure: make_chip's (the area and random chips) leaves.
    return [c.replace(tensor_parallel=1.0, pipeline_parallel=1.0) for c in chips]


def configs(seed: int = SEED, n: int = N_CONFIGS):
    """The seeded sweep: pools of models and chips, and per-config indices and values."""
    rng = np.random.default_rng(seed)
    models, chips = _models(rng), _chips(rng)
    log_uniform = lambda lo, hi: np.exp(rng.uniform(np.log(lo), np.log(hi), n))
    batch = np.round(log_uniform(1, 4096))
    context = np.round(log_uniform(1, 1e6))
    batch[:4], context[:4] = [1, 4096, 1, 4096], [1, 1, 1e6, 1e6]  # the corners, always
    prefix = np.where(rng.random(n) < 0.3, np.floor(context * rng.random(n)), 0.0)
    per = {
        "model": rng.integers(0, len(models), n),
        "chip": rng.integers(0, len(chips), n),
        "batch": batch,
        "context": context,
        "prefix": prefix,
        "weight_bytes": rng.choice([0.5625, 1.0, 2.0, 4.0], n),
        "kv_bytes": rng.choice([1.0, 2.0], n),
        "precision": rng.integers(0, len(cm.PRECISIONS), n),
        "tp": rng.choice([1.0, 2.0, 4.0, 8.0, 64.0], n),
        "pp": rng.choice([1.0, 1.0, 2.0, 16.0], n),
        "logits": rng.normal(size=(n, len(cm.ROWS), len(cm.TIERS))) * rng.choice([0.1, 1, 10], (n, 1, 1)),
        "temperature": rng.choice(TEMPERATURES, n),
    }
    return models, chips, per


def _pools(models, chips):
    return _stack(models), _stack(chips)


def _config(pools, c):
    models, chips = pools
    chip = _take(chips, c["chip"]).replace(tensor_parallel=c["tp"], pipeline_parallel=c["pp"])
    scenario = cm.Scenario(
        batch=c["batch"],
        context=c["context"],
        prefix=c["prefix"],
        weight_bytes=c["weight_bytes"],
        kv_bytes=c["kv_bytes"],
        weight_precision=c["precision"],
        kv_precision=c["precision"],
    )
    return cm.Workload(_take(models, c["model"]), scenario), chip


def _cost(pools, c):
    workload, chip = _config(pools, c)
    placement = cm.soft_placement(c["logits"], c["temperature"])
    return cm.decode_cost(workload, chip, placement), cm.sustained_cost(workload, chip, placement).cost


def _grads(pools, c):
    def objective(chip, logits, batch, context, which):
        d = {**c, "logits": logits, "batch": batch, "context": context}
        workload, _ = _config(pools, d)
        cost = cm.decode_cost(workload, chip, cm.soft_placement(logits, c["temperature"]))
        return cost.seconds_per_step if which == "s" else cost.joules_per_token

    _, chip = _config(pools, c)
    args = (chip, c["logits"], c["batch"], c["context"])
    return [jax.grad(objective, argnums=(0, 1, 2, 3))(*args, which) for which in ("s", "j")]


def _as(per, dtype):
    return {
        k: jnp.asarray(v, dtype=dtype if np.issubdtype(np.asarray(v).dtype, np.floating) else None)
        for k, v in per.items()
    }


@pytest.fixture(scope="module")
def sweep32():
    models, chips, per = configs()
    pools = _pools(models, chips)
    c = _as(per, jnp.float32)
    cost, sustained = eqx.filter_jit(jax.vmap(_cost, in_axes=(None, 0)))(pools, c)
    grads = eqx.filter_jit(jax.vmap(_grads, in_axes=(None, 0)))(pools, c)
    return per, cost, sustained, grads


def _bad(tree) -> np.ndarray:
    """Per config: whether any float leaf is non-finite."""
    leaves = [np.asarray(x) for x in jax.tree.leaves(tree) if jnp.issubdtype(jnp.asarray(x).dtype, jnp.floating)]
    return np.any(np.stack([~np.isfinite(x).reshape(len(x), -1).all(axis=1) for x in leaves]), axis=0)


@pytest.mark.slow
def test_the_sweep_spans_the_ranges(sweep32):
    per, cost, _, _ = sweep32
    assert per["batch"].min() == 1 and per["batch"].max() == 4096
    assert per["context"].min() == 1 and per["context"].max() == 1e6
    assert set(np.unique(per["temperature"])) == set(TEMPERATURES)
    feasible = np.asarray(cost.feasible)
    assert 0.05 < feasible.mean() < 0.995, "both fitting and overflowing configs are covered"


def test_every_cost_is_finite(sweep32):
    per, cost, sustained, _ = sweep32
    for name, tree in (("decode_cost", cost), ("sustained_cost", sustained)):
        bad = _bad(tree)
        assert not bad.any(), f"{name}: {bad.sum()} of {len(bad)} configs non-finite, first {np.flatnonzero(bad)[:5]}"
    assert np.all(np.asarray(cost.seconds_per_step) > 0)
    assert np.all(np.asarray(cost.joules_per_token) > 0)


def test_every_gradient_is_finite(sweep32):
    per, _, _, grads = sweep32
    for name, g in zip(("d seconds", "d joules"), grads):
        bad = _bad(g)
        assert not bad.any(), f"{name}: {bad.sum()} of {len(bad)} configs non-finite, first {np.flatnonzero(bad)[:5]}"


def test_infeasible_is_flagged_not_nan(sweep32):
    _, cost, _, _ = sweep32
    feasible = np.asarray(cost.feasible)
    overflow = np.asarray(cost.overflow_bytes)
    assert np.all(overflow[~feasible] > 0), "an infeasible config says how much does not fit"
    assert np.all(overflow[feasible] <= 1e-3 * np.asarray(jnp.sum(cost.stored_bytes, axis=-1))[feasible] + 1)
    assert np.all(np.isfinite(np.asarray(cost.seconds_per_step)[~feasible]))


@pytest.mark.slow
def test_hard_placements_are_finite_for_every_policy():
    models, chips, per = configs(seed=SEED + 1, n=512)
    pools = _pools(models, chips)

    def hard(pools, c):
        workload, chip = _config(pools, c)
        traffic = cm.lower_traffic(workload)
        return [cm.decode_cost(workload, chip, cm.policy_placement(p, traffic, chip)) for p in cm.POLICIES]

    costs = eqx.filter_jit(jax.vmap(hard, in_axes=(None, 0)))(pools, _as(per, jnp.float32))
    for policy, cost in zip(cm.POLICIES, costs):
        bad = _bad(cost)
        assert not bad.any(), f"policy {policy!r}: {bad.sum()} configs non-finite, first {np.flatnonzero(bad)[:5]}"


@pytest.mark.slow
def test_float32_agrees_with_float64(sweep32, x64):
    per, cost32, _, _ = sweep32
    models, chips, _ = configs()
    pools = _pools(models, chips)
    cost64, _ = eqx.filter_jit(jax.vmap(_cost, in_axes=(None, 0)))(pools, _as(per, jnp.float64))
    assert cost64.seconds_per_step.dtype == jnp.float64
    ok = np.asarray(cost64.feasible) & np.asarray(cost32.feasible)
    assert ok.mean() > 0.05
    for field in ("seconds_per_step", "joules_per_token", "tokens_per_second"):
        a = np.asarray(getattr(cost32, field), np.float64)[ok]
        b = np.asarray(getattr(cost64, field))[ok]
        rel = np.abs(a - b) / np.abs(b)
        assert rel.max() <= F32_RTOL, (
            f"{field}: float32 off by {rel.max():.2e} (config {np.flatnonzero(ok)[rel.argmax()]})"
        )
    assert np.mean(np.asarray(cost32.feasible) == np.asarray(cost64.feasible)) > 0.99
