"""Sweeps over thousands to millions of (chip x workload) configs.

A sweep spec (TOML) names *axes*: lists of values or numeric ranges over the model,
batch, context, number formats, placement policy, chip preset, any `Chip` field, or
an area split through `costmodel.chip_from_area` at a technology node. Configs are
enumerated as a grid (every combination, last axis fastest) or drawn by Latin
hypercube sampling from a seed. Either way config `i` is a pure function of the spec
and `i`, so any range of configs can be generated on its own: chunks need no shared
state, which is what makes resuming and splitting across hosts exact.

Each chunk of configs is one call of one compiled program whose only input is the
chunk's first config index: it is sharded over the local devices along a 1-D mesh
(`jax.shard_map`), and each device generates its slice's configs from their indices
(grid: uint32 div/mod; Latin hypercube: a keyed uint32 Feistel permutation and hash,
float32 values) and evaluates them with `jax.vmap` of the config function. It is
compiled once (the last chunk is padded to the same shape, repeating the last config).
Indices are uint32, so a sweep has at most `MAX_CONFIGS` (2**32 - 1) configs.

Each finished chunk is written to Parquet under a temporary name and renamed into
place, so a folder only ever holds whole chunks; `resume=True` skips the chunks
already there and the final table is identical, row for row, to an uninterrupted run.

Multi-host: under `jax.distributed`, process `p` of `P` evaluates the contiguous range
of chunks `[n_chunks * p // P, n_chunks * (p + 1) // P)` on its own local devices
(no cross-host communication is needed), writing into a shared output folder. The
union of all processes' chunks is the whole sweep, each config exactly once.

The spec format::

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
(an area split: `area.node`, `area.budget_mm2`, `area.sram` and `area.pim` as
fractions of the area left after I/O, the rest being compute, ...) and `chip.<field>`
overrides applied last (`chip.peak_flops` sets every precision, `chip.peak_flops.8`
one of them; `chip.tiers.capacity.sram` one tier).
"""

from __future__ import annotations

import dataclasses
import difflib
import hashlib
import json
import math
import os
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import jax.tree_util as jtu
import numpy as np

from ._core.area import Technology, chip_from_area
from ._core.chip import TIERS, Chip, Tiers, make_chip
from ._core.cost import BOUNDS, decode_cost
from ._core.placement import POLICIES
from ._core.traffic import lower_traffic
from ._core.workload import PRECISIONS, Model, Scenario, Workload
from .api import _ALL_TIERS, _FAST_TIERS, size_system, system_placement, tier_mask
from .io import InputError, atomic_write, chip_info, formats, load_model, load_toml, tech_nodes, tech_preset


FORMAT = "costmodel-sweep/2"
"""Version 2: configs generated inside the compiled program (uint32 Feistel and hash,
float32 values); version 1 drew them on the host (numpy, uint64) and its configs differ,
so a version-1 folder can be read (`pareto`) but not resumed or rewritten."""
_READABLE = ("costmodel-sweep/1", FORMAT)
MANIFEST = "sweep.json"
DEFAULT_CHUNK = 16384
"""Configs per compiled call: small enough that a chunk's intermediates stay in the
CPU caches (16k configs ran ~1.3x faster per config than 64k here), large enough to
amortise the per-call dispatch."""

RESULTS = (
    "seconds_per_step",
    "tokens_per_second",
    "tokens_per_second_per_sequence",
    "joules_per_token",
    "power_watts_per_chip",
    "overflow_bytes_per_chip",
)
"""Float result columns (SI units: s, tokens/s, J, W, B), besides `bound`, `feasible`,
`chips`, `tensor_parallel` and `pipeline_parallel`."""


# --- parameters -------------------------------------------------------------------

_NUMBER_KINDS: dict[str, tuple[str, Callable[[float], bool]]] = {
    "positive": ("a number > 0", lambda v: v > 0),
    "nonneg": ("a number >= 0", lambda v: v >= 0),
    "batch": ("a number >= 1", lambda v: v >= 1),
    "fraction": ("a number in (0, 1]", lambda v: 0 < v <= 1),
    "unit": ("a number in [0, 1]", lambda v: 0 <= v <= 1),
    "overlap": ("a number >= 1", lambda v: v >= 1),
    "count": ("a whole number >= 1", lambda v: v >= 1 and float(v).is_integer()),
}
_WHOLE = ("count",)
"""Kinds that take lists only (a range would give fractional values)."""

CHOICES = ("model", "chip", "weights", "kv", "placement", "area.node")
"""Parameters whose values are names."""

PARAMETERS: dict[str, str] = {
    "batch": "batch",
    "context": "nonneg",
    "prefix": "nonneg",
    "chips": "count",
    "area.budget_mm2": "positive",
    "area.sram": "unit",
    "area.pim": "unit",
    "area.n_stacks": "nonneg",
    "area.compute_efficiency": "fraction",
    "area.memory_efficiency": "fraction",
    "area.power_cap_w": "positive",
    "area.kernel_overhead_us": "nonneg",
    "area.overlap": "overlap",
    "area.max_chips": "count",
}
"""Numeric parameters (besides `chip.*`) and their kinds. Units: tokens; mm², W, µs."""

_AREA_DEFAULTS = {
    "area.node": "N5",
    "area.budget_mm2": 814.0,
    "area.sram": 1 / 3,
    "area.pim": 1 / 3,
    "area.n_stacks": 5.0,
    "area.compute_efficiency": 0.8,
    "area.memory_efficiency": 0.9,
    "area.power_cap_w": 1e9,
    "area.kernel_overhead_us": 0.0,
    "area.overlap": 64.0,
    "area.max_chips": 64.0,
}
"""Defaults of an area-split chip: those of `chip_from_area` (equal thirds of the free
area, 5 HBM stacks) on an H100-sized (814 mm²) N5 die."""

