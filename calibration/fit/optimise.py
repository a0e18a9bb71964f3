"""Fitting the knobs to a trace: filter specs, the loss, Adam then L-BFGS, the uncertainty.

Which knobs are trained is chosen by a filter spec (`eqx.partition` /
`eqx.combine`); the plain roofline baseline is the same model with the cache switched
off, latencies and overheads at zero, the kernel knobs neutral, a near-max overlap and
only one bandwidth and one FLOP rate trained.

The loss is the mean squared log error (so every point weighs by its relative error)
plus a weak prior towards the starting point, minimised with optax (Adam from a few
starts in one `vmap`, then L-BFGS). The parameter uncertainty is the Gauss-Newton
covariance `s² H⁻¹` of the log parameters, with `H` the Hessian of half the summed
squared log residuals and `s²` their variance.
"""

from __future__ import annotations

import dataclasses
import math

import equinox as eqx
import jax
import jax.numpy as jnp
import jax.tree_util as jtu
import numpy as np
import optax

import costmodel as cm
from costmodel.io import formats

from .data import Dataset
from .knobs import KNOB_NAMES, Knobs
from .model import _predict


def full_spec(rows: list[dict], knobs: Knobs):
    """Every knob trained, except the 16-bit FLOP ratio when no 16-bit row is measured,
    the attention efficiency when no attention kernel is, and the hot-array speed-up
    when no pass over distinct tensors (a GEMV chain) is: it would only trade places
    with the bandwidths (as the per-call floor would with the per-kernel overhead)."""
    fmts = formats()
    has16 = any(
        r["kind"] != "decode_step"
        and fmts[r["dtype"]].precision == cm.PRECISIONS.index("16")
        or r["kind"] == "decode_step"
        and fmts[r["weights"]].precision == cm.PRECISIONS.index("16")
        for r in rows
    )
    has_attention = any(r["kind"] == "attention_decode" for r in rows)
    has_chains = any(r["kind"] != "decode_step" and r.get("kernels", 1.0) > 1 for r in rows)
    spec = jtu.tree_map(lambda _: True, knobs)
    return eqx.tree_at(
        lambda k: (
            k.log_flops_16_ratio,
            k.logit_attention_efficiency,
            k.log_hot_speedup_m1,
            k.log_small_kernel_bytes,
            k.logit_small_kernel_efficiency,
            k.log_small_kernel_knee,
            k.log_call_overhead,
        ),
        spec,
        (has16, has_attention, has_chains, has_chains, has_chains, has_chains, has_chains),
    )


def roofline_knobs(knobs: Knobs) -> Knobs:
    """The plain roofline as a point of the same model: no cache (1-byte capacity, no
    inner level), no latency or overhead, no hot-array speed-up, one FLOP rate for every
    precision, kernel and row count (attention efficiency and DRAM feed ~1, half-rate
    rows ~0), overlap p = 64 (~max)."""
    tiny = jnp.log(jnp.asarray(1e-15))
    one = jnp.asarray(30.0)  # logit: sigmoid(30) = 1 - 1e-13
    return eqx.tree_at(
        lambda k: (
            k.log_sram_capacity,
            k.log_knee,
            k.log_sram_latency,
            k.log_dram_latency,
            k.log_flops_16_ratio,
            k.log_kernel_overhead,
            k.log_overlap_m1,
            k.log_inner_speedup_m1,
            k.log_hot_speedup_m1,
            k.logit_attention_efficiency,
            k.log_half_rate_rows,
            k.logit_dram_feed,
            k.logit_small_kernel_efficiency,
            k.log_call_overhead,
        ),
        knobs,
        (
            jnp.asarray(0.0),
            jnp.asarray(0.0),
            tiny,
            tiny,
            jnp.asarray(0.0),
            tiny,
            jnp.log(jnp.asarray(63.0)),
            tiny,
            tiny,
            one,
            tiny,
            one,
            one,
            tiny,
        ),
    )


def roofline_spec(knobs: Knobs):
    """The roofline baseline's filter spec: only the DRAM bandwidth and the f32 FLOP rate trained."""
    spec = jtu.tree_map(lambda _: False, knobs)
    return eqx.tree_at(lambda k: (k.log_dram_bandwidth, k.log_flops_f32), spec, (True, True))


