"""Reproducing the published PIM results: each paper's headline ratio against its own
baseline, both systems configured from the paper (`costmodel validate --pim`).

The rows (`data/measurements/pim.toml`) name a PIM system and a baseline system (chip
files in `data/pim/` or presets, chip counts or layout, placement policy, batch), the
workload (model, context, number formats) and the quantity the paper reports:

- `throughput_ratio`: tokens/s of the PIM system over the baseline's,
- `energy_efficiency_ratio`: J/token of the baseline over the PIM system's,
- `tokens_per_dollar_ratio`: tokens/s per unit of system cost, PIM over baseline,
- `gemv_speedup`: step time of the baseline over the PIM system's (same batch).

A system of `replicas` independent copies has `replicas` times a copy's tokens/s and
cost. Evaluation is `costmodel.evaluate`; this module only loads rows and forms ratios.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from .evaluation import evaluate
from .io import InputError
from .io.files import data_dir, row_tables
from .io.schema import check_table


QUANTITIES = ("throughput_ratio", "energy_efficiency_ratio", "tokens_per_dollar_ratio", "gemv_speedup")
"""What a row's paper value is (see the module docstring)."""

TARGET = 0.25
"""Goal: each model ratio within 25 % of the paper's (issue 15)."""


@dataclasses.dataclass(frozen=True)
class System:
    """One side of a comparison.

    Attributes:
        chip: a chip preset id, or a chip TOML path relative to `data/`.
        batch: sequences decoded together per copy.
        chips: chips per copy (None: `tensor_parallel` x `pipeline_parallel`).
        tensor_parallel, pipeline_parallel: the layout of a copy (both, or neither).
        placement: a placement policy overriding the chip file's (None: the file's).
        replicas: independent copies the system is made of.
        micro_batches: groups the batch is split into through a pipeline
            (`costmodel.evaluate`'s `micro_batches`: a number, or "auto", one per
            pipeline stage).
        cost_per_chip: cost of one chip in the row's cost unit (tokens per dollar only).
    """

    chip: str
    batch: float
    chips: int | None
    tensor_parallel: int | None
    pipeline_parallel: int | None
    placement: str | None
    replicas: int
    cost_per_chip: float | None
    micro_batches: float | str = 1


@dataclasses.dataclass(frozen=True)
class PimRow:
    """One published PIM result (see the table's header)."""

    id: str
    paper: str
    where: str
    quantity: str
    value: float
    model: str
    context: float
    weights: str
    kv: str
    pim: System
    baseline: System
    source: str
    notes: str


def pim_table_path() -> Path:
    return data_dir() / "measurements" / "pim.toml"


def _resolve(spec: str) -> str:
    """A preset id as is; a `.toml` path relative to `data/` made absolute."""
    return str(data_dir() / spec) if spec.endswith(".toml") and not Path(spec).is_absolute() else spec


