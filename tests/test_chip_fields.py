"""Every chip field is live, or listed as inert with a reason.

Each leaf entry of every preset's `Chip` (and of the calibrated chips) is perturbed
on its own, and the step is evaluated over probes that between them exercise every
mechanism: KV-heavy and weight-heavy steps, all four precision classes, every
placement policy, tensor and pipeline parallelism, the power cap and the price. A
leaf is live when some output (time, energy, stored bytes, overflow, feasibility,
$/token, sustained time or energy) changes. `inert_reason` lists the leaves that may
change nothing on a given chip and why; the test checks both directions, so the list
cannot go stale.
"""

from __future__ import annotations

import functools

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import costmodel as cm
from costmodel._core.chip import DRAM, PIM, SRAM, TIERS
from costmodel._core.placement import POLICIES
from costmodel.evaluation import resolve_profile
from costmodel.io import chip_info, chip_presets
from costmodel.io.chips import CHIP_SCHEMA, calibrated_chips


SWITCH_ON = {
    "latency": 1e-6,
    "capacity": 1e9,
    "bandwidth": 1e12,
    "energy_per_byte": 10e-12,
    "small_kernel_bytes": 1e9,
    "half_rate_rows": 1e5,
    "attention_half_rate_rows": 1e5,
    "static_power": 100.0,
    "kernel_overhead": 10e-6,
    "link_bandwidth": 100e9,
    "link_knee": 1e6,
    "link_bandwidth_large": 50e9,
    "link_latency": 10e-6,
    "link_latency_small": 5e-6,
    "link_bandwidth_small": 50e9,
    "hop_latency": 10e-6,
    "host_step": 1e-3,
    "host_per_sequence": 100e-6,
    "host_per_sequence_tp": 50e-6,
    "area": 800e-6,
    "pim_energy_per_flop": 1e-12,
    "energy_per_flop": 1e-12,
    "peak_flops": 1e12,
    "pim_bandwidth": 1e12,
    "pim_flops": 1e12,
    "pim_energy_per_byte": 1e-12,
    "parallel_units": 100.0,
    "bytes_in_flight": 1e3,
    "attention_heads_per_block": 1.0,
}
"""Value given to a leaf that is 0 on a chip (a term that is off): a typical 'on'."""

UNIT = {
    "pim_serial",
    "pim_softmax",
    "pim_pipelined",
    "attention_kv_rereads",
    "attention_rereads_cached",
    "serial_kernels",
}
"""Leaves in [0, 1] that are perturbed by flipping them (v -> 1 - v)."""

PROBES = (
    # (model, batch, context, weights, kv, profile)
    ("llama-3-8b", 8, 32768, "bf16", "f32", "dense"),  # KV-heavy, GQA attention in f32
    ("llama-3-8b", 1, 128, "int8", "f32", "dense"),  # weights stream, small KV kernels, 8-bit and f32
    ("llama-3-8b", 64, 8192, "int4", "bf16", "topk"),  # large batch, 4-bit weights, sparse history
    ("llama-3-8b", 256, 1024, "bf16", "bf16", "dense"),  # compute near the memory time
    ("llama-3-8b", 1024, 128, "bf16", "bf16", "dense"),  # 8 MiB all-reduces: past a small-message protocol
)
SYSTEMS = ((1, 1), (2, 1), (1, 2))
"""(tensor, pipeline) parallel layouts each probe runs on, as multiples of the system
`costmodel.evaluate` sizes for the chip (an SRAM machine needs many chips to hold a model)."""

UP = {"latency", "link_latency", "hop_latency", "kernel_overhead", "host_step", "small_kernel_bytes"}
"""Leaves perturbed upwards (by 1 / `FACTOR`): a latency, or the size below which
kernels stream slowly, shows most when it grows."""

FACTOR = 1e-4
"""What a nonzero leaf is multiplied by: a large change, so a term that is small at the
probes (the compute of a memory-bound step) still shows."""


def _name(path) -> str:
    return ".".join(p.name for p in path)


def _leaf_entries(chip: cm.Chip):
    """(label, leaf index, entry index or None) of every number in a chip."""
    leaves = jax.tree_util.tree_flatten_with_path(chip)[0]
    out = []
    for i, (path, leaf) in enumerate(leaves):
        name = _name(path)
        if jnp.ndim(leaf) == 0:
            out.append((name, i, None))
        else:
            out.extend((f"{name}[{k}]", i, k) for k in range(leaf.shape[-1]))
    return out