_BASE_DEFAULTS: dict[str, Any] = {
    "model": "llama-3-8b",
    "batch": 1.0,
    "context": 4096.0,
    "prefix": 0.0,
    "weights": "bf16",
    "kv": "bf16",
    "chips": "auto",
}


def _chip_fields() -> dict[str, tuple[tuple[str, ...], int | None, str]]:
    """`chip.<path>[.<entry>]` -> (attribute path, entry index or None, kind)."""
    sample = make_chip(capacity=(1, 1, 1), bandwidth=(1, 1, 1), peak_flops=1)
    kinds = {
        "efficiency": "fraction",
        "compute_efficiency": "fraction",
        "attention_efficiency": "fraction",
        "small_kernel_efficiency": "fraction",
        "small_kernel_knee": "positive",
        "compute_feed": "fraction",
        "overlap": "overlap",
        "pim_serial": "unit",
        "power_cap": "positive",
        "tensor_parallel": "count",
        "pipeline_parallel": "count",
    }
    out = {}
    paths = [("tiers", f.name) for f in dataclasses.fields(Tiers)]
    paths += [(f.name,) for f in dataclasses.fields(Chip) if f.name != "tiers"]
    for path in paths:
        leaf: Any = sample
        for part in path:
            leaf = getattr(leaf, part)
        kind = kinds.get(path[-1], "nonneg")
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
        for a in self.axes:
            if a.name == name:
                return a
        return self.base.get(name)


