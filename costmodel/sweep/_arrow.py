"""pyarrow, an optional dependency (the `costmodel[sweep]` extra), imported on first use."""

from __future__ import annotations

from types import ModuleType

from ..io import InputError


def pyarrow() -> ModuleType:
    """The `pyarrow` module, with `pyarrow.parquet` loaded.

    Raises:
        InputError: if pyarrow is not installed, saying how to install it.
    """
    try:
        import pyarrow as pa
        import pyarrow.parquet  # noqa: F401  (loads `pa.parquet`)
    except ImportError:
        raise InputError(
            "sweeps are stored as Parquet, which needs pyarrow (not installed): pip install 'costmodel[all]'"
        ) from None
    return pa
