"""The grid baseline of co-design: every design on a grid over the same variables as
the gradient's (the logic die's compute/SRAM split, the PIM share of the DRAM dies on
multiples of 1/dies, and whole stacks when the count is free; under a dollar budget
the die gets what the stacks leave), each with the best hard placement policy, all
evaluated in one `vmap`."""

from __future__ import annotations

import math
import time
from collections.abc import Sequence

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from .._core.area import design_logits
from .._core.placement import POLICIES, policy_placement
from .._core.traffic import lower_traffic
from .problem import Problem, design_chip, design_of, point_metric
from .result import Result, status_of


def is_grid_step(step: float) -> bool:
    """Whether `step` is 1/N for a whole N >= 2: a step that tiles the unit interval."""
    return 0 < step <= 0.5 and math.isclose(1 / step, round(1 / step))


def split_grid(step: float = 0.02) -> np.ndarray:
    """Compute shares of the logic die's free area on a grid (SRAM takes the rest):
    `step, 2·step, …, 1` (a die without compute cannot decode)."""
    if not is_grid_step(step):
        raise ValueError(f"step {step!r}: expected 1/N for a whole N >= 2 (e.g. 0.02)")
    n = round(1 / step)
    return np.arange(1, n + 1, dtype=np.float64) / n


def design_grid(problem: Problem, step: float = 0.02) -> jax.Array:
    """Every grid design of the problem that fits, as `[designs, 5]` design vectors.

    The axes: the compute share (`split_grid(step)`), the PIM share on multiples of
    1/`dies_per_stack`, and, with `stacks="auto"`, every whole stack count from 1 to
    `max_stacks`. A design whose logic die cannot hold its I/O and PHYs (or, under a
    dollar budget, whose stacks leave nothing for the die) is left out.
    """
    tech = problem.tech
    dies = round(float(tech.dies_per_stack))
    stacks = np.arange(1, round(float(tech.max_stacks)) + 1) if problem.stacks == "auto" else [float(problem.n_stacks)]
    c, rho, n = np.meshgrid(split_grid(step), np.arange(dies + 1) / dies, np.asarray(stacks, float), indexing="ij")
    usd = float(problem.budget_usd) if problem.budget == "usd" else 0.0
    x = design_logits(c.ravel(), rho.ravel(), n.ravel(), tech, problem.econ, budget_usd=usd)
    designs = jax.vmap(lambda v: design_of(problem, v))(x)
    ok = np.asarray(designs.logic_fits) & np.isfinite(np.asarray(designs.die_usd))
    if problem.budget == "usd" and problem.stacks == "auto":
        ok &= np.asarray(x[:, 4]) > -np.inf  # the stacks leave dollars for the die
    return x[np.flatnonzero(ok)]


def grid_baseline(problem: Problem, *, step: float = 0.02, policies: Sequence[str] = POLICIES) -> Result:
    """Best design over the grid (`design_grid`), with the best hard placement policy
    at every grid point (and for every mix point separately).

    Returns:
        The best feasible grid design (`Result`); `evaluations` counts grid points x
        policies (each evaluates the whole mix once).
    """
    t0 = time.perf_counter()
    logits = design_grid(problem, step)
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
        status=status_of(math.isfinite(obj), problem),
        evaluations=int(logits.shape[0]) * len(policies),
        seconds=time.perf_counter() - t0,
        history=np.asarray([obj]),
    )


@eqx.filter_jit  # tried one design at a time by the polish and the rounding: one compile per policy
def _policy_at(problem: Problem, area_logits, policy: str):
    """Per mix point: (metric, feasible, placement) of a policy on one area split."""
    design = design_of(problem, area_logits)
    chip = design_chip(problem, area_logits, design)

    def point(workload):
        placement = policy_placement(policy, lower_traffic(workload), chip)
        metric, feasible, _ = point_metric(problem, workload, chip, placement, design)
        return metric, feasible, placement

    return jax.vmap(point)(problem.workloads)


@eqx.filter_jit
def _grid_policy(problem: Problem, logits, policy: str):
    return jax.vmap(lambda a: _policy_at(problem, a, policy))(logits)