def _flatten(table: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """Dotted names for nested tables; a table with min/max/num/scale is a range."""
    out = {}
    for key, value in table.items():
        name = prefix + key
        # An empty table is a value (checked, so `[base.chpi]` is reported), not a namespace.
        if isinstance(value, dict) and value and not ({"min", "max", "num", "scale"} & set(value)):
            out.update(_flatten(value, name + "."))
        else:
            out[name] = value
    return out


def _check_name(name: str, where: str) -> None:
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
            if value not in formats():
                raise InputError(f"unknown format; expected one of {sorted(formats())}")
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
    base_raw = _flatten(raw.get("base", {}))
    axes_raw = _flatten(raw.get("axes", {}))
    base: dict[str, Any] = {}
    for name, value in base_raw.items():
        _check_name(name, f"{source}: [base]")
        if isinstance(value, (list, dict)):
            raise InputError(f"{source}: [base]: field {name!r} = {value!r}: expected one value (sweep it in [axes])")
        base[name] = _check_value(value, name, f"{source}: [base]")
    axes = []
    for name, value in axes_raw.items():
        _check_name(name, f"{source}: [axes]")
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
    from .io import data_dir

    return data_dir() / "sweeps"


# --- sampling (inside the compiled program, in uint32) --------------------------------

MAX_CONFIGS = 2**32 - 1
"""Most configs a sweep may have: config indices are uint32 inside the program (JAX
runs without 64-bit integers)."""


def _key(*parts: int) -> int:
    """A 32-bit key from integers (seed, dimension, purpose, round), on the host."""
    return int.from_bytes(hashlib.sha256(json.dumps(parts).encode()).digest()[:4], "little")


def _hash32(x: jax.Array) -> jax.Array:
    """`lowbias32` (C. Wellons' 32-bit integer hash): a bijection of uint32, wrapping."""
    x = x ^ (x >> 16)
    x = x * jnp.uint32(0x7FEB352D)
    x = x ^ (x >> 15)
    x = x * jnp.uint32(0x846CA68B)
    return x ^ (x >> 16)


def _bits(n: int) -> int:
    """Bits that hold every index of `[0, n)` (0 for n = 1); exact integer arithmetic."""
    return (n - 1).bit_length()


def _radices(n: int) -> tuple[int, int]:
    """(a, b): the smallest `a >= sqrt(n)` and `b = ceil(n / a)`, so `n <= a * b < n + a`."""
    a = max(1, math.isqrt(n - 1) + 1) if n > 1 else 1
    return a, -(-n // a)


def permute(index: jax.Array, n: int, keys: jax.Array | Sequence[int]) -> jax.Array:
    """Keyed pseudo-random permutations of `[0, n)`, evaluated at `index` (uint32).

    A 4-round alternating Feistel network with modular addition (as format-preserving
    encryption's FFX A2) on `[0, a * b)`, `a * b` just above `n` (`_radices`): a round
    maps the pair `(left, right) = (x // b, x % b)` in `[0, a) x [0, b)` to `(right,
    (left + F(right)) % a)` in `[0, b) x [0, a)` (then `a` and `b` swap roles; after
    the 4th the pair is back in `[0, a) x [0, b)`), with `F` the round key mixed by
    `_hash32` and scaled into `[0, a)`. It is cycle-walked back into `[0, n)` (an
    index that lands outside is permuted again until it lands inside, which keeps it a
    bijection), which is rarely needed: at most `a - 1 < sqrt(n)` of the `a * b`
    indices lie outside. Computed per index, so any slice of a permutation of 10^9
    items costs only its own length. Traceable.

    Args:
        index: uint32 indices in `[0, n)`, shape `(..., m)`.
        n: the permuted range, `1 <= n <= MAX_CONFIGS`.
        keys: one 32-bit key per permutation, shape `index.shape[:-1]` (e.g. one per
            dimension of a Latin hypercube, with `index` of shape `(dims, m)`).

    Examples:
        >>> import numpy as np, costmodel.sweep as sw
        >>> sorted(np.asarray(sw.permute(np.arange(10, dtype=np.uint32), 10, 3)).tolist())
        [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]
    """
    assert 1 <= n <= MAX_CONFIGS, n
    x = jnp.asarray(index, jnp.uint32)
    keys32 = np.asarray(keys, np.uint64).astype(np.uint32)
    assert keys32.shape == x.shape[:-1], (keys32.shape, x.shape)
    rounds = [
        jnp.asarray(np.vectorize(lambda k, r=r: _key(int(k), r), otypes=[np.uint32])(keys32))[..., None]
        for r in range(4)
    ]
    a, b = _radices(n)

    def once(x):
        # The state is the pair (x // b, x % b); a round maps (left, right) in [0, a) x [0, b)
        # to (right, (left + F(right)) % a) in [0, b) x [0, a): no division inside.
        left, right = x // jnp.uint32(b), x % jnp.uint32(b)
        for r, k in enumerate(rounds):
            ra = jnp.uint32(a if r % 2 == 0 else b)
            f = ((_hash32(right ^ k) >> 16) * ra) >> 16  # in [0, ra): ra <= 2**16
            mixed = left + f
            left, right = right, jnp.where(mixed >= ra, mixed - ra, mixed)
        return left * jnp.uint32(b) + right

    y = once(x)
    if a * b > n:
        top = jnp.uint32(n)
        y = jax.lax.while_loop(lambda y: jnp.any(y >= top), lambda y: jnp.where(y >= top, once(y), y), y)
    return y


def latin_hypercube(index: jax.Array, n: int, dims: int, seed: int) -> jax.Array:
    """Points `index` of an `n`-point Latin hypercube in [0, 1)**dims, shape `(dims, m)`.

    Along every dimension each of the `n` strata `[k/n, (k+1)/n)` holds exactly one
    point: `k` is `permute(index, n, _key(seed, dim, 1))`, an independent keyed
    permutation per dimension; the point's place inside its stratum is a keyed hash of
    `index`. Float32: the jitter has `24 - bits(n - 1)` bits (none past 2**24 points),
    so `k + jitter` is exact and below `k + 1`; the division by `n` rounds to float32.
    The same point whatever chunk `index` comes in (each point is its own function).
    """
    index = jnp.asarray(index, jnp.uint32)
    at = jnp.broadcast_to(index[None, :], (dims, index.shape[0]))
    stratum = permute(at, n, [_key(seed, d, 1) for d in range(dims)])
    # Through int32 where the value fits: x86 has no vector uint32 -> float32 conversion.
    x = (stratum.astype(jnp.int32) if n <= 2**31 else stratum).astype(jnp.float32)
    q = max(0, 24 - _bits(n))
    if q:
        jitter_keys = jnp.asarray(np.array([_key(seed, d, 2) for d in range(dims)], np.uint32))[:, None]
        h = _hash32(at ^ jitter_keys)
        x = x + (h >> (32 - q)).astype(jnp.int32).astype(jnp.float32) * jnp.float32(2.0**-q)
    return jnp.minimum(x / jnp.float32(n), jnp.float32(1 - 2**-24))


# --- the compiled program ---------------------------------------------------------

COMPILER_OPTIONS: dict[str, Any] = {"xla_cpu_experimental_ynn_fusion_type": ""}
"""XLA options of the sweep's programs: no YNNPACK fusions on the CPU. By default XLA
hands the config function's small reductions and elementwise ops (over 7 block
classes and 3 tiers, batched) to YNNPACK, which made the chunk program about 1.5x
slower on this 2-core CPU (`sweep_ynn` in `benchmarks/sweep_bench.py`). A CPU option:
other backends ignore it."""


def _stack(trees: Sequence[Any]) -> Any:
    return jtu.tree_map(lambda *x: jnp.stack(x), *trees)


def _take(tree: Any, i) -> Any:
    return jtu.tree_map(lambda x: x[i], tree)


def _set_field(chip: Chip, path: tuple[str, ...], index: int | None, value) -> Chip:
    def get(c) -> Any:
        for part in path:
            c = getattr(c, part)
        return c

    old = get(chip)
    new = jnp.full_like(old, value) if index is None else old.at[index].set(value)
    return eqx.tree_at(get, chip, new)


class Sweep:
    """A sweep ready to run: the spec, its tables and one compiled chunk program.

    Args:
        spec: the validated spec.
        chunk: configs per compiled call (default: the spec's).
        devices: devices to shard each chunk over (default `jax.local_devices()`).
        compiler_options: XLA options of its programs (default `COMPILER_OPTIONS` on CPU
            devices, none on others).

    Examples:
        >>> import costmodel.sweep as sw
        >>> spec = sw.parse_spec({"axes": {"batch": [1, 8]}})
        >>> s = sw.Sweep(spec, chunk=2)
        >>> t = s.table(0, 2)
        >>> t.column("batch").to_pylist(), t.num_rows
        ([1.0, 8.0], 2)
    """

    def __init__(
        self,
        spec: SweepSpec,
        chunk: int | None = None,
        devices: Sequence[Any] | None = None,
        compiler_options: dict[str, Any] | None = None,
    ):
        self.spec = spec
        self.chunk = int(chunk or spec.chunk)
        if self.chunk < 1:
            raise InputError(f"chunk = {self.chunk!r}: expected a whole number >= 1")
        self.n_configs = spec.n_configs
        self.n_chunks = -(-self.n_configs // self.chunk)
        self.devices = list(devices) if devices is not None else jax.local_devices()
        n_dev = len(self.devices)
        self.padded = -(-self.chunk // n_dev) * n_dev
        if self.padded >= 2**31:
            raise InputError(f"chunk = {self.chunk!r}: expected fewer than 2**31 configs per chunk")
        self.traces = 0
        self._axes = {a.name: a for a in spec.axes}
        self._grid = [a.grid() for a in spec.axes] if spec.sampling == "grid" else None
        self._build_tables()
        from jax.sharding import Mesh, NamedSharding, PartitionSpec

        mesh = Mesh(np.array(self.devices), ("configs",))
        self.sharding = NamedSharding(mesh, PartitionSpec("configs"))
        # Each device generates and evaluates its own contiguous slice of the chunk: the
        # only input is the chunk's first config index, and nothing crosses devices.
        chunk_fn = jax.shard_map(
            self._chunk_slice, mesh=mesh, in_specs=PartitionSpec(), out_specs=PartitionSpec("configs"), check_vma=False
        )
        if compiler_options is None:  # the defaults are XLA:CPU options: none elsewhere
            on_cpu = all(d.platform == "cpu" for d in self.devices)
            compiler_options = COMPILER_OPTIONS if on_cpu else {}
        options = dict(compiler_options)
        self._program = jax.jit(chunk_fn, compiler_options=options)
        self._generator = jax.jit(self._generate, compiler_options=options)
        self.single = jax.jit(self._row, compiler_options=options)
        """The same config function, jitted without vmap: one config's values per call
        (a dict of scalars, as `configs` gives them), e.g. for a per-config loop."""

    # -- tables of named things --

    def _choices(self, name: str) -> tuple[str, ...]:
        axis = self._axes.get(name)
        if axis is not None:
            assert axis.values is not None
            return tuple(axis.values)
        value = self.spec.base.get(name)
        return () if value is None else (value,)

    def _build_tables(self) -> None:
        spec = self.spec
        self.choices: dict[str, tuple[str, ...]] = {n: self._choices(n) for n in CHOICES}
        models = [load_model(m) for m in self.choices["model"]]
        self._models = models[0] if len(models) == 1 else _stack(models)
        fmt_names = sorted(set(self.choices["weights"]) | set(self.choices["kv"]))
        table = formats()
        self._fmt_index = {n: i for i, n in enumerate(fmt_names)}
        self._fmt_bytes = np.array([table[n].bytes_per_element for n in fmt_names], np.float32)
        self._fmt_precision = np.array([table[n].precision for n in fmt_names], np.int32)
        if spec.area_mode:
            techs: list[Technology] = [tech_preset(n) for n in self.choices["area.node"]]
            self._techs = techs[0] if len(techs) == 1 else _stack(techs)
            own = ["greedy"]
            self._own_policy = np.zeros(1, np.int32)
        else:
            infos = [chip_info(c) for c in self.choices["chip"]]
            self._chips = infos[0].chip if len(infos) == 1 else _stack([i.chip for i in infos])
            self._max_chips = np.array([i.max_chips for i in infos], np.float32)
            own = [i.placement for i in infos]
        if self.choices["placement"]:
            self.policies = self.choices["placement"]
            self._policy_of_chip = None
        else:
            # Each chip placed as its own system does (`ChipInfo.placement`).
            self.policies = tuple(p for p in POLICIES if p in own)
            self._policy_of_chip = np.array([self.policies.index(p) for p in own], np.int32)
        self._fast = np.stack([tier_mask(_FAST_TIERS[p]) for p in self.policies])
        self._all = np.stack([tier_mask(_ALL_TIERS[p]) for p in self.policies])

    # -- configs, generated inside the program --

    def _generate(self, index: jax.Array) -> dict[str, jax.Array]:
        """The swept values of configs `index` (uint32, any shape): float32 numbers, or
        int32 indices into the axis's values for names. Traced: the compiled chunk
        program calls it, so the values it evaluates are the values it reports."""
        index = jnp.asarray(index, jnp.uint32)
        out: dict[str, jax.Array] = {}
        if self._grid is not None:
            rest = index
            for axis, grid in reversed(list(zip(self.spec.axes, self._grid))):  # last axis fastest
                k = jnp.uint32(len(grid))
                digit = (rest % k).astype(jnp.int32)
                rest = rest // k
                out[axis.name] = digit if axis.is_choice else jnp.asarray(np.asarray(grid, np.float32))[digit]
            return {a.name: out[a.name] for a in self.spec.axes}
        n = self.n_configs
        points = latin_hypercube(index.reshape(-1), n, len(self.spec.axes), self.spec.seed)
        for dim, axis in enumerate(self.spec.axes):
            u = points[dim].reshape(index.shape)
            if axis.values is not None:
                k = len(axis.values)
                pick = jnp.minimum((u * k).astype(jnp.int32), k - 1)
                out[axis.name] = pick if axis.is_choice else jnp.asarray(np.asarray(axis.values, np.float32))[pick]
                continue
            assert axis.low is not None and axis.high is not None
            lo, hi = np.float32(axis.low), np.float32(axis.high)
            if axis.scale == "log":
                a, b = np.log(np.float64(axis.low)), np.log(np.float64(axis.high))
                v = jnp.exp(jnp.float32(a) + u * jnp.float32(b - a))
            else:
                v = lo + u * (hi - lo)
            out[axis.name] = jnp.clip(v, lo, hi)  # float32 rounding stays inside the range
        return out

    def configs(self, start: int, stop: int) -> dict[str, np.ndarray]:
        """The swept values of configs `[start, stop)`, as the chunk program generates them:
        float32 numbers, or int32 indices into the axis's values for names."""
        if not 0 <= start <= stop <= self.n_configs:
            raise ValueError(f"configs [{start}, {stop}): expected a range in [0, {self.n_configs}]")
        values = self._generator(np.arange(start, stop, dtype=np.uint32))
        return {k: np.asarray(v) for k, v in values.items()}

    def _chunk_slice(self, start: jax.Array) -> tuple[dict[str, jax.Array], dict[str, jax.Array]]:
        """One device's slice of the chunk that starts at config `start` (inside shard_map).

        Rows past the sweep's end (the padding of the last chunk) repeat its last config.
        """
        per = self.padded // len(self.devices)
        offset = jax.lax.axis_index("configs").astype(jnp.uint32) * jnp.uint32(per)
        local = offset + jnp.arange(per, dtype=jnp.uint32)
        index = start + jnp.minimum(local, jnp.uint32(self.n_configs - 1) - start)
        values = self._generate(index)
        return values, jax.vmap(self._row, axis_size=per)(values)

    # -- the config function (traced once) --

    def _row(self, p: dict[str, jax.Array]) -> dict[str, jax.Array]:
        self.traces += 1  # runs at trace time only: counts compilations
        spec = self.spec

        def num(name):
            return p[name] if name in p else jnp.asarray(spec.base[name], jnp.float32)

        def idx(name):
            return p[name] if name in p else jnp.asarray(0, jnp.int32)

        def pick(table, name):
            return table if len(self.choices[name]) == 1 else _take(table, idx(name))

        model: Model = pick(self._models, "model")
        fb, fp = jnp.asarray(self._fmt_bytes), jnp.asarray(self._fmt_precision)
        wi = jnp.asarray(np.array([self._fmt_index[f] for f in self.choices["weights"]], np.int32))[idx("weights")]
        ki = jnp.asarray(np.array([self._fmt_index[f] for f in self.choices["kv"]], np.int32))[idx("kv")]
        scenario = Scenario(
            batch=num("batch"),
            context=num("context"),
            prefix=num("prefix"),
            weight_bytes=fb[wi],
            kv_bytes=fb[ki],
            weight_precision=fp[wi],
            kv_precision=fp[ki],
        )
        workload = Workload(model, scenario)
        valid = scenario.prefix <= scenario.context
        out: dict[str, jax.Array] = {}

        if spec.area_mode:
            tech = pick(self._techs, "area.node")
            sram, pim = num("area.sram"), num("area.pim")
            compute = 1.0 - sram - pim
            # An impossible split (sram + pim >= 1 leaves no compute) is reported as
            # infeasible; the chip is built from a harmless split so nothing is NaN.
            ok = compute > 1e-6
            fractions = jnp.stack([jnp.where(ok, compute, 1.0), jnp.where(ok, sram, 0.0), jnp.where(ok, pim, 0.0)])
            # An empty part gets a logit of -inf: exactly no area, not a sliver.
            logits = jnp.where(fractions > 0, jnp.log(jnp.where(fractions > 0, fractions, 1.0)), -jnp.inf)
            chip = chip_from_area(
                num("area.budget_mm2") * 1e-6,
                logits,
                tech,
                n_stacks=num("area.n_stacks"),
                compute_efficiency=num("area.compute_efficiency"),
                memory_efficiency=num("area.memory_efficiency"),
                kernel_overhead=num("area.kernel_overhead_us") * 1e-6,
                overlap=num("area.overlap"),
                power_cap=num("area.power_cap_w"),
            )
            valid = valid & ok
            max_chips = num("area.max_chips")
            out["area.compute"] = jnp.where(ok, compute, 0.0)
            chip_index = jnp.asarray(0, jnp.int32)
        else:
            chip = pick(self._chips, "chip")
            chip_index = idx("chip")
            max_chips = jnp.asarray(self._max_chips)[chip_index]

        if self._policy_of_chip is None:
            policy = idx("placement")
        else:
            policy = jnp.asarray(self._policy_of_chip)[chip_index]
        traffic = lower_traffic(workload)
        layout = ("chip.tensor_parallel", "chip.pipeline_parallel")
        for name in [n for n in spec.names if n in CHIP_FIELDS and not n.startswith(layout)]:
            path, index, _ = CHIP_FIELDS[name]
            chip = _set_field(chip, path, index, num(name))
        tp, pp, fits = self._system_size(workload, traffic, chip, policy, max_chips, num)
        valid = valid & fits
        chip = chip.replace(tensor_parallel=tp, pipeline_parallel=pp)
        for name in [n for n in spec.names if n.startswith(layout)]:
            path, index, _ = CHIP_FIELDS[name]
            chip = _set_field(chip, path, index, num(name))

        # Placed on the whole system as one chip, as `costmodel.evaluate` places it.
        placements = [system_placement(pol, traffic, chip) for pol in self.policies]
        placement = placements[0] if len(placements) == 1 else jnp.stack(placements)[policy]
        cost = decode_cost(workload, chip, placement)
        finite = jnp.isfinite(cost.seconds_per_step) & (cost.seconds_per_step > 0)
        out.update(
            seconds_per_step=cost.seconds_per_step,
            tokens_per_second=cost.tokens_per_second,
            tokens_per_second_per_sequence=cost.tokens_per_second_per_sequence,
            joules_per_token=cost.joules_per_token,
            power_watts_per_chip=cost.power,
            overflow_bytes_per_chip=cost.overflow_bytes,
            bound=cost.bound,
            feasible=cost.feasible & valid & finite,
            tensor_parallel=chip.tensor_parallel,
            pipeline_parallel=chip.pipeline_parallel,
            placement=policy,
        )
        return out

    def _system_size(self, workload, traffic, chip, policy, max_chips, num):
        """(tensor_parallel, pipeline_parallel, fits): `costmodel.api.size_system`, per
        config inside the vmapped program (the rules `costmodel.evaluate` sizes with)."""
        fixed = "chips" in self._axes or self.spec.base.get("chips") != "auto"
        return size_system(
            jnp.sum(traffic.stored_bytes),
            workload.model.n_layers,
            chip.tiers.capacity,
            max_chips,
            jnp.asarray(self._fast)[policy],
            jnp.asarray(self._all)[policy],
            jnp.asarray(np.array([p == "sram" for p in self.policies]))[policy],
            num("chips") if fixed else None,
        )

    # -- running --

    def dispatch(self, start: int, stop: int) -> tuple[dict[str, jax.Array], dict[str, jax.Array]]:
        """Starts evaluating configs `[start, stop)` (at most one chunk); returns at once.

        One compiled call: the configs are generated on the devices from `start`.

        Returns:
            The swept values (as `configs` gives them) and the results, both padded to
            the compiled chunk and asynchronous (device arrays).
        """
        if not 0 <= start < stop <= self.n_configs or stop - start > self.chunk:
            raise ValueError(f"configs [{start}, {stop}): expected a range of at most {self.chunk} in the sweep")
        return self._program(np.uint32(start))

    def to_table(self, start: int, stop: int, values: dict[str, jax.Array], results: dict[str, jax.Array]):
        """A `pyarrow.Table` of configs `[start, stop)`: the config, then the results.

        Numbers are float32, the values the program evaluated (unswept ones too)."""
        import pyarrow as pa

        n = stop - start
        res = {k: np.asarray(v)[:n] for k, v in results.items()}
        host = {k: np.asarray(v)[:n] for k, v in values.items()}
        cols: dict[str, Any] = {"config": pa.array(np.arange(start, stop, dtype=np.int64))}

        def names(values, indices):
            return pa.DictionaryArray.from_arrays(pa.array(indices.astype(np.int32)), pa.array(list(values)))

        for name in self.spec.names:
            if name == "placement":
                continue
            if name in CHOICES:
                vals = self.choices[name]
                cols[name] = names(vals, host[name] if name in host else np.zeros(n, np.int32))
            elif name in host:
                cols[name] = pa.array(host[name])
            elif self.spec.base[name] == "auto":
                continue
            else:
                cols[name] = pa.array(np.full(n, self.spec.base[name], np.float32))
        cols["placement"] = names(self.policies, res.pop("placement"))
        if "area.compute" in res:
            cols["area.compute"] = pa.array(res.pop("area.compute"))
        tp, pp = res.pop("tensor_parallel"), res.pop("pipeline_parallel")
        cols["chips_used"] = pa.array((tp * pp).astype(np.int32))
        cols["tensor_parallel"] = pa.array(tp.astype(np.int32))
        cols["pipeline_parallel"] = pa.array(pp.astype(np.int32))
        for name in RESULTS:
            cols[name] = pa.array(res[name].astype(np.float32))
        cols["bound"] = names(BOUNDS, res["bound"])
        cols["feasible"] = pa.array(res["feasible"].astype(bool))
        return pa.table(cols)

    def table(self, start: int, stop: int):
        """Evaluates configs `[start, stop)` (at most one chunk) into a table."""
        host, results = self.dispatch(start, stop)
        return self.to_table(start, stop, host, results)

    def chunk_range(self, k: int) -> tuple[int, int]:
        return k * self.chunk, min((k + 1) * self.chunk, self.n_configs)


_CACHE: dict[tuple, Sweep] = {}


def cached_sweep(spec: SweepSpec, chunk: int | None = None, devices: Sequence[Any] | None = None) -> Sweep:
    """A `Sweep`, reusing the compiled program of an identical earlier one in this process."""
    devices = list(devices) if devices is not None else jax.local_devices()
    key = (spec.digest(), int(chunk or spec.chunk), tuple(d.id for d in devices), jax.process_index())
    if key not in _CACHE:
        if len(_CACHE) >= 8:
            _CACHE.pop(next(iter(_CACHE)))
        _CACHE[key] = Sweep(spec, chunk, devices)
    return _CACHE[key]


# --- files --------------------------------------------------------------------------


def chunk_path(out: Path, k: int) -> Path:
    return out / f"chunk-{k:08d}.parquet"


def process_chunks(n_chunks: int, index: int, count: int) -> range:
    """The contiguous chunks process `index` of `count` evaluates."""
    return range(n_chunks * index // count, n_chunks * (index + 1) // count)


def _write_atomic(table, path: Path) -> None:
    import pyarrow.parquet as pq

    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    with open(tmp, "wb") as f:
        pq.write_table(table, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def _manifest(sweep: Sweep) -> dict[str, Any]:
    from . import __version__
    from .provenance import provenance, shipped_inputs, user_files

    spec = sweep.spec
    own = [v for n in ("model", "chip") for v in sweep.choices[n] if Path(v).suffix in (".json", ".toml")]

    return {
        "format": FORMAT,
        "spec_sha256": sweep.spec.digest(),
        "n_configs": sweep.n_configs,
        "chunk": sweep.chunk,
        "n_chunks": sweep.n_chunks,
        "spec": sweep.spec.raw,
        "costmodel_version": __version__,
        "provenance": provenance([*user_files(spec.source, *own), *shipped_inputs()]),
    }


def read_manifest(out: Path | str) -> dict[str, Any]:
    path = Path(out) / MANIFEST
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise InputError(f"{path}: file not found (not a sweep folder)") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise InputError(f"{path}: not valid JSON ({e})") from None
    if not isinstance(data, dict) or data.get("format") not in _READABLE:
        raise InputError(
            f"{path}: field 'format' = {data.get('format') if isinstance(data, dict) else data!r}: expected one of {list(_READABLE)}"
        )
    for key, lo in (("n_configs", 1), ("chunk", 1), ("n_chunks", 1)):
        v = data.get(key)
        if isinstance(v, bool) or not isinstance(v, int) or v < lo:
            raise InputError(f"{path}: field {key!r} = {v!r}: expected a whole number >= {lo}")
    if not isinstance(data.get("spec"), dict) or not isinstance(data["spec"].get("axes", {}), dict):
        raise InputError(f"{path}: field 'spec' = {data.get('spec')!r}: expected the sweep spec's table")
    return data


def _check_manifest(out: Path, mine: dict[str, Any]) -> None:
    path = out / MANIFEST
    if not path.exists():
        return
    old = read_manifest(out)
    if old["format"] != mine["format"]:
        raise InputError(
            f"{path}: field 'format' = {old['format']!r}: expected {mine['format']!r} (the folder was written "
            "by an earlier version whose sampler drew other configs); choose a new --out"
        )
    if old.get("spec_sha256") != mine["spec_sha256"]:
        raise InputError(
            f"{path}: field 'spec_sha256' = {old.get('spec_sha256')!r}: expected {mine['spec_sha256']!r} "
            "(the folder holds a different sweep); choose a new --out"
        )
    if old.get("chunk") != mine["chunk"]:
        raise InputError(
            f"{path}: field 'chunk' = {old.get('chunk')!r}: expected {mine['chunk']!r}; "
            f"resume with --chunk {old.get('chunk')} (or without --chunk)"
        )


@dataclasses.dataclass(frozen=True)
class SweepStats:
    """What a run did.

    Attributes:
        n_configs: configs in the whole sweep.
        evaluated: configs this process evaluated in this run.
        skipped: configs of this process's chunks already on disk (resume).
        seconds: wall time of the evaluation loop (compilation included), s.
        chunks: chunk ids this process owns.
    """

    n_configs: int
    evaluated: int
    skipped: int
    seconds: float
    chunks: range

    @property
    def configs_per_second(self) -> float:
        return self.evaluated / self.seconds if self.seconds > 0 else 0.0


def _progress(enabled: bool, total: int, done: int):
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        ProgressColumn,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )
    from rich.text import Text

    class Rate(ProgressColumn):
        def render(self, task):
            speed = task.finished_speed or task.speed
            return Text("" if speed is None else f"{speed:,.0f} configs/s", style="progress.data.speed")

    progress = Progress(
        TextColumn("[progress.description]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        Rate(),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=Console(stderr=True),
        disable=not enabled,
        speed_estimate_period=10.0,
    )
    task = progress.add_task("sweep", total=total, completed=done)
    return progress, task


def run_sweep(
    spec: SweepSpec,
    out: Path | str,
    *,
    chunk: int | None = None,
    resume: bool = False,
    progress: bool = False,
    devices: Sequence[Any] | None = None,
    process_index: int | None = None,
    process_count: int | None = None,
) -> SweepStats:
    """Evaluates a sweep chunk by chunk into `out/chunk-XXXXXXXX.parquet`.

    Args:
        spec: the sweep.
        out: the output folder (created). It also gets `sweep.json`, which records
            the spec, its hash and the chunk size, and `spec.toml`-free resumption.
        chunk: configs per chunk (default: the spec's; on resume, the folder's).
        resume: skip chunks already written; without it every chunk is rewritten.
        progress: show a progress bar (configs/s) on stderr.
        devices: devices to shard each chunk over (default: the local devices).
        process_index, process_count: this process's share of the chunks (default:
            `jax.process_index()` and `jax.process_count()`).

    Returns:
        A `SweepStats`.

    Raises:
        InputError: if `out` holds a different sweep or another chunk size.
    """
    out = Path(out)
    if resume and chunk is None and (out / MANIFEST).exists():
        chunk = read_manifest(out).get("chunk")
    sweep = cached_sweep(spec, chunk, devices)
    mine = _manifest(sweep)
    out.mkdir(parents=True, exist_ok=True)
    _check_manifest(out, mine)
    path = out / MANIFEST
    atomic_write(path, json.dumps(mine, indent=1, sort_keys=True, default=str))

    index = jax.process_index() if process_index is None else process_index
    count = jax.process_count() if process_count is None else process_count
    chunks = process_chunks(sweep.n_chunks, index, count)
    # Temporary files of our chunks are what a killed run left half-written.
    for k in chunks:
        for stale in out.glob(f".{chunk_path(out, k).name}.tmp-*"):
            stale.unlink(missing_ok=True)
    todo = [k for k in chunks if not (resume and chunk_path(out, k).exists())]
    sizes = {k: sweep.chunk_range(k)[1] - sweep.chunk_range(k)[0] for k in chunks}
    total = sum(sizes.values())
    skipped = total - sum(sizes[k] for k in todo)
    throttle = float(os.environ.get("COSTMODEL_SWEEP_THROTTLE_S", "0") or 0)

    bar, task = _progress(progress, total, skipped)
    t0 = time.perf_counter()
    with bar:
        # One chunk is evaluated while the previous one is written, so at most two
        # chunks of results are alive at a time, whatever the sweep's size.
        pending = None
        for k in [*todo, None]:
            nxt = None
            if k is not None:
                start, stop = sweep.chunk_range(k)
                nxt = (k, start, stop, *sweep.dispatch(start, stop))
            if pending is not None:
                pk, pstart, pstop, host, results = pending
                _write_atomic(sweep.to_table(pstart, pstop, host, results), chunk_path(out, pk))
                bar.advance(task, pstop - pstart)
                if throttle:
                    time.sleep(throttle)  # only for tests/demos of interruption
            pending = nxt
    seconds = time.perf_counter() - t0
    return SweepStats(sweep.n_configs, total - skipped, skipped, seconds, chunks)


def missing_chunks(out: Path | str) -> list[int]:
    manifest = read_manifest(out)
    return [k for k in range(manifest["n_chunks"]) if not chunk_path(Path(out), k).exists()]


def iter_sweep(out: Path | str, columns: Sequence[str] | None = None) -> Iterator[Any]:
    """The chunks of a finished sweep, in order, as `pyarrow.Table`s.

    Raises:
        InputError: if a chunk is missing (the sweep did not finish).
    """
    import pyarrow.parquet as pq

    out = Path(out)
    missing = missing_chunks(out)
    if missing:
        shown = ", ".join(map(str, missing[:5])) + (", ..." if len(missing) > 5 else "")
        raise InputError(
            f"{out}: {len(missing)} chunk(s) missing ({shown}): the sweep did not finish; rerun it with --resume"
        )
    n = read_manifest(out)["n_chunks"]
    for k in range(n):
        yield pq.read_table(chunk_path(out, k), columns=list(columns) if columns is not None else None)


def read_sweep(out: Path | str, columns: Sequence[str] | None = None):
    """The whole table of a finished sweep (rows in config order)."""
    import pyarrow as pa

    return pa.concat_tables(list(iter_sweep(out, columns)))


# --- Pareto fronts --------------------------------------------------------------------


def pareto_mask(x: np.ndarray, y: np.ndarray, maximize_x: bool = False, maximize_y: bool = False) -> np.ndarray:
    """Which points no other point dominates (NaNs never are on the front).

    A point dominates another when it is at least as good in both coordinates and
    better in one; of identical points the first is kept.

    Examples:
        >>> import numpy as np, costmodel.sweep as sw
        >>> sw.pareto_mask(np.array([1.0, 2, 3, 2]), np.array([3.0, 1, 0.5, 2])).tolist()
        [True, True, True, False]
    """
    x = np.asarray(x, np.float64) * (-1.0 if maximize_x else 1.0)
    y = np.asarray(y, np.float64) * (-1.0 if maximize_y else 1.0)
    ok = np.isfinite(x) & np.isfinite(y)
    order = np.lexsort((np.arange(len(x)), y, x))  # by x, then y, then position
    order = order[ok[order]]
    ys = y[order]
    best = np.minimum.accumulate(ys)
    keep = np.ones(len(order), bool)
    keep[1:] = ys[1:] < best[:-1]
    mask = np.zeros(len(x), bool)
    mask[order[keep]] = True
    return mask


def pareto_front(
    out: Path | str,
    x: str,
    y: str,
    *,
    maximize_x: bool = False,
    maximize_y: bool = False,
    feasible_only: bool = True,
    sample: int = 0,
):
    """The Pareto front of a finished sweep over two columns, chunk by chunk.

    Memory holds one chunk plus the front so far (the front of a union is the front
    of the fronts of its parts).

    Args:
        out: the sweep folder.
        x, y: result or config columns.
        maximize_x, maximize_y: which way each column is better.
        feasible_only: only rows with `feasible`.
        sample: also return about this many (x, y) points of all rows, for plotting.

    Returns:
        (front table sorted by x, sampled x, sampled y, rows considered).
    """
    import pyarrow as pa

    manifest = read_manifest(out)
    stride = max(1, manifest["n_configs"] // sample) if sample else 0
    front = None
    xs, ys = [], []
    considered = 0
    for t in iter_sweep(out):
        for col in (x, y):
            if col not in t.column_names:
                raise InputError(f"{out}: column {col!r}: not in the sweep; expected one of {t.column_names}")
        if feasible_only:
            t = t.filter(t.column("feasible"))
        considered += t.num_rows
        if stride and t.num_rows:
            xs.append(t.column(x).to_numpy()[::stride])
            ys.append(t.column(y).to_numpy()[::stride])
        cand = t if front is None else pa.concat_tables([front, t])
        mask = pareto_mask(cand.column(x).to_numpy(), cand.column(y).to_numpy(), maximize_x, maximize_y)
        front = cand.filter(pa.array(mask))
    assert front is not None
    order = np.argsort(front.column(x).to_numpy() * (-1.0 if maximize_x else 1.0), kind="stable")
    front = front.take(pa.array(order))
    cat = lambda parts: np.concatenate(parts) if parts else np.zeros(0)
    return front, cat(xs), cat(ys), considered


def plot_pareto(front, xs, ys, x: str, y: str, path: Path | str, title: str = "") -> None:
    """Writes a PNG: sampled configs in grey, the front in colour."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fx, fy = front.column(x).to_numpy(), front.column(y).to_numpy()
    fig, ax = plt.subplots(figsize=(6.4, 4.8), dpi=120)
    if len(xs):
        ax.scatter(xs, ys, s=2, c="0.75", label="configs (sample)", rasterized=True)
    ax.plot(fx, fy, "-o", c="tab:red", ms=3, lw=1.2, label=f"Pareto front ({len(fx)})")
    for axis, v in ((ax.xaxis, np.concatenate([xs, fx])), (ax.yaxis, np.concatenate([ys, fy]))):
        v = v[np.isfinite(v)]
        if len(v) and v.min() > 0 and v.max() / v.min() > 100:
            (ax.set_xscale if axis is ax.xaxis else ax.set_yscale)("log")
    ax.set_xlabel(x)
    ax.set_ylabel(y)
    ax.set_title(title)
    ax.legend(loc="best", fontsize=8)
    ax.grid(True, alpha=0.3)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
