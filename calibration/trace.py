"""The trace format: one table, one row per measured point, CSV or Parquet.

A trace row is one point measured on one device. Every row has

=================  ======================================================================
column             meaning (unit)
=================  ======================================================================
kind               `stream`, `gemv`, `gemm`, `attention_decode` or `decode_step`
label              free text naming the point (e.g. "stream 64MB", a model name)
seconds            median wall time of one kernel call or one decode step (s)
spread_seconds     spread of the repetitions: their interquartile range (s, >= 0)
reps               repetitions the median is over (whole number >= 1)
device             the device, e.g. "cpu: Intel(R) Xeon(R) Processor (2 cores)"
software           versions, e.g. "jax 0.10.2, jaxlib 0.10.2, flax 0.12.8"
=================  ======================================================================

and, by kind:

* microbenchmarks (`stream`, `gemv`, `gemm`, `attention_decode`): `dtype` (a format of
  `data/formats.toml`: f32, bf16, ...), `bytes` (bytes moved per call, B),
  `working_set` (bytes the call keeps resident, B), `flops` (FLOP per call; 0 for a
  stream); optional `kernels` (distinct kernel calls per call, default 1: a chain of
  GEMVs over `kernels` different matrices, or attention over `kernels` layers'
  caches, each streamed once per call); shapes: `m`,
  `k`, `n` (GEMV/GEMM: `[m, k] @ [k, n]`, per matrix; `m` is required for a GEMM and
  used by the fit, the rows sharing each weight) and `batch`, `context`, `n_heads`,
  `n_kv_heads`, `head_dim` (attention; the query heads per KV head are used by the
  fit, 1 when not given).
* `decode_step`: the model's dimensions (`n_layers`, `d_model`, `n_heads`,
  `n_kv_heads`, `head_dim`, `d_ff`, `vocab`; optional `ffn_matrices` (3), and
  `tied_embeddings` (0)), the scenario (`batch`, `context`) and the formats `weights`
  and `kv` (names in `data/formats.toml`).

Every row may also carry an optional `source` (one line of text: where the point was
published or measured, e.g. "github.com/OWNER/REPO/blob/COMMIT/FILE line 7" or a
paper, table and figure). A trace without the column, or a row whose cell is empty,
loads as before: its `source` is "FILE:LINE". The published GPU traces
(`data/traces/published/`) cite every row this way.

Cells a kind does not use are left empty. Loading validates every row and raises
`costmodel.io.InputError` naming the file and the line (the CSV line a row starts on,
header = line 1; for Parquet the row number + 2, as if it were a CSV) of anything
malformed, with the column and its value: among them a row cut short (fewer cells
than the header, as the last line of a truncated file has), a quoted cell never
closed, and an empty cell where the kind needs a number. The CLI prints it as one
line and exits with status 2.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

from costmodel.io import InputError, formats


KINDS = ("stream", "gemv", "gemm", "attention_decode", "decode_step")
MICRO_KINDS = KINDS[:4]

COMMON = ("kind", "label", "seconds", "spread_seconds", "reps", "device", "software")
MICRO = ("dtype", "bytes", "working_set", "flops")
MICRO_OPTIONAL = {"kernels": 1.0}
SHAPES = ("m", "k", "n", "batch", "context", "n_heads", "n_kv_heads", "head_dim")
DECODE = ("n_layers", "d_model", "n_heads", "n_kv_heads", "head_dim", "d_ff", "vocab", "batch", "context")
DECODE_OPTIONAL = {"ffn_matrices": 3.0, "tied_embeddings": 0.0}
FORMAT_COLUMNS = ("weights", "kv")
SOURCE = "source"
"""The optional column citing where a row's figure was published (one line of text)."""
COLUMNS = (
    COMMON
    + MICRO
    + tuple(MICRO_OPTIONAL)
    + ("m", "k", "n")
    + DECODE
    + tuple(DECODE_OPTIONAL)
    + FORMAT_COLUMNS
    + (SOURCE,)
)
"""Every column of a trace, in the order `save_trace` writes them."""