# --- fitting --------------------------------------------------------------------


class FitStatus(eqx.Enumeration):
    """How a fit ended. Its item's name is the `status` text of `calibrate`'s result
    (`status_name`); the message says what it means."""

    converged = "converged: the gradient norm of the loss is at most `tol`"
    max_steps_reached = (
        "the optimiser steps ran out with the gradient norm of the loss above `tol`: "
        "try more `adam_steps` or `lbfgs_steps`"
    )
    nonfinite = "the loss or its gradient is not finite"


STATUS = ("converged", "max_steps_reached", "nonfinite")
"""The names of the `FitStatus` items, as results print them."""


def status_name(status: FitStatus) -> str:
    """The name of a `FitStatus` item ("converged", "max_steps_reached" or "nonfinite")."""
    for name in STATUS:
        if bool(status == getattr(FitStatus, name)):
            return name
    raise ValueError(f"{status!r}: not a FitStatus item")


@dataclasses.dataclass
class Fit:
    """A fitted model: knobs, status, loss, and the log-parameter covariance."""

    knobs: Knobs
    initial: Knobs
    spec: Knobs
    status: FitStatus
    loss: float
    grad_norm: float
    steps: int
    trained: tuple[str, ...]
    log_std: dict[str, float]

    @property
    def status_name(self) -> str:
        """`status` as results print it (see `status_name`)."""
        return status_name(self.status)


def _residuals(knobs, data: Dataset, measured):
    return jnp.log(_predict(knobs, data)) - jnp.log(measured)


START_OFFSETS = {
    # knob: offsets (in log units) of the extra starts; 0 is the given start
    "log_overlap_m1": (0.0, -1.6, 0.0, -1.6),
    "log_inner_capacity": (0.0, 0.0, 1.4, 1.4),
}
"""Where the vmapped Adam starts: the given knobs, shifted by these (trained knobs only)."""


def _starts(train: Knobs) -> Knobs:
    """The trainable knobs, stacked over the starts of `START_OFFSETS`."""
    n = len(next(iter(START_OFFSETS.values())))
    stacked = jtu.tree_map(lambda x: jnp.broadcast_to(x, (n, *jnp.shape(x))), train)
    for name, offsets in START_OFFSETS.items():
        leaf = getattr(stacked, name)
        if leaf is not None:
            stacked = eqx.tree_at(lambda k, name=name: getattr(k, name), stacked, leaf + jnp.asarray(offsets))
    return stacked


