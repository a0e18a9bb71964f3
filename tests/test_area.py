"""Two dies, two budgets, one price: the co-designed chip's physics and its gradients."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import costmodel as cm
from costmodel import codesign as cd
from costmodel._core.area import chip_from_design, design_logits, design_point
from costmodel.io import economics_preset


TECH = cm.tech_preset("N5")
ECON = economics_preset("N5")


def _design(compute, rho, n, **kw):
    x = design_logits(compute, rho, n, TECH, ECON, budget_usd=kw.get("budget_usd", 0.0))
    return design_point(x, TECH, ECON, **kw)


@pytest.mark.parametrize("stacks", [1, 3, 6])
def test_the_logic_die_never_pays_for_pim(stacks):
    """The PIM share moves no logic-die area and no logic-die dollar; its price is the
    premium per PIM die on the stacks."""
    kw = dict(logic_area=600e-6, n_stacks=stacks, stacks="fixed")
    none, half, full = (_design(0.5, rho, stacks, **kw) for rho in (0.0, 0.5, 1.0))
    for d in (half, full):
        for name in ("logic_area", "compute_area", "sram_area", "fixed_area", "die_usd"):
            assert float(getattr(d, name)) == pytest.approx(float(getattr(none, name)), rel=1e-6), name
    dies = stacks * float(TECH.dies_per_stack)
    assert float(full.stacks_usd - none.stacks_usd) == pytest.approx(dies * float(ECON.pim_die_premium), rel=1e-5)
    assert float(full.pim_logic_area) == pytest.approx(dies * float(TECH.pim_logic_area), rel=1e-6)
    # The logic die: I/O + PHYs + compute + SRAM, all of it.
    assert float(none.fixed_area + none.compute_area + none.sram_area) == pytest.approx(600e-6, rel=1e-6)


@pytest.mark.parametrize("rho", [0.0, 0.25, 0.625, 1.0])
def test_capacity_is_the_stacks_dies_less_what_pim_takes(rho):
    d = _design(0.4, rho, 4, logic_area=814e-6, n_stacks=4)
    chip = chip_from_design(d, TECH)
    cap = chip.tiers.capacity
    whole = 4 * float(TECH.dies_per_stack) * float(TECH.die_capacity)
    lost = whole * rho * float(TECH.pim_capacity_lost)
    assert float(cap[1] + cap[2]) == pytest.approx(whole - lost, rel=1e-6)
    assert float(cap[1]) == pytest.approx(whole * rho * (1 - float(TECH.pim_capacity_lost)), rel=1e-6, abs=1)


@pytest.mark.parametrize("rho", [0.0, 0.375, 1.0])
def test_stack_bandwidth_is_counted_once(rho):
    """The DRAM tier has the stacks' channels; the PIM tier's external bandwidth is the
    PIM dies' share of the same channels, and PIM and DRAM accesses do not overlap."""
    d = _design(0.4, rho, 5, logic_area=814e-6, n_stacks=5)
    chip = chip_from_design(d, TECH)
    channels = 5 * float(TECH.stack_bandwidth)
    assert float(chip.tiers.bandwidth[2]) == pytest.approx(channels, rel=1e-6)
    assert float(chip.tiers.bandwidth[1]) == pytest.approx(rho * channels, rel=1e-6, abs=1)
    assert float(chip.pim_serial) == 1.0
    banks = 5 * float(TECH.dies_per_stack) * rho * float(TECH.pim_banks_per_die)
    assert float(chip.pim_bandwidth) == pytest.approx(
        banks * float(TECH.pim_bank_bandwidth * TECH.pim_derate), rel=1e-5
    )
    assert float(chip.pim_flops) == pytest.approx(banks * float(TECH.pim_bank_flops * TECH.pim_derate), rel=1e-5)
    # The PIM units' energy and where the softmax runs come from data/tech.toml [pim].
    assert float(chip.pim_energy_per_flop) == pytest.approx(0.16e-12)
    assert float(chip.pim_softmax) == 1.0


