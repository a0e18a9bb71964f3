"""Deprecated: the cost-per-token loaders are now in `costmodel.io` (`costmodel.io.economics`)
and the command-line flags in `costmodel.cli.economics`.

Every loader is still importable from here, with a `DeprecationWarning` when it is
looked up (not when this module is imported, so collecting doctests stays quiet).
"""

import warnings
from typing import Any

from .io import economics as _economics


_NAMES = [  # what the old module offered that the library keeps (the flags moved to the CLI)
    "OVERRIDES",
    "SECONDS_PER_YEAR",
    "JOULES_PER_KWH",
    "economics_table",
    "economics_preset",
    "node_for_process",
    "chip_node",
]


def __getattr__(name: str) -> Any:
    if name not in _NAMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    warnings.warn(
        f"costmodel.economics_io is deprecated: import {name} from costmodel.io", DeprecationWarning, stacklevel=2
    )
    return getattr(_economics, name)
