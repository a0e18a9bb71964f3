"""Technology constants of process nodes, PIM and DRAM (`data/tech.toml`), in SI units."""

from __future__ import annotations

from typing import Any

import jax.numpy as jnp

from .._core.area import Technology
from .chips import FLOP_ENERGY_SCALE
from .errors import InputError
from .files import data_dir, load_toml
from .schema import check_table


_NODE_FIELDS = {
    "compute_tflops_per_mm2_16": "positive",
    "compute_tflops_per_mm2_8": "positive",
    "energy_pj_per_flop_16": "positive",
    "sram_MB_per_mm2": "positive",
    "sram_bandwidth_GBps_per_mm2": "positive",
    "sram_energy_pj_per_byte": "positive",
    "sram_latency_ns": "nonneg",
    "leakage_w_per_mm2": "nonneg",
    "wafer_cost_usd": "positive",
    "defect_density_per_cm2": "nonneg",
}
_PIM_TECH = {
    "tflops_per_mm2": "positive",
    "internal_bandwidth_GBps_per_mm2": "positive",
    "capacity_GB_per_mm2": "positive",
    "capacity_lost_GB_per_mm2": "nonneg",
    "energy_pj_per_byte": "positive",
    "latency_ns": "nonneg",
    "capacity_lost_fraction": "unit",
    "banks_per_die": "count",
    "bank_bandwidth_GBps": "positive",
    "bank_gflops": "positive",
    "power_derate": "fraction",
    "refresh_share": "unit",
    "energy_pj_per_flop": "nonneg",
    "logic_area_mm2_per_die": "nonneg",
    "serial": "unit",
    "softmax": "unit",
    "pipelined": "unit",
}
_DRAM_TECH = {
    "dies_per_stack": "count",
    "die_capacity_GB": "positive",
    "max_stacks": "count",
    "stack_bandwidth_GBps": "positive",
    "energy_pj_per_byte": "positive",
    "latency_ns": "nonneg",
    "phy_area_mm2_per_stack": "nonneg",
}


F32_AREA_RATE_OVER_16 = 0.25
"""f32 FLOP/s per mm² of compute area over the 16-bit rate: a 32-bit floating-point
multiplier takes about 4.7x the area of a 16-bit one (M. Horowitz, "Computing's
energy problem", ISSCC 2014, 45 nm: 7,700 vs 1,640 µm²), so an area built for f32
gives about a quarter of the 16-bit rate. 8- and 4-bit take the 8-bit rate (the
nodes list no 4-bit figure)."""


def tech_table() -> dict[str, Any]:
    return load_toml(data_dir() / "tech.toml")


def _tech_data() -> dict[str, Any]:
    """`tech_table()` with its sections checked to be tables."""
    data = tech_table()
    for section in ("nodes", "pim", "dram", "io"):
        if not isinstance(data.get(section), dict):
            raise InputError(f"{data_dir() / 'tech.toml'}: [{section}]: expected a table, got {data.get(section)!r}")
    return data


def tech_nodes() -> list[str]:
    return sorted(_tech_data()["nodes"])


def tech_preset(node: str) -> Technology:
    """Technology constants of a process node (`data/tech.toml`), in SI units."""
    path = data_dir() / "tech.toml"
    data = _tech_data()
    if node not in data["nodes"]:
        raise InputError(f"technology node {node!r}: unknown; expected one of {sorted(data['nodes'])} (in {path})")
    n = check_table(
        data["nodes"][node], f"{path}: nodes.{node}", _NODE_FIELDS, strings=("name", "source"), tables=("sources",)
    )
    pim = check_table(data["pim"], f"{path}: pim", _PIM_TECH, strings=("source",), tables=("sources",))
    dram = check_table(data["dram"], f"{path}: dram", _DRAM_TECH, strings=("source",), tables=("sources",))
    io = check_table(data["io"], f"{path}: io", {"fixed_area_mm2": "nonneg"}, strings=("source",), tables=("sources",))
    mm2 = 1e-6
    f16 = n["compute_tflops_per_mm2_16"] * 1e12 / mm2
    f8 = n["compute_tflops_per_mm2_8"] * 1e12 / mm2
    e16 = n["energy_pj_per_flop_16"] * 1e-12
    f = lambda x: jnp.asarray(x, dtype=float)
    return Technology(
        flops_per_area=f([f16 * F32_AREA_RATE_OVER_16, f16, f8, f8]),
        energy_per_flop=f([e16 * s for s in FLOP_ENERGY_SCALE]),
        sram_capacity_per_area=f(n["sram_MB_per_mm2"] * 1e6 / mm2),
        sram_bandwidth_per_area=f(n["sram_bandwidth_GBps_per_mm2"] * 1e9 / mm2),
        sram_energy_per_byte=f(n["sram_energy_pj_per_byte"] * 1e-12),
        sram_latency=f(n["sram_latency_ns"] * 1e-9),
        leakage_per_area=f(n["leakage_w_per_mm2"] / mm2),
        pim_flops_per_area=f(pim["tflops_per_mm2"] * 1e12 / mm2),
        pim_bandwidth_per_area=f(pim["internal_bandwidth_GBps_per_mm2"] * 1e9 / mm2),
        pim_capacity_per_area=f(pim["capacity_GB_per_mm2"] * 1e9 / mm2),
        pim_capacity_lost_per_area=f(pim["capacity_lost_GB_per_mm2"] * 1e9 / mm2),
        pim_energy_per_byte=f(pim["energy_pj_per_byte"] * 1e-12),
        pim_latency=f(pim["latency_ns"] * 1e-9),
        stack_capacity=f(dram["dies_per_stack"] * dram["die_capacity_GB"] * 1e9),
        stack_bandwidth=f(dram["stack_bandwidth_GBps"] * 1e9),
        dram_energy_per_byte=f(dram["energy_pj_per_byte"] * 1e-12),
        dram_latency=f(dram["latency_ns"] * 1e-9),
        phy_area=f(dram["phy_area_mm2_per_stack"] * mm2),
        io_area=f(io["fixed_area_mm2"] * mm2),
        dies_per_stack=f(dram["dies_per_stack"]),
        die_capacity=f(dram["die_capacity_GB"] * 1e9),
        pim_capacity_lost=f(pim["capacity_lost_fraction"]),
        pim_banks_per_die=f(pim["banks_per_die"]),
        pim_bank_bandwidth=f(pim["bank_bandwidth_GBps"] * 1e9),
        pim_bank_flops=f(pim["bank_gflops"] * 1e9),
        pim_derate=f(pim["power_derate"] * (1.0 - pim["refresh_share"])),
        pim_energy_per_flop=f(pim["energy_pj_per_flop"] * 1e-12),
        pim_logic_area=f(pim["logic_area_mm2_per_die"] * mm2),
        pim_serial=f(pim["serial"]),
        pim_softmax=f(pim["softmax"]),
        pim_pipelined=f(pim["pipelined"]),
        max_stacks=f(dram["max_stacks"]),
    )
