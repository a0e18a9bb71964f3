"""Gradient co-design: Adam on (design vector, placement logits) together.

The design vector (`DESIGN_VARIABLES`) holds the logic die's compute/SRAM split, the
PIM share of the DRAM dies, the stack count and the die's share of a dollar budget,
each relaxed to a continuous variable; the reported design is rounded to whole stacks
and whole PIM dies per stack and re-evaluated there.

The placement's softmax temperature is annealed from warm to nearly hard, with several
random restarts in one `vmap`; what overflows SRAM or PIM spills to DRAM (so capacity
is feasible by construction), and what a placement asks beyond any capacity is also a
penalty (linear plus quadratic, the augmented-Lagrangian shape). The best restart's
placement is then hardened to whole blocks and the hard design's exact cost is
reported. Its evaluations are counted, as the grid baseline's are, so the optimiser's
saving is measured.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any, cast

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax

from .._core.area import DESIGN_VARIABLES, area_logits as logits_of_split, design_logits
from .._core.chip import TIERS
from .._core.placement import POLICIES, harden_placement, policy_placement, soft_placement
from .._core.traffic import IS_KV, ROWS, lower_traffic
from .grid import _policy_at
from .problem import Problem, design_chip, design_of, evaluate_design
from .result import Result, status_of


class _Params(eqx.Module):
    # Arrays; the same structure with strings labels the parts for optax.multi_transform.
    area_logits: Any  # [design variables] (`DESIGN_VARIABLES`)
    placement_logits: Any  # [points, classes, tiers]


def _loss(params: _Params, problem: Problem, temperature, penalty):
    placements = soft_placement(params.placement_logits, temperature)
    objective, overflow, _ = evaluate_design(problem, params.area_logits, placements, soft=True)
    # Log objective: scale-free steps; DRAM overflow as a quadratic penalty plus a
    # linear term (the augmented-Lagrangian shape), scaled to the log objective.
    return jnp.log(objective) + penalty * (overflow + overflow**2), objective


def optimize(
    problem: Problem,
    *,
    restarts: int = 6,
    steps: int = 45,
    learning_rate: float = 0.15,
    decay: float = 1.0,
    placement_speedup: float = 1.0,
    temperature: tuple[float, float] = (2.0, 1.0),
    penalty: float = 10.0,
    seed: int = 0,
    polish: bool = True,
    train_area: bool = True,
    area_logits=None,
    refine: int = 25,
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
        train_area: False to optimise the placement alone, on the fixed design
            `area_logits`.
        area_logits: `[5]` fixed design vector (`DESIGN_VARIABLES`, with
            `train_area=False`).
        refine: Adam steps on the area split alone after the joint run, each with the
            placement the polish's winning policy (else greedy) gives it filled to the byte (`policy_placement`
            with `whole_blocks=False`: continuous in the capacities, so the area has a
            gradient); then the policies are tried on the refined split (with
            `polish`) and the better design kept. It places heat buckets by access
            density, which the soft placement over many buckets finds slowly. It
            starts from the restart's split, or one of `_REFINE_STARTS`, that the
            greedy fill scores best (one of the `refine` evaluations each); a
            `refine` no larger than that count skips it.
        progress: called with the number of steps done (for a progress bar).

    With `polish`, the design is then rounded to whole stacks (when their count is a
    design variable: the floor, the ceiling and the most) and to a whole number of PIM
    dies per stack (the floor, the ceiling, none and all), and every rounded design
    that fits is tried with each policy
    and with the placement found; the best is reported (`Result.area_logits` is the
    rounded design vector).

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
    chosen_area = np.asarray(params.area_logits[best])
    if refine > restarts + len(_REFINE_STARTS) and train_area:
        # Start from the restart whose split the greedy fill likes best (one evaluation
        # each): the joint run's best hard design may sit in another basin.
        # The fill is the policy that won the polish (greedy if none did).
        fill = polished_by or "greedy"
        candidates = jnp.concatenate([params.area_logits, _refine_starts()])
        start = int(jnp.argmin(_fill_losses(problem, candidates, penalty, fill)))
        evaluations += len(candidates)
        refined = _refine(problem, candidates[start], refine - len(candidates), learning_rate, penalty, fill)
        evaluations += refine - len(candidates)
        for policy in POLICIES if polish else ():
            metric, feas, placed = _policy_at(problem, refined, policy)
            evaluations += 1
            value = float(jnp.sum(problem.weights * metric))
            if bool(jnp.all(feas)) and (value < objective or not ok):
                placements, objective, ok, polished_by = np.asarray(placed), value, True, f"{policy} (refined split)"
                chosen_area = np.asarray(refined)
    if polish and train_area:
        placements, objective, ok, polished_by, chosen_area, extra = _round_design(
            problem, chosen_area, placements, objective, ok, polished_by
        )
        evaluations += extra
    return Result(
        area_logits=chosen_area,
        placements=placements,
        objective=objective,
        soft_objective=float(soft_obj[best]),
        status=status_of(ok, problem),
        evaluations=evaluations,
        seconds=time.perf_counter() - t0,
        history=history[:, best],
        rounded_objective=rounded,
        polished_by=polished_by,
    )


_REFINE_STARTS = ((0.1, 0.05), (0.5, 0.85), (0.5, 0.25))
"""(compute share of the free logic area, PIM share of the DRAM dies) the refinement
may also start from, with the stack count and the dollar split at the middle of their
ranges: an SRAM-heavy die without PIM, a PIM-heavy stack and a balanced design, so a
basin the joint run missed can still be found."""


def _refine_starts():
    c, rho = (jnp.asarray(v) for v in zip(*_REFINE_STARTS))
    split = logits_of_split(jnp.stack([c, 1.0 - c], axis=-1))
    rest = jnp.stack([jnp.log(rho) - jnp.log1p(-rho), jnp.zeros_like(c), jnp.zeros_like(c)], axis=-1)
    return jnp.concatenate([split, rest], axis=-1)


def _round_design(problem: Problem, x, placements, objective: float, ok: bool, polished_by):
    """The design rounded to whole stacks (floor, ceiling, the most) and whole PIM dies
    per stack (every count), each tried with the placement found and with every
    policy; then the compute share around the relaxed one at the best whole design.

    Returns:
        (placements, objective, feasible, polished_by, design vector, evaluations).
    """
    tech = problem.tech
    design = design_of(problem, jnp.asarray(x))
    dies = round(float(tech.dies_per_stack))
    # The floor and ceiling of the PIM dies per stack, and no PIM and all PIM: the PIM
    # share's landscape has a basin at each end (PIM serial with DRAM on one side,
    # PIM's bank bandwidth on the other) that the relaxation may sit on the wrong side of.
    shares = range(dies + 1)
    n = float(design.stacks)
    top = round(float(tech.max_stacks))
    stacks = sorted({min(max(math.floor(n + 1e-6), 1), top), min(max(math.ceil(n - 1e-6), 1), top), top})
    if problem.stacks == "fixed":
        stacks = [float(problem.n_stacks)]
    compute = float(jax.nn.softmax(jnp.asarray(x)[:2])[0])
    usd = float(problem.budget_usd) if problem.budget == "usd" else 0.0
    best: tuple[Any, float, bool, str | None, np.ndarray] = (None, np.inf, False, polished_by, np.asarray(x))
    evaluations = 0

    def attempt(k: int, m: float, compute: float = compute) -> bool:
        """Tries PIM dies `k` per stack on `m` stacks (and a compute share of the free
        logic area); whether some placement fits."""
        nonlocal best, evaluations
        cand = design_logits(compute, k / dies, m, tech, problem.econ, budget_usd=usd)
        if not bool(design_of(problem, cand).logic_fits):
            return False
        value, _, costs = evaluate_design(problem, cand, jnp.asarray(placements))
        evaluations += 1
        tried = [(float(value), bool(jnp.all(costs.feasible)), np.asarray(placements), polished_by)]
        for policy in POLICIES:
            metric, feas, placed = _policy_at(problem, cand, policy)
            evaluations += 1
            tried.append((float(jnp.sum(problem.weights * metric)), bool(jnp.all(feas)), np.asarray(placed), policy))
        for value, feas, placed, by in tried:
            if (feas and (value < best[1] or not best[2])) or (best[0] is None):
                best = (placed, value, feas, by, np.asarray(cand))
        return any(feas for _, feas, _, _ in tried)

    # Every whole number of PIM dies per stack: the PIM share's landscape has a basin
    # at each end (PIM serial with DRAM on one side, PIM's bank bandwidth on the other)
    # and the relaxation may sit on the wrong side of the grid's best count.
    for k in shares:
        for m in stacks:
            attempt(k, m)
    if best[0] is None:  # no rounded design fits the die: keep the relaxed one
        return placements, objective, ok, polished_by, np.asarray(x), evaluations
    # The compute/SRAM split the relaxation found was best for its own PIM share: at
    # the chosen whole design, a few compute shares around it (x 2^(j/4)).
    chosen = design_of(problem, jnp.asarray(best[4]))
    k, m = round(float(chosen.pim_share) * dies), float(chosen.stacks)
    for j in (-4, -3, -2, -1, 1, 2, 3, 4):
        attempt(k, m, min(compute * 2.0 ** (j / 4), 0.99))
    placed, value, feas, by, cand = best
    return placed, value, feas, by, cand, evaluations


def _fill_loss(problem: Problem, area, penalty, policy: str):
    """The joint loss with the placement `policy` fills to the byte."""
    chip = design_chip(problem, area)
    fill = lambda w: policy_placement(policy, lower_traffic(w), chip, whole_blocks=False)
    placements = jax.vmap(fill)(problem.workloads)
    objective, overflow, _ = evaluate_design(problem, area, placements, soft=True)
    return jnp.log(objective) + penalty * (overflow + overflow**2)


@eqx.filter_jit
def _fill_losses(problem: Problem, areas, penalty, policy: str):
    return jax.vmap(lambda a: _fill_loss(problem, a, penalty, policy))(areas)


@eqx.filter_jit
def _refine(problem: Problem, area, steps: int, learning_rate: float, penalty: float, policy: str):
    """Adam on the area logits alone, the placement being `policy`'s fill to the byte;
    returns the best split seen (the objective is not monotone along the run)."""

    def loss(a):
        return _fill_loss(problem, a, penalty, policy)

    opt = optax.adam(optax.cosine_decay_schedule(learning_rate, steps), b2=0.9)

    def body(carry, _):
        a, s, best_a, best_v = carry
        v, g = jax.value_and_grad(loss)(a)
        better = v < best_v
        best_a, best_v = jnp.where(better, a, best_a), jnp.where(better, v, best_v)
        with jax.numpy_dtype_promotion("standard"):
            updates, s = opt.update(g, s, a)
        return (optax.apply_updates(a, updates), s, best_a, best_v), None

    init = (area, opt.init(area), area, jnp.asarray(jnp.inf, area.dtype))
    (_, _, best_a, _), _ = jax.lax.scan(body, init, None, length=steps)
    return best_a


_STARTS = (
    (1, 0, 0),  # SRAM-heavy die, everything asked of SRAM
    (2, 2, 1),  # PIM-heavy stacks, KV in PIM, weights in DRAM
    (1, 0, 1),  # SRAM-heavy die, weights in SRAM, KV in PIM
    (0, 2, 2),  # compute-heavy die, everything in DRAM
    (2, 1, 1),  # PIM-heavy stacks, everything asked of PIM
    (None, 0, 2),  # balanced design, weights in SRAM, KV in DRAM
)
"""(design variable, weight tier, KV tier) each restart leans toward, in turn: starts
that ask SRAM or PIM for data give the SRAM area and the PIM share a gradient from
the first step."""


def _starts(problem: Problem, restarts: int, seed: int) -> _Params:
    """Diverse starting points (`_STARTS`) plus Gaussian noise."""
    key_a, key_p = jax.random.split(jax.random.key(seed))
    shape = (problem.n_points, len(ROWS), len(TIERS))
    area = 0.3 * jax.random.normal(key_a, (restarts, len(DESIGN_VARIABLES)))
    area = area.at[:, 2].add(-1.0)  # PIM share σ(-1) ≈ 0.27 unless leaned toward
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
            # optax's Adam mixes a Python float with its int32 step count (bias correction), which
            # strict dtype promotion (the tests' setting) rejects: allow the standard rules there.
            with jax.numpy_dtype_promotion("standard"):
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
