"""Measuring traces with JAX on the local devices: the plan, the kernels, the timing, the driver."""

from .bench import (
    Point as Point,
    attention_chain_points as attention_chain_points,
    attention_points as attention_points,
    decode_step_points as decode_step_points,
    gemv_chain_points as gemv_chain_points,
    matmul_points as matmul_points,
    measure_points as measure_points,
    plan_points as plan_points,
    run_bench as run_bench,
    stream_points as stream_points,
)
from .plans import (
    GB as GB,
    KB as KB,
    MB as MB,
    Config as Config,
    Plan as Plan,
    decode_models as decode_models,
    plan as plan,
)
from .timing import (
    device_description as device_description,
    median_and_spread as median_and_spread,
    software_description as software_description,
    time_iterations as time_iterations,
    time_loop as time_loop,
    xla_cpu_thread_flags as xla_cpu_thread_flags,
)
