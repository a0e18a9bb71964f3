"""Timing a jitted loop on one device, and describing the device and software measured.

Every point is a jitted function that repeats its kernel `n` times in one program
(`lax.fori_loop` with a loop-carried dependency, so nothing is hoisted), timed with
`block_until_ready`: one warm-up call compiles, `n` is chosen so a call lasts about
`target_seconds`, then `reps` calls are timed. Repeating inside one program removes
the per-call dispatch cost from the figures (a decode loop written with
`lax.fori_loop`, as in `calibration.measure.transformer`, does not pay it either).
"""

from __future__ import annotations

import os
import platform
import time
from collections.abc import Callable

import jax
import numpy as np


def xla_cpu_thread_flags(threads: int) -> str:
    """XLA_FLAGS that run XLA:CPU's kernels on `threads` intra-op threads (1: single-
    threaded Eigen); append them to `XLA_FLAGS` before JAX initialises."""
    multi = "false" if threads == 1 else "true"
    return f"--xla_cpu_multi_thread_eigen={multi} intra_op_parallelism_threads={threads}"


def device_description(device) -> str:
    """The device as a trace's `device` column names it, e.g. "cpu: AMD EPYC (2 cores)"."""
    if device.platform == "cpu":
        name = platform.processor() or platform.machine()
        try:
            with open("/proc/cpuinfo") as f:
                for line in f:
                    if line.startswith("model name"):
                        name = line.split(":", 1)[1].strip()
                        break
        except OSError:
            pass
        return f"cpu: {name} ({os.cpu_count()} cores)"
    return f"{device.platform}: {getattr(device, 'device_kind', str(device))}"


def software_description() -> str:
    """The versions a trace's `software` column names, e.g. "jax 0.10.2, jaxlib 0.10.2, ..."."""
    from importlib.metadata import version

    parts = [f"jax {jax.__version__}", f"jaxlib {version('jaxlib')}"]
    try:
        import flax

        parts.append(f"flax {flax.__version__}")
    except ImportError:
        pass
    parts.append(f"python {platform.python_version()}")
    return ", ".join(parts)


def time_iterations(
    fn: Callable, args: tuple, reps: int, target_seconds: float, carry: int = 0, min_n: int = 1
) -> tuple[list[float], int]:
    """The time per iteration of `fn(*args, n)` in each of `reps` timed calls.

    Args:
        fn: a jitted function whose last argument is the (traced) iteration count.
        args: its other arguments (already on the device).
        reps: timed calls.
        target_seconds: about how long one timed call should last (s).
        carry: when > 0, `fn` donates its last `carry` arguments and returns their
            new values, which are fed to the next call (a decode state).
        min_n: fewest iterations per timed call.

    Returns:
        (seconds per iteration of each timed call, iterations per call).
    """
    state = list(args)

    def call(n):
        out = jax.block_until_ready(fn(*state, n))
        if carry:
            state[len(state) - carry :] = list(out)

    call(1)  # compile and warm up
    n = min_n
    for _ in range(3):  # grow n until one call is long enough to time (dispatch amortised)
        t0 = time.perf_counter()
        call(n)
        elapsed = time.perf_counter() - t0
        if elapsed >= target_seconds / 2:
            break
        n = int(min(max(n * target_seconds / max(elapsed, 1e-6), n + 1), 1_000_000))
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        call(n)
        times.append((time.perf_counter() - t0) / n)
    return times, n


def median_and_spread(times) -> tuple[float, float]:
    """(median, interquartile range) of per-iteration times (s): a trace row's
    `seconds` and `spread_seconds`."""
    q1, med, q3 = np.percentile(times, [25, 50, 75])
    return float(med), float(q3 - q1)


def time_loop(
    fn: Callable, args: tuple, reps: int, target_seconds: float, carry: int = 0, min_n: int = 1
) -> tuple[float, float, int]:
    """Median and interquartile range of the time per iteration of `fn(*args, n)`
    (the arguments as for `time_iterations`).

    Returns:
        (median s, IQR s, iterations per call).
    """
    times, n = time_iterations(fn, args, reps, target_seconds, carry, min_n)
    return (*median_and_spread(times), n)
