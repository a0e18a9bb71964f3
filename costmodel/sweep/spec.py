"""Sweep specs: the TOML schema, its parameters and axes, parsing and validation.

A sweep spec names *axes*: lists of values or numeric ranges over the model, batch,
context, number formats, placement policy, chip preset, any `Chip` field, or a
two-die design at a technology node (a logic die and HBM stacks, through
`costmodel._core.area.design_from_split` and `chip_from_design`, the model co-design
optimises). The format::

    [sweep]
    sampling = "grid"          # "grid" (every combination) or "random" (Latin hypercube)
    samples = 100000           # random only: how many configs
    seed = 0                   # random only
    chunk = 16384              # configs per compiled call (the CLI's --chunk overrides)

    [base]                     # values of parameters that are not swept
    model = "llama-3-8b"
    chip = "h100-sxm"

    [axes]                     # each axis: a list of values, or a numeric range
    batch = [1, 8, 64]
    context = { min = 1024, max = 131072, num = 8, scale = "log" }
    placement = ["dram", "greedy"]
    "chip.tiers.bandwidth.dram" = [2e12, 3.35e12, 8e12]   # any Chip field, SI units

Parameters (see `PARAMETERS` and `CHIP_FIELDS`): `model` (preset ids), `chip` (preset
ids), `batch`, `context`, `prefix` (tokens), `weights`, `kv` (formats by name),
`placement` (a policy; by default each chip's own), `chips` (system size, a whole
number or "auto": the fewest that fit, as `costmodel evaluate` sizes it), `area.*`
(a two-die design instead of a chip preset: `area.node`, the technology; `area.logic_mm2`,
the logic die's area, which holds the fixed I/O, one HBM PHY per stack, compute and
SRAM; `area.sram`, the share of the logic die's free area that is SRAM, the rest
being compute; `area.stacks`, the HBM stack count, whole; `area.pim_share`, the share
of the stacks' DRAM dies that are PIM dies, PIM logic on the DRAM dies, never on the
logic die, a share off the multiples of 1/dies-per-stack being co-design's continuous
relaxation; and `area.compute_efficiency`, `area.memory_efficiency` (of SRAM and
DRAM; the PIM units reach their derated bank rate), `area.power_cap_w`,
`area.kernel_overhead_us`, `area.overlap`, `area.max_chips`), `profile` (a KV
access profile: preset ids or profile TOML paths) and `profile.<field>` (one of its
numbers, e.g. `profile.budget_tokens`), and `chip.<field>`
overrides applied last (`chip.peak_flops` sets every precision, `chip.peak_flops.8`
one of them; `chip.tiers.capacity.sram` one tier).

The single-budget area model is gone: `area.budget_mm2`, `area.pim` and
`area.n_stacks` are errors that name the field to use instead (`RENAMED`), not
silently re-read, since the same spec would give other numbers (the old budget also
paid for PIM logic; the old PIM part was logic-die area, not a share of DRAM dies).
"""

from __future__ import annotations

import dataclasses
import difflib
import hashlib
import inspect
import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from .._core.area import DESIGN_VARIABLES, REFERENCE_DIE_AREA, chip_from_design, design_point
from .._core.chip import DEFAULT_OVERLAP, TIERS, Chip, Tiers, make_chip
from .._core.placement import POLICIES
from .._core.workload import PRECISIONS
from ..evaluation import MAX_SYSTEM_CHIPS
from ..io import (
    KINDS,
    MAX_TOKENS,
    InputError,
    chip_info,
    chip_leaf_kinds,
    data_dir,
    formats,
    load_model,
    load_toml,
    tech_nodes,
)
from ..io.profiles import profile_info
from .sampling import MAX_CONFIGS


DEFAULT_CHUNK = 16384
"""Configs per compiled call: small enough that a chunk's intermediates stay in the
CPU caches (16k configs ran ~1.3x faster per config than 64k here), large enough to
amortise the per-call dispatch."""


# --- parameters -------------------------------------------------------------------

