"""Decode scenarios from user-facing values, and workload mixes (`data/workloads.toml`)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from .._core.workload import Scenario
from .errors import InputError
from .files import data_dir, load_toml
from .formats import get_format, plain_fields
from .schema import check_table


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
    micro_batches: float = 1,
    dequant_ops: float = 0.0,
    kv_dequant_ops: float = 0.0,
    copy_rows: float = 0.0,
    dequant_rows: float = 0.0,
    where: str = "scenario",
) -> Scenario:
    """A `Scenario` from user-facing values, validated (formats by name); `dequant_ops`:
    the framework's instructions per weight element to unpack `weights`
    (`Scenario.weight_dequant_ops`, `ChipInfo.dequant`); `kv_dequant_ops`: its attention
    kernels' per K/V element read of the cache `kv` (`Scenario.kv_dequant_ops`,
    `ChipInfo.kv_dequant`); `copy_rows`: the rows above which its kernel for `weights`
    works on a 16-bit copy (`Scenario.weight_copy_rows`, `ChipInfo.copy`; 0: never);
    `dequant_rows`: the rows each of its unpackings serves (`Scenario.weight_dequant_rows`,
    `ChipInfo.tile`; 0: once per step)."""
    for key, value, lo in (("batch", batch, 1), ("context", context, 0), ("prefix", prefix, 0)):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not lo <= value <= MAX_TOKENS:
            raise InputError(f"{where}: {key} = {value!r}: expected a number >= {lo} and <= {MAX_TOKENS:g}")
    if prefix > context:
        raise InputError(f"{where}: prefix = {prefix!r}: expected <= context ({context!r})")
    if (
        isinstance(micro_batches, bool)
        or not isinstance(micro_batches, (int, float))
        or not 1 <= micro_batches <= batch
    ):
        raise InputError(
            f"{where}: micro_batches = {micro_batches!r}: expected a number >= 1 and <= the batch ({batch!r}): "
            "each group holds at least one sequence"
        )
    w = get_format(weights, f"{where}: weights")
    k = get_format(kv, f"{where}: kv")
    if k.plain is not None:
        raise InputError(f"{where}: kv {kv!r}: a weight recipe (its attention in {k.plain}), not a KV-cache format")
    for key, value in (("dequant_ops", dequant_ops), ("kv_dequant_ops", kv_dequant_ops)):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < float("inf"):
            raise InputError(f"{where}: {key} = {value!r}: expected a number of instructions >= 0")
    for key, value in (("copy_rows", copy_rows), ("dequant_rows", dequant_rows)):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < float("inf"):
            raise InputError(f"{where}: {key} = {value!r}: expected a number of rows >= 0 (0: none)")
    if w.plain is not None and dequant_ops > 0:
        raise InputError(
            f"{where}: weights {weights!r} with {dequant_ops!r} instructions per weight to unpack: a recipe of two "
            "formats is used as stored (a framework's dequant_ops name one format)"
        )
    return Scenario(
        batch=batch,
        context=context,
        prefix=prefix,
        weight_bytes=w.bytes_per_element,
        kv_bytes=k.bytes_per_element,
        weight_precision=w.precision,
        kv_precision=k.precision,
        micro_batches=micro_batches,
        weight_dequant_ops=dequant_ops,
        kv_dequant_ops=kv_dequant_ops,
        weight_copy_rows=copy_rows,
        weight_dequant_rows=dequant_rows,
        **plain_fields(w),
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
