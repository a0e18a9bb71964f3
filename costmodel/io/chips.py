"""Chip presets (`data/chips.toml`), calibrated chips and chip files, converted to SI."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .._core.chip import DEFAULT_OVERLAP, DRAM, PIM, SMALL_KERNEL_KNEE, SRAM, Chip, make_chip
from .._core.placement import POLICIES
from .._core.workload import BITS4, BITS8, BITS16, F32
from .errors import InputError
from .files import data_dir, load_toml
from .formats import KernelTables
from .schema import check_table


FLOP_ENERGY_SCALE = (3.0, 1.0, 0.5, 0.25)
"""Energy per FLOP relative to 16-bit, per precision class (f32, 16, 8, 4): Horowitz,
ISSCC 2014, 45 nm: FP32 mult+add 4.6 pJ vs FP16 1.5 pJ (~3x); 8-bit between INT8
(0.23 pJ) and FP8 (assumption: half of 16-bit); 4-bit assumed half of 8-bit."""

F32_PEAK_OVER_16 = 0.5
"""f32 peak over the 16-bit peak for a chip file that gives no `peak_tflops_f32`: an
assumption with no source (the rate of 16-bit SIMD packed two per 32-bit lane), which
only f32 weights or KV on such a chip see. The presets that rely on it are the ones
without the field in `data/chips.toml` (TPUs, Groq, Cerebras, SN40L, d-Matrix)."""


# --- the chip-file schema -----------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class ChipField:
    """One number of a chip file and the `Chip` leaf it sets.

    Attributes:
        key: the field's name in the file (in its section).
        section: None for a top-level field, else the tier's table ("sram", "pim", "dram").
        kind: what the file's value must be (a key of `costmodel.io.KINDS`).
        scale: file unit -> SI (e.g. 1e9 for GB/s -> B/s).
        leaves: the `Chip` leaves the value sets, as (attribute path, entry index or
            None); most fields set one.
        default: the value (file units) when the field is absent; None: required.
        sweep: the kind a sweep axis over the leaf must satisfy, where it differs from
            `kind` (a tier or a precision can be absent in a sweep: bandwidth 0).
    """

    key: str
    section: str | None
    kind: str
    scale: float
    leaves: tuple[tuple[tuple[str, ...], int | None], ...]
    default: float | None = None
    sweep: str | None = None


def _top(key, kind, scale, path, index=None, default=None, sweep=None):
    return ChipField(key, None, kind, scale, ((path, index),), default, sweep)


def _tier_fields(section: str, tier: int, capacity_key: str, capacity_scale: float) -> tuple[ChipField, ...]:
    t = lambda key, kind, scale, name, default=None, sweep=None: ChipField(
        key, section, kind, scale, ((("tiers", name), tier),), default, sweep
    )
    common = (
        t(capacity_key, "nonneg", capacity_scale, "capacity"),
        t("bandwidth_GBps", "positive", 1e9, "bandwidth", sweep="nonneg"),
        t("latency_ns", "nonneg", 1e-9, "latency"),
    )
    if section != "pim":
        return (
            *common,
            t("energy_pj_per_byte", "nonneg", 1e-12, "energy_per_byte"),
            t("efficiency", "fraction", 1.0, "efficiency"),
            t("compute_feed", "fraction", 1.0, "compute_feed", default=1.0),
        )
    # PIM-held FLOPs run in the PIM units: there is no compute feed on that tier. The
    # tier's bandwidth and energy per byte are its external links' (what a host
    # softmax moves); the PIM units read their banks at the internal ones.
    pim = lambda key, kind, scale, name, default=None, sweep=None: ChipField(
        key, section, kind, scale, (((name,), None),), default, sweep
    )
    return (
        *common,
        t("energy_pj_per_byte", "nonneg", 1e-12, "energy_per_byte"),
        t("efficiency", "fraction", 1.0, "efficiency"),
        pim("internal_bandwidth_GBps", "positive", 1e9, "pim_bandwidth", sweep="nonneg"),
        pim("internal_energy_pj_per_byte", "nonneg", 1e-12, "pim_energy_per_byte"),
        pim("tflops", "positive", 1e12, "pim_flops", sweep="nonneg"),
        pim("energy_pj_per_flop", "nonneg", 1e-12, "pim_energy_per_flop"),
        pim("serial_with_dram", "unit", 1.0, "pim_serial", default=0.0),
        pim("softmax_in_memory", "unit", 1.0, "pim_softmax"),
        pim("pipelined", "unit", 1.0, "pim_pipelined"),
    )


CHIP_SCHEMA: tuple[ChipField, ...] = (
    _top("peak_tflops_16", "positive", 1e12, ("peak_flops",), BITS16, sweep="nonneg"),
    _top("compute_efficiency", "fraction", 1.0, ("compute_efficiency",)),
    # The other precisions' energies scale from the 16-bit one (`FLOP_ENERGY_SCALE`).
    _top("energy_pj_per_flop", "nonneg", 1e-12, ("energy_per_flop",), BITS16),
    _top("static_power_w", "nonneg", 1.0, ("static_power",)),
    _top("power_cap_w", "positive", 1.0, ("power_cap",)),
    _top("kernel_overhead_us", "nonneg", 1e-6, ("kernel_overhead",)),
    _top("link_bandwidth_GBps", "nonneg", 1e9, ("link_bandwidth",)),
    _top("link_knee_MB", "nonneg", 1e6, ("link_knee",), default=0.0),
    _top("link_bandwidth_large_GBps", "nonneg", 1e9, ("link_bandwidth_large",), default=0.0),
    _top("link_latency_us", "nonneg", 1e-6, ("link_latency",)),
    _top("link_latency_small_us", "nonneg", 1e-6, ("link_latency_small",), default=0.0),
    _top("link_bandwidth_small_GBps", "nonneg", 1e9, ("link_bandwidth_small",), default=0.0),
    _top("hop_latency_us", "nonneg", 1e-6, ("hop_latency",)),
    _top("host_step_us", "nonneg", 1e-6, ("host_step",), default=0.0),
    _top("host_per_sequence_us", "nonneg", 1e-6, ("host_per_sequence",), default=0.0),
    _top("host_per_sequence_tp_us", "nonneg", 1e-6, ("host_per_sequence_tp",), default=0.0),
    # Absent peaks derive from the 16-bit one (`_derived_peaks`): their default is None
    # here only because it is not a constant.
    _top("peak_tflops_f32", "positive", 1e12, ("peak_flops",), F32, sweep="nonneg"),
    _top("peak_tflops_8", "positive", 1e12, ("peak_flops",), BITS8, sweep="nonneg"),
    _top("peak_tflops_4", "positive", 1e12, ("peak_flops",), BITS4, sweep="nonneg"),
    _top("area_mm2", "nonneg", 1e-6, ("area",), default=0.0),
    _top("overlap", "overlap", 1.0, ("overlap",), default=DEFAULT_OVERLAP),
    _top("serial_kernels", "unit", 1.0, ("serial_kernels",), default=0.0),
    _top("attention_efficiency", "fraction", 1.0, ("attention_efficiency",), default=1.0),
    _top("attention_stream_efficiency", "fraction", 1.0, ("attention_stream_efficiency",), default=1.0),
    _top("attention_kv_rereads", "unit", 1.0, ("attention_kv_rereads",), default=0.0),
    _top("attention_heads_per_block", "wholenonneg", 1.0, ("attention_heads_per_block",), default=0.0, sweep="nonneg"),
    _top("attention_rereads_cached", "unit", 1.0, ("attention_rereads_cached",), default=0.0),
    _top("half_rate_rows", "nonneg", 1.0, ("half_rate_rows",), default=0.0),
    # Absent: the weight matmuls' (`_derived_half_rate`), as before the two were apart.
    _top("attention_half_rate_rows", "nonneg", 1.0, ("attention_half_rate_rows",)),
    _top("small_kernel_MB", "nonneg", 1e6, ("small_kernel_bytes",), default=0.0),
    _top("small_kernel_efficiency", "fraction", 1.0, ("small_kernel_efficiency",), default=1.0),
    _top("small_kernel_knee", "positive", 1.0, ("small_kernel_knee",), default=SMALL_KERNEL_KNEE),
    _top("parallel_units", "nonneg", 1.0, ("parallel_units",), default=0.0),
    _top("bytes_in_flight_KB", "nonneg", 1e3, ("bytes_in_flight",), default=0.0),
    *_tier_fields("sram", SRAM, "capacity_MB", 1e6),
    *_tier_fields("pim", PIM, "capacity_GB", 1e9),
    *_tier_fields("dram", DRAM, "capacity_GB", 1e9),
)
"""Every number of a chip file (`data/chips.toml` sections, chip TOML files), in the
order the file lists them. Reading (`chip_from_table`), sweeping (`chip_leaf_kinds`)
and writing (`chip_table`) all go through it."""

DERIVED_PEAKS = {"peak_tflops_f32", "peak_tflops_8", "peak_tflops_4"}
"""Optional peaks whose default comes from another peak (`_derived_peaks`)."""

DERIVED = DERIVED_PEAKS | {"attention_half_rate_rows"}
"""Optional fields whose default comes from another field (`_derived_peaks`,
`_derived_half_rate`): a file leaves them out where they equal it."""

OMITTED_AT_ZERO = (
    "host_step_us",
    "host_per_sequence_us",
    "host_per_sequence_tp_us",
    "attention_kv_rereads",
    "attention_heads_per_block",
    "attention_rereads_cached",
    "serial_kernels",
    "link_knee_MB",
    "link_bandwidth_large_GBps",
    "link_latency_small_us",
    "link_bandwidth_small_GBps",
)
"""Fields a chip file leaves out at 0, their default (`chip_table`)."""

SYSTEM_FIELDS = {"max_chips": "count"}
"""Top-level numbers that describe the system, not the `Chip` pytree (`ChipInfo`)."""

OPTIONAL_SYSTEM_FIELDS = {"prefill_efficiency": "fraction"}
"""Optional top-level numbers of the system (`ChipInfo`), with their kinds; absent: 1."""

STRINGS = ("name", "source", "placement", "process")
SECTIONS = ("sram", "pim", "dram")


def _derived_peaks(values: dict[str, float]) -> dict[str, float]:
    """Peaks the file leaves out: 8-bit at the 16-bit rate, 4-bit at the 8-bit rate, f32 at
    `F32_PEAK_OVER_16` of the 16-bit rate."""
    p16 = values["peak_tflops_16"]
    p8 = values.get("peak_tflops_8", p16)
    return {
        "peak_tflops_f32": values.get("peak_tflops_f32", p16 * F32_PEAK_OVER_16),
        "peak_tflops_8": p8,
        "peak_tflops_4": values.get("peak_tflops_4", p8),
    }


def _derived_half_rate(values: dict[str, float]) -> dict[str, float]:
    """Decode attention's half-rate rows where the file leaves them out: the weight
    matmuls' (0 when both are absent)."""
    return {"attention_half_rate_rows": values.get("attention_half_rate_rows", values.get("half_rate_rows", 0.0))}


