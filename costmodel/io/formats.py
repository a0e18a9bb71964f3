"""Weight and KV number formats (`data/formats.toml`)."""

from __future__ import annotations

import dataclasses

from .._core.workload import PRECISIONS
from .errors import InputError
from .files import data_dir, load_toml
from .schema import check_table


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
