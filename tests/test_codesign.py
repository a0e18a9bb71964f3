"""Co-design: the gradient optimiser against closed forms and the grid baseline."""

import dataclasses
import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import costmodel as cm
from costmodel import codesign as cd
from costmodel._core.area import design_logits
from costmodel.cli import main
from costmodel.io import economics_preset
from costmodel.report.codesign import codesign_report


def _water_fill(bandwidths, capacities, total):
    """Smallest t with sum_t min(bw_t * t, cap_t) >= total (parallel tiers)."""
    lo, hi = 0.0, total / min(b for b in bandwidths if b > 0)
    for _ in range(200):
        mid = (lo + hi) / 2
        served = sum(min(b * mid, c) for b, c in zip(bandwidths, capacities))
        lo, hi = (mid, hi) if served < total else (lo, mid)
    return hi


def _parallel_tier_problem():
    # Dense attention with parallel tiers: no compute cost, no latencies, channels
    # fully overlapped (p large), PIM bandwidth-bound. The optimum is the closed form.
    tech = cm.tech_preset("N5")
    tech = cm.Technology(
        **{
            **{k: getattr(tech, k) for k in tech.__dataclass_fields__},
            "flops_per_area": tech.flops_per_area * 1e6,
            "pim_flops_per_area": tech.pim_flops_per_area * 1e6,
            "pim_bank_flops": tech.pim_bank_flops * 1e6,
            "sram_latency": jnp.asarray(0.0),
            "pim_latency": jnp.asarray(0.0),
            "dram_latency": jnp.asarray(0.0),
            # Parallel tiers: PIM streams beside DRAM and the host, softmax in the stacks.
            "pim_serial": jnp.asarray(0.0),
            "pim_softmax": jnp.asarray(1.0),
            "pim_pipelined": jnp.asarray(1.0),
        }
    )
    system = cm.make_chip(capacity=(0, 0, 1), bandwidth=(0, 0, 1), peak_flops=1, overlap=1000.0)
    model = cm.Model(n_layers=8, d_model=2048, n_heads=16, n_kv_heads=16, d_ff=4096, vocab=32000, tied_embeddings=1)
    w = cm.Workload(model, cm.Scenario(batch=8, context=16384))
    problem = cd.make_problem(
        [w], [1.0], tech, logic_area=400e-6, n_stacks=2, system=system, econ=economics_preset("N5"), objective="latency"
    )
    return problem, w


def _fixed_design(problem, compute=0.04, rho=0.5):
    """A design vector: `compute` of the free logic area (SRAM the rest), PIM share `rho`."""
    return design_logits(compute, rho, float(problem.n_stacks), problem.tech, problem.econ)


@pytest.mark.slow
def test_placement_optimiser_matches_the_water_filling_closed_form():
    problem, w = _parallel_tier_problem()
    area_logits = _fixed_design(problem)
    chip = cd.design_chip(problem, area_logits)
    traffic = cm.lower_traffic(w)
    total = float(jnp.sum(traffic.read_bytes + traffic.writes))
    eff = chip.tiers.efficiency
    bandwidths = [
        float(chip.tiers.bandwidth[0] * eff[0]),
        float(chip.pim_bandwidth * eff[1]),
        float(chip.tiers.bandwidth[2] * eff[2]),
    ]
    # Capacities in bytes moved (reads = 1 per byte stored; the KV writes are 1/16384).
    capacities = [float(chip.tiers.capacity[0]), float(chip.tiers.capacity[1]), math_inf()]
    optimum = _water_fill(bandwidths, capacities, total)
    assert capacities[0] < total and capacities[1] < total  # the capacities bind
    result = cd.optimize(problem, train_area=False, area_logits=area_logits, polish=False, steps=150)
    assert result.objective == pytest.approx(optimum, rel=0.01)
    # and the hard placement is not a placement policy in disguise
    assert result.polished_by is None