def _perturbed(leaf_name: str, value: float) -> float:
    short = leaf_name.split(".")[-1]
    if short in ("tensor_parallel", "pipeline_parallel"):
        return value + 1.0
    if short in UNIT:
        return 1.0 - value
    if short == "overlap":
        return max(1.0, value * 0.01) if value > 1.0 else 4.0
    if value == 0.0:
        return SWITCH_ON[short]
    if short in UP:
        return value / FACTOR
    return value * FACTOR


LARGEST_MESSAGE = 1024 * 4096 * 2 * 2
"""Bytes of the largest all-reduce message any probe sends (batch x d_model x 2 B: Llama 3
8B, batch 1,024, 16-bit activations), with a margin of 2: an f32 probe's activations."""

OFF = 1e-5
"""How close to its off value (0 or 1) a fitted knob may be and count as off."""


def inert_reason(chip: cm.Chip, label: str) -> str | None:
    """Why a leaf entry may change no output on this chip, or None (it must be live)."""
    capacity = np.asarray(chip.tiers.capacity)
    if label.startswith("tiers."):
        tier = int(label.split("[")[1].rstrip("]"))
        if label.startswith("tiers.compute_feed") and tier == PIM:
            return "PIM-held FLOPs run in the PIM units, never on the compute die"
        feed = np.asarray(chip.tiers.compute_feed)
        # A fit that ran a knob to its bound leaves it within OFF of its off value.
        if label.startswith("tiers.compute_feed") and tier == SRAM and feed[DRAM] >= 1.0 - OFF:
            return "the on-chip feed is never below DRAM's (effective_feed), which is already 1"
        absent = capacity[tier] <= 0 and not label.startswith("tiers.capacity")
        # Bytes that overflow every tier still stream from DRAM, the last one.
        if absent and not (tier == DRAM and label.startswith("tiers.bandwidth")):
            return f"the {TIERS[tier]} tier is absent (capacity 0: the chip file has no [{TIERS[tier]}] section)"
        return None
    if label.startswith("pim_") and capacity[PIM] <= 0:
        return "no PIM tier (capacity 0)"
    if label == "pim_serial" and float(chip.pim_pipelined) <= 0:
        return "PIM already runs after the host's work (pim_pipelined 0): sharing DRAM's channels adds nothing"
    no_energy = not (np.any(np.asarray(chip.tiers.energy_per_byte) > 0) or np.any(np.asarray(chip.energy_per_flop) > 0))
    if label == "power_cap" and no_energy and float(chip.static_power) <= 0:
        return "the chip has no energy figures (a time-only calibration): its power is 0 and never reaches a cap"
    if label in ("link_latency", "host_per_sequence_tp") and float(chip.link_bandwidth) <= 0:
        return "no chip-to-chip link (link_bandwidth 0): a multi-chip step is infinitely slow whatever the latency"
    if label == "link_latency_small" and float(chip.link_bandwidth_small) <= 0:
        return "no small-message protocol (link_bandwidth_small 0): every all-reduce on the ring's line"
    if label == "link_knee" and float(chip.link_bandwidth_large) <= 0:
        return "no second line of the all-reduce (link_bandwidth_large 0): every byte at link_bandwidth"
    if label == "link_bandwidth_large" and float(chip.link_knee) > LARGEST_MESSAGE:
        return "the all-reduce's knee lies past every probe's message (at most 1024 x 4096 x 4 B = 16 MiB)"
    no_rereads = float(chip.attention_kv_rereads) <= 0 and float(chip.attention_heads_per_block) <= 0
    if label == "attention_rereads_cached" and no_rereads:
        return "no K/V re-reads (attention_kv_rereads and attention_heads_per_block 0): nothing for the cache to serve"
    if label == "parallel_units" and float(chip.bytes_in_flight) <= 0:
        return "no bound on the bytes in flight (bytes_in_flight 0): a framework profile sets one"
    if label == "bytes_in_flight" and float(chip.parallel_units) <= 0:
        return "no parallel units (parallel_units 0): the chip file gives no SM count to bound DRAM streaming with"
    for name in ("half_rate_rows", "attention_half_rate_rows"):
        if label == name and 0 < float(getattr(chip, name)) < OFF:
            return "Hockney's n1/2 fitted to its lower bound (below 1e-5 rows): matmuls at full rate from one row"
    if label == "serial_kernels" and float(chip.overlap) <= 1.0 + OFF:
        return "the channels already add (overlap 1): kernels in sequence add nothing"
    sram_only = capacity[DRAM] <= 0 and capacity[PIM] <= 0
    if label == "serial_kernels" and sram_only and float(jnp.max(chip.peak_flops) / chip.tiers.bandwidth[SRAM]) < 1.0:
        return (
            "SRAM alone, streaming a byte faster than the core does a FLOP (a wafer's 21 PB/s): the compute binds "
            "every class at every probe, so classes in sequence add what the overlap does"
        )
    if label.startswith("small_kernel_") and float(chip.small_kernel_bytes) <= 0:
        return "the small-kernel step is off (small_kernel_bytes 0): only a calibrated chip has one"
    # At efficiency 1 the size and knee of the step change nothing; the efficiency
    # itself, flipped to 0, switches the step on.
    if label in ("small_kernel_bytes", "small_kernel_knee") and float(chip.small_kernel_efficiency) >= 1 - OFF:
        return "the small-kernel step is off (small_kernel_efficiency 1): only a calibrated chip has one"
    return None