def _kinds(section: str | None) -> tuple[dict[str, str], dict[str, str]]:
    """(required, optional) field kinds of one table of a chip file, in file order."""
    fields = [f for f in CHIP_SCHEMA if f.section == section]
    required = {f.key: f.kind for f in fields if f.default is None and f.key not in DERIVED}
    optional = {f.key: f.kind for f in fields if f.default is not None or f.key in DERIVED}
    if section is None:
        required = {**required, **SYSTEM_FIELDS}
        optional = {**optional, **OPTIONAL_SYSTEM_FIELDS}
    return required, optional


def chip_leaf_kinds() -> dict[tuple[str, ...], str]:
    """The kind a sweep axis over each `Chip` leaf must satisfy, by attribute path (the
    file's kind, or the field's `sweep` kind). Every entry of a vector leaf has the same
    kind. `tensor_parallel` and `pipeline_parallel` are the system's layout, not a chip
    file's: they are not listed."""
    out: dict[tuple[str, ...], str] = {}
    for f in CHIP_SCHEMA:
        for path, _ in f.leaves:
            kind = f.sweep or f.kind
            if out.setdefault(path, kind) != kind:
                raise AssertionError(f"CHIP_SCHEMA: leaf {path} has kinds {out[path]} and {kind}")
    return out