def _system(t: Any, where: str, needs_cost: bool) -> System:
    t = check_table(
        t,
        where,
        {"batch": "positive"},
        {
            "chips": "count",
            "tensor_parallel": "count",
            "pipeline_parallel": "count",
            "replicas": "count",
            "cost_per_chip": "positive",
        },
        strings=("chip", "placement", "cost_source"),
        tables=("micro_batches",),
    )
    groups = t.get("micro_batches", 1)
    if groups != "auto" and (isinstance(groups, bool) or not isinstance(groups, (int, float)) or groups < 1):
        raise InputError(f"{where}: field 'micro_batches' = {groups!r}: expected a number >= 1 or \"auto\"")
    if not t.get("chip"):
        raise InputError(f"{where}: missing field 'chip' (a chip preset id or a chip TOML path under data/)")
    if ("tensor_parallel" in t) != ("pipeline_parallel" in t):
        raise InputError(f"{where}: fields 'tensor_parallel' and 'pipeline_parallel': expected both or neither")
    if "chips" in t and "tensor_parallel" in t:
        raise InputError(f"{where}: field 'chips' = {t['chips']:g}: expected either chips or a layout, not both")
    if needs_cost and ("cost_per_chip" not in t or not t.get("cost_source")):
        raise InputError(
            f"{where}: missing field 'cost_per_chip' (and its 'cost_source'): needed by a tokens-per-dollar row"
        )
    from ._core.placement import POLICIES

    if t.get("placement") is not None and t["placement"] not in POLICIES:
        raise InputError(f"{where}: field 'placement' = {t['placement']!r}: expected one of {list(POLICIES)}")
    count = lambda key: int(t[key]) if key in t else None
    return System(
        chip=t["chip"],
        batch=t["batch"],
        chips=count("chips"),
        tensor_parallel=count("tensor_parallel"),
        pipeline_parallel=count("pipeline_parallel"),
        placement=t.get("placement"),
        replicas=int(t.get("replicas", 1)),
        cost_per_chip=t.get("cost_per_chip"),
        micro_batches=groups,
    )


def load_pim_rows(path: Path | str | None = None) -> list[PimRow]:
    """The PIM reproduction table, validated.

    Raises:
        InputError: one line naming the file, the row, the field and the value.
    """
    path = Path(path) if path is not None else pim_table_path()
    rows = row_tables(path)
    out: list[PimRow] = []
    seen: set[str] = set()
    for i, t in enumerate(rows):
        where = f"{path}: rows[{i}]"
        t = check_table(
            t,
            where,
            {"value": "positive"},
            strings=("id", "paper", "where", "quantity", "source", "notes"),
            tables=("workload", "pim", "baseline"),
        )
        for key in ("id", "paper", "where", "quantity", "source"):
            if not t.get(key):
                raise InputError(f"{where}: missing field {key!r} (a non-empty string)")
        where = f"{path}: rows[{i}] ({t['id']})"
        if t["id"] in seen:
            raise InputError(f"{where}: field 'id' = {t['id']!r}: expected a unique id")
        seen.add(t["id"])
        if t["quantity"] not in QUANTITIES:
            raise InputError(f"{where}: field 'quantity' = {t['quantity']!r}: expected one of {list(QUANTITIES)}")
        for key in ("workload", "pim", "baseline"):
            if key not in t:
                raise InputError(f"{where}: missing table {key!r}")
        w = check_table(t["workload"], f"{where}.workload", {"context": "nonneg"}, strings=("model", "weights", "kv"))
        if not w.get("model"):
            raise InputError(f"{where}.workload: missing field 'model' (a preset id or a model TOML path under data/)")
        needs_cost = t["quantity"] == "tokens_per_dollar_ratio"
        out.append(
            PimRow(
                id=t["id"],
                paper=t["paper"],
                where=t["where"],
                quantity=t["quantity"],
                value=t["value"],
                model=w["model"],
                context=w["context"],
                weights=w.get("weights", "bf16"),
                kv=w.get("kv", "bf16"),
                pim=_system(t["pim"], f"{where}.pim", needs_cost),
                baseline=_system(t["baseline"], f"{where}.baseline", needs_cost),
                source=t["source"],
                notes=t.get("notes", ""),
            )
        )
    return out


@dataclasses.dataclass(frozen=True)
class SystemResult:
    """What one side of a row evaluates to."""

    tokens_per_second: float
    joules_per_token: float
    seconds_per_step: float
    cost: float | None
    tensor_parallel: int
    pipeline_parallel: int
    placement: str
    feasible: bool


@dataclasses.dataclass(frozen=True)
class PimResult:
    """A row with the model's ratio."""

    row: PimRow
    pim: SystemResult
    baseline: SystemResult
    predicted: float

    @property
    def error(self) -> float:
        """Signed relative error of the ratio, model / paper - 1."""
        return self.predicted / self.row.value - 1.0

    @property
    def within(self) -> bool:
        return abs(self.error) <= TARGET