def fit_knobs(
    data: Dataset,
    knobs: Knobs,
    spec: Knobs,
    *,
    adam_steps: int = 1500,
    lbfgs_steps: int = 200,
    learning_rate: float = 0.05,
    prior: float = 1e-4,
    tol: float = 1e-5,
) -> Fit:
    """Fits the trainable knobs (`spec` True) to the rows of `data`.

    Args:
        data: the training rows.
        knobs: the starting point (also the centre of a weak prior).
        spec: a `Knobs` of bools: which leaves are trained.
        adam_steps / lbfgs_steps: optimiser steps (Adam first, then L-BFGS).
        learning_rate: Adam's step size in log units.
        prior: weight of `sum (log p - log p0)**2` added to the mean squared log
            error, which keeps parameters the data cannot see near their start.
        tol: the fit is `converged` when the gradient norm of the loss is below this.

    Returns:
        A `Fit`. A fit whose loss is not finite, or whose gradient is still large,
        says so in `status` (a `FitStatus`) rather than raising.
    """
    measured = jnp.asarray(data.measured)
    train, static = eqx.partition(knobs, spec)
    start = train

    def loss_fn(train):
        k = eqx.combine(train, static)
        r = _residuals(k, data, measured)
        reg = sum(jnp.sum((a - b) ** 2) for a, b in zip(jtu.tree_leaves(train), jtu.tree_leaves(start)))
        return jnp.mean(r**2) + prior * reg

    value_and_grad = jax.value_and_grad(loss_fn)
    schedule = optax.cosine_decay_schedule(learning_rate, adam_steps, alpha=0.01)
    adam = optax.adam(schedule)

    @jax.jit
    def run_adam(train):
        def step(carry, _):
            p, s = carry
            loss, g = value_and_grad(p)
            # optax's Adam mixes a Python float with its int32 step count (bias correction), which
            # strict dtype promotion (the tests' setting) rejects: allow the standard rules there.
            with jax.numpy_dtype_promotion("standard"):
                u, s = adam.update(g, s, p)
            return (optax.apply_updates(p, u), s), loss

        (p, _), losses = jax.lax.scan(step, (train, adam.init(train)), None, length=adam_steps)
        return p, losses

    # Adam from several starts at once (vmapped): the knee and overlap knobs trade off
    # and one start can settle in a local minimum. The best start goes on to L-BFGS.
    if any(getattr(train, name) is not None for name in START_OFFSETS):
        ends, losses = jax.vmap(run_adam)(_starts(train))
        best = int(jnp.nanargmin(jnp.where(jnp.isfinite(losses[:, -1]), losses[:, -1], jnp.inf)))
        train = jtu.tree_map(lambda x: x[best], ends)
    else:  # none of the knobs the starts differ in is trained: one start
        train, _ = run_adam(train)
    lbfgs = optax.lbfgs()

    @jax.jit
    def run_lbfgs(train):
        vg = optax.value_and_grad_from_state(loss_fn)

        def step(carry, _):
            p, s = carry
            value, g = vg(p, state=s)
            u, s = lbfgs.update(g, s, p, value=value, grad=g, value_fn=loss_fn)
            return (optax.apply_updates(p, u), s), value

        (p, _), values = jax.lax.scan(step, (train, lbfgs.init(train)), None, length=lbfgs_steps)
        return p

    if lbfgs_steps:
        candidate = run_lbfgs(train)
        # L-BFGS polishes; keep it only if it helped and stayed finite.
        loss_jit = jax.jit(loss_fn)
        before, after = float(loss_jit(train)), float(loss_jit(candidate))
        if math.isfinite(after) and after <= before:
            train = candidate
    loss, g = jax.jit(value_and_grad)(train)
    loss = float(loss)
    gnorm = float(optax.tree.norm(g))
    if not (math.isfinite(loss) and math.isfinite(gnorm)):
        status = FitStatus.nonfinite
    elif gnorm <= tol:
        status = FitStatus.converged
    else:
        status = FitStatus.max_steps_reached
    fitted = eqx.combine(train, static)
    trained = tuple(n for n in KNOB_NAMES if bool(getattr(spec, n)))
    finite = bool(status != FitStatus.nonfinite)
    log_std = uncertainty(fitted, spec, data, prior) if finite else {n: float("nan") for n in trained}
    return Fit(fitted, knobs, spec, status, loss, gnorm, adam_steps + lbfgs_steps, trained, log_std)


def uncertainty(knobs: Knobs, spec: Knobs, data: Dataset, prior: float = 1e-4) -> dict[str, float]:
    """Standard deviation of each trained log parameter: `diag(s² H⁻¹)`.

    `H` is the Hessian, over the trained log parameters, of the objective the fit
    minimises scaled to half the summed squared log residuals (`sum r²/2 + n prior
    |dθ|²/2`), and `s² = sum r² / (n - p)` the residual variance. A parameter the data
    cannot pin down is held only by the weak prior, so its standard deviation comes
    out large (several units of log, a factor of e^k) rather than small.
    """
    from jax.flatten_util import ravel_pytree

    measured = jnp.asarray(data.measured)
    train, static = eqx.partition(knobs, spec)
    flat, unravel = ravel_pytree(train)
    names = [n for n in KNOB_NAMES if bool(getattr(spec, n))]
    if not names:
        return {}

    def half_ssr(x):
        r = _residuals(eqx.combine(unravel(x), static), data, measured)
        return 0.5 * jnp.sum(r**2)

    n, p = data.n, len(names)
    h = np.asarray(jax.jit(jax.hessian(half_ssr))(flat), dtype=float)
    h = 0.5 * (h + h.T) + n * prior * np.eye(p)
    s2 = 2.0 * float(jax.jit(half_ssr)(flat)) / max(n - p, 1)
    try:
        cov = s2 * np.linalg.inv(h)
        var = np.diag(cov)
    except np.linalg.LinAlgError:
        var = np.full(p, np.inf)
    var = np.where(np.isfinite(var) & (var >= 0), var, np.inf)
    return {name: float(np.sqrt(x)) for name, x in zip(names, var)}
