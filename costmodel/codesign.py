"""Gradient co-design of a chip's area split and its KV/weight placement.

One problem, two solvers:

- `optimize`: Adam on (area logits, placement logits) together, the placement's
  softmax temperature annealed from warm to nearly hard, several random restarts in
  one `vmap`; what overflows SRAM or PIM spills to DRAM (so capacity is feasible by
  construction), and what a placement asks beyond any capacity is also a penalty
  (linear plus quadratic, the augmented-Lagrangian shape). The best
  restart's placement is then hardened to whole blocks and the hard design's exact
  cost is reported.
- `grid_baseline`: every area split on a simplex grid (2% steps by default) with the
  best of the hard placement policies at each point, all evaluated in one `vmap`.

Both count their cost-model evaluations, so the optimiser's saving is measured.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable, Sequence
from typing import Any, cast

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax

from ._core.area import AREA_PARTS, Technology, area_split, chip_from_area, fixed_area
from ._core.chip import TIERS, Chip
from ._core.cost import Cost, decode_cost
from ._core.economics import Economics, token_cost
from ._core.placement import POLICIES, harden_placement, policy_placement, soft_placement
from ._core.power import sustained_cost
from ._core.traffic import CLASSES, IS_KV, lower_traffic
from ._core.workload import BITS16, Workload


OBJECTIVES = ("latency", "energy", "cost")


class Problem(eqx.Module):
    """A co-design problem: a die budget, a technology and a weighted workload mix.

    Attributes:
        workloads: the mix, stacked along a leading axis of `points`.
        weights: `[points]` share of decode steps at each point (sums to 1).
        tech: technology constants.
        budget: die area, m².
        n_stacks: HBM stacks per chip.
        tensor_parallel: chips per system (each a copy of the design).
        system: a reference chip whose system parameters the design shares: links,
            all-reduce and hop latency, per-layer kernel overhead, compute and
            memory efficiency, channel overlap and power cap.
        econ: prices and operating assumptions (for the cost objective).
        objective: one of `OBJECTIVES`.
        sustained: evaluate under the power cap (`sustained_cost`) instead of at
            full clock.
    """

    workloads: Workload
    weights: jax.Array
    tech: Technology
    budget: jax.Array
    n_stacks: jax.Array
    tensor_parallel: jax.Array
    system: Chip
    econ: Economics
    objective: str = eqx.field(static=True)
    sustained: bool = eqx.field(static=True)

    @property
    def n_points(self) -> int:
        return int(self.weights.shape[0])


def make_problem(
    workloads: Sequence[Workload],
    weights: Sequence[float],
    tech: Technology,
    *,
    budget: float,
    n_stacks: float = 5,
    tensor_parallel: float = 1,
    system: Chip,
    econ: Economics,
    objective: str = "latency",
    sustained: bool = False,
) -> Problem:
    if objective not in OBJECTIVES:
        raise ValueError(f"objective {objective!r}: expected one of {OBJECTIVES}")
    w = jnp.asarray(weights, dtype=float)
    f = lambda x: jnp.asarray(x, dtype=float)
    return Problem(
        workloads=jax.tree.map(lambda *xs: jnp.stack(xs), *workloads),
        weights=w / jnp.sum(w),
        tech=tech,
        budget=f(budget),
        n_stacks=f(n_stacks),
        tensor_parallel=f(tensor_parallel),
        system=system,
        econ=econ,
        objective=objective,
        sustained=sustained,
    )


def design_chip(problem: Problem, area_logits) -> Chip:
    """The chip an area split gives, in the problem's system."""
    ref = problem.system
    chip = chip_from_area(
        problem.budget,
        area_logits,
        problem.tech,
        n_stacks=problem.n_stacks,
        compute_efficiency=ref.compute_efficiency,
        kernel_overhead=ref.kernel_overhead,
        overlap=ref.overlap,
        power_cap=ref.power_cap,
    )
    return chip.replace(
        tensor_parallel=problem.tensor_parallel,
        link_bandwidth=ref.link_bandwidth,
        link_latency=ref.link_latency,
        hop_latency=ref.hop_latency,
        # The kernel efficiencies of the system's compute die (a calibrated chip's).
        attention_efficiency=ref.attention_efficiency,
        half_rate_rows=ref.half_rate_rows,
        small_kernel_bytes=ref.small_kernel_bytes,
        small_kernel_efficiency=ref.small_kernel_efficiency,
        small_kernel_knee=ref.small_kernel_knee,
        tiers=chip.tiers.replace(compute_feed=ref.tiers.compute_feed),
    )


