"""Weight and KV number formats (`data/formats.toml`)."""

from __future__ import annotations

import dataclasses

from .._core.workload import PRECISIONS
from .errors import InputError
from .files import data_dir, load_toml
from .schema import check_table


@dataclasses.dataclass(frozen=True)
class Format:
    """A number format (`data/formats.toml`).

    Attributes:
        name: format id.
        bytes_per_element: bytes per element, scales included.
        precision: index into `PRECISIONS` of the matmuls on it.
        source: where the layout comes from.
        plain: for a weight recipe that leaves the attention projections and the
            embedding and output tables in another format, that format's name
            (`Scenario.plain_weight_bytes`); None: every weight in this one.
    """

    name: str
    bytes_per_element: float
    precision: int
    source: str
    plain: str | None = None


def formats() -> dict[str, Format]:
    """Weight/KV number formats by name (`data/formats.toml`)."""
    path = data_dir() / "formats.toml"
    out = {}
    for name, t in load_toml(path)["formats"].items():
        where = f"{path}: formats.{name}"
        t = check_table(t, where, {"bits_per_element": "positive"}, strings=("precision", "source", "plain"))
        if t["precision"] not in PRECISIONS:
            raise InputError(f"{where}: field 'precision' = {t['precision']!r}: expected one of {list(PRECISIONS)}")
        out[name] = Format(
            name, t["bits_per_element"] / 8, PRECISIONS.index(t["precision"]), t["source"], t.get("plain")
        )
    for f in out.values():
        if f.plain is not None and (f.plain not in out or out[f.plain].plain is not None):
            raise InputError(
                f"{path}: formats.{f.name}: field 'plain' = {f.plain!r}: expected a format of {sorted(out)} "
                "that is not itself a recipe"
            )
    return out


def plain_fields(f: Format) -> dict[str, float | int]:
    """`Scenario`'s `plain_weight_bytes` and `plain_weight_precision` for weights in `f`
    (0 and -1, "as the rest", for a format that is not a recipe)."""
    if f.plain is None:
        return {"plain_weight_bytes": 0.0, "plain_weight_precision": -1}
    p = formats()[f.plain]
    return {"plain_weight_bytes": p.bytes_per_element, "plain_weight_precision": p.precision}


def get_format(name: str, what: str = "format") -> Format:
    table = formats()
    if name not in table:
        raise InputError(f"{what} {name!r}: unknown format; expected one of {sorted(table)}")
    return table[name]
