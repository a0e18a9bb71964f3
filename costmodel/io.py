"""The edge of the core: presets and files in, validated and converted to SI.

Everything the tool reads passes through here: model presets and Hugging Face
`config.json` files, chip presets and chip files, technology constants and number
formats. A bad value raises `InputError` naming the file, the field, the value and
what was expected; the core never sees a raw dict.
"""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path
from typing import Any

import jax.numpy as jnp
import tomllib

from ._area import Technology
from ._chip import Chip, make_chip
from ._workload import PRECISIONS, Model, Scenario


class InputError(ValueError):
    """Bad user input: the message names the file, field, value and expectation."""


def data_dir() -> Path:
    """The folder of shipped data (`data/` in a checkout, `costmodel/_data` in a wheel)."""
    here = Path(__file__).resolve().parent
    for candidate in (here.parent / "data", here / "_data"):
        if (candidate / "models.toml").exists():
            return candidate
    raise InputError(f"shipped data not found next to {here}: expected data/models.toml")


def load_toml(path: Path | str) -> dict[str, Any]:
    path = Path(path)
    try:
        with open(path, "rb") as f:
            return tomllib.load(f)
    except FileNotFoundError:
        raise InputError(f"{path}: file not found") from None
    except IsADirectoryError:
        raise InputError(f"{path}: is a folder, expected a TOML file") from None
    except tomllib.TOMLDecodeError as e:
        raise InputError(f"{path}: not valid TOML ({e})") from None
    except UnicodeDecodeError:
        raise InputError(f"{path}: not a UTF-8 text file") from None


