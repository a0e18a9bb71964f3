"""Deprecated: `costmodel.api` is now `costmodel.evaluation`.

Every name is still importable from here, with a `DeprecationWarning` when it is
looked up (not when this module is imported, so collecting doctests stays quiet).
"""

import warnings
from typing import Any

from . import evaluation as _evaluation


_RENAMED = {"_FAST_TIERS": "FAST_TIERS", "_ALL_TIERS": "ALL_TIERS"}
"""Private names of the old module -> their public names in `costmodel.evaluation`."""

_NAMES = [  # what the old module offered, now in costmodel.evaluation
    "ALL_TIERS",
    "FAST_TIERS",
    "MAX_TENSOR_PARALLEL",
    "SRAM_RESERVE",
    "Evaluation",
    "apply_framework",
    "apply_multipliers",
    "evaluate",
    "evaluate_policy",
    "size_system",
    "system_placement",
    "system_size",
    "tier_mask",
]


def __getattr__(name: str) -> Any:
    target = _RENAMED.get(name, name)
    if target not in _NAMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    warnings.warn(
        f"costmodel.api is deprecated: import {target} from costmodel.evaluation", DeprecationWarning, stacklevel=2
    )
    return getattr(_evaluation, target)