def test_designed_chip_inherits_the_system_kernel_fields():
    """A calibrated system's kernel fields (attention efficiency, half-rate rows, the
    small-kernel step, the compute feed) and its host time per step carry over to every
    designed chip."""
    problem, _ = _parallel_tier_problem()
    system = problem.system.replace(
        attention_efficiency=0.7,
        half_rate_rows=3.0,
        attention_half_rate_rows=5.0,
        attention_kv_rereads=1.0,
        attention_heads_per_block=2.0,
        serial_kernels=1.0,
        host_step=27e-6,
        host_per_sequence=1e-6,
        host_per_sequence_tp=2e-6,
        small_kernel_bytes=2.4e6,
        small_kernel_efficiency=0.55,
        small_kernel_knee=17.0,
    )
    chip = cd.design_chip(dataclasses.replace(problem, system=system), _fixed_design(problem, 0.5, 0.4))
    names = (
        "attention_efficiency",
        "half_rate_rows",
        "attention_half_rate_rows",
        "attention_kv_rereads",
        "attention_heads_per_block",
        "serial_kernels",
        "small_kernel_bytes",
    )
    for name in (*names, "small_kernel_efficiency", "host_step", "host_per_sequence", "host_per_sequence_tp"):
        assert float(getattr(chip, name)) == pytest.approx(float(getattr(system, name))), name
    assert float(chip.small_kernel_knee) == pytest.approx(17.0)


def math_inf():
    return float("inf")


@pytest.mark.slow
def test_without_capacity_limits_fractions_follow_bandwidth():
    # Unlimited capacities: the closed form is x_t proportional to effective bandwidth.
    problem, w = _parallel_tier_problem()
    chip = cd.design_chip(problem, _fixed_design(problem))
    big = chip.replace(tiers=chip.tiers.replace(capacity=jnp.full(3, 1e15)))
    bws = jnp.asarray([big.tiers.bandwidth[0], big.pim_bandwidth, big.tiers.bandwidth[2]]) * big.tiers.efficiency
    x = bws / jnp.sum(bws)
    placement = jnp.broadcast_to(x, (len(cm.ROWS), 3))
    best = cm.decode_cost(w, big, placement).seconds_per_step
    traffic = cm.lower_traffic(w)
    total = float(jnp.sum(traffic.read_bytes + traffic.writes))
    assert float(best) == pytest.approx(total / float(jnp.sum(bws)), rel=0.01)
    # any other split is slower
    rng = np.random.default_rng(0)
    for _ in range(20):
        other = jnp.asarray(rng.dirichlet(np.ones(3), size=len(cm.ROWS)))
        assert cm.decode_cost(w, big, other).seconds_per_step >= best * 0.999


@pytest.fixture(scope="module")
def chat_report():
    # What `costmodel optimize --model llama-3-8b --batch 1 --context 4096 --logic-area-mm2 814 --tech N5
    # --stacks auto` computes.
    problem, names = cd.build_problem("llama-3-8b", batch=1, context=4096, logic_area=814e-6, tech="N5")
    return codesign_report(problem, names)


@pytest.mark.slow
def test_gradient_design_meets_the_grid_with_twenty_times_fewer_evaluations(chat_report):
    r = chat_report
    assert r["gap"] <= 0.01
    assert r["evaluation_ratio"] >= 20
    assert abs(r["soft_to_hard_gap"]) <= 0.02
    d = r["design"]
    assert sum(d["logic_die_mm2"][p] for p in ("compute", "sram", "io_and_phys")) == pytest.approx(814, rel=1e-4)
    # The reported design has whole stacks and whole PIM dies per stack, as the grid's.
    for design in (d, r["baseline"]["design"]):
        m = design["dram"]
        assert m["stacks"] == pytest.approx(round(m["stacks"]), abs=1e-4)
        assert m["pim_dies_per_stack"] == pytest.approx(round(m["pim_dies_per_stack"]), abs=1e-4)
        usd = design["price_usd"]
        assert usd["chip"] == pytest.approx(usd["logic_die"] + usd["stacks"] + usd["packaging"], rel=1e-6)
    for rows in d["placement"].values():
        for fractions in rows.values():
            assert sum(fractions.values()) == pytest.approx(1, abs=1e-5)


