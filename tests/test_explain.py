"""`costmodel explain`: elasticities (checked against finite differences), figures, CLI."""

import json

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import costmodel as cm
from costmodel._core import channels
from costmodel.cli import main
from costmodel.explain import DESIGN_PARAMETERS, AreaDesign, cascade_placement, explain
from costmodel.explain.sensitivity import _logs, _objectives, _scale_chip
from costmodel.io import economics_preset
from costmodel.report.roofline import attainable_flops


ECON = economics_preset("N5")


def _explain(model, chip, batch, context, **kw):
    e = cm.evaluate(model, chip, batch=batch, context=context)
    return e, explain(e.workload, e.chip, ECON, policy=e.info.placement, **kw)


@pytest.mark.slow
def test_h100_batch_1_is_memory_bound_and_large_batch_turns_compute_bound():
    _, small = _explain("llama-3-8b", "h100-sxm", 1, 4096)
    el = small.record["elasticities"]
    assert abs(el["peak_flops"]) < 0.05
    assert el["bandwidth.dram"] < -0.5
    _, big = _explain("llama-3-8b", "h100-sxm", 1024, 256)
    assert big.record["elasticities"]["peak_flops"] < -0.5
    assert abs(big.record["elasticities"]["peak_flops"]) > abs(el["peak_flops"]) + 0.4
    assert abs(big.record["elasticities"]["bandwidth.dram"]) < abs(el["bandwidth.dram"])
    assert big.record["compute_utilisation"] > 10 * small.record["compute_utilisation"]
    # A dram-placed GPU serves nothing from SRAM, and its capacity elasticities are 0.
    assert small.record["onchip_byte_share"] == 0.0
    assert el["capacity.sram"] == 0.0
    assert len(small.answers) == 5


def test_elasticities_sum_to_minus_one_for_time():
    # Time is homogeneous of degree -1 in all rates when every serial term scales too;
    # with latencies fixed, the rate elasticities sum to between -1 and 0.
    _, x = _explain("llama-3-8b", "hbm-pim-gpu", 16, 32768)
    el = x.record["elasticities"]
    rates = sum(
        el[k]
        for k in ("peak_flops", "bandwidth.sram", "bandwidth.pim", "bandwidth.dram", "pim_flops", "link_bandwidth")
    )
    assert -1.0 <= rates < -0.8


OBJECTIVES = ("seconds_per_token", "joules_per_token", "usd_per_token")
ALL = ("peak_flops", "bandwidth.sram", "bandwidth.pim", "bandwidth.dram", "pim_flops", "link_bandwidth")
CAPS = ("capacity.sram", "capacity.pim", "capacity.dram")