_NUMBER_KINDS: dict[str, tuple[str, Callable[[float], bool]]] = {
    **KINDS,
    "batch": ("a number >= 1", lambda v: v >= 1),
}
"""The data files' number kinds (`costmodel.io.KINDS`), and the batch's."""
_TOKEN_COUNTS = ("batch", "context", "prefix")
"""Parameters bounded by `costmodel.io.MAX_TOKENS`, as a scenario is (beyond it a large
model's KV bytes overflow float32)."""
_WHOLE = ("count", "wholenonneg")
"""Kinds that take lists only (a range would give fractional values)."""

CHOICES = ("model", "chip", "weights", "kv", "profile", "placement", "area.node")
"""Parameters whose values are names."""

PARAMETERS: dict[str, str] = {
    "batch": "batch",
    "context": "nonneg",
    "prefix": "nonneg",
    "chips": "count",
    "area.logic_mm2": "positive",
    "area.sram": "unit",
    "area.stacks": "wholenonneg",
    "area.pim_share": "unit",
    "area.compute_efficiency": "fraction",
    "area.memory_efficiency": "fraction",
    "area.power_cap_w": "positive",
    "area.kernel_overhead_us": "nonneg",
    "area.overlap": "overlap",
    "area.max_chips": "count",
    "profile.sink_tokens": "nonneg",
    "profile.recent_tokens": "nonneg",
    "profile.recent_fraction": "unit",
    "profile.kept_fraction": "unit",
    "profile.budget_tokens": "nonneg",
    "profile.idle_sequences": "nonneg",
}
"""Numeric parameters (besides `chip.*`) and their kinds. Units: tokens; mm², W, µs.
A `profile.*` field overrides that field of the `profile` (an `AccessProfile`)."""

RENAMED: dict[str, str] = {
    "area.budget_mm2": "the single budget (compute, SRAM and PIM logic on one die) is gone; expected "
    "'area.logic_mm2', the logic die (I/O, HBM PHYs, compute and SRAM; PIM logic is on the DRAM dies)",
    "area.pim": "the PIM share of the logic die's area is gone; expected 'area.pim_share', the share of "
    "the DRAM dies that are PIM dies, in [0, 1] (and 'area.sram' is now a share of the compute and SRAM area)",
    "area.n_stacks": "renamed; expected 'area.stacks', the HBM stack count (a whole number >= 0)",
}
"""Fields of the single-budget area model, and what to write instead."""


def _area_defaults() -> dict[str, Any]:
    """The design's defaults, from the sources they mirror (no number written twice)."""

    def defaults(f):
        return {n: p.default for n, p in inspect.signature(f).parameters.items() if p.kind is p.KEYWORD_ONLY}

    kw, point = defaults(chip_from_design), defaults(design_point)
    # The zero design vector: compute and SRAM alike, half the DRAM dies PIM dies.
    zero = jnp.zeros(len(DESIGN_VARIABLES))
    return {
        "area.node": "N5",
        # 12 significant digits: 814e-6 m² is 814 mm², not 814.0000000000001.
        "area.logic_mm2": float(f"{REFERENCE_DIE_AREA / 1e-6:.12g}"),
        "area.sram": float(jax.nn.softmax(zero[:2])[1]),
        "area.stacks": float(point["n_stacks"]),
        "area.pim_share": float(jax.nn.sigmoid(zero[2])),
        "area.compute_efficiency": float(kw["compute_efficiency"]),
        "area.memory_efficiency": float(kw["memory_efficiency"]),
        "area.power_cap_w": float(kw["power_cap"]),
        "area.kernel_overhead_us": float(kw["kernel_overhead"]) / 1e-6,
        "area.overlap": float(DEFAULT_OVERLAP),
        "area.max_chips": float(MAX_SYSTEM_CHIPS),
    }


_AREA_DEFAULTS = _area_defaults()
"""Defaults of a two-die design: the zero design vector's split (compute and SRAM alike,
PIM share 1/2), `design_point`'s stack count, `chip_from_design`'s efficiencies,
overlap and power cap, on a `REFERENCE_DIE_AREA` (814 mm², H100-sized) N5 logic die,
in a system of at most 64 chips."""