@pytest.mark.slow
def test_optimize_json_keys(chat_report):
    for key in ("design", "objective", "evaluations", "seconds", "baseline", "gap"):
        assert key in chat_report
    for key in ("objective", "evaluations", "seconds"):
        assert key in chat_report["baseline"]
    json.dumps(chat_report)


@pytest.mark.parametrize(
    "args,needle",
    [
        (["optimize", "--area-mm2", "50"], "fixed I/O"),
        (["optimize", "--logic-area-mm2", "60", "--stacks", "3"], "3 HBM PHYs"),
        (["optimize", "--budget-usd", "1000"], "--budget-usd 1000: llama-3-8b needs 2 stacks"),
        (["optimize", "--stacks", "many"], "many"),
        (["optimize", "--model", "llama-3.1-405b", "--chips", "1"], "fit nowhere"),
        (["optimize", "--tech", "N1"], "N1"),
        (["optimize", "--objective", "speed"], "speed"),
        (["optimize", "--grid-step", "0.3"], "grid-step"),
    ],
)
def test_infeasible_requests_are_clear_errors(args, needle, capsys):
    assert main(args) == 2
    err = capsys.readouterr().err
    assert needle in err and "Traceback" not in err and "nan" not in err.lower()


@pytest.mark.slow
def test_the_grid_covers_the_ends_of_every_design_variable_exactly():
    """Grid designs at the ends of a range are exactly there (the one fractions -> logits
    rule): no SRAM, no PIM die or all PIM dies, not a sliver of 1e-12."""
    problem, _ = _parallel_tier_problem()
    assert cd.split_grid(0.5).tolist() == [0.5, 1.0]
    x = cd.design_grid(problem, 0.5)
    designs = jax.vmap(lambda v: cd.design_of(problem, v))(x)
    dies = float(problem.tech.dies_per_stack)
    assert sorted(set(np.round(np.asarray(designs.pim_share) * dies, 6))) == list(range(int(dies) + 1))
    assert float(jnp.min(designs.sram_area)) == 0.0
    base = cd.grid_baseline(problem, step=0.5)
    assert any(np.array_equal(np.asarray(base.area_logits), row) for row in np.asarray(x))
    with pytest.raises(ValueError, match="1/N"):
        cd.split_grid(0.3)


def test_the_deprecated_area_flag_says_so_on_stderr(capsys):
    # A bad value: one error line, which says how the flag was read.
    assert main(["optimize", "--area-mm2", "50"]) == 2
    lines = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(lines) == 1 and "--area-mm2 is deprecated and read as --logic-area-mm2" in lines[0]
    assert "--logic-area-mm2 50" in lines[0]


@pytest.mark.slow
def test_status_is_an_enumeration_and_feasible_follows_it():
    problem, _ = _parallel_tier_problem()
    base = cd.grid_baseline(problem, step=0.5)
    assert base.status == cd.DesignStatus.successful and base.feasible
    tiny = dataclasses.replace(problem, tensor_parallel=jnp.asarray(1.0), n_stacks=jnp.asarray(0.01))
    none_fit = cd.grid_baseline(tiny, step=0.5)
    assert none_fit.status == cd.DesignStatus.infeasible_capacity and not none_fit.feasible
    assert "overflow" in cd.DesignStatus[none_fit.status]


def test_the_system_sizing_rule_takes_plain_values():
    tech = cm.tech_preset("N5")
    per_chip = 5 * float(tech.stack_capacity)
    assert cd.design_system_chips(per_chip / cd.DRAM_HEADROOM, tech, 5) == 1
    assert cd.design_system_chips(per_chip, tech, 5) == 2  # 30% headroom
    assert cd.design_system_chips(per_chip, tech, 5, chips=1) == 1  # a fixed size that holds it
    with pytest.raises(cm.InputError, match="fit nowhere"):
        cd.design_system_chips(2 * per_chip, tech, 5, chips=1)
    with pytest.raises(cm.InputError, match=f"at most {cd.MAX_SYSTEM_CHIPS}"):
        cd.design_system_chips(100 * per_chip, tech, 5)
