"""Deprecated: the microbenchmarks moved to `calibration.measure`; import from there (or `calibration`)."""

import warnings

from .measure import (
    GB as GB,
    KB as KB,
    MB as MB,
    Plan as Plan,
    decode_models as decode_models,
    device_description as device_description,
    plan as plan,
    run_bench as run_bench,
    software_description as software_description,
    time_loop as time_loop,
    xla_cpu_thread_flags as xla_cpu_thread_flags,
)


warnings.warn(
    "calibration.bench is deprecated: import from calibration.measure (or calibration)",
    DeprecationWarning,
    stacklevel=2,
)