def _set(values: dict[tuple[str, ...], list[float] | float], path, index, value):
    if index is None:
        values[path] = value
    else:
        entries = values[path]
        assert isinstance(entries, list)
        entries[index] = value


def check_power(
    static_power_w: float, power_cap_w: float, where: str, fields=("static_power_w", "power_cap_w")
) -> None:
    """The one check of a chip's power cap against its static power, both per chip, W.

    Leakage and always-on power are drawn at any clock, so a cap at or below them
    leaves no power to run at all: the sustained clock (`sustained_cost`) would come
    down to nothing and every sustained figure would be meaningless.

    Args:
        static_power_w, power_cap_w: the two powers, W.
        where: the file (or option) for the message.
        fields: the names of the two in `where`.

    Raises:
        InputError: naming the file, both fields and their values.
    """
    static, cap = fields
    if not power_cap_w > static_power_w:
        raise InputError(
            f"{where}: field {cap!r} = {power_cap_w:g} W: expected more than field {static!r} = {static_power_w:g} W "
            "(static power is drawn at any clock: a cap at or below it leaves none to run on)"
        )


def chip_from_table(t: dict[str, Any], where: str, name: str) -> ChipInfo:
    """Validates one chip table (datasheet units) and converts it to a SI `Chip`.

    Every number goes through `CHIP_SCHEMA`; a tier whose section is absent has zero
    capacity (it is not there).
    """
    required, optional = _kinds(None)
    t = check_table(t, where, required, optional, strings=STRINGS, tables=(*SECTIONS, "sources"))
    check_power(t["static_power_w"], t["power_cap_w"], where)
    placement = t.get("placement", "dram")
    if placement not in POLICIES:
        raise InputError(f"{where}: field 'placement' = {placement!r}: expected one of {list(POLICIES)}")
    sections: dict[str | None, dict[str, Any]] = {None: {**t, **_derived_peaks(t), **_derived_half_rate(t)}}
    for key in SECTIONS:
        if key in t:
            req, opt = _kinds(key)
            sections[key] = check_table(t[key], f"{where}.{key}", req, opt, strings=("source",), tables=("sources",))
    blank = make_chip(capacity=(0.0, 0.0, 0.0), bandwidth=(0.0, 0.0, 0.0), peak_flops=0.0)
    values: dict[tuple[str, ...], Any] = {}
    for f in CHIP_SCHEMA:
        for path, _ in f.leaves:
            leaf: Any = blank
            for part in path:
                leaf = getattr(leaf, part)
            values.setdefault(path, [float(v) for v in leaf.reshape(-1)] if leaf.ndim else float(leaf))
    for f in CHIP_SCHEMA:
        if f.section not in sections:
            continue
        value = sections[f.section].get(f.key, f.default)
        for path, index in f.leaves:
            _set(values, path, index, value * f.scale)
    if sum(values[("tiers", "capacity")]) <= 0:
        raise InputError(f"{where}: no memory: expected at least one of [sram], [pim], [dram] with capacity > 0")
    e16 = values[("energy_per_flop",)][BITS16]
    values[("energy_per_flop",)] = [e16 * s for s in FLOP_ENERGY_SCALE]
    tier_names = {p[1]: v for p, v in values.items() if p[0] == "tiers"}
    chip = make_chip(**tier_names, **{p[0]: v for p, v in values.items() if p[0] != "tiers"})
    return ChipInfo(
        chip,
        placement,
        int(t["max_chips"]),
        name,
        t.get("source", ""),
        t.get("name", name),
        prefill_efficiency=float(t.get("prefill_efficiency", 1.0)),
    )


