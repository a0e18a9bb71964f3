"""The serving objective of co-design: chip-seconds per token (1 / tokens per second
per chip) at the best batch that fits and meets a TPOT target."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from costmodel import codesign as cd
from costmodel.cli import main
from costmodel.codesign.grid import _policy_at
from costmodel.io import InputError


pytestmark = pytest.mark.slow  # minutes: serving curves over whole batch grids (tests/conftest.py)


def _problem(tpot=0.03, model="llama-3-8b"):
    return cd.build_problem(model, objective="serving", tpot_target=tpot)[0]


def test_hard_figure_is_the_best_batch_within_the_target():
    tpot = jnp.asarray([0.01, 0.02, 0.04, 0.08])
    tokens = jnp.asarray([1.0, 4.0, 16.0, 64.0])
    feasible = jnp.asarray([True, True, True, False])
    over = jnp.asarray([0.0, 0.0, 0.0, 0.2])
    m, best = cd.serving_metric(tpot, tokens, 2.0, feasible, over, 0.05)
    assert int(best) == 2 and float(m) == pytest.approx(2 * 0.04 / 16)
    m, best = cd.serving_metric(tpot, tokens, 2.0, feasible, over, 0.015)  # only batch 0 meets it
    assert int(best) == 0 and float(m) == pytest.approx(2 * 0.01)
    m, _ = cd.serving_metric(tpot, tokens, 2.0, feasible, over, 0.005)  # none meets it
    assert float(m) == np.inf
    # The soft figure is finite, near the hard one where the target is met, and never
    # rewards a batch that does not fit.
    soft, _ = cd.serving_metric(tpot, tokens, 2.0, feasible, over, 0.05, soft=True)
    assert float(soft) == pytest.approx(2 * 0.04 / 16, rel=0.1)
    assert np.isfinite(float(cd.serving_metric(tpot, tokens, 2.0, feasible, over, 0.005, soft=True)[0]))


def test_relaxing_the_target_never_lowers_throughput():
    p = _problem()
    x = cd.design_grid(p, 0.1)[20]
    values = []
    for target in (0.005, 0.01, 0.02, 0.05, 0.1, 0.5):
        q = _problem(target)
        metric, _, _ = _policy_at(q, x, "dram")
        values.append(float(metric[0]))
    assert all(b <= a for a, b in zip(values, values[1:])), values
    assert values[0] == np.inf and np.isfinite(values[-1]) and values[-1] < values[1]


def test_grid_and_evaluate_design_agree_and_the_batch_is_chosen():
    p = _problem()
    x = cd.design_grid(p, 0.1)[3]
    metric, feasible, placement = _policy_at(p, x, "dram")
    objective, _, cost = cd.evaluate_design(p, x, placement)
    assert float(objective) == pytest.approx(float(metric[0]), rel=1e-6)
    assert bool(feasible[0]) and bool(cost.feasible[0])
    step = float(cost.seconds_per_step[0])
    assert step <= 0.03
    # The chosen batch is the largest that fits within the target: the next one misses.
    batch = round(float(objective) ** -1 * step / float(p.tensor_parallel))
    assert batch in cd.SERVING_BATCHES and batch > 8
    k = cd.SERVING_BATCHES.index(batch)
    if k + 1 < len(cd.SERVING_BATCHES):
        q = eqx.tree_at(lambda q: q.batches, p, jnp.asarray(cd.SERVING_BATCHES[k + 1 : k + 2]))
        assert float(_policy_at(q, x, "dram")[0][0]) == np.inf


def test_a_target_no_batch_meets(capsys):
    """Finite soft figures and gradients, an infinite hard one, a status that names the
    target (not the memory), and one line from the CLI."""
    p = _problem(0.0005)
    x = cd.design_grid(p, 0.1)[5]
    _, _, placement = _policy_at(p, x, "dram")
    soft = lambda v: jnp.log(cd.evaluate_design(p, v, placement, soft=True)[0])
    assert np.isfinite(float(soft(x))) and np.all(np.isfinite(np.asarray(jax.grad(soft)(x))))
    assert float(cd.evaluate_design(p, x, placement)[0]) == np.inf
    base = cd.grid_baseline(p, step=0.5)
    assert base.status == cd.DesignStatus.infeasible_target and not base.feasible
    args = ["optimize", "--objective", "serving", "--tpot-ms", "0.5", "--restarts", "1", "--steps", "2"]
    assert main([*args, "--refine", "0", "--no-baseline"]) == 2
    err = capsys.readouterr().err
    assert "--tpot-ms 0.5" in err and "ms per token" in err and "Traceback" not in err


def test_soft_objective_gradient_matches_finite_differences(x64):
    p = _problem(0.02)
    x = jnp.asarray(cd.design_grid(p, 0.1)[5], dtype=jnp.float64)
    _, _, placement = _policy_at(p, x, "dram")
    f = lambda v: jnp.log(cd.evaluate_design(p, v, placement, soft=True)[0])
    grad = np.asarray(jax.grad(f)(x))
    eps = 1e-5
    for i in (0, 1):
        fd = (float(f(x.at[i].add(eps))) - float(f(x.at[i].add(-eps)))) / (2 * eps)
        assert grad[i] == pytest.approx(fd, rel=1e-3, abs=1e-7), i


def test_target_and_objective_go_together(capsys):
    with pytest.raises(InputError, match="--tpot-ms"):
        cd.build_problem("llama-3-8b", objective="serving")
    with pytest.raises(InputError, match="--objective latency"):
        cd.build_problem("llama-3-8b", objective="latency", tpot_target=0.05)
    assert main(["optimize", "--objective", "serving"]) == 2
    err = capsys.readouterr().err
    assert "--tpot-ms" in err and "Traceback" not in err
