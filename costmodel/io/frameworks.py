"""Serving-framework profiles (`data/frameworks.toml`): what each multiplier is and
which measurement rows it was fitted on."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from .errors import InputError
from .files import data_dir, named_tables
from .formats import KernelTables, formats
from .schema import check_table


MULTIPLIERS = ("memory_efficiency", "compute_efficiency", "kernel_overhead", "link_latency")
"""The multipliers of a framework profile, the first entries of its log vector."""

IN_FLIGHT = "bytes_in_flight_KB"
"""The profile's kernel concurrency: bytes its weights' decode kernels keep in flight
per parallel unit (a GPU's SM), kB; the fifth entry of the log vector (the attention
kernels' K/V is not bound: `costmodel.class_in_flight`). Absent:
`UNBOUNDED_IN_FLIGHT_KB`."""

HALF_RATE = "half_rate_rows"
"""The profile's weight matmuls' half-rate length (Hockney's n½ in rows per weight
element, `Chip.half_rate_rows`): a framework's GEMM library tiles a batch's rows, and a
matmul with m rows runs at `m / (m + n½ (1 - 1/m))` of the FLOP rate; decode attention
keeps the chip's own (`Chip.attention_half_rate_rows`). The last entry of the log
vector. Given, it replaces the chip's own; absent: `CHIP_HALF_RATE` (the chip's
own stands)."""

PROFILE_FIELDS = (*MULTIPLIERS, IN_FLIGHT, HALF_RATE)
"""Every number of a framework profile's log vector, in its order."""

HOST_FIELDS = ("host_step_us", "host_per_sequence_us")
"""The serving stack's host time per step and per sequence per step that it does not
hide behind the device, µs (`Chip.host_step`, `Chip.host_per_sequence`): additive,
>= 0, one absent of two is 0. Given, they replace the chip's own (a framework owns its
host loop); a profile with neither leaves the chip's own. Fitted on serving rows (`costmodel.validate_serving.fit_host`), not
in the log vector."""

OFFLINE_HOST = "host_per_sequence_offline_us"
"""Host time per running sequence per step of the engine run offline (`inference =
"offline"` rows: vLLM's `LLM.generate`, its `benchmark_throughput.py` and
`benchmark_latency.py`: the whole batch run in the client's process and the outputs returned
when it ends), µs: it replaces `host_per_sequence_us` there, which prices the engine serving
online, every token formatted and streamed to its client as it is generated (vLLM v0.6.0
moved its HTTP API server to its own process and called it still short of "as efficient as
offline batching inference": https://blog.vllm.ai/2024/09/05/perf-update.html). Absent: the
online value."""

TP_HOST = "host_per_sequence_tp_us"
"""Host time per running sequence per step added when the system splits each layer over
more than one chip (`Chip.host_per_sequence_tp`), µs: vLLM's V0 engine prepares a step's
inputs on its driver process and broadcasts them to the other tensor-parallel workers
(https://blog.vllm.ai/2025/01/27/v1-alpha-release.html, section 4). Absent: 0."""

SERVED_PER_SEQUENCE = HOST_FIELDS[1]
"""The online host time per sequence (`host_per_sequence_us`): an offline run prices its own
(`OFFLINE_HOST`) where the profile gives one, and does not use it."""

ENGINE_HOST_FIELDS = (OFFLINE_HOST, TP_HOST)
"""The host times fitted on static-batch decode rows run offline
(`costmodel.validate.fit_engine_host`), not in the log vector."""

INFERENCE_MODES = ("online", "offline")
"""How a measurement row's engine ran (`inference`): `online` (the default), serving requests
and streaming each token to its client as it is generated (its HTTP API server, or an
in-process async engine); `offline`, the whole batch run in the client's process and the
outputs returned when it ends (vLLM's `LLM.generate`; `OFFLINE_HOST`)."""

KV_REREADS = "attention_kv_rereads"
"""How far the framework's decode-attention kernels stream each K/V head once per query
head of its group (`Chip.attention_kv_rereads`, in [0, 1]); absent: the chip's own. Set
from the framework's kernel design (a source), not fitted, and not in the log vector."""