@pytest.mark.slow
def test_elasticities_match_finite_differences():
    # float32, as the CLI runs (and sharing its compiled program): log(USD/token) ~ -16
    # has an ulp of ~2e-6, so h = 1e-2 keeps the rounding error of the difference ~1e-4.
    # A two-die design with SRAM, PIM dies and HBM, large enough to need two chips, at a
    # point where the KV history overflows SRAM into PIM: many parameters matter at once.
    tech = cm.tech_preset("N5")
    design = AreaDesign.from_split(tech, ECON, 814e-6, (0.7, 0.3), 5.0, 0.25, power_cap=700.0)
    info = cm.ChipInfo(design.chip(), "greedy", 8, "area", "")
    e = cm.evaluate("llama-3-8b", info, batch=8, context=16384, chips=2)
    w, chip = e.workload, e.chip
    x = explain(w, chip, ECON, policy="greedy", area=design)
    by = x.record["elasticities_by_objective"]
    traffic = cm.lower_traffic(w)
    hard = cm.policy_placement("greedy", traffic, chip)
    base = jnp.asarray(design.values)

    @eqx.filter_jit
    def logy(theta, scale, responsive):
        c = design.chip(base * scale).replace(
            tensor_parallel=chip.tensor_parallel, pipeline_parallel=chip.pipeline_parallel
        )
        c = _scale_chip(c, theta)
        p = cascade_placement(traffic, c, "greedy") if responsive else hard
        # Priced as the design: good logic die, stacks with the PIM premium, package.
        return _logs(*_objectives(w, c, p, ECON, "peak", design.price(base * scale, ECON))[:2])

    h = 1e-2
    zero = {k: jnp.zeros(()) for k in ALL + CAPS}
    ones = jnp.ones(len(DESIGN_PARAMETERS))
    checked = 0
    for name in ALL + CAPS + tuple(f"area.{p}" for p in DESIGN_PARAMETERS):
        responsive = name not in ALL
        if name.startswith("area."):
            i = DESIGN_PARAMETERS.index(name[5:])
            up = logy(zero, ones.at[i].set(np.exp(h)), True)
            down = logy(zero, ones.at[i].set(np.exp(-h)), True)
        else:
            up = logy({**zero, name: jnp.asarray(h)}, ones, responsive)
            down = logy({**zero, name: jnp.asarray(-h)}, ones, responsive)
        fd = (np.asarray(up) - np.asarray(down)) / (2 * h)
        for k, obj in enumerate(OBJECTIVES):
            assert by[obj][name] == pytest.approx(fd[k], rel=1e-2, abs=5e-4), (name, obj)
            checked += abs(fd[k]) > 1e-3
    assert checked >= 15  # the point is one where many parameters matter
    assert by["usd_per_token"]["area.compute"] > 0  # more die area costs money
    assert by["seconds_per_token"]["area.pim_share"] < 0  # more PIM dies serve the KV faster
    # The record prices the chip as the design does.
    assert x.record["chip_usd"] == pytest.approx(float(design.design().chip_usd), rel=1e-6)


def test_capacity_matters_only_through_a_responsive_placement():
    # An SRAM machine whose SRAM cannot hold the model: the hard placement is fixed, so
    # time does not depend on SRAM capacity; the cascade placement does, and more SRAM is faster.
    w = cm.Workload(cm.model_preset("llama-3-8b"), cm.Scenario(batch=1, context=4096))
    chip = cm.chip_preset("dmatrix-corsair")
    traffic = cm.lower_traffic(w)
    hard = cm.policy_placement("sram", traffic, chip)
    g_hard = eqx.filter_jit(
        jax.grad(lambda s: jnp.log(cm.decode_cost(w, _scale_chip(chip, {"capacity.sram": s}), hard).seconds_per_step))
    )(0.0)
    assert float(g_hard) == 0.0
    x = explain(w, chip, ECON, policy="sram")
    assert x.record["elasticities"]["capacity.sram"] < -0.05
    # The cascade agrees with the hard placement on what fits, up to which classes stay.
    c = cascade_placement(traffic, chip, "sram")
    np.testing.assert_allclose(np.asarray(c).sum(-1), 1.0, rtol=1e-6)
    assert x.record["cascade_seconds_per_token"] == pytest.approx(x.record["seconds_per_token"], rel=0.1)


def test_cascade_equals_the_policy_when_everything_fits():
    w = cm.Workload(cm.model_preset("llama-3-8b"), cm.Scenario(batch=1, context=1024))
    chip = cm.chip_preset("hbm-pim-gpu")
    traffic = cm.lower_traffic(w)
    for policy in ("dram", "pim_kv"):
        np.testing.assert_allclose(
            cascade_placement(traffic, chip, policy), cm.policy_placement(policy, traffic, chip), atol=1e-6
        )


@pytest.mark.slow
def test_sustained_mode_reports_the_power_cap():
    e = cm.evaluate("llama-3-8b", "h100-sxm", batch=1024, context=512)
    chip = e.chip.replace(power_cap=300.0)
    x = explain(e.workload, chip, ECON, policy="dram", mode="sustained")
    r = x.record
    assert r["sustained_to_peak"] < 0.95 and r["sustained_clock"] < 1
    assert r["sustained_power_watts_per_chip"] <= 300.0 * (1 + 1e-5)
    # Lower voltage: less energy per token, though the chip is amortised over fewer tokens.
    assert r["cost_sustained"]["energy_usd_per_million_tokens"] < r["cost_peak"]["energy_usd_per_million_tokens"]
    assert r["cost_sustained"]["die_usd_per_million_tokens"] > r["cost_peak"]["die_usd_per_million_tokens"]
    assert "No" in x.answers[1]
    # Throttled, compute matters less per unit of peak than at full clock? It still binds.
    assert r["elasticities"]["peak_flops"] < -0.3


