"""Deprecated: `costmodel.provenance` is now `costmodel.report.provenance`.

Every name is still importable from here, with a `DeprecationWarning` when it is
looked up (not when this module is imported, so collecting doctests stays quiet).
"""

import warnings
from typing import Any

from .report import provenance as _provenance


_NAMES = ["provenance", "sha256_file", "shipped_inputs", "user_files"]


def __getattr__(name: str) -> Any:
    if name not in _NAMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    warnings.warn(
        f"costmodel.provenance is deprecated: import {name} from costmodel.report.provenance",
        DeprecationWarning,
        stacklevel=2,
    )
    return getattr(_provenance, name)
