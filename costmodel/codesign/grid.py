"""The grid baseline of co-design: every area split on a simplex grid, each with the
best hard placement policy, all evaluated in one `vmap`."""

from __future__ import annotations

import math
import time
from collections.abc import Sequence

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from .._core.area import area_logits
from .._core.placement import POLICIES, policy_placement
from .._core.traffic import lower_traffic
from .problem import Problem, _cost, _metric, design_chip
from .result import Result, status_of


def is_grid_step(step: float) -> bool:
    """Whether `step` is 1/N for a whole N >= 2: a step that tiles the simplex."""
    return 0 < step <= 0.5 and math.isclose(1 / step, round(1 / step))


def simplex_grid(step: float = 0.02, min_compute: float | None = None) -> np.ndarray:
    """Area fractions (compute, SRAM, PIM) on a simplex grid with the given step.

    Designs without compute are left out (they cannot decode); the smallest compute
    share is one step unless `min_compute` says otherwise.
    """
    if not is_grid_step(step):
        raise ValueError(f"step {step!r}: expected 1/N for a whole N >= 2 (e.g. 0.02)")
    n = round(1 / step)
    lo = round((min_compute if min_compute is not None else step) / step)
    pts = [(i, j, n - i - j) for i in range(lo, n + 1) for j in range(0, n - i + 1)]
    return np.asarray(pts, dtype=np.float64) / n


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
    logits = area_logits(grid)  # an empty part gets no area at all
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
        status=status_of(math.isfinite(obj)),
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