def _chips() -> dict[str, cm.ChipInfo]:
    names = [*sorted(chip_presets()), *sorted(calibrated_chips())]
    return {name: chip_info(name) for name in names}


@functools.cache
def _outputs():
    """Per chip: the outputs of the unperturbed chip and of each perturbation,
    `[1 + entries, outputs]`, with the entries' labels."""
    econ = cm.economics_preset("N5")

    @functools.partial(jax.jit, static_argnames="policy")
    def run(chips, workload, tp, pp, policy):
        def one(chip, tp, pp):
            chip = chip.replace(
                tensor_parallel=chip.tensor_parallel * tp, pipeline_parallel=chip.pipeline_parallel * pp
            )
            placement = cm.policy_placement(policy, cm.lower_traffic(workload), chip)
            cost = cm.decode_cost(workload, chip, placement)
            sustained = cm.sustained_cost(workload, chip, placement).cost
            usd = cm.token_cost(cost, chip, econ).usd_per_token
            return jnp.concatenate(
                [
                    jnp.stack([cost.seconds_per_step, cost.joules_per_token, cost.overflow_bytes]),
                    cost.stored_bytes,
                    jnp.stack([cost.feasible.astype(float), usd]),
                    jnp.stack([sustained.seconds_per_step, sustained.joules_per_token]),
                ]
            )

        return jax.vmap(one)(chips, tp, pp)

    results = {}
    for name, info in _chips().items():
        chip = info.chip
        leaves, treedef = jax.tree_util.tree_flatten(chip)
        entries = _leaf_entries(chip)
        variants = [chip]
        for label, i, k in entries:
            new = list(leaves)
            v = np.array(leaves[i], dtype=float)
            if k is None:
                new[i] = jnp.asarray(_perturbed(label, float(v)))
            else:
                v[k] = _perturbed(label.split("[")[0], float(v[k]))
                new[i] = jnp.asarray(v)
            variants.append(jax.tree_util.tree_unflatten(treedef, new))
        results[name] = (chip, entries, jax.tree.map(lambda *xs: jnp.stack(xs), *variants))

    # Stack every chip's variants together: one vmap per probe, system and policy.
    names = list(results)
    sizes = [len(results[n][1]) + 1 for n in names]
    stacked = jax.tree.map(lambda *xs: jnp.concatenate(xs), *(results[n][2] for n in names))
    columns = []
    for model, batch, context, weights, kv, profile in PROBES:
        workload = cm.Workload(
            cm.model_preset(model),
            cm.make_scenario(batch=batch, context=context, weights=weights, kv=kv),
            resolve_profile(profile, context)[1],
        )
        sized = []  # per variant: the (tp, pp) `evaluate` gives its chip at this probe
        for name, size in zip(names, sizes):
            try:
                e = cm.evaluate(model, name, batch=batch, context=context, weights=weights, kv=kv)
                sized += [(float(e.chip.tensor_parallel), float(e.chip.pipeline_parallel))] * size
            except cm.InputError:  # fits on no system of this chip: one chip, overflowing
                sized += [(1.0, 1.0)] * size
        base_tp, base_pp = (jnp.asarray(a) for a in zip(*sized))
        for tp, pp in SYSTEMS:
            for policy in POLICIES:
                columns.append(np.asarray(run(stacked, workload, base_tp * tp, base_pp * pp, policy)))
    table = np.concatenate(columns, axis=1)  # [all variants, probes x outputs]
    out, start = {}, 0
    for name, size in zip(names, sizes):
        out[name] = (results[name][0], results[name][1], table[start : start + size])
        start += size
    return out


def _changed(base: np.ndarray, new: np.ndarray) -> bool:
    both_nan = np.isnan(base) & np.isnan(new)
    same = np.isclose(base, new, rtol=1e-6, atol=0.0) | both_nan | (base == new)
    return not bool(np.all(same))


