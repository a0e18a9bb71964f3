"""Field checking: every number a data file holds, of its kind, in its file's units."""

from __future__ import annotations

from typing import Any

from .errors import InputError


MAX_NUMBER = 1e15
"""Largest magnitude a number in a data file may have (in the file's own units): any
bigger value is a unit slip, and after conversion to SI (x1e12 at most) it must still
be finite in float32 (max 3.4e38)."""

KINDS = {
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
        required / optional: field name -> kind (a key of `KINDS`).
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
            raise InputError(f"{where}: missing field {key!r} ({KINDS[required[key]][0]})")
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
            text, ok = KINDS[kind]
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not abs(value) <= MAX_NUMBER:
                raise InputError(f"{where}: field {key!r} = {value!r}: expected {text} (at most {MAX_NUMBER:g})")
            if not ok(value):
                raise InputError(f"{where}: field {key!r} = {value!r}: expected {text}")
            out[key] = float(value)
    return out