def _evaluate_system(row: PimRow, s: System, where: str) -> SystemResult:
    try:
        layout: dict[str, Any] = (
            {"tensor_parallel": s.tensor_parallel, "pipeline_parallel": s.pipeline_parallel}
            if s.tensor_parallel is not None
            else {"chips": s.chips}
        )
        e = evaluate(
            _resolve(row.model),
            _resolve(s.chip),
            batch=s.batch,
            context=row.context,
            weights=row.weights,
            kv=row.kv,
            placement=s.placement,
            micro_batches=s.micro_batches,
            **layout,
        )
    except InputError as err:
        raise InputError(f"{where}: {err}") from None
    c = e.cost
    n = e.tensor_parallel * e.pipeline_parallel
    return SystemResult(
        tokens_per_second=s.replicas * float(c.tokens_per_second),
        joules_per_token=float(c.joules_per_token),
        seconds_per_step=float(c.seconds_per_step),
        cost=None if s.cost_per_chip is None else s.replicas * n * s.cost_per_chip,
        tensor_parallel=e.tensor_parallel,
        pipeline_parallel=e.pipeline_parallel,
        placement=e.info.placement,
        feasible=bool(c.feasible),
    )


def _ratio(quantity: str, pim: SystemResult, base: SystemResult) -> float:
    if quantity == "throughput_ratio":
        return pim.tokens_per_second / base.tokens_per_second
    if quantity == "energy_efficiency_ratio":
        return base.joules_per_token / pim.joules_per_token
    if quantity == "gemv_speedup":
        return base.seconds_per_step / pim.seconds_per_step
    assert pim.cost is not None and base.cost is not None  # checked when the row was loaded
    return (pim.tokens_per_second / pim.cost) / (base.tokens_per_second / base.cost)


def evaluate_pim_rows(rows: list[PimRow] | None = None) -> list[PimResult]:
    """Evaluates both systems of every row and forms the row's ratio.

    Raises:
        InputError: a row whose system cannot be built or does not fit its chips.
    """
    rows = rows if rows is not None else load_pim_rows()
    out = []
    for row in rows:
        sides = []
        for name, s in (("pim", row.pim), ("baseline", row.baseline)):
            r = _evaluate_system(row, s, f"pim row {row.id!r}.{name}")
            if not r.feasible:
                raise InputError(
                    f"pim row {row.id!r}.{name}: chip {s.chip!r} x {r.tensor_parallel * r.pipeline_parallel} "
                    f"does not hold {row.model} at batch {s.batch:g}, context {row.context:g}; use more chips"
                )
            sides.append(r)
        pim, base = sides
        out.append(PimResult(row, pim, base, _ratio(row.quantity, pim, base)))
    return out


def pim_record(r: PimResult) -> dict[str, Any]:
    """A result as a flat JSON-ready record."""

    def side(s: System, x: SystemResult) -> dict[str, Any]:
        return {
            "chip": s.chip,
            "placement": x.placement,
            "batch": s.batch,
            "tensor_parallel": x.tensor_parallel,
            "pipeline_parallel": x.pipeline_parallel,
            "replicas": s.replicas,
            "tokens_per_second": x.tokens_per_second,
            "joules_per_token": x.joules_per_token,
            "seconds_per_step": x.seconds_per_step,
            "cost": x.cost,
        }

    return {
        "id": r.row.id,
        "paper": r.row.paper,
        "where": r.row.where,
        "quantity": r.row.quantity,
        "model": r.row.model,
        "context": r.row.context,
        "paper_value": r.row.value,
        "model_value": r.predicted,
        "error": r.error,
        "within_target": r.within,
        "pim": side(r.row.pim, r.pim),
        "baseline": side(r.row.baseline, r.baseline),
        "source": r.row.source,
        "notes": r.row.notes,
    }
