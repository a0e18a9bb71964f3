"""The published measurement table (`data/measurements/measurements.toml`): each row's
conditions and source, validated."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from .errors import InputError
from .files import data_dir, row_tables
from .frameworks import INFERENCE_MODES
from .scenarios import make_scenario
from .schema import check_table


GROUPS = ("batch1-gpu", "apple", "large-batch", "sram")
"""Groups the error is summarised over."""

STATUSES = ("fit", "test", "reference")
"""`fit`: used to fit a profile or an assumed chip number; `test`: held out and
scored; `reference`: shown with a prediction, not scored (the row says why)."""

METRICS = ("tokens_per_second_per_sequence", "output_tokens_per_second_per_chip")


@dataclasses.dataclass(frozen=True)
class Row:
    """One published measurement with its conditions (see the table's header)."""

    id: str
    group: str
    status: str
    chip: str
    framework: str
    model: str
    weights: str
    kv: str
    batch: float
    context: float
    input_tokens: float
    output_tokens: float
    tensor_parallel: int | None
    pipeline_parallel: int | None
    metric: str
    value: float
    tag: str
    source: str
    conditions: str
    reason: str
    blind: str = ""
    inference: str = "online"


def measurements_path() -> Path:
    return data_dir() / "measurements" / "measurements.toml"


def serving_table_path() -> Path:
    """The serving benchmarks' table (`costmodel.validate_serving` reads it)."""
    return data_dir() / "measurements" / "serving.toml"


def serving_row_ids() -> set[str]:
    """The ids of the serving table's rows (unvalidated: which rows a profile names)."""
    return {t["id"] for t in row_tables(serving_table_path()) if isinstance(t, dict) and "id" in t}


def load_rows(path: Path | str | None = None) -> list[Row]:
    """The measurement table, validated (every row has a source and known presets)."""
    path = Path(path) if path is not None else measurements_path()
    rows = row_tables(path)
    out: list[Row] = []
    seen = set()
    for i, t in enumerate(rows):
        where = f"{path}: rows[{i}]"
        t = check_table(
            t,
            where,
            {"batch": "positive", "value": "positive"},
            {
                "context": "nonneg",
                "input_tokens": "nonneg",
                "output_tokens": "count",
                "tensor_parallel": "count",
                "pipeline_parallel": "count",
            },
            strings=(
                "id",
                "group",
                "status",
                "chip",
                "framework",
                "model",
                "weights",
                "kv",
                "metric",
                "tag",
                "source",
                "conditions",
                "reason",
                "blind",
                "inference",
            ),
        )
        for key in ("id", "group", "status", "chip", "framework", "model", "metric", "source", "conditions"):
            if not t.get(key):
                raise InputError(f"{where}: missing field {key!r} (a non-empty string)")
        where = f"{path}: rows[{i}] ({t['id']})"
        if t["id"] in seen:
            raise InputError(f"{where}: field 'id' = {t['id']!r}: expected a unique id")
        seen.add(t["id"])
        t.setdefault("inference", "online")
        for key, allowed in (
            ("group", GROUPS),
            ("status", STATUSES),
            ("metric", METRICS),
            ("inference", INFERENCE_MODES),
        ):
            if t[key] not in allowed:
                raise InputError(f"{where}: field {key!r} = {t[key]!r}: expected one of {list(allowed)}")
        if t.get("blind") and t["status"] != "test":
            raise InputError(f"{where}: field 'blind' = {t['blind']!r}: a blind-check row is held out (status 'test')")
        if t["status"] == "reference" and not t.get("reason"):
            raise InputError(f"{where}: missing field 'reason' (why a reference row is not scored)")
        if t["metric"] == "output_tokens_per_second_per_chip":
            for key in ("input_tokens", "output_tokens"):
                if key not in t:
                    raise InputError(f"{where}: missing field {key!r} (needed by metric {t['metric']!r})")
        elif "context" not in t:
            raise InputError(f"{where}: missing field 'context' (mean tokens in the KV cache)")
        if ("tensor_parallel" in t) != ("pipeline_parallel" in t):
            raise InputError(f"{where}: fields 'tensor_parallel' and 'pipeline_parallel': expected both or neither")
        context = t.get("context", t.get("input_tokens", 0.0) + t.get("output_tokens", 0.0) / 2)
        make_scenario(
            batch=t["batch"], context=context, weights=t.get("weights", "bf16"), kv=t.get("kv", "bf16"), where=where
        )
        out.append(
            Row(
                id=t["id"],
                group=t["group"],
                status=t["status"],
                chip=t["chip"],
                framework=t["framework"],
                model=t["model"],
                weights=t.get("weights", "bf16"),
                kv=t.get("kv", "bf16"),
                batch=t["batch"],
                context=context,
                input_tokens=t.get("input_tokens", 0.0),
                output_tokens=t.get("output_tokens", 1.0),
                tensor_parallel=int(t["tensor_parallel"]) if "tensor_parallel" in t else None,
                pipeline_parallel=int(t["pipeline_parallel"]) if "pipeline_parallel" in t else None,
                metric=t["metric"],
                value=t["value"],
                tag=t.get("tag", ""),
                source=t["source"],
                conditions=t["conditions"],
                reason=t.get("reason", ""),
                blind=t.get("blind", ""),
                inference=t["inference"],
            )
        )
    return out