STRING_COLUMNS = ("kind", "label", "device", "software", "dtype", "weights", "kv", SOURCE)

MAX_SECONDS = 600.0
"""A single call or step longer than ten minutes is taken to be in the wrong unit (ms, us)."""


def _is_blank(v) -> bool:
    return v is None or (isinstance(v, float) and math.isnan(v)) or (isinstance(v, str) and v.strip() == "")


def _number(v, where: str, col: str, kind: str = "positive") -> float:
    if isinstance(v, bool):
        raise InputError(f"{where}: column {col!r} = {v!r}: expected a number")
    try:
        x = float(v)
    except (TypeError, ValueError):
        raise InputError(f"{where}: column {col!r} = {v!r}: expected a number") from None
    if not math.isfinite(x):
        raise InputError(f"{where}: column {col!r} = {v!r}: expected a finite number")
    if kind == "positive" and not x > 0:
        raise InputError(f"{where}: column {col!r} = {v!r}: expected a number > 0")
    if kind == "nonneg" and not x >= 0:
        raise InputError(f"{where}: column {col!r} = {v!r}: expected a number >= 0")
    if kind == "count" and not (x >= 1 and x.is_integer()):
        raise InputError(f"{where}: column {col!r} = {v!r}: expected a whole number >= 1")
    if kind == "wholenonneg" and not (x >= 0 and x.is_integer()):
        raise InputError(f"{where}: column {col!r} = {v!r}: expected a whole number >= 0")
    return x


def _source(v, where: str) -> str | None:
    """The row's `source` cell: None when absent or blank, else one line of text."""
    if _is_blank(v):
        return None
    if not isinstance(v, str):
        raise InputError(f"{where}: column {SOURCE!r} = {v!r}: expected text (where the figure was published)")
    text = v.strip()
    if any(ord(c) < 32 or ord(c) == 127 for c in text):
        shown = text if len(text) <= 60 else text[:57] + "..."
        raise InputError(
            f"{where}: column {SOURCE!r} = {shown!r}: expected one line of text (no line breaks or control characters)"
        )
    return text


def validate_row(raw: dict, where: str, known_formats: set[str]) -> dict:
    """Checks one row and returns it with numbers as floats and unused cells dropped."""
    for col in COMMON:
        if col not in raw:
            raise InputError(f"{where}: missing column {col!r}")
    kind = str(raw["kind"]).strip()
    if kind not in KINDS:
        raise InputError(f"{where}: column 'kind' = {raw['kind']!r}: expected one of {list(KINDS)}")
    row: dict = {"kind": kind}
    for col in ("label", "device", "software"):
        row[col] = "" if _is_blank(raw[col]) else str(raw[col])
    if _is_blank(raw["seconds"]):
        raise InputError(
            f"{where}: column 'seconds' = {raw['seconds']!r} is empty: expected the median time in seconds (> 0)"
        )
    row["seconds"] = _number(raw["seconds"], where, "seconds", "positive")
    if row["seconds"] > MAX_SECONDS:
        raise InputError(
            f"{where}: column 'seconds' = {raw['seconds']!r}: expected seconds (< {MAX_SECONDS:g}); "
            "is it in ms or us? (wrong units)"
        )
    row["spread_seconds"] = _number(raw["spread_seconds"], where, "spread_seconds", "nonneg")
    if row["spread_seconds"] > 100 * row["seconds"]:
        raise InputError(
            f"{where}: column 'spread_seconds' = {raw['spread_seconds']!r}: expected seconds, at most 100x "
            f"'seconds' ({row['seconds']:g}); wrong units?"
        )
    row["reps"] = _number(raw["reps"], where, "reps", "count")

    def need(cols, kind_="positive"):
        for col in cols:
            if col not in raw:
                raise InputError(
                    f"{where}: kind {kind!r} needs column {col!r} (a number); the trace has no such column"
                )
            if _is_blank(raw[col]):
                raise InputError(
                    f"{where}: column {col!r} = {raw[col]!r} is empty: kind {kind!r} needs column {col!r} (a number)"
                )
            row[col] = _number(raw[col], where, col, kind_)

    def need_format(col):
        if col not in raw:
            raise InputError(
                f"{where}: kind {kind!r} needs column {col!r} (a format name); the trace has no such column"
            )
        if _is_blank(raw[col]):
            raise InputError(
                f"{where}: column {col!r} = {raw[col]!r} is empty: kind {kind!r} needs column {col!r} (a format name)"
            )
        name = str(raw[col]).strip()
        if name not in known_formats:
            raise InputError(f"{where}: column {col!r} = {name!r}: expected one of {sorted(known_formats)}")
        row[col] = name

    if kind in MICRO_KINDS:
        need_format("dtype")
        need(("bytes", "working_set"))
        need(("flops",), "nonneg")
        for col, default in MICRO_OPTIONAL.items():
            v = raw.get(col)
            row[col] = default if _is_blank(v) else _number(v, where, col, "count")
        for col in SHAPES:
            if col in raw and not _is_blank(raw[col]):
                row[col] = _number(raw[col], where, col, "positive")
        if kind == "gemm" and "m" not in row:
            raise InputError(f"{where}: kind 'gemm' needs column 'm' (rows of the left operand, a number)")
    else:
        need(("n_layers", "d_model", "n_heads", "n_kv_heads", "head_dim", "d_ff", "vocab", "batch"), "count")
        need(("context",), "nonneg")
        for col, default in DECODE_OPTIONAL.items():
            v = raw.get(col)
            row[col] = default if _is_blank(v) else _number(v, where, col, "wholenonneg")
        need_format("weights")
        need_format("kv")
        if row["n_kv_heads"] > row["n_heads"]:
            raise InputError(
                f"{where}: column 'n_kv_heads' = {row['n_kv_heads']:g}: expected <= n_heads ({row['n_heads']:g})"
            )
    return row