_BASE_DEFAULTS: dict[str, Any] = {
    "model": "llama-3-8b",
    "batch": 1.0,
    "context": 4096.0,
    "prefix": 0.0,
    "weights": "bf16",
    "kv": "bf16",
    "profile": "dense",
    "chips": "auto",
}


_LAYOUT = (("tensor_parallel",), ("pipeline_parallel",))
"""`Chip` leaves that are the system's layout, not a chip file's: whole numbers >= 1."""


def _chip_fields() -> dict[str, tuple[tuple[str, ...], int | None, str]]:
    """`chip.<path>[.<entry>]` -> (attribute path, entry index or None, kind).

    The kinds are the chip-file schema's (`costmodel.io.chip_leaf_kinds`), so an axis
    over a field takes exactly the values a chip file may give it.
    """
    sample = make_chip(capacity=(1, 1, 1), bandwidth=(1, 1, 1), peak_flops=1)
    kinds = {**chip_leaf_kinds(), **dict.fromkeys(_LAYOUT, "count")}
    out = {}
    paths = [("tiers", f.name) for f in dataclasses.fields(Tiers)]
    paths += [(f.name,) for f in dataclasses.fields(Chip) if f.name != "tiers"]
    for path in paths:
        if path not in kinds:
            raise AssertionError(f"Chip leaf {path}: not in the chip-file schema (costmodel.io.chips.CHIP_SCHEMA)")
        leaf: Any = sample
        for part in path:
            leaf = getattr(leaf, part)
        kind = kinds[path]
        name = "chip." + ".".join(path)
        out[name] = (path, None, kind)
        shape = jnp.shape(leaf)
        if shape:
            labels = TIERS if shape == (len(TIERS),) else PRECISIONS
            for i, label in enumerate(labels):
                out[f"{name}.{label}"] = (path, i, kind)
    return out


CHIP_FIELDS = _chip_fields()
"""Every sweepable `Chip` field, in SI units (B, B/s, s, J/B, J/FLOP, FLOP/s, W, m²).
A vector field without an entry (`chip.peak_flops`) sets every entry."""


def _kind(name: str) -> str | None:
    if name in CHIP_FIELDS:
        return CHIP_FIELDS[name][2]
    return PARAMETERS.get(name)


def _known() -> list[str]:
    return [*CHOICES, *PARAMETERS, *CHIP_FIELDS]


# --- the spec -----------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Axis:
    """One swept parameter.

    Attributes:
        name: the parameter (`batch`, `model`, `chip.tiers.bandwidth.dram`, ...).
        values: the listed values (names or numbers), or `None` for a range.
        low, high: the range's bounds (a range only).
        num: grid points of a range (grid sampling only).
        scale: "linear" or "log" spacing of a range.
    """

    name: str
    values: tuple[Any, ...] | None = None
    low: float | None = None
    high: float | None = None
    num: int | None = None
    scale: str = "linear"

    @property
    def is_choice(self) -> bool:
        return self.name in CHOICES

    def grid(self) -> tuple[Any, ...]:
        """The values a grid takes along this axis."""
        if self.values is not None:
            return self.values
        assert self.low is not None and self.high is not None and self.num is not None
        if self.scale == "log":
            pts = np.geomspace(self.low, self.high, self.num)
        else:
            pts = np.linspace(self.low, self.high, self.num)
        # 12 significant digits: a log grid from 512 lands on 2048, not 2048.000000000001.
        return tuple(float(f"{v:.12g}") for v in pts)