def _cost(problem: Problem, workload: Workload, chip: Chip, placement) -> Cost:
    """A step's cost at full clock, or under the power cap for a sustained problem."""
    if problem.sustained:
        return sustained_cost(workload, chip, placement).cost
    return decode_cost(workload, chip, placement)


def _metric(problem: Problem, cost: Cost, chip: Chip):
    """Per-point figure of merit: s per step, J per token, or $ per token."""
    if problem.objective == "latency":
        return cost.seconds_per_step
    if problem.objective == "energy":
        return cost.joules_per_token
    return token_cost(cost, chip, problem.econ).usd_per_token


def evaluate_design(problem: Problem, area_logits, placements):
    """The mix objective of one design: weighted mean of the per-point metric.

    Returns:
        (objective, overflow, per-point costs), where overflow is what the placement
        asks of every tier beyond its capacity, as a fraction of the bytes stored
        (SRAM and PIM overflow spills to DRAM inside `decode_cost`, so it costs time
        there; counting the ask as well keeps a gradient on a placement that asks a
        slow, full tier for more than it holds).
    """
    chip = design_chip(problem, area_logits)
    costs = jax.vmap(lambda w, p: _cost(problem, w, chip, p))(problem.workloads, placements)
    metric = jax.vmap(lambda c: _metric(problem, c, chip))(costs)
    objective = jnp.sum(problem.weights * metric)
    stored = jax.vmap(lambda w: lower_traffic(w).stored_bytes)(problem.workloads)  # [points, classes]
    asked = jnp.einsum("pct,pc->pt", placements, stored) / chip.n_chips
    # SRAM is left out: asking it for more than it holds costs nothing (the rest
    # streams from DRAM) and is what gives its area a gradient. The capacity is held
    # constant here: the penalty steers the placement, and must not buy a tier area
    # only to make room for a placement's bad ask.
    capacity = jax.lax.stop_gradient(chip.tiers.capacity)
    over = jnp.sum(jnp.maximum(asked - capacity[None, :], 0.0)[:, 1:], axis=-1)
    overflow = jnp.sum(problem.weights * over / jnp.sum(stored, axis=-1))
    return objective, overflow, costs


class _Params(eqx.Module):
    # Arrays; the same structure with strings labels the parts for optax.multi_transform.
    area_logits: Any  # [parts]
    placement_logits: Any  # [points, classes, tiers]


def _loss(params: _Params, problem: Problem, temperature, penalty):
    placements = soft_placement(params.placement_logits, temperature)
    objective, overflow, _ = evaluate_design(problem, params.area_logits, placements)
    # Log objective: scale-free steps; DRAM overflow as a quadratic penalty plus a
    # linear term (the augmented-Lagrangian shape), scaled to the log objective.
    return jnp.log(objective) + penalty * (overflow + overflow**2), objective


@dataclasses.dataclass(frozen=True)
class Result:
    """A design and what it cost to find."""

    area_logits: np.ndarray
    placements: np.ndarray  # [points, classes, tiers], hard
    objective: float  # of the hard design
    soft_objective: float  # before hardening
    feasible: bool
    evaluations: int
    seconds: float
    history: np.ndarray  # [steps] best restart's soft objective along the run
    rounded_objective: float | None = None  # the rounded soft placement's, before polishing
    polished_by: str | None = None  # the policy whose placement beat the rounded one