def _short_row(path: Path, line: int, cells: list[str], header: list[str]) -> InputError:
    """The error for a CSV row with fewer cells than the header: a line cut short, as
    the last line of a truncated file is. It names the row's last cell and its value (a
    number cut short may still read as a number) and the first missing column."""
    last = header[len(cells) - 1]
    return InputError(
        f"{path}: line {line}: the row has {len(cells)} of the header's {len(header)} cells: it ends at column "
        f"{last!r} = {cells[-1]!r} and column {header[len(cells)]!r} onwards is missing (a truncated line? "
        f"expected {len(header)} comma-separated cells)"
    )


def _records(path: Path) -> tuple[list[dict], list[str], list[int]]:
    """The rows of a trace file as dicts of raw cells, its header, and the line number
    each row starts on (CSV: header = line 1, blank lines counted; Parquet: row number + 2)."""
    suffix = path.suffix.lower()
    if not path.exists():
        raise InputError(f"{path}: file not found")
    if path.is_dir():
        raise InputError(f"{path}: is a folder, expected a trace file (.csv or .parquet)")
    if suffix == ".csv":
        import csv

        header: list[str] = []
        rows, lines = [], []
        try:
            with open(path, newline="") as f:
                # strict: a quoted cell left open (a file cut inside it) is an error, not a
                # cell that silently runs to the end of the file.
                reader = csv.reader(f, strict=True)
                end = 0  # the line the previous record ended on
                try:
                    for cells in reader:
                        line, end = end + 1, reader.line_num
                        if not cells:  # a blank line
                            continue
                        if not header:
                            header = cells
                        elif len(cells) > len(header):
                            raise InputError(f"{path}: line {line}: more cells than the {len(header)} header columns")
                        elif len(cells) < len(header):
                            raise _short_row(path, line, cells, header)
                        else:
                            rows.append(dict(zip(header, cells)))
                            lines.append(line)
                except csv.Error as e:
                    cut = " (a quoted cell is not closed: a truncated line?)" if "end of data" in str(e) else ""
                    raise InputError(f"{path}: line {end + 1}: not valid CSV ({e}){cut}") from None
        except UnicodeDecodeError:
            raise InputError(f"{path}: not a UTF-8 text file") from None
        if not header:
            raise InputError(f"{path}: empty file: expected a header line with columns {list(COMMON)} and rows")
        return rows, header, lines
    if suffix in (".parquet", ".pq"):
        import pyarrow as pa
        import pyarrow.parquet as pq

        try:
            table = pq.read_table(path)
        except (pa.ArrowInvalid, OSError) as e:
            raise InputError(f"{path}: not a readable Parquet file ({e})") from None
        return table.to_pylist(), list(table.column_names), list(range(2, table.num_rows + 2))
    raise InputError(f"{path}: unknown trace file type {suffix!r}: expected .csv or .parquet")