@dataclasses.dataclass(frozen=True)
class SweepSpec:
    """A validated sweep spec.

    Attributes:
        axes: the swept parameters, in spec order (a grid varies the last fastest).
        base: values of the parameters that are not swept (defaults filled in).
        sampling: "grid" or "random" (Latin hypercube).
        samples: configs drawn by random sampling.
        seed: seed of random sampling.
        chunk: configs per compiled call.
        source: the file it came from (for messages).
        raw: the parsed TOML (hashed to recognise the sweep on resume).
    """

    axes: tuple[Axis, ...]
    base: dict[str, Any]
    sampling: str = "grid"
    samples: int = 0
    seed: int = 0
    chunk: int = DEFAULT_CHUNK
    source: str = "<spec>"
    raw: dict[str, Any] = dataclasses.field(default_factory=dict, compare=False)

    @property
    def area_mode(self) -> bool:
        return any(n.startswith("area.") for n in self.names)

    @property
    def names(self) -> list[str]:
        return [a.name for a in self.axes] + list(self.base)

    @property
    def n_configs(self) -> int:
        if self.sampling == "random":
            return self.samples
        return math.prod(len(a.grid()) for a in self.axes)

    def digest(self) -> str:
        """SHA-256 of the validated content (what makes two sweeps the same sweep).

        Defaults are filled in and comments are gone, so reformatting a file does not
        change it; the chunk size is not part of it (it is checked on its own).
        """
        content = {
            "axes": [dataclasses.asdict(a) for a in self.axes],
            "base": self.base,
            "sampling": self.sampling,
            "samples": self.samples,
            "seed": self.seed,
        }
        return hashlib.sha256(json.dumps(content, sort_keys=True, default=str).encode()).hexdigest()

    def value(self, name: str) -> Any:
        """The parameter's `Axis` if it is swept, else its base value (None if unset)."""
        for a in self.axes:
            if a.name == name:
                return a
        return self.base.get(name)

    def input_files(self) -> list[str]:
        """The spec's own file and the model, chip and profile files it names (presets are not
        files), in that order: what a record of the sweep's inputs should hash."""
        own = []
        for name in ("model", "chip", "profile"):
            v = self.value(name)
            values = v.values if isinstance(v, Axis) else (() if v is None else (v,))
            own += [x for x in values or () if Path(x).suffix in (".json", ".toml")]
        return [self.source, *own]