@pytest.mark.parametrize("name", [*sorted(chip_presets()), *sorted(calibrated_chips())])
@pytest.mark.slow
def test_every_chip_leaf_is_live_or_listed_inert(name):
    chip, entries, table = _outputs()[name]
    base = table[0]
    dead, wrongly_listed = [], []
    for (label, _, _), row in zip(entries, table[1:]):
        live = _changed(base, row)
        reason = inert_reason(chip, label)
        if not live and reason is None:
            dead.append(label)
        if live and reason is not None:
            wrongly_listed.append(f"{label} ({reason})")
    assert not dead, f"{name}: chip leaves that change no output: {dead}"
    assert not wrongly_listed, f"{name}: leaves listed inert that do change an output: {wrongly_listed}"


def test_every_chip_file_field_sets_a_leaf_of_the_chip():
    """Each number a chip file can hold sets at least one `Chip` leaf (so the live test
    above covers it), and every leaf but the system's layout is set by some field."""
    chip = chip_info("h100-sxm").chip
    paths = {tuple(p.name for p in path) for path, _ in jax.tree_util.tree_flatten_with_path(chip)[0]}
    set_by_file = {path for f in CHIP_SCHEMA for path, _ in f.leaves}
    assert set_by_file <= paths
    assert paths - set_by_file == {("tensor_parallel",), ("pipeline_parallel",)}


def test_pim_external_bandwidth_and_energy_are_live_on_the_pim_preset():
    """The issue's example: on hbm-pim-gpu (llama-3-8b, batch 8, 32k context), the PIM
    tier's external bandwidth x100 and energy 1 J/B change time and energy."""
    e = cm.evaluate("llama-3-8b", "hbm-pim-gpu", batch=8, context=32768)
    base = e.cost
    tiers = e.chip.tiers
    faster = e.chip.replace(tiers=tiers.replace(bandwidth=tiers.bandwidth.at[PIM].multiply(100.0)))
    costly = e.chip.replace(tiers=tiers.replace(energy_per_byte=tiers.energy_per_byte.at[PIM].set(1.0)))
    fast = cm.decode_cost(e.workload, faster, e.placement)
    dear = cm.decode_cost(e.workload, costly, e.placement)
    assert float(fast.seconds_per_step) < float(base.seconds_per_step)
    assert float(dear.joules_per_token) > 10 * float(base.joules_per_token)
    # The internal figures stay live too (GQA attention is FLOP-bound in the banks).
    inner = e.chip.replace(pim_flops=e.chip.pim_flops * 100.0, pim_energy_per_byte=1.0)
    moved = cm.decode_cost(e.workload, inner, e.placement)
    assert float(moved.seconds_per_step) != float(base.seconds_per_step)
    assert float(moved.joules_per_token) > 10 * float(base.joules_per_token)


def test_tiers_of_absent_sections_are_zero_capacity():
    """The inert rule for absent tiers relies on a chip file's missing section giving
    capacity 0 (and the PIM rule on PIM capacity 0)."""
    for name, info in _chips().items():
        capacity = np.asarray(info.chip.tiers.capacity)
        assert capacity.shape == (len(TIERS),), name
        assert np.all(capacity >= 0), name
    assert float(chip_info("h100-sxm").chip.tiers.capacity[PIM]) == 0.0
    assert float(chip_info("hbm-pim-gpu").chip.tiers.capacity[PIM]) > 0.0
    assert SRAM < PIM < DRAM
    assert isinstance(chip_info("h100-sxm").chip, eqx.Module)


def test_attention_half_rate_rows_defaults_to_the_weight_matmuls_and_round_trips(tmp_path):
    """A chip file without `attention_half_rate_rows` (every file written before the field)
    gives decode attention the weight matmuls' n-half; a chip whose two differ writes and
    reads both back, one whose two agree leaves the key out."""
    import tomllib

    from costmodel.io.chips import chip_file_text, chip_from_table, chip_table

    cpu = chip_info("cpu").chip
    assert float(cpu.half_rate_rows) > 1.0
    assert float(cpu.attention_half_rate_rows) == float(cpu.half_rate_rows)
    for attention in (float(cpu.half_rate_rows), 0.0, 11.0):
        chip = cpu.replace(attention_half_rate_rows=attention)
        table = chip_table(chip, name="t", source="test", placement="sram", max_chips=1)
        assert ("attention_half_rate_rows" in table) == (attention != float(cpu.half_rate_rows))
        path = tmp_path / "t.toml"
        path.write_text(chip_file_text(table, []))
        back_chip = chip_from_table(tomllib.loads(path.read_text()), str(path), "t").chip
        assert float(back_chip.attention_half_rate_rows) == pytest.approx(attention, rel=1e-5)
        assert float(back_chip.half_rate_rows) == pytest.approx(float(cpu.half_rate_rows), rel=1e-5)