def optimize(
    problem: Problem,
    *,
    restarts: int = 6,
    steps: int = 50,
    learning_rate: float = 0.15,
    decay: float = 1.0,
    placement_speedup: float = 1.0,
    temperature: tuple[float, float] = (2.0, 1.0),
    penalty: float = 10.0,
    seed: int = 0,
    polish: bool = True,
    train_area: bool = True,
    area_logits=None,
    progress: Callable[[int], None] | None = None,
) -> Result:
    """Minimises the mix objective over the area split and the placement, by gradient.

    Args:
        problem: the co-design problem.
        restarts: random starts, run together in one `vmap`.
        steps: Adam steps per restart.
        learning_rate: Adam step size on the logits.
        decay: final step size as a fraction of the first (cosine schedule).
        placement_speedup: the placement logits' step size over the area logits'.
        temperature: (start, end) of the geometric placement-temperature anneal.
        penalty: weight of the DRAM-overflow penalty.
        seed: PRNG seed of the starting logits.
        polish: also try each placement policy on the optimised area split and keep
            the best hard placement (one evaluation per policy).
        train_area: False to optimise the placement alone, on the fixed split
            `area_logits`.
        area_logits: `[parts]` logits of the fixed split (with `train_area=False`).
        progress: called with the number of steps done (for a progress bar).

    Returns:
        The best restart's hardened design (`Result`); `evaluations` counts cost-model
        evaluations (each gradient step evaluates the mix once per restart).
    """
    t0 = time.perf_counter()
    params = _starts(problem, restarts, seed)
    if not train_area:
        if area_logits is None:
            raise ValueError("train_area=False needs the fixed area_logits")
        fixed = jnp.broadcast_to(jnp.asarray(area_logits, float), params.area_logits.shape)
        params = _Params(fixed, params.placement_logits)
    # b2 = 0.9: the second-moment estimate forgets the large gradients of the first
    # steps, or late steps on a flat objective would shrink to nothing.
    # A cosine-decayed step: large early moves across the simplex, fine ones at the end.
    # The placement logits get a larger step: a class's fraction in a tier must often
    # travel from ~0 to most of it, a move of several nats.
    area_lr = optax.cosine_decay_schedule(learning_rate, steps, alpha=decay)
    placement_lr = optax.cosine_decay_schedule(learning_rate * placement_speedup, steps, alpha=decay)
    # What is trained is chosen by labels over the parameter pytree (the filter-spec
    # idiom): a frozen part gets no update at all.
    labels = _Params("area" if train_area else "frozen", "placement")
    opt = optax.chain(
        optax.clip_by_global_norm(10.0),
        optax.multi_transform(
            {
                "area": optax.adam(area_lr, b2=0.9),
                "placement": optax.adam(placement_lr, b2=0.9),
                "frozen": optax.set_to_zero(),
            },
            cast(Any, labels),
        ),
    )
    state = jax.vmap(opt.init)(cast(Any, params))  # an equinox pytree; optax types plain ones
    t_start, t_end = temperature
    taus = t_start * (t_end / t_start) ** (jnp.arange(steps) / max(steps - 1, 1))
    history = []
    chunk = max(1, steps // 10)
    for begin in range(0, steps, chunk):
        params, state, objs = _run_steps(params, state, problem, taus[begin : begin + chunk], penalty, opt)
        history.append(np.asarray(objs))
        if progress is not None:
            progress(min(begin + chunk, steps))
    history = np.concatenate(history)  # [steps, restarts]
    final_tau = taus[-1]
    hard, soft_obj, hard_obj, feasible = _harden_all(params, problem, final_tau)
    score = np.where(np.asarray(feasible), np.asarray(hard_obj), np.inf)
    best = int(np.argmin(score)) if np.isfinite(score).any() else int(np.argmin(np.asarray(hard_obj)))
    placements, objective, ok = np.asarray(hard[best]), float(hard_obj[best]), bool(feasible[best])
    evaluations = restarts * (steps + 1)
    rounded = objective
    polished_by = None
    if polish:
        # The hard placement is also tried against the placement policies on the
        # optimised area split; the better one is kept and reported as such.
        area = params.area_logits[best]
        for policy in POLICIES:
            metric, feas, placed = _policy_at(problem, area, policy)
            evaluations += 1
            value = float(jnp.sum(problem.weights * metric))
            if bool(jnp.all(feas)) and (value < objective or not ok):
                placements, objective, ok, polished_by = np.asarray(placed), value, True, policy
    return Result(
        area_logits=np.asarray(params.area_logits[best]),
        placements=placements,
        objective=objective,
        soft_objective=float(soft_obj[best]),
        feasible=ok,
        evaluations=evaluations,
        seconds=time.perf_counter() - t0,
        history=history[:, best],
        rounded_objective=rounded,
        polished_by=polished_by,
    )


_STARTS = (
    (1, 0, 0),  # SRAM-heavy die, everything asked of SRAM
    (2, 2, 1),  # PIM-heavy die, KV in PIM, weights in DRAM
    (1, 0, 1),  # SRAM-heavy die, weights in SRAM, KV in PIM
    (0, 2, 2),  # compute-heavy die, everything in DRAM
    (2, 1, 1),  # PIM-heavy die, everything asked of PIM
    (None, 0, 2),  # balanced die, weights in SRAM, KV in DRAM
)
"""(area part, weight tier, KV tier) each restart leans toward, in turn: starts that
ask SRAM or PIM for data give those parts' areas a gradient from the first step."""


def _starts(problem: Problem, restarts: int, seed: int) -> _Params:
    """Diverse starting points (`_STARTS`) plus Gaussian noise."""
    key_a, key_p = jax.random.split(jax.random.key(seed))
    shape = (problem.n_points, len(CLASSES), len(TIERS))
    area = 0.3 * jax.random.normal(key_a, (restarts, len(AREA_PARTS)))
    placement = 0.3 * jax.random.normal(key_p, (restarts, *shape))
    is_kv = np.asarray(IS_KV)
    for k in range(restarts):
        part, weight_tier, kv_tier = _STARTS[k % len(_STARTS)]
        if part is not None:
            area = area.at[k, part].add(1.5)
        lean = np.where(is_kv, kv_tier, weight_tier)
        placement = placement.at[k].add(2.0 * jax.nn.one_hot(lean, len(TIERS))[None])
    return _Params(area, placement)


@eqx.filter_jit
def _run_steps(params, state, problem, taus, penalty, opt):
    def one_restart(p, s):
        def body(carry, tau):
            p, s = carry
            (_, obj), g = jax.value_and_grad(_loss, has_aux=True)(p, problem, tau, penalty)
            updates, s = opt.update(g, s, p)
            return (optax.apply_updates(p, updates), s), obj

        (p, s), objs = jax.lax.scan(body, (p, s), taus)
        return p, s, objs

    p, s, objs = jax.vmap(one_restart)(params, state)
    return p, s, objs.T


@eqx.filter_jit
def _harden_all(params, problem, tau):
    def one(p):
        soft = soft_placement(p.placement_logits, tau)
        soft_obj, _, _ = evaluate_design(problem, p.area_logits, soft)
        chip = design_chip(problem, p.area_logits)
        traffic = jax.vmap(lower_traffic)(problem.workloads)
        hard = jax.vmap(harden_placement, in_axes=(0, 0, None))(soft, traffic, chip)
        hard_obj, _, costs = evaluate_design(problem, p.area_logits, hard)
        return hard, soft_obj, hard_obj, jnp.all(costs.feasible)

    return jax.vmap(one)(params)


def simplex_grid(step: float = 0.02, min_compute: float | None = None) -> np.ndarray:
    """Area fractions (compute, SRAM, PIM) on a simplex grid with the given step.

    Designs without compute are left out (they cannot decode); the smallest compute
    share is one step unless `min_compute` says otherwise.
    """
    n = round(1 / step)
    lo = round((min_compute if min_compute is not None else step) / step)
    pts = [(i, j, n - i - j) for i in range(lo, n + 1) for j in range(0, n - i + 1)]
    return np.asarray(pts, dtype=np.float64) / n


def _fraction_logits(fractions):
    # log of the fractions: softmax gives them back exactly; a zero share gets a very
    # negative logit (a part of 1e-12 of the area is nothing).
    return jnp.log(jnp.maximum(fractions, 1e-12))


def grid_baseline(problem: Problem, *, step: float = 0.02, policies: Sequence[str] = POLICIES) -> Result:
    """Best design over a simplex grid of area splits, with the best hard placement
    policy at every grid point (and for every mix point separately).

    Returns:
        The best feasible grid design (`Result`); `evaluations` = grid points x
        policies x mix points... counted as grid points x policies (each evaluates
        the whole mix once).
    """
    t0 = time.perf_counter()
    grid = jnp.asarray(simplex_grid(step), dtype=float)
    logits = _fraction_logits(grid)
    per_policy = [_grid_policy(problem, logits, policy) for policy in policies]
    metric = jnp.stack([m for m, _, _ in per_policy])  # [policies, grid, points]
    feasible = jnp.stack([f for _, f, _ in per_policy])
    placements = jnp.stack([p for _, _, p in per_policy])  # [policies, grid, points, C, T]
    masked = jnp.where(feasible, metric, jnp.inf)
    best_policy = jnp.argmin(masked, axis=0)  # [grid, points]
    best_metric = jnp.min(masked, axis=0)
    objective = best_metric @ problem.weights  # [grid]
    g = int(jnp.argmin(objective))
    chosen = jnp.take_along_axis(placements[:, g], best_policy[g][None, :, None, None], axis=0)[0]
    obj = float(objective[g])
    return Result(
        area_logits=np.asarray(logits[g]),
        placements=np.asarray(chosen),
        objective=obj,
        soft_objective=obj,
        feasible=bool(math.isfinite(obj)),
        evaluations=int(grid.shape[0]) * len(policies),
        seconds=time.perf_counter() - t0,
        history=np.asarray([obj]),
    )


def _policy_at(problem: Problem, area_logits, policy: str):
    """Per mix point: (metric, feasible, placement) of a policy on one area split."""
    chip = design_chip(problem, area_logits)

    def point(workload):
        placement = policy_placement(policy, lower_traffic(workload), chip)
        cost = _cost(problem, workload, chip, placement)
        return _metric(problem, cost, chip), cost.feasible, placement

    return jax.vmap(point)(problem.workloads)


@eqx.filter_jit
def _grid_policy(problem: Problem, logits, policy: str):
    return jax.vmap(lambda a: _policy_at(problem, a, policy))(logits)


def describe(problem: Problem, result: Result, names: Sequence[str]) -> dict:
    """A JSON-ready description of a design: areas, tiers, placement (SI units)."""
    chip = design_chip(problem, jnp.asarray(result.area_logits))
    areas = np.asarray(area_split(problem.budget, jnp.asarray(result.area_logits), problem.tech, problem.n_stacks))
    tiers = {
        tier: {
            "capacity_bytes": float(chip.tiers.capacity[i]),
            "bandwidth_bytes_per_second": float(chip.tiers.bandwidth[i]),
        }
        for i, tier in enumerate(TIERS)
    }
    tiers["pim"]["internal_bandwidth_bytes_per_second"] = float(chip.pim_bandwidth)
    tiers["pim"]["flops"] = float(chip.pim_flops)
    return {
        "area_mm2": {
            **{part: float(a) * 1e6 for part, a in zip(AREA_PARTS, areas)},
            "fixed_io": float(fixed_area(problem.tech, problem.n_stacks)) * 1e6,
            "total": float(problem.budget) * 1e6,
        },
        "peak_flops_16bit": float(chip.peak_flops[BITS16]),
        "tiers": tiers,
        "placement": {
            name: {
                cls: {tier: float(result.placements[k, i, j]) for j, tier in enumerate(TIERS)}
                for i, cls in enumerate(CLASSES)
            }
            for k, name in enumerate(names)
        },
    }