def flatten_table(table: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """Dotted names for nested tables; a table with min/max/num/scale is a range.

    Examples:
        >>> from costmodel.sweep import flatten_table
        >>> flatten_table({"chip": {"tiers": {"bandwidth": {"dram": [1e12]}}}, "batch": {"min": 1, "max": 8}})
        {'chip.tiers.bandwidth.dram': [1000000000000.0], 'batch': {'min': 1, 'max': 8}}
    """
    out = {}
    for key, value in table.items():
        name = prefix + key
        # An empty table is a value (checked, so `[base.chpi]` is reported), not a namespace.
        if isinstance(value, dict) and value and not ({"min", "max", "num", "scale"} & set(value)):
            out.update(flatten_table(value, name + "."))
        else:
            out[name] = value
    return out


def _check_name(name: str, value: Any, where: str) -> None:
    if name in RENAMED:
        raise InputError(f"{where}: field {name!r} = {value!r}: {RENAMED[name]}")
    if name in CHOICES or _kind(name) is not None:
        return
    close = difflib.get_close_matches(name, _known(), n=1)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    raise InputError(
        f"{where}: unknown field {name!r}: expected one of {', '.join([*CHOICES, *PARAMETERS])} "
        f"or chip.<Chip field> (e.g. chip.tiers.bandwidth.dram, chip.peak_flops){hint}"
    )


def _check_number(value: Any, name: str, where: str) -> float:
    kind = _kind(name)
    assert kind is not None
    text, ok = _NUMBER_KINDS[kind]
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or not ok(value):
        raise InputError(f"{where}: field {name!r} = {value!r}: expected {text}")
    if name in _TOKEN_COUNTS and value > MAX_TOKENS:  # the bound `evaluate` puts on a scenario
        raise InputError(f"{where}: field {name!r} = {value!r}: expected {text} and <= {MAX_TOKENS:g}")
    return float(value)


def _check_choice(value: Any, name: str, where: str) -> str:
    if not isinstance(value, str):
        raise InputError(f"{where}: field {name!r} = {value!r}: expected a name (a string)")
    try:
        if name == "model":
            load_model(value)
        elif name == "chip":
            chip_info(value)
        elif name in ("weights", "kv"):
            table = formats()
            if value not in table:
                raise InputError(f"unknown format; expected one of {sorted(table)}")
            if name == "kv" and table[value].plain is not None:
                raise InputError(f"a weight recipe (its attention in {table[value].plain}), not a KV-cache format")
        elif name == "profile":
            profile_info(value)
        elif name == "placement":
            if value not in POLICIES:
                raise InputError(f"unknown placement policy; expected one of {list(POLICIES)}")
        elif name == "area.node":
            if value not in tech_nodes():
                raise InputError(f"unknown technology node; expected one of {tech_nodes()}")
    except InputError as e:
        raise InputError(f"{where}: field {name!r} = {value!r}: {e}") from None
    return value


def _check_value(value: Any, name: str, where: str) -> Any:
    if name == "chips" and value == "auto":
        return value
    if name in CHOICES:
        return _check_choice(value, name, where)
    return _check_number(value, name, where)


def _parse_axis(name: str, value: Any, where: str, sampling: str) -> Axis:
    if isinstance(value, list):
        if not value:
            raise InputError(f"{where}: field {name!r} = []: expected at least one value")
        if name == "chips" and "auto" in value:
            raise InputError(f"{where}: field 'chips' = {value!r}: expected whole numbers >= 1 ('auto' only in [base])")
        vals = tuple(_check_value(v, name, where) for v in value)
        if len(set(vals)) != len(vals):
            raise InputError(f"{where}: field {name!r} = {value!r}: expected distinct values")
        return Axis(name, values=vals)
    if isinstance(value, dict):
        if name in CHOICES or _kind(name) in _WHOLE:
            raise InputError(f"{where}: field {name!r} = {value!r}: expected a list of values (not a range)")
        for key in value:
            if key not in ("min", "max", "num", "scale"):
                raise InputError(f"{where}: field {name!r}: unknown key {key!r}; expected min, max, num, scale")
        for key in ("min", "max"):
            if key not in value:
                raise InputError(f"{where}: field {name!r}: missing key {key!r} of the range")
        low = _check_number(value["min"], name, f"{where} (min)")
        high = _check_number(value["max"], name, f"{where} (max)")
        if high < low:
            raise InputError(f"{where}: field {name!r}: max = {high!r}: expected >= min ({low!r})")
        scale = value.get("scale", "linear")
        if scale not in ("linear", "log"):
            raise InputError(f"{where}: field {name!r}: scale = {scale!r}: expected 'linear' or 'log'")
        if scale == "log" and low <= 0:
            raise InputError(f"{where}: field {name!r}: min = {low!r}: expected > 0 on a log scale")
        num = value.get("num")
        if num is not None:
            if isinstance(num, bool) or not isinstance(num, int) or num < 1:
                raise InputError(f"{where}: field {name!r}: num = {num!r}: expected a whole number >= 1")
        elif sampling == "grid":
            raise InputError(f"{where}: field {name!r}: missing key 'num' (grid points of the range)")
        return Axis(name, low=low, high=high, num=num, scale=scale)
    raise InputError(
        f"{where}: field {name!r} = {value!r}: expected a list of values or a range table {{min, max, num, scale}}"
    )


def parse_spec(raw: dict[str, Any], source: str = "<spec>") -> SweepSpec:
    """Validates a parsed spec (see the module docstring for the format).

    Raises:
        InputError: naming the file, the field, the value and what was expected.
    """
    if not isinstance(raw, dict):
        raise InputError(f"{source}: expected a table")
    for key in raw:
        if key not in ("sweep", "base", "axes", "name", "description"):
            raise InputError(f"{source}: unknown section {key!r}; expected sweep, base, axes, name, description")
    for key in ("name", "description"):
        if key in raw and not isinstance(raw[key], str):
            raise InputError(f"{source}: field {key!r} = {raw[key]!r}: expected a string")
    sweep = raw.get("sweep", {})
    where = f"{source}: [sweep]"
    if not isinstance(sweep, dict):
        raise InputError(f"{where}: expected a table")
    for key in sweep:
        if key not in ("sampling", "samples", "seed", "chunk"):
            raise InputError(f"{where}: unknown field {key!r}; expected sampling, samples, seed, chunk")
    sampling = sweep.get("sampling", "grid")
    if sampling not in ("grid", "random"):
        raise InputError(f"{where}: field 'sampling' = {sampling!r}: expected 'grid' or 'random'")

    def whole(key, default, lo):
        v = sweep.get(key, default)
        if isinstance(v, bool) or not isinstance(v, int) or v < lo:
            raise InputError(f"{where}: field {key!r} = {v!r}: expected a whole number >= {lo}")
        return v

    seed = whole("seed", 0, 0)
    chunk = whole("chunk", DEFAULT_CHUNK, 1)
    if sampling == "random":
        if "samples" not in sweep:
            raise InputError(f"{where}: missing field 'samples' (configs to draw, a whole number >= 1)")
        samples = whole("samples", 0, 1)
        if samples > MAX_CONFIGS:
            raise InputError(
                f"{where}: field 'samples' = {samples!r}: expected at most {MAX_CONFIGS} (2**32 - 1; config indices are 32-bit)"
            )
    else:
        if "samples" in sweep:
            raise InputError(f"{where}: field 'samples' = {sweep['samples']!r}: only for sampling = 'random'")
        samples = 0

    for section in ("base", "axes"):
        if section in raw and not isinstance(raw[section], dict):
            raise InputError(f"{source}: [{section}]: expected a table, got {raw[section]!r}")
    base_raw = flatten_table(raw.get("base", {}))
    axes_raw = flatten_table(raw.get("axes", {}))
    base: dict[str, Any] = {}
    for name, value in base_raw.items():
        _check_name(name, value, f"{source}: [base]")
        if isinstance(value, (list, dict)):
            raise InputError(f"{source}: [base]: field {name!r} = {value!r}: expected one value (sweep it in [axes])")
        base[name] = _check_value(value, name, f"{source}: [base]")
    axes = []
    for name, value in axes_raw.items():
        _check_name(name, value, f"{source}: [axes]")
        if name in base:
            raise InputError(f"{source}: [axes]: field {name!r}: also set in [base]; expected one or the other")
        axes.append(_parse_axis(name, value, f"{source}: [axes]", sampling))

    names = set(base) | {a.name for a in axes}
    area = any(n.startswith("area.") for n in names)
    if area and "chip" in names:
        raise InputError(
            f"{source}: field 'chip' with area.* fields: expected either a chip preset or an area split, not both"
        )
    for name, value in _BASE_DEFAULTS.items():
        if name not in names:
            base[name] = value
    if area:
        for name, value in _AREA_DEFAULTS.items():
            if name not in names:
                base[name] = value
    elif "chip" not in names:
        base["chip"] = "h100-sxm"
    if sampling == "random" and not axes:
        raise InputError(f"{where}: sampling = 'random' with no [axes]: expected at least one axis to sample")
    spec = SweepSpec(
        axes=tuple(axes),
        base=base,
        sampling=sampling,
        samples=samples,
        seed=seed,
        chunk=chunk,
        source=source,
        raw=raw,
    )
    if spec.n_configs > MAX_CONFIGS:
        raise InputError(
            f"{source}: [axes]: {spec.n_configs} configs (the product of the axes' lengths): "
            f"expected at most {MAX_CONFIGS} (2**32 - 1; config indices are 32-bit)"
        )
    return spec


def load_spec(path: Path | str) -> SweepSpec:
    """Loads and validates a sweep spec TOML file.

    Examples:
        >>> import costmodel.sweep as sw
        >>> spec = sw.load_spec(sw.data_sweeps() / "default.toml")
        >>> spec.n_configs  # 3 models x 4 chips x 5 batches x 8 contexts x 2 KV formats
        960
    """
    return parse_spec(load_toml(path), str(path))


def data_sweeps() -> Path:
    """The folder of example sweep specs (`data/sweeps`)."""
    return data_dir() / "sweeps"
