"""Shared machinery of the reliability tests (no tests here): a TOML writer, value strategies, mutations.

Every fuzz test records how many inputs each loader took in `COUNTS` (printed by
`python -m pytest tests/test_reliability_inputs.py -s -k counts`, quoted in
RELIABILITY.md).
"""

from __future__ import annotations

import collections
import json
import math
from typing import Any

from hypothesis import HealthCheck, settings, strategies as st


FUZZ = settings(
    max_examples=100,
    deadline=None,
    database=None,  # no .hypothesis/ folder in the checkout
    derandomize=True,  # the same inputs on every run: CI failures reproduce
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
"""Hypothesis settings of the loader fuzz tests: modest, deterministic, no deadline."""

COUNTS: collections.Counter[str] = collections.Counter()
"""Inputs each loader took in this session, by loader name."""


# --- TOML and JSON values ---------------------------------------------------------

_TEXT = st.text(st.characters(exclude_categories=("Cs",)), max_size=12)
_SCALARS = st.one_of(
    st.integers(-(2**63), 2**63 - 1),
    st.sampled_from([0, 1, -1, 2, 1_000_000]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0.0, -0.0, 1e-300, 1e300, 0.5, 1.5, -1.0]),
    _TEXT,
    st.booleans(),
)
TOML_VALUES = st.recursive(
    _SCALARS,
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(_TEXT, inner, max_size=3)),
    max_leaves=6,
)
"""Any value a TOML file can hold (no dates): numbers incl. nan/inf, text, lists, tables."""

JSON_VALUES = st.recursive(
    st.one_of(
        st.none(),
        st.integers(-(10**30), 10**30),
        st.floats(allow_nan=True, allow_infinity=True),  # json accepts NaN/Infinity
        _TEXT,
        st.booleans(),
    ),
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(_TEXT, inner, max_size=3)),
    max_leaves=6,
)
"""Any value a JSON file can hold, with Python's NaN/Infinity extension and huge ints."""


def _string(v: str) -> str:
    # JSON escapes are TOML basic-string escapes; TOML also forbids a raw DEL.
    return json.dumps(v, ensure_ascii=False).replace("\x7f", "\\u007f")


def toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if math.isnan(v):
            return "nan"
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
        return repr(v)
    if isinstance(v, str):
        return _string(v)
    if isinstance(v, list):
        return "[" + ", ".join(toml_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{_string(str(k))} = {toml_value(x)}" for k, x in v.items()) + "}"
    raise TypeError(type(v))


def dump_toml(doc: dict[str, Any]) -> str:
    """A TOML document with the given content (tables inline): `tomllib.loads` round-trips it."""
    return "".join(f"{_string(str(k))} = {toml_value(v)}\n" for k, v in doc.items())


# --- mutations --------------------------------------------------------------------


def paths(doc: Any, prefix: tuple = ()) -> list[tuple]:
    """Every position in a nested dict/list: a key path to each value."""
    out = []
    if isinstance(doc, dict):
        for k, v in doc.items():
            out.append((*prefix, k))
            out.extend(paths(v, (*prefix, k)))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            out.append((*prefix, i))
            out.extend(paths(v, (*prefix, i)))
    return out


def tables(doc: Any, prefix: tuple = ()) -> list[tuple]:
    """The key paths of every table (dict) in a document, the root included."""
    out = [prefix] if isinstance(doc, dict) else []
    items = doc.items() if isinstance(doc, dict) else enumerate(doc) if isinstance(doc, list) else []
    for k, v in items:
        out.extend(tables(v, (*prefix, k)))
    return out


def get(doc: Any, path: tuple) -> Any:
    for p in path:
        doc = doc[p]
    return doc


def typo(key: str, how: int) -> str:
    """A misspelling of `key`: a letter dropped, doubled, two swapped, or a case change."""
    if len(key) < 2:
        return key + "_"
    i = 1 + how % (len(key) - 1)
    forms = [
        key[:i] + key[i + 1 :],  # dropped
        key[:i] + key[i] + key[i:],  # doubled
        key[: i - 1] + key[i] + key[i - 1] + key[i + 1 :],  # swapped
        key.upper(),
        key + "s",
    ]
    out = forms[how % len(forms)]
    return out if out != key else key + "_"


@st.composite
def mutated(draw, base: Any, values=TOML_VALUES) -> tuple[Any, str, tuple]:
    """A copy of `base` with one change: a value deleted, replaced, or a key added.

    Returns:
        (document, operation, path) with operation "delete", "replace" or "add".
    """
    doc = json.loads(json.dumps(base))
    op = draw(st.sampled_from(["delete", "replace", "add"]))
    if op == "add":
        where = draw(st.sampled_from(tables(doc)))
        key = draw(st.one_of(_TEXT, st.sampled_from(["unknown", "bandwidth", "n_layer"])))
        get(doc, where)[key] = draw(values)
        return doc, op, (*where, key)
    path = draw(st.sampled_from(paths(doc)))
    parent = get(doc, path[:-1])
    if op == "delete":
        del parent[path[-1]]
    else:
        parent[path[-1]] = draw(values)
    return doc, op, path
