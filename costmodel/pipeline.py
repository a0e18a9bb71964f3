"""Deprecated: the main job is now `costmodel.report.main_job` (and `costmodel.report.presets`).

Every name is still importable from here, with a `DeprecationWarning` when it is
looked up. `run_main_job` now takes the calibration stage as an argument
(`calibrate_stage=calibration.pipeline.calibrate_shipped`), as `costmodel run` passes it.
"""

import warnings
from typing import Any

from .report import main_job as _main_job, presets as _presets


_NAMES = {  # what the old module offered -> where it lives now
    "run_main_job": _main_job,
    "evaluate_presets_on_mix": _presets,
    "presets_table": _presets,
    "plot_presets": _presets,
}


def __getattr__(name: str) -> Any:
    if name not in _NAMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module = _NAMES[name]
    warnings.warn(
        f"costmodel.pipeline is deprecated: import {name} from {module.__name__}", DeprecationWarning, stacklevel=2
    )
    return getattr(module, name)
