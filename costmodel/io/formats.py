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


class KernelTables:
    """What a framework's kernels do with each number format, looked up by format name
    from the tables a `Framework` reads from data/frameworks.toml and a `ChipInfo`
    carries once the framework is applied (`costmodel.evaluation.apply_framework`):
    `dequant_ops`, `kv_dequant_ops`, `copy_rows` and `dequant_rows`, each a tuple of
    (format, value) pairs; a format absent gets 0 (used as stored, never copied, unpacked
    once per step)."""

    dequant_ops: tuple[tuple[str, float], ...]
    kv_dequant_ops: tuple[tuple[str, float], ...]
    copy_rows: tuple[tuple[str, float], ...]
    dequant_rows: tuple[tuple[str, float], ...]

    def dequant(self, weights: str) -> float:
        """ALU instructions per weight element the kernels spend unpacking `weights`
        (`Scenario.weight_dequant_ops`)."""
        return dict(self.dequant_ops).get(weights, 0.0)

    def kv_dequant(self, kv: str) -> float:
        """ALU instructions per K/V element read the attention kernels spend unpacking
        the cache format `kv` (`Scenario.kv_dequant_ops`)."""
        return dict(self.kv_dequant_ops).get(kv, 0.0)

    def copy(self, weights: str) -> float:
        """Rows above which the kernel for `weights` works on a 16-bit copy of the
        weights (`Scenario.weight_copy_rows`; 0: never)."""
        return dict(self.copy_rows).get(weights, 0.0)

    def tile(self, weights: str) -> float:
        """Rows each unpacking of `weights` by the kernel serves
        (`Scenario.weight_dequant_rows`; 0: once per step)."""
        return dict(self.dequant_rows).get(weights, 0.0)