def atomic_write(path: Path | str, text: str) -> None:
    """Writes `text` to `path` through a temporary file and a rename, so that an
    interruption never leaves a partial file behind."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        tmp.write_text(text)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


# --- field checking -------------------------------------------------------------

MAX_NUMBER = 1e15
"""Largest magnitude a number in a data file may have (in the file's own units): any
bigger value is a unit slip, and after conversion to SI (x1e12 at most) it must still
be finite in float32 (max 3.4e38)."""

_KINDS = {
    "positive": ("a number > 0", lambda v: v > 0),
    "nonneg": ("a number >= 0", lambda v: v >= 0),
    "fraction": ("a number in (0, 1]", lambda v: 0 < v <= 1),
    "count": ("a whole number >= 1", lambda v: v >= 1 and float(v).is_integer()),
    "wholenonneg": ("a whole number >= 0", lambda v: v >= 0 and float(v).is_integer()),
    "overlap": ("a number >= 1", lambda v: v >= 1),
    "unit": ("a number in [0, 1]", lambda v: 0 <= v <= 1),
}


def check_table(
    table: Any,
    where: str,
    required: dict[str, str],
    optional: dict[str, str] | None = None,
    strings: tuple[str, ...] = (),
    tables: tuple[str, ...] = (),
) -> dict[str, Any]:
    """Validates a TOML table: known keys only, required present, values of their kind.

    Args:
        table: the parsed table.
        where: "file: section" prefix for messages.
        required / optional: field name -> kind (a key of `_KINDS`).
        strings: fields that must be strings.
        tables: fields that must be tables (checked by the caller).

    Returns:
        The table with numbers as floats.
    """
    optional = optional or {}
    if not isinstance(table, dict):
        raise InputError(f"{where}: expected a table, got {table!r}")
    known = set(required) | set(optional) | set(strings) | set(tables)
    for key in table:
        if key not in known:
            raise InputError(f"{where}: unknown field {key!r}; expected one of {sorted(known)}")
    for key in required:
        if key not in table:
            raise InputError(f"{where}: missing field {key!r} ({_KINDS[required[key]][0]})")
    out = {}
    for key, value in table.items():
        if key in strings:
            if not isinstance(value, str):
                raise InputError(f"{where}: field {key!r} = {value!r}: expected a string")
            out[key] = value
        elif key in tables:
            out[key] = value
        else:
            kind = required.get(key) or optional[key]
            text, ok = _KINDS[kind]
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not abs(value) <= MAX_NUMBER:
                raise InputError(f"{where}: field {key!r} = {value!r}: expected {text} (at most {MAX_NUMBER:g})")
            if not ok(value):
                raise InputError(f"{where}: field {key!r} = {value!r}: expected {text}")
            out[key] = float(value)
    return out


# --- number formats -------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Format:
    name: str
    bytes_per_element: float
    precision: int
    source: str


def formats() -> dict[str, Format]:
    """Weight/KV number formats by name (`data/formats.toml`)."""
    path = data_dir() / "formats.toml"
    out = {}
    for name, t in load_toml(path)["formats"].items():
        t = check_table(t, f"{path}: formats.{name}", {"bits_per_element": "positive"}, strings=("precision", "source"))
        out[name] = Format(name, t["bits_per_element"] / 8, PRECISIONS.index(t["precision"]), t["source"])
    return out


def get_format(name: str, what: str = "format") -> Format:
    table = formats()
    if name not in table:
        raise InputError(f"{what} {name!r}: unknown format; expected one of {sorted(table)}")
    return table[name]


# --- models ---------------------------------------------------------------------

_MODEL_FIELDS = {
    "n_layers": "count",
    "d_model": "count",
    "n_heads": "count",
    "d_ff": "count",
    "vocab": "count",
}
_MODEL_OPTIONAL = {
    "n_kv_heads": "count",
    "head_dim": "count",
    "ffn_matrices": "count",
    "tied_embeddings": "wholenonneg",
    "n_experts": "wholenonneg",
    "top_k": "wholenonneg",
    "n_shared_experts": "wholenonneg",
    "n_sliding_layers": "wholenonneg",
    "window": "wholenonneg",
}


def _model_from_table(t: dict[str, Any], where: str, name: str) -> Model:
    t = check_table(t, where, _MODEL_FIELDS, _MODEL_OPTIONAL, strings=("source", "name"))
    t.pop("source", None)
    t.pop("name", None)
    if t.get("n_sliding_layers", 0) > t["n_layers"]:
        raise InputError(
            f"{where}: field 'n_sliding_layers' = {t['n_sliding_layers']:g}: expected <= n_layers ({t['n_layers']:g})"
        )
    if t.get("n_kv_heads", t["n_heads"]) > t["n_heads"]:
        raise InputError(f"{where}: field 'n_kv_heads' = {t['n_kv_heads']:g}: expected <= n_heads ({t['n_heads']:g})")
    if t.get("n_experts", 0) > 0 and not 1 <= t.get("top_k", 0) <= t["n_experts"]:
        raise InputError(
            f"{where}: field 'top_k' = {t.get('top_k', 0):g}: expected 1..n_experts ({t['n_experts']:g}) for a MoE model"
        )
    if t.get("n_sliding_layers", 0) > 0 and t.get("window", 0) < 1:
        raise InputError(
            f"{where}: field 'window' = {t.get('window', 0):g}: expected >= 1 when there are sliding layers"
        )
    del name
    return Model(**t)


def model_presets() -> dict[str, dict[str, Any]]:
    return load_toml(data_dir() / "models.toml")["models"]


def model_preset(name: str) -> Model:
    """A model preset by id (see `costmodel presets`)."""
    presets = model_presets()
    if name not in presets:
        raise InputError(
            f"model {name!r}: unknown preset; expected one of {sorted(presets)} or a path to a config.json"
        )
    return _model_from_table(presets[name], f"{data_dir() / 'models.toml'}: models.{name}", name)


def model_from_hf_config(path: Path | str) -> Model:
    """A model from a Hugging Face `config.json` (Llama, Mistral/Mixtral, Qwen2, Gemma-2 keys)."""
    path = Path(path)
    try:
        cfg = json.loads(path.read_text())
    except FileNotFoundError:
        raise InputError(f"{path}: file not found") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise InputError(f"{path}: not valid JSON ({e})") from None
    if not isinstance(cfg, dict):
        raise InputError(f"{path}: expected a JSON object, got {type(cfg).__name__}")
    if "text_config" in cfg and isinstance(cfg["text_config"], dict):
        cfg = {**cfg, **cfg["text_config"]}

    def number(key, v):
        # Checked before any arithmetic on it: a list or string must not reach `//`.
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not abs(v) <= MAX_NUMBER:
            raise InputError(f"{path}: field {key!r} = {v!r}: expected a positive integer")
        return v

    def need(key, *alts):
        for k in (key, *alts):
            if k in cfg and cfg[k] is not None:
                return number(k, cfg[k])
        raise InputError(f"{path}: missing field {key!r} (a positive integer)")

    def get(key, default):
        v = cfg.get(key)
        return default if v is None else number(key, v)

    n_layers = need("num_hidden_layers", "n_layer", "num_layers")
    d_model = need("hidden_size", "n_embd", "d_model")
    n_heads = need("num_attention_heads", "n_head")
    table: dict[str, Any] = {
        "n_layers": n_layers,
        "d_model": d_model,
        "n_heads": n_heads,
        "n_kv_heads": get("num_key_value_heads", n_heads),
        "d_ff": need("intermediate_size", "n_inner", "ffn_dim"),
        "vocab": need("vocab_size"),
        "tied_embeddings": int(bool(get("tie_word_embeddings", False))),
    }
    if cfg.get("head_dim") is not None:
        table["head_dim"] = cfg["head_dim"]
    experts = cfg.get("num_local_experts") or cfg.get("num_experts") or 0
    if experts:
        table["n_experts"] = experts
        table["top_k"] = need("num_experts_per_tok")
        if cfg.get("moe_intermediate_size"):
            table["d_ff"] = number("moe_intermediate_size", cfg["moe_intermediate_size"])
        shared = get("shared_expert_intermediate_size", 0)
        if shared and table["d_ff"]:
            table["n_shared_experts"] = shared / table["d_ff"]
    window = cfg.get("sliding_window")
    layer_types = cfg.get("layer_types")
    if isinstance(layer_types, list):
        sliding = sum(1 for x in layer_types if "sliding" in str(x))
    elif cfg.get("model_type") in ("gemma2", "gemma3_text"):
        sliding = n_layers // 2 if cfg.get("model_type") == "gemma2" else n_layers * 5 // 6
    elif cfg.get("model_type") in ("qwen2", "qwen2_moe"):
        sliding = (n_layers - get("max_window_layers", n_layers)) if cfg.get("use_sliding_window") else 0
    else:
        sliding = n_layers if window else 0
    if window and sliding:
        table["n_sliding_layers"] = sliding
        table["window"] = window
    for key in ("n_layers", "d_model", "n_heads", "n_kv_heads", "d_ff", "vocab"):
        v = table[key]
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise InputError(f"{path}: field for {key!r} = {v!r}: expected a positive integer")
    return _model_from_table(table, str(path), path.parent.name or path.stem)


def load_model(spec: str) -> Model:
    """A model from a preset id, a Hugging Face `config.json`, or a TOML file of `Model` fields."""
    p = Path(spec)
    if spec in model_presets():
        return model_preset(spec)
    if p.suffix == ".json" or (p.is_dir() and (p / "config.json").exists()):
        return model_from_hf_config(p / "config.json" if p.is_dir() else p)
    if p.suffix == ".toml":
        return _model_from_table(load_toml(p), str(p), p.stem)
    return model_preset(spec)  # raises the unknown-preset error


# --- chips ----------------------------------------------------------------------

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
_FLOP_ENERGY_SCALE = (3.0, 1.0, 0.5, 0.25)
"""Energy per FLOP relative to 16-bit, per precision class (f32, 16, 8, 4): Horowitz,
ISSCC 2014, 45 nm: FP32 mult+add 4.6 pJ vs FP16 1.5 pJ (~3x); 8-bit between INT8
(0.23 pJ) and FP8 (assumption: half of 16-bit); 4-bit assumed half of 8-bit."""
DEFAULT_OVERLAP = 64.0
"""p of the channel p-norm for an uncalibrated chip: close to a full overlap (the
DMA engines of a GPU stream while the SMs compute)."""


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
    from ._placement import POLICIES

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
    peaks = [t.get("peak_tflops_f32", p16 / 2), p16, p8, t.get("peak_tflops_4", p8)]
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
        energy_per_flop=[e16 * s for s in _FLOP_ENERGY_SCALE],
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


# --- technology -----------------------------------------------------------------

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
}
_DRAM_TECH = {
    "stack_capacity_GB": "positive",
    "stack_bandwidth_GBps": "positive",
    "energy_pj_per_byte": "positive",
    "latency_ns": "nonneg",
    "phy_area_mm2_per_stack": "nonneg",
}


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
        flops_per_area=f([f16 / 4, f16, f8, f8]),
        energy_per_flop=f([e16 * s for s in _FLOP_ENERGY_SCALE]),
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
        stack_capacity=f(dram["stack_capacity_GB"] * 1e9),
        stack_bandwidth=f(dram["stack_bandwidth_GBps"] * 1e9),
        dram_energy_per_byte=f(dram["energy_pj_per_byte"] * 1e-12),
        dram_latency=f(dram["latency_ns"] * 1e-9),
        phy_area=f(dram["phy_area_mm2_per_stack"] * mm2),
        io_area=f(io["fixed_area_mm2"] * mm2),
    )


# --- scenarios ------------------------------------------------------------------


MAX_TOKENS = 1e12
"""Largest batch, context or prefix a scenario takes: beyond it the KV cache's bytes
overflow float32 for the largest models."""


def make_scenario(
    *,
    batch: float = 1,
    context: float = 4096,
    prefix: float = 0,
    weights: str = "bf16",
    kv: str = "bf16",
    where: str = "scenario",
) -> Scenario:
    """A `Scenario` from user-facing values, validated (formats by name)."""
    for key, value, lo in (("batch", batch, 1), ("context", context, 0), ("prefix", prefix, 0)):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not lo <= value <= MAX_TOKENS:
            raise InputError(f"{where}: {key} = {value!r}: expected a number >= {lo} and <= {MAX_TOKENS:g}")
    if prefix > context:
        raise InputError(f"{where}: prefix = {prefix!r}: expected <= context ({context!r})")
    w = get_format(weights, f"{where}: weights")
    k = get_format(kv, f"{where}: kv")
    return Scenario(
        batch=batch,
        context=context,
        prefix=prefix,
        weight_bytes=w.bytes_per_element,
        kv_bytes=k.bytes_per_element,
        weight_precision=w.precision,
        kv_precision=k.precision,
    )


# --- workload mixes ---------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class MixPoint:
    name: str
    model: str
    batch: float
    context: float
    weights: str
    kv: str
    weight: float
    prefix: float = 0.0


def load_mix(path: Path | str | None = None) -> list[MixPoint]:
    """A workload mix (`data/workloads.toml` by default): points with weights."""
    path = Path(path) if path is not None else data_dir() / "workloads.toml"
    data = load_toml(path)
    for key in data:
        if key != "workloads":
            raise InputError(f"{path}: unknown field {key!r}; expected only [[workloads]] tables")
    points = data.get("workloads")
    if not isinstance(points, list) or not points:
        raise InputError(f"{path}: expected a non-empty [[workloads]] array")
    out = []
    for i, t in enumerate(points):
        where = f"{path}: workloads[{i}]"
        t = check_table(
            t,
            where,
            {"batch": "positive", "context": "nonneg", "weight": "positive"},
            {"prefix": "nonneg"},
            strings=("name", "model", "weights", "kv"),
        )
        for key in ("name", "model"):
            if key not in t:
                raise InputError(f"{where}: missing field {key!r} (a string)")
        make_scenario(
            batch=t["batch"],
            context=t["context"],
            prefix=t.get("prefix", 0.0),
            weights=t.get("weights", "bf16"),
            kv=t.get("kv", "bf16"),
            where=where,
        )
        out.append(
            MixPoint(
                t["name"],
                t["model"],
                t["batch"],
                t["context"],
                t.get("weights", "bf16"),
                t.get("kv", "bf16"),
                t["weight"],
                t.get("prefix", 0.0),
            )
        )
    return out