def load_trace(path: Path | str) -> list[dict]:
    """Loads and validates a trace file (CSV or Parquet).

    Args:
        path: a `.csv` or `.parquet` file in the schema of this module.

    Returns:
        One dict per row (numbers as floats), each with `source`: the row's `source`
        cell where the trace has one (a citation), else "FILE:LINE".

    Raises:
        InputError: naming the file and line of the first malformed row, or an
            empty file, or a missing column.
    """
    path = Path(path)
    rows, header, lines = _records(path)
    for col in COMMON:
        if col not in header:
            raise InputError(f"{path}: line 1: missing column {col!r}; a trace needs {list(COMMON)}")
    for col in header:
        if col not in COLUMNS:
            # A misspelt optional column must not silently fall back to its default.
            raise InputError(f"{path}: line 1: unknown column {col!r}; expected columns from {list(COLUMNS)}")
    if not rows:
        raise InputError(f"{path}: no rows: expected at least one measured point after the header")
    known = set(formats())
    out = []
    for raw, line in zip(rows, lines):
        where = f"{path}: line {line}"
        row = validate_row(raw, where, known)
        cited = _source(raw.get(SOURCE), where)
        row[SOURCE] = cited if cited is not None else f"{path.name}:{line}"
        out.append(row)
    return out


def load_traces(paths) -> list[dict]:
    """Loads several traces into one list of rows."""
    rows = []
    for p in paths:
        rows.extend(load_trace(p))
    return rows


def save_trace(rows: list[dict], path: Path | str) -> Path:
    """Writes rows to a `.csv` or `.parquet` trace (columns in `COLUMNS` order),
    atomically: to a temporary file, then renamed over `path`."""
    final = Path(path)
    if final.suffix.lower() not in (".parquet", ".pq", ".csv"):
        raise InputError(f"{final}: unknown trace file type {final.suffix!r}: expected .csv or .parquet")
    final.parent.mkdir(parents=True, exist_ok=True)
    path = final.with_name(final.name + ".tmp" + final.suffix)
    try:
        _write_trace(rows, path)
        os.replace(path, final)
    finally:
        path.unlink(missing_ok=True)
    return final


def _cell(v) -> str:
    """A CSV cell: whole numbers exactly (byte counts of GB working sets need more than
    nine digits), other numbers to nine significant digits, text as it is."""
    if v is None:
        return ""
    if isinstance(v, float):
        return str(int(v)) if v.is_integer() and abs(v) < 2**53 else f"{v:.9g}"
    return v


def _write_trace(rows: list[dict], path: Path) -> None:
    table = [{c: r.get(c, None) for c in COLUMNS} for r in rows]
    if path.suffix.lower() in (".parquet", ".pq"):
        import pyarrow as pa
        import pyarrow.parquet as pq

        columns = {}
        for c in COLUMNS:
            values = [t[c] for t in table]
            if c in STRING_COLUMNS:
                columns[c] = pa.array([None if v is None else str(v) for v in values], pa.string())
            else:
                columns[c] = pa.array([None if v is None else float(v) for v in values], pa.float64())
        pq.write_table(pa.table(columns), path)
    elif path.suffix.lower() == ".csv":
        import csv

        with open(path, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(COLUMNS))
            w.writeheader()
            for t in table:
                w.writerow({k: _cell(v) for k, v in t.items()})
    else:
        raise InputError(f"{path}: unknown trace file type {path.suffix!r}: expected .csv or .parquet")