def test_a_dollar_budget_is_spent_in_full_and_its_design_round_trips():
    for stacks in (2, 4):
        d = _design(0.5, 0.25, stacks, budget_usd=4000.0, budget="usd", stacks="auto")
        assert float(d.stacks) == pytest.approx(stacks, rel=1e-5)
        assert float(d.chip_usd) == pytest.approx(4000.0, rel=1e-5)
        assert bool(d.logic_fits)
    fixed = _design(0.5, 0.25, 3, budget_usd=4000.0, n_stacks=3, budget="usd", stacks="fixed")
    assert float(fixed.chip_usd) == pytest.approx(4000.0, rel=1e-5)


def _problem(budget_usd=None, n_stacks="auto"):
    model = cm.Model(n_layers=4, d_model=1024, n_heads=8, n_kv_heads=8, d_ff=2816, vocab=32000)
    w = cm.Workload(model, cm.Scenario(batch=4, context=8192))
    # Constants loaded here, in the caller's precision (float64 under the x64 fixture).
    return cd.make_problem(
        [w],
        [1.0],
        cm.tech_preset("N5"),
        logic_area=500e-6,
        budget_usd=budget_usd,
        n_stacks=n_stacks,
        system=cm.chip_preset("h100-sxm"),
        econ=economics_preset("N5"),
        objective="latency",
    )


@pytest.mark.slow
@pytest.mark.parametrize(
    "budget_usd,index,objective",
    [(None, 2, "latency"), (None, 3, "latency"), (None, 3, "cost"), (3000.0, 4, "latency"), (3000.0, 2, "cost")],
)
def test_gradients_through_the_design_variables_match_float64_finite_differences(budget_usd, index, objective, x64):
    """The PIM share (2), the stack count (3) and the dollar split (4), through chip,
    price and decode cost, against central differences in float64."""
    problem = dataclasses.replace(_problem(budget_usd), objective=objective)
    placement = jnp.full((1, len(cm.ROWS), 3), 1 / 3)
    x0 = jnp.asarray([0.3, -0.2, -0.5, 0.4, 0.2])
    f = lambda t: cd.evaluate_design(problem, x0.at[index].set(t), placement)[0]
    t0 = float(x0[index])
    g = float(jax.grad(f)(t0))
    h = 1e-5
    fd = (float(f(t0 + h)) - float(f(t0 - h))) / (2 * h)
    assert g != 0.0
    assert g == pytest.approx(fd, rel=1e-4)


@pytest.mark.slow
def test_gradient_through_the_dollar_budget_matches_float64_finite_differences(x64):
    problem = _problem(3000.0)
    placement = jnp.full((1, len(cm.ROWS), 3), 1 / 3)
    x = jnp.asarray([0.3, -0.2, -0.5, 0.4, 0.2])

    def f(b):
        return cd.evaluate_design(dataclasses.replace(problem, budget_usd=b), x, placement)[0]

    g = float(jax.grad(f)(jnp.asarray(3000.0)))
    h = 1e-2
    fd = (float(f(3000.0 + h)) - float(f(3000.0 - h))) / (2 * h)
    assert g < 0  # more dollars, a faster chip
    assert g == pytest.approx(fd, rel=1e-4)


def test_design_chip_passes_the_reference_memory_and_stream_efficiency():
    problem = _problem()
    system = problem.system.replace(
        tiers=problem.system.tiers.replace(efficiency=jnp.asarray([0.61, 0.5, 0.73])),
        attention_stream_efficiency=0.44,
    )
    chip = cd.design_chip(dataclasses.replace(problem, system=system), jnp.zeros(5))
    eff = np.asarray(chip.tiers.efficiency)
    assert eff[0] == pytest.approx(0.61) and eff[2] == pytest.approx(0.73)
    assert float(chip.attention_stream_efficiency) == pytest.approx(0.44)


def test_a_budget_that_cannot_hold_the_workload_is_one_line():
    with pytest.raises(cm.InputError) as e:
        cd.build_problem("llama-3-8b", budget_usd=1000.0)
    text = str(e.value)
    assert "\n" not in text and text.startswith(
        "--budget-usd 1000: llama-3-8b needs 2 stacks ($480) + the smallest die ($"
    )
    assert "packaging ($750)" in text
    with pytest.raises(
        cm.InputError, match=r"^--budget-usd 9000: llama-3-70b needs 9 stacks per chip, more than the 6"
    ):
        cd.build_problem("llama-3-70b", budget_usd=9000.0, chips=1)