KV_REREADS_BY_KV = "attention_kv_rereads_by_kv"
"""The decode-attention K/V re-reads (`KV_REREADS`) of the kernel the engine runs over a
cache of a given format, where it runs another kernel for that format than for the
others, a table of KV format -> value in [0, 1]: vLLM V0 runs FlashAttention over a
16-bit cache and falls back to its own PagedAttention kernel, one thread block per query
head, over an FP8 one. A format absent takes `KV_REREADS`. From the engine's kernel
selection (a source), not fitted, and not in the log vector."""

REREADS_CACHED = "attention_rereads_cached"
"""The share of the framework's decode-attention K/V re-reads the chip's on-chip cache
serves (`Chip.attention_rereads_cached`, in [0, 1]); absent: the chip's own. From the
kernel's launch order (a source), not fitted, and not in the log vector."""

HEADS_PER_BLOCK = "attention_heads_per_block"
"""Query heads of a grouped-query group one of the framework's decode-attention thread
blocks serves from one read of their K/V head (`Chip.attention_heads_per_block`, a whole
number >= 1); absent: the chip's own. Set from the framework's kernel source, not fitted,
and not in the log vector."""

SERIAL_KERNELS = "serial_kernels"
"""Whether the engine runs a layer's kernels one after another (`Chip.serial_kernels`, in
[0, 1]: 1 for one CUDA stream, where a compute-bound GEMM cannot hide a memory-bound
attention kernel); absent: the chip's own. From the engine's execution model (a source),
not fitted, and not in the log vector."""

MEMORY_FRACTION = "memory_fraction"
"""The share of each chip's DRAM the engine allocates to the model's weights and KV
cache (vLLM's `--gpu-memory-utilization`, 0.9 by default), in (0, 1]: the rest stays
free for activations, the CUDA context and other processes, so fewer sequences fit.
Absent: all of it (1). From the engine's documented default, not fitted, and not in the
log vector."""

DEQUANT = "dequant_ops"
"""ALU instructions per weight element the framework's kernels spend unpacking each
weight format before the matmul (`Scenario.weight_dequant_ops`), a table of format
name -> count; a format absent is used as stored (0). Counted from the kernels' source,
not fitted, and not in the log vector."""

KV_DEQUANT = "kv_dequant_ops"
"""ALU instructions per K/V element the framework's decode-attention kernels spend
unpacking each quantised KV-cache format every time a thread block reads it
(`Scenario.kv_dequant_ops`), a table of format name -> count; a format absent is used as
stored (0). Counted from the kernels' source, not fitted, and not in the log vector."""

COPY_ROWS = "dequant_copy_rows"
"""Rows (query tokens through the weights in one step) above which the framework's
kernel for a weight format first unpacks the weights into a 16-bit copy in DRAM and
runs a 16-bit GEMM over it (`Scenario.weight_copy_rows`, `costmodel.weight_copy_bytes`),
a table of format name -> rows; a format absent never copies. vLLM's GPTQ kernel: 50
(`MAX_Q_GEMM_ROWS`), its AWQ kernel: 255 (from 256 rows). From the kernels' source, not
fitted, and not in the log vector."""

DEQUANT_ROWS = "dequant_rows"
"""Rows of a step each unpacking of a weight format's kernel serves
(`Scenario.weight_dequant_rows`, `costmodel.unpack_passes`): a kernel that tiles the
rows unpacks the weights once per tile, a table of format name -> rows; a format absent
is unpacked once per step. vLLM's GPTQ kernel: 8, its AWQ GEMM: 16. From the kernels'
source, not fitted, and not in the log vector."""

UNBOUNDED_IN_FLIGHT_KB = 1e9
"""The bytes in flight of a profile that does not bound them (1 TB per unit: no
memory's latency limits such a stream)."""

CHIP_HALF_RATE = 1e-9
"""The half-rate rows of a profile that gives none: below `PROFILE_HALF_RATE_FLOOR`, so
the chip's own `half_rate_rows` stands (`costmodel.apply_multipliers`)."""

PROFILE_HALF_RATE_FLOOR = 1e-6
"""Half-rate rows at or below this in a profile's vector mean "the chip's own"."""


