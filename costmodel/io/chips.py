"""Chip presets (`data/chips.toml`), calibrated chips and chip files, converted to SI."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from .._core.chip import DEFAULT_OVERLAP, Chip, make_chip
from .._core.placement import POLICIES
from .errors import InputError
from .files import data_dir, load_toml
from .schema import check_table


_CHIP_FIELDS = {
    "peak_tflops_16": "positive",
    "compute_efficiency": "fraction",
    "energy_pj_per_flop": "nonneg",
    "static_power_w": "nonneg",
    "power_cap_w": "positive",
    "kernel_overhead_us": "nonneg",
    "link_bandwidth_GBps": "nonneg",
    "link_latency_us": "nonneg",
    "hop_latency_us": "nonneg",
    "max_chips": "count",
}
_CHIP_OPTIONAL = {
    "peak_tflops_f32": "positive",
    "peak_tflops_8": "positive",
    "peak_tflops_4": "positive",
    "area_mm2": "nonneg",
    "overlap": "overlap",
    "attention_efficiency": "fraction",
    "half_rate_rows": "nonneg",
    "small_kernel_MB": "nonneg",
    "small_kernel_efficiency": "fraction",
    "small_kernel_knee": "positive",
}
_TIER_FIELDS = {
    "bandwidth_GBps": "positive",
    "latency_ns": "nonneg",
    "energy_pj_per_byte": "nonneg",
    "efficiency": "fraction",
}
_PIM_FIELDS = {**_TIER_FIELDS, "internal_bandwidth_GBps": "positive", "tflops": "positive"}
FLOP_ENERGY_SCALE = (3.0, 1.0, 0.5, 0.25)
"""Energy per FLOP relative to 16-bit, per precision class (f32, 16, 8, 4): Horowitz,
ISSCC 2014, 45 nm: FP32 mult+add 4.6 pJ vs FP16 1.5 pJ (~3x); 8-bit between INT8
(0.23 pJ) and FP8 (assumption: half of 16-bit); 4-bit assumed half of 8-bit."""
F32_PEAK_OVER_16 = 0.5
"""f32 peak over the 16-bit peak for a chip file that gives no `peak_tflops_f32`: an
assumption with no source (the rate of 16-bit SIMD packed two per 32-bit lane), which
only f32 weights or KV on such a chip see. The presets that rely on it are the ones
without the field in `data/chips.toml` (TPUs, Groq, Cerebras, SN40L, d-Matrix)."""


@dataclasses.dataclass(frozen=True)
class ChipInfo:
    """A chip with what is not part of the pytree: how its system places data."""

    chip: Chip
    placement: str
    max_chips: int
    name: str
    source: str
    label: str = ""


def _tier(t: Any, where: str, fields: dict[str, str], capacity_key: str, scale: float, optional=None):
    t = check_table(t, where, {capacity_key: "nonneg", **fields}, optional, strings=("source",), tables=("sources",))
    return t, t[capacity_key] * scale


def chip_from_table(t: dict[str, Any], where: str, name: str) -> ChipInfo:
    """Validates one chip table (datasheet units) and converts it to a SI `Chip`."""
    t = check_table(
        t,
        where,
        _CHIP_FIELDS,
        _CHIP_OPTIONAL,
        strings=("name", "source", "placement", "process"),
        tables=("sram", "pim", "dram", "sources"),
    )
    placement = t.get("placement", "dram")
    if placement not in POLICIES:
        raise InputError(f"{where}: field 'placement' = {placement!r}: expected one of {list(POLICIES)}")
    cap = [0.0, 0.0, 0.0]
    bw = [0.0, 0.0, 0.0]
    lat = [0.0, 0.0, 0.0]
    epb = [0.0, 0.0, 0.0]
    eff = [1.0, 1.0, 1.0]
    feed = [1.0, 1.0, 1.0]
    pim_bw = pim_flops = pim_e = pim_serial = 0.0
    for i, (key, fields, cap_key, scale) in enumerate(
        [
            ("sram", _TIER_FIELDS, "capacity_MB", 1e6),
            ("pim", _PIM_FIELDS, "capacity_GB", 1e9),
            ("dram", _TIER_FIELDS, "capacity_GB", 1e9),
        ]
    ):
        if key not in t:
            continue
        # PIM-held FLOPs run in the PIM units: a compute feed there would do nothing.
        optional = {"serial_with_dram": "unit"} if key == "pim" else {"compute_feed": "fraction"}
        tier, cap[i] = _tier(t[key], f"{where}.{key}", fields, cap_key, scale, optional)
        bw[i] = tier["bandwidth_GBps"] * 1e9
        lat[i] = tier["latency_ns"] * 1e-9
        epb[i] = tier["energy_pj_per_byte"] * 1e-12
        eff[i] = tier["efficiency"]
        feed[i] = tier.get("compute_feed", 1.0)
        if key == "pim":
            pim_bw = tier["internal_bandwidth_GBps"] * 1e9
            pim_flops = tier["tflops"] * 1e12
            pim_e = epb[i]
            pim_serial = tier.get("serial_with_dram", 0.0)
    if sum(cap) <= 0:
        raise InputError(f"{where}: no memory: expected at least one of [sram], [pim], [dram] with capacity > 0")
    p16 = t["peak_tflops_16"]
    p8 = t.get("peak_tflops_8", p16)
    peaks = [t.get("peak_tflops_f32", p16 * F32_PEAK_OVER_16), p16, p8, t.get("peak_tflops_4", p8)]
    e16 = t["energy_pj_per_flop"] * 1e-12
    chip = make_chip(
        capacity=cap,
        bandwidth=bw,
        latency=lat,
        energy_per_byte=epb,
        efficiency=eff,
        compute_feed=feed,
        pim_bandwidth=pim_bw,
        pim_flops=pim_flops,
        pim_energy_per_byte=pim_e,
        pim_serial=pim_serial,
        peak_flops=[p * 1e12 for p in peaks],
        compute_efficiency=t["compute_efficiency"],
        attention_efficiency=t.get("attention_efficiency", 1.0),
        half_rate_rows=t.get("half_rate_rows", 0.0),
        small_kernel_bytes=t.get("small_kernel_MB", 0.0) * 1e6,
        small_kernel_efficiency=t.get("small_kernel_efficiency", 1.0),
        small_kernel_knee=t.get("small_kernel_knee", 4.0),
        energy_per_flop=[e16 * s for s in FLOP_ENERGY_SCALE],
        static_power=t["static_power_w"],
        power_cap=t["power_cap_w"],
        kernel_overhead=t["kernel_overhead_us"] * 1e-6,
        link_bandwidth=t["link_bandwidth_GBps"] * 1e9,
        link_latency=t["link_latency_us"] * 1e-6,
        hop_latency=t["hop_latency_us"] * 1e-6,
        overlap=t.get("overlap", DEFAULT_OVERLAP),
        area=t.get("area_mm2", 0.0) * 1e-6,
    )
    return ChipInfo(chip, placement, int(t["max_chips"]), name, t.get("source", ""), t.get("name", name))


def chip_presets() -> dict[str, dict[str, Any]]:
    return load_toml(data_dir() / "chips.toml")["chips"]


def calibrated_chips() -> dict[str, Path]:
    """Chip files fitted to measured traces (`data/calibrated/NAME.toml`), by name."""
    folder = data_dir() / "calibrated"
    return {p.stem: p for p in sorted(folder.glob("*.toml"))} if folder.is_dir() else {}


def chip_info(spec: str) -> ChipInfo:
    """A chip from a preset id, a calibrated chip name, or a TOML chip file (same fields as a preset)."""
    presets = chip_presets()
    if spec in presets:
        return chip_from_table(presets[spec], f"{data_dir() / 'chips.toml'}: chips.{spec}", spec)
    calibrated = calibrated_chips()
    if spec in calibrated:
        spec = str(calibrated[spec])
    p = Path(spec)
    if p.suffix == ".toml" or p.exists():
        t = load_toml(p)
        if "chip" in t and isinstance(t["chip"], dict):
            t = t["chip"]
        return chip_from_table(t, str(p), p.stem)
    raise InputError(
        f"chip {spec!r}: unknown preset; expected one of {sorted(presets) + sorted(calibrated)} or a path to a chip TOML file"
    )


def chip_preset(name: str) -> Chip:
    """A chip preset by id (see `costmodel presets`)."""
    return chip_info(name).chip