def _round(x: float) -> float:
    """Six significant digits: what a chip file shows (and reads back exactly)."""
    return float(f"{x:.6g}")


def chip_table(
    chip: Chip, *, name: str, source: str, placement: str, max_chips: int, sources: dict[str, Any] | None = None
) -> dict[str, Any]:
    """A chip as a chip-file table (file units, six significant digits), the inverse of
    `chip_from_table` for the `Chip` and the descriptive fields (the optional system
    field `prefill_efficiency`, a `ChipInfo`'s, is not written: a file written here reads
    back at 1).

    Args:
        chip: one chip (no batch axes).
        name, source, placement, max_chips: the file's descriptive fields.
        sources: notes on where each number comes from: a key naming a section
            ("sram", "pim", "dram") gives that section's `source`; the others form the
            file's `[sources]` table.

    Returns:
        A dict for `chip_file_text`: top-level fields, then a table per tier that has
        capacity (a tier without capacity is left out, as it is absent). Peaks equal to
        their derived default are left out.
    """
    sources = dict(sources or {})

    def value(f: ChipField) -> float:
        path, index = f.leaves[0]
        leaf: Any = chip
        for part in path:
            leaf = getattr(leaf, part)
        return _round(float(leaf if index is None else leaf[index]) / f.scale)

    top: dict[str, Any] = {"name": name, "source": source}
    top.update({f.key: value(f) for f in CHIP_SCHEMA if f.section is None})
    derived = _derived_peaks({k: v for k, v in top.items() if k == "peak_tflops_16"})
    for key in DERIVED_PEAKS:
        if _round(derived[key]) == top[key]:
            del top[key]
    if top["attention_half_rate_rows"] == top["half_rate_rows"]:
        del top["attention_half_rate_rows"]
    for key in OMITTED_AT_ZERO:  # a chip with no serving-stack host time: as before the fields
        if top[key] == 0.0:
            del top[key]
    top.update(placement=placement, max_chips=int(max_chips))
    capacity = chip.tiers.capacity
    for section, tier in zip(SECTIONS, (SRAM, PIM, DRAM)):
        if float(capacity[tier]) > 0:
            table = {f.key: value(f) for f in CHIP_SCHEMA if f.section == section}
            if section in sources:
                table["source"] = sources.pop(section)
            top[section] = table
    if sources:
        top["sources"] = sources
    return top