@dataclasses.dataclass(frozen=True)
class Framework(KernelTables):
    """A serving-framework efficiency profile (`data/frameworks.toml`).

    Attributes:
        name: profile id.
        multipliers: the `PROFILE_FIELDS`, each > 0: the four `MULTIPLIERS`, the
            bytes in flight per unit (kB; `UNBOUNDED_IN_FLIGHT_KB` when the file gives
            none), then the half-rate rows (`CHIP_HALF_RATE` when it gives none).
        host: the `HOST_FIELDS`, µs, each >= 0; None when the profile gives neither
            (the chip's own host time stands).
        host_offline: `OFFLINE_HOST`, µs, or None (the online value stands).
        host_tp: `TP_HOST`, µs, or None (the chip's own).
        max_batch: the most sequences the engine's scheduler runs in one step (vLLM's
            `--max-num-seqs`), or None (no cap but the memory).
        fit: which fields the fit may move (the others keep the profile's values:
            multipliers of 1, the bytes in flight unbounded and the half-rate rows the
            chip's own where it gives none).
        fitted_on: measurement row ids the profile was fitted on.
        base: for a backend variant (e.g. `llama.cpp-metal`), the framework name a user
            asks for; the variant is used on the chips it lists.
        chips: chip ids a backend variant applies to.
        source: how the profile was obtained.
        kv_rereads: `Chip.attention_kv_rereads` of the framework's decode-attention
            kernels (1: one block per query head streams its group's K/V), or None
            (the chip's own).
        kv_rereads_by_kv: (KV format, `Chip.attention_kv_rereads`) pairs for the formats
            whose cache the engine reads with another attention kernel
            (`KV_REREADS_BY_KV`).
        rereads_cached: `Chip.attention_rereads_cached` of the framework's kernels
            (`REREADS_CACHED`), or None (the chip's own).
        heads_per_block: `Chip.attention_heads_per_block` of the framework's
            decode-attention kernels (`HEADS_PER_BLOCK`), or None (the chip's own).
        carried: (field, profile) pairs: fields whose value is another profile's
            fitted one, copied (vllm-0.6-rocm's host times are vllm-0.6's); the loader
            checks the copy against the source.
        dequant_ops: (format, instructions per weight element) pairs (`DEQUANT`).
        kv_dequant_ops: (KV format, instructions per K/V element read) pairs
            (`KV_DEQUANT`).
        copy_rows: (format, rows) pairs: above that many rows in a step the kernel
            for the format works on a 16-bit copy of the weights (`COPY_ROWS`).
        dequant_rows: (format, rows) pairs: the rows each unpacking serves
            (`DEQUANT_ROWS`).
        memory_fraction: the share of each chip's DRAM the engine allocates to weights
            and KV cache (`MEMORY_FRACTION`).
        serial_kernels: `Chip.serial_kernels` of the engine (`SERIAL_KERNELS`), or None
            (the chip's own).
    """

    name: str
    multipliers: tuple[float, float, float, float, float, float]
    fit: tuple[str, ...]
    fitted_on: tuple[str, ...]
    base: str | None
    chips: tuple[str, ...]
    source: str
    host: tuple[float, float] | None = None
    max_batch: int | None = None
    carried: tuple[tuple[str, str], ...] = ()
    kv_rereads: float | None = None
    heads_per_block: float | None = None
    dequant_ops: tuple[tuple[str, float], ...] = ()
    memory_fraction: float = 1.0
    serial_kernels: float | None = None
    kv_dequant_ops: tuple[tuple[str, float], ...] = ()
    host_offline: float | None = None
    host_tp: float | None = None
    kv_rereads_by_kv: tuple[tuple[str, float], ...] = ()
    rereads_cached: float | None = None
    copy_rows: tuple[tuple[str, float], ...] = ()
    dequant_rows: tuple[tuple[str, float], ...] = ()

    def rereads(self, kv: str | None = None) -> float | None:
        """`Chip.attention_kv_rereads` of the attention kernel the engine runs over a
        cache of format `kv` (`KV_REREADS_BY_KV`, else `KV_REREADS`); None where the
        profile gives neither (the chip's own)."""
        return dict(self.kv_rereads_by_kv).get(kv, self.kv_rereads) if kv is not None else self.kv_rereads

    def host_us(self, inference: str = "online") -> tuple[float, float] | None:
        """The profile's (`host_step`, `host_per_sequence`), µs, for an engine run as
        `inference` says (`INFERENCE_MODES`): offline, its `OFFLINE_HOST` where given;
        None without host time."""
        if self.host is None:
            return None
        if inference == "offline" and self.host_offline is not None:
            return (self.host[0], self.host_offline)
        return self.host

    def value(self, field: str) -> float | None:
        """The profile's value of one of its fields (`PROFILE_FIELDS`, `HOST_FIELDS`;
        None for a host field of a profile with no host time)."""
        if field in HOST_FIELDS:
            return None if self.host is None else self.host[HOST_FIELDS.index(field)]
        if field == OFFLINE_HOST:
            return self.host_offline
        if field == TP_HOST:
            return self.host_tp
        return self.multipliers[PROFILE_FIELDS.index(field)]