def test_cli_json(capsys):
    code = main(["explain", "--model", "llama-3-8b", "--chip", "h100-sxm", "--batch", "1", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0
    for key in ("peak_flops", "bandwidth.dram", "bandwidth.sram", "capacity.sram"):
        assert key in out["elasticities"]
    assert 0 <= out["onchip_byte_share"] <= 1
    assert 0 < out["sustained_to_peak"] <= 1
    assert len(out["answers"]) == 5
    assert out["elasticities"]["bandwidth.dram"] < -0.5


def test_cli_area_design_and_overrides(capsys):
    argv = ["explain", "--tech", "N5", "--split", "0.8,0.2", "--stacks", "4", "--pim-share", "0.25", "--batch", "4"]
    code = main([*argv, "--electricity", "0.2", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0
    assert {"area.compute", "area.sram", "area.pim_share", "area.stacks"} <= set(out["elasticities"])
    assert "4 stacks, PIM share 0.25" in out["label"]
    # The chip is the two-die design's: 8 PIM dies of 4 x 8, priced as co-design prices it.
    tech, econ = cm.tech_preset("N5"), economics_preset("N5", electricity_usd_per_kwh=0.2)
    design = cm.design_from_split(814e-6, 0.2, 4.0, 0.25, tech, econ)
    assert float(design.pim_dies) == 8.0
    assert out["chip_usd"] == pytest.approx(float(design.chip_usd), rel=1e-5)
    assert out["cost_peak"]["energy_usd_per_million_tokens"] == pytest.approx(
        out["joules_per_token"] * 0.2 / 3.6e6 * 1e6, rel=1e-4
    )


@pytest.mark.parametrize(
    "argv, needle",
    [
        (["explain", "--split", "a,b"], "a,b"),
        (["explain", "--tech", "N5", "--split", "0.9,0.08,0.02"], "--pim-share"),
        (["explain", "--tech", "N5", "--split", "0,0"], "summing to 0"),
        (["explain", "--tech", "N5", "--pim-share", "1.5"], "[0, 1]"),
        (["explain", "--tech", "N5", "--area", "50"], "fixed I/O"),
        (["explain", "--chip", "h100-sxm", "--tech", "N5"], "--tech"),
        (["explain", "--tech", "N1"], "N1"),
        (["explain", "--utilization", "3"], "utilization"),
        (["explain", "--mode", "turbo"], "turbo"),
    ],
)
def test_cli_bad_input_is_one_line_exit_2(argv, needle, capsys):
    code = main(argv)
    err = capsys.readouterr().err
    assert code == 2
    assert needle in err and err.count("\n") == 1


def test_an_empty_part_has_no_area_and_no_gradient():
    """`AreaDesign` goes through co-design's shares -> logits rule (`design_logits`): no
    SRAM is exactly none and no PIM die is no PIM tier at all, and their elasticities
    are 0, not NaN."""
    tech = cm.tech_preset("N5")
    design = AreaDesign.from_split(tech, ECON, 814e-6, (1.0, 0.0), 5.0, 0.0, power_cap=700.0)
    chip = design.chip()
    assert float(chip.tiers.capacity[0]) == 0.0
    assert float(chip.tiers.capacity[1]) == 0.0 and float(chip.pim_flops) == 0.0
    e = cm.evaluate("llama-3-8b", cm.ChipInfo(chip, "greedy", 8, "area", ""), batch=4)
    x = explain(e.workload, e.chip, ECON, policy="greedy", area=design)
    for by in x.record["elasticities_by_objective"].values():
        assert all(np.isfinite(v) for v in by.values())
        assert by["area.pim_share"] == 0.0 and by["area.sram"] == 0.0


def test_area_design_is_the_two_die_model():
    """An area design's chip is `chip_from_design` of the design its split describes,
    its PIM on the DRAM dies: a larger PIM share leaves the logic die as it was."""
    tech = cm.tech_preset("N5")
    a = AreaDesign.from_split(tech, ECON, 700e-6, (0.75, 0.25), 6.0, 0.5)
    b = AreaDesign.from_split(tech, ECON, 700e-6, (0.75, 0.25), 6.0, 0.0)
    da, db = a.design(), b.design()
    for d in (da, db):
        assert float(d.logic_area) == pytest.approx(700e-6, rel=1e-6)
        assert float(d.sram_area / (d.compute_area + d.sram_area)) == pytest.approx(0.25, rel=1e-6)
    assert float(da.compute_area) == pytest.approx(float(db.compute_area), rel=1e-6)
    assert float(da.pim_dies) == 24.0 and float(db.pim_dies) == 0.0
    direct = cm.chip_from_design(da, tech, memory_efficiency=jnp.array([0.9, 1.0, 0.9]))
    chip = a.chip()
    for leaf, ref in zip(jax.tree.leaves(chip.tiers), jax.tree.leaves(direct.tiers)):
        np.testing.assert_allclose(leaf, ref, rtol=1e-6)
    np.testing.assert_allclose(chip.pim_flops, direct.pim_flops, rtol=1e-6)
    with pytest.raises(ValueError, match="pim_share"):
        AreaDesign.from_split(tech, ECON, 814e-6, (0.6, 0.25, 0.15))


def _class_rates(e):
    """The per-class arguments of `attainable_flops`, as the roofline plot builds them."""
    traffic = cm.lower_traffic(e.workload)
    return (
        e.chip,
        cm.class_placement(e.placement, traffic),
        cm.class_sum(traffic.read_bytes + traffic.writes),
        cm.class_sum(traffic.flops),
        cm.class_flop_rates(e.workload, traffic, e.chip),
        cm.class_stream_efficiency(traffic, e.chip),
    )


def test_roofline_rates_come_from_the_channel_functions(monkeypatch):
    e = cm.evaluate("llama-3-8b", "h100-sxm", batch=1, context=4096)
    args = _class_rates(e)
    chip, _, moved, flops, _, small = args
    rates = np.asarray(attainable_flops(*args))
    # Memory-bound at batch 1: the FFN weights, in DRAM, reach the stream rate x intensity
    # (the p-norm at p = 64 lets the compute channel shave off a little).
    c = cm.CLASSES.index("weights.ffn")
    stream = float(chip.tiers.effective_bandwidth[2] * chip.tensor_parallel * small[c])
    assert rates[c] == pytest.approx(stream * float(flops[c] / moved[c]), rel=0.02)
    assert rates[c] <= stream * float(flops[c] / moved[c])
    # A change to a channel's formula moves the plot: twice the stream time, half the rate.
    slow = channels.stream_seconds
    monkeypatch.setattr(channels, "stream_seconds", lambda *a: 2.0 * slow(*a))
    assert np.asarray(attainable_flops(*args))[c] == pytest.approx(rates[c] / 2, rel=0.02)


def test_roofline_roofs_are_the_channels_limits():
    e = cm.evaluate("llama-3-8b", "hbm-pim-gpu", batch=16, context=32768)
    chip, tp = e.chip, float(e.chip.tensor_parallel)
    peak = chip.peak_flops[1] * chip.compute_efficiency
    x = jnp.logspace(-2, 4, 50)
    for tier in range(3):
        roof = np.asarray(attainable_flops(chip, np.eye(3)[tier], jnp.ones_like(x), x, peak))
        assert np.all(np.diff(roof) >= -1e-6 * roof[1:])  # more FLOPs per byte never slows
        if tier == 1:  # PIM: its internal bandwidth, then its own FLOP/s
            limit = np.minimum(float(chip.pim_bandwidth * chip.tiers.efficiency[1]) * x, float(chip.pim_flops))
        else:
            limit = np.minimum(float(chip.tiers.effective_bandwidth[tier]) * x, float(peak))
        np.testing.assert_allclose(roof, tp * limit, rtol=0.02)