def chip_file_text(table: dict[str, Any], comments: Sequence[str] = ()) -> str:
    """TOML text of a chip-file table, after `# ` comment lines."""
    import tomli_w

    header = "".join(f"# {line}\n" for line in comments)
    return header + ("\n" if header else "") + tomli_w.dumps(table)


@dataclasses.dataclass(frozen=True)
class ChipInfo(KernelTables):
    """A chip with what is not part of the pytree: how its system places data, and
    (`max_batch`) the most sequences its serving engine runs at once: a framework's
    scheduler cap (vLLM's `--max-num-seqs`), set by `apply_framework`; None: only the
    memory limits the batch (`costmodel.serving.serve`). `dequant_ops`: a framework's
    (format, instructions per weight element) to unpack its quantised weights, set by
    `apply_framework` (`Scenario.weight_dequant_ops`); empty: formats used as stored.
    `kv_dequant_ops`: the same for its attention kernels' reads of a quantised KV cache
    (`Scenario.kv_dequant_ops`). `copy_rows`: (format, rows) above which its kernel for
    the format works on a 16-bit copy of the weights (`Scenario.weight_copy_rows`);
    `dequant_rows`: (format, rows each of its unpackings serves: `Scenario.weight_dequant_rows`).
    `prefill_efficiency`: the share of the chip's compute efficiency that a pass
    prefilling prompts alone reaches (a burst's admissions, a disaggregated prefill
    pool: `costmodel.serving.prompt_seconds`), in (0, 1]; the chip file's optional
    field, 1 where absent (a chip file written by `chip_table` leaves it out)."""

    chip: Chip
    placement: str
    max_chips: int
    name: str
    source: str
    label: str = ""
    max_batch: int | None = None
    dequant_ops: tuple[tuple[str, float], ...] = ()
    prefill_efficiency: float = 1.0
    kv_dequant_ops: tuple[tuple[str, float], ...] = ()
    copy_rows: tuple[tuple[str, float], ...] = ()
    dequant_rows: tuple[tuple[str, float], ...] = ()

    def prefill_chip(self) -> Chip:
        """The chip as a pass that prefills prompts alone runs it: its compute efficiency
        times `prefill_efficiency`."""
        return self.chip.replace(compute_efficiency=self.chip.compute_efficiency * self.prefill_efficiency)


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
