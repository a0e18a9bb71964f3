"""Die cost from area, yield, and cost per token: the technology.md smoke test and invariants."""

import jax
import numpy as np
import pytest

import costmodel as cm
from costmodel._core.economics import die_cost, die_yield, dies_per_wafer, token_cost
from costmodel.io import InputError, economics_preset, node_for_process


def test_technology_md_smoke_test():
    # 814 mm² at N5, D0 = 0.10/cm² (TSMC 2020, via AnandTech), alpha = 3: Y ≈ 0.49,
    # 63.5 sites, ≈ $550 per good die; LLMCompass's 0.2/cm² gave Y ≈ 0.27 and ≈ $980.
    e = economics_preset("N5")
    a = 814e-6
    assert float(e.defect_density) == pytest.approx(0.1e4)
    assert float(die_yield(a, e.defect_density, e.yield_alpha)) == pytest.approx(0.487, abs=0.002)
    assert float(dies_per_wafer(a, e.wafer_diameter)) == pytest.approx(63.5, abs=0.1)
    assert float(die_cost(a, e)) == pytest.approx(550, abs=5)
    assert float(die_cost(a, economics_preset("N5", defect_density_per_cm2=0.2))) == pytest.approx(980, abs=5)


def test_closed_forms_and_monotonicity():
    e = economics_preset("N7")
    areas = np.array([50e-6, 100e-6, 300e-6, 600e-6, 826e-6])
    y = np.array([float(die_yield(a, e.defect_density, e.yield_alpha)) for a in areas])
    cost = np.array([float(die_cost(a, e)) for a in areas])
    assert np.all(np.diff(y) < 0) and np.all((y > 0) & (y < 1))
    assert np.all(np.diff(cost / areas) > 0)  # a bigger die costs more per mm²: yield and edge loss
    # Poisson limit: alpha -> inf gives exp(-A D0).
    assert float(die_yield(600e-6, e.defect_density, 1e3)) == pytest.approx(np.exp(-600e-6 * 0.15e4), rel=2e-3)
    assert float(die_yield(600e-6, 0.0, 3.0)) == 1.0


def test_wafer_scale_and_unknown_area():
    e = economics_preset("N5")
    assert float(die_cost(46225e-6, e)) == pytest.approx(float(e.wafer_cost))
    assert float(die_cost(0.0, e)) == 0.0


def test_token_cost_parts_add_up_and_scale():
    ev = cm.evaluate("llama-3-8b", "h100-sxm", batch=8, context=4096)
    e = economics_preset("N5")
    t = token_cost(ev.cost, ev.chip, e)
    total = float(t.die_usd_per_token + t.package_usd_per_token + t.energy_usd_per_token)
    assert float(t.usd_per_token) == pytest.approx(total, rel=1e-6)
    # Chip price: die + packaging + its HBM (85.52 GB, 80 GiB) at the file's prices.
    hbm_gb = float(ev.chip.tiers.capacity[-1]) / 1e9
    assert hbm_gb == pytest.approx(85.52, rel=1e-6)
    assert float(t.chip_usd) == pytest.approx(float(t.die_usd) + 750 + hbm_gb * 15, rel=1e-4)
    # Energy part is J/token x price; capital part halves when the life doubles.
    assert float(t.energy_usd_per_token) == pytest.approx(float(ev.cost.joules_per_token) * 0.10 / 3.6e6, rel=1e-5)
    t2 = token_cost(ev.cost, ev.chip, economics_preset("N5", lifetime_years=8.0))
    assert float(t2.die_usd_per_token) == pytest.approx(float(t.die_usd_per_token) / 2, rel=1e-5)
    assert float(t2.energy_usd_per_token) == pytest.approx(float(t.energy_usd_per_token), rel=1e-6)


def test_gradient_of_die_cost_matches_finite_differences(x64):
    e = economics_preset("N5")
    g = float(jax.grad(lambda a: die_cost(a, e))(814e-6))
    h = 1e-9
    fd = (float(die_cost(814e-6 + h, e)) - float(die_cost(814e-6 - h, e))) / (2 * h)
    assert g > 0
    assert g == pytest.approx(fd, rel=1e-5)


def test_overrides_are_validated():
    assert float(economics_preset("N5", electricity_usd_per_kwh=0.2).energy_price) == pytest.approx(0.2 / 3.6e6)
    with pytest.raises(InputError, match="utilization"):
        economics_preset("N5", utilization=1.5)
    with pytest.raises(InputError, match="bogus"):
        economics_preset("N5", bogus=1.0)
    with pytest.raises(InputError, match="N1"):
        economics_preset("N1")


@pytest.mark.parametrize(
    "process, node",
    [("TSMC 4N", "N5"), ("TSMC N7", "N7"), ("TSMC 6nm", "N7"), ("TSMC N3E", "N3"), ("GlobalFoundries 14nm", None)],
)
def test_node_for_process(process, node):
    assert node_for_process(process) == node


def test_die_area_for_cost_inverts_the_die_price_with_the_implicit_derivative(x64):
    from costmodel._core.economics import RETICLE_AREA, die_area_for_cost

    e = economics_preset("N5")
    for area in (20e-6, 300e-6, 814e-6):
        assert float(die_area_for_cost(die_cost(area, e), e)) == pytest.approx(area, rel=1e-9)
    usd = 400.0
    g = float(jax.grad(lambda u: die_area_for_cost(u, e))(usd))
    h = 1e-3
    fd = (float(die_area_for_cost(usd + h, e)) - float(die_area_for_cost(usd - h, e))) / (2 * h)
    assert g == pytest.approx(fd, rel=1e-5)
    # Through the prices too: d area / d wafer cost at a fixed budget.
    ge = jax.grad(lambda e: die_area_for_cost(usd, e))(e)
    bump = lambda w: die_area_for_cost(usd, economics_preset("N5", wafer_cost_usd=w))
    fd_w = (float(bump(16988.0 + 1.0)) - float(bump(16988.0 - 1.0))) / 2.0
    assert float(ge.wafer_cost) == pytest.approx(fd_w, rel=1e-5)
    # Beyond a reticle-size die the dollars buy no more area.
    big = float(die_cost(RETICLE_AREA, e)) * 2
    assert float(die_area_for_cost(big, e)) == pytest.approx(RETICLE_AREA, rel=1e-9)
    assert float(jax.grad(lambda u: die_area_for_cost(u, e))(big)) == 0.0