def with_carried(frameworks: dict[str, Framework]) -> dict[str, Framework]:
    """The profiles with every carried field of their vector (`Framework.carried`, a
    `PROFILE_FIELDS` entry) set to its source's value, a chain of carries followed to its
    end: what a refit of the sources hands on (benchmarks/validate_ablation.py,
    benchmarks/calibration_gpu.py). Host fields are not in the vector and are left."""
    out = dict(frameworks)
    for _ in range(len(out)):
        changed = False
        for name, f in out.items():
            m = list(f.multipliers)
            for key, source in f.carried:
                if key in PROFILE_FIELDS:
                    i = PROFILE_FIELDS.index(key)
                    if m[i] != out[source].multipliers[i]:
                        m[i] = out[source].multipliers[i]
                        changed = True
            out[name] = dataclasses.replace(f, multipliers=tuple(m))
        if not changed:
            break
    return out


def frameworks_path() -> Path:
    return data_dir() / "frameworks.toml"


def load_frameworks(path: Path | str | None = None) -> dict[str, Framework]:
    """All framework profiles, validated."""
    path = Path(path) if path is not None else frameworks_path()
    data = named_tables(path, "frameworks")
    out = {}
    for name, t in data.items():
        where = f"{path}: frameworks.{name}"
        t = check_table(
            t,
            where,
            {k: "positive" for k in MULTIPLIERS},
            {
                IN_FLIGHT: "positive",
                HALF_RATE: "positive",
                "max_batch": "count",
                KV_REREADS: "unit",
                REREADS_CACHED: "unit",
                HEADS_PER_BLOCK: "count",
                SERIAL_KERNELS: "unit",
                MEMORY_FRACTION: "fraction",
                **{k: "nonneg" for k in HOST_FIELDS + ENGINE_HOST_FIELDS},
            },
            strings=("source", "base", "description"),
            tables=(
                "fit",
                "fitted_on",
                "chips",
                "carried",
                DEQUANT,
                KV_DEQUANT,
                KV_REREADS_BY_KV,
                COPY_ROWS,
                DEQUANT_ROWS,
            ),
        )
        lists = {}
        for key in ("fit", "fitted_on", "chips"):
            value = t.get(key, [])
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                raise InputError(f"{where}: field {key!r} = {value!r}: expected a list of strings")
            lists[key] = tuple(value)
        fields = PROFILE_FIELDS + HOST_FIELDS + ENGINE_HOST_FIELDS
        for key in lists["fit"]:
            if key not in fields:
                raise InputError(f"{where}: field 'fit' has {key!r}: expected names from {list(fields)}")
        if not t.get("source"):
            raise InputError(f"{where}: missing field 'source' (how the profile was obtained)")
        carried = t.get("carried", {})
        if not isinstance(carried, dict) or not all(isinstance(v, str) for v in carried.values()):
            raise InputError(f"{where}: field 'carried' = {carried!r}: expected a table of field = \"profile\"")
        for key in carried:
            if key not in fields or key in lists["fit"]:
                raise InputError(
                    f"{where}: field 'carried' has {key!r}: expected a field of {list(fields)} "
                    "that the profile does not fit itself"
                )
        if OFFLINE_HOST in t and not set(HOST_FIELDS) & set(t):
            raise InputError(
                f"{where}: field {OFFLINE_HOST!r} = {t[OFFLINE_HOST]:g}: expected with the online host time "
                f"({', '.join(HOST_FIELDS)}) it replaces offline"
            )
        dequant, kv_dequant = (_instruction_table(t, key, where) for key in (DEQUANT, KV_DEQUANT))
        rereads_by_kv = _format_table(
            t, KV_REREADS_BY_KV, where, lambda v: 0 <= v <= 1, "a share of re-reads in [0, 1]", "format = re-reads"
        )
        copy_rows, dequant_rows = (
            _format_table(t, key, where, lambda v: 1 <= v < float("inf"), "a number of rows >= 1", "format = rows")
            for key in (COPY_ROWS, DEQUANT_ROWS)
        )
        out[name] = Framework(
            name=name,
            multipliers=(
                *(t[k] for k in MULTIPLIERS),
                t.get(IN_FLIGHT, UNBOUNDED_IN_FLIGHT_KB),
                t.get(HALF_RATE, CHIP_HALF_RATE),
            ),
            host=(t.get(HOST_FIELDS[0], 0.0), t.get(HOST_FIELDS[1], 0.0)) if set(HOST_FIELDS) & set(t) else None,
            max_batch=int(t["max_batch"]) if "max_batch" in t else None,
            fit=lists["fit"],
            fitted_on=lists["fitted_on"],
            base=t.get("base"),
            chips=lists["chips"],
            source=t["source"],
            carried=tuple(sorted(carried.items())),
            kv_rereads=t.get(KV_REREADS),
            heads_per_block=float(t[HEADS_PER_BLOCK]) if HEADS_PER_BLOCK in t else None,
            dequant_ops=dequant,
            kv_dequant_ops=kv_dequant,
            memory_fraction=t.get(MEMORY_FRACTION, 1.0),
            serial_kernels=t.get(SERIAL_KERNELS),
            host_offline=t.get(OFFLINE_HOST),
            host_tp=t.get(TP_HOST),
            kv_rereads_by_kv=rereads_by_kv,
            rereads_cached=t.get(REREADS_CACHED),
            copy_rows=copy_rows,
            dequant_rows=dequant_rows,
        )
    for f in out.values():
        if f.base is not None and f.base not in out:
            raise InputError(f"{path}: frameworks.{f.name}: field 'base' = {f.base!r}: expected a framework name")
        for key, source in f.carried:
            where = f"{path}: frameworks.{f.name}: field 'carried'"
            if source not in out or key not in out[source].fit:
                raise InputError(f"{where} has {key} = {source!r}: expected a profile that fits {key!r}")
            if f.value(key) != out[source].value(key):
                raise InputError(
                    f"{where} has {key} = {source!r}: the profile's {key} = {f.value(key)!r} differs from "
                    f"{source}'s {out[source].value(key)!r}: expected the same value (copy the refitted one)"
                )
    return out


def framework_names(frameworks: dict[str, Framework] | None = None) -> list[str]:
    """The names a user can ask for (backend variants are chosen automatically)."""
    frameworks = frameworks if frameworks is not None else load_frameworks()
    return sorted(name for name, f in frameworks.items() if f.base is None)


def resolve_framework(name: str, chip_name: str, frameworks: dict[str, Framework] | None = None) -> Framework:
    """The profile for framework `name` on chip `chip_name` (a backend variant if one lists it)."""
    frameworks = frameworks if frameworks is not None else load_frameworks()
    if name not in frameworks or frameworks[name].base is not None:
        raise InputError(f"framework {name!r}: unknown; expected one of {framework_names(frameworks)}")
    for f in frameworks.values():
        if f.base == name and chip_name in f.chips:
            return f
    return frameworks[name]


def _instruction_table(t: dict, key: str, where: str) -> tuple[tuple[str, float], ...]:
    """A profile's table `key` (`DEQUANT`, `KV_DEQUANT`) of format = instructions per
    element, checked: formats of one kind, counts finite and >= 0."""
    return _format_table(
        t, key, where, lambda v: 0 <= v < float("inf"), "a number of instructions >= 0", "format = instructions"
    )


def _format_table(t: dict, key: str, where: str, ok, expected: str, shape: str) -> tuple[tuple[str, float], ...]:
    """A profile's table `key` of format = number, checked: formats of one kind, each
    number one `ok` accepts (`expected` says which)."""
    table = t.get(key, {})
    if not isinstance(table, dict):
        raise InputError(f"{where}: field {key!r} = {table!r}: expected a table of {shape}")
    known = formats()
    for fmt, value in table.items():
        if fmt not in known or known[fmt].plain is not None:
            raise InputError(
                f"{where}: field {key!r} has {fmt!r}: expected a format of one kind of "
                f"{sorted(k for k, f in known.items() if f.plain is None)} (a recipe of two is used as stored)"
            )
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not ok(value):
            raise InputError(f"{where}: field {key!r}: {fmt} = {value!r}: expected {expected}")
    return tuple(sorted((k, float(v)) for k, v in table.items()))
