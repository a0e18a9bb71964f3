"""Measuring a trace: microbenchmarks and flax decode steps, timed with JAX on one device.

A plan (`calibration.measure.plans`) becomes a list of points, one function per
benchmark family (`stream_points`, `gemv_chain_points`, `matmul_points`,
`attention_points`, `attention_chain_points`, `decode_step_points`). A point is its
trace row without the timings plus a function that times it once
(`calibration.measure.timing`); `run_bench` times every point in `passes` shuffled
passes and gives each row the median and interquartile range of the time per kernel
(or per decode step) over the repetitions of all passes.
"""

from __future__ import annotations

import dataclasses
import functools as ft
import math
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np

from ..trace import KINDS
from . import kernels
from .plans import MB, Config, Plan, plan
from .timing import device_description, median_and_spread, software_description, time_iterations


STREAM_COLUMNS = 1024
"""Columns of the `[rows, 1024]` f32 array a stream point reads as one matrix-vector product."""

_JNP_DTYPES = {"f32": "float32", "bf16": "bfloat16", "f16": "float16"}


@dataclasses.dataclass(frozen=True)
class Point:
    """One point of a plan.

    Attributes:
        description: what the progress bar shows while it is measured.
        row: its trace row (see `calibration.trace`) without `seconds`,
            `spread_seconds`, `reps`, `device` and `software`.
        measure: times it once; returns the seconds per kernel call (or decode step)
            of each timed repetition.
    """

    description: str
    row: dict
    measure: Callable[[], list[float]]


def reps_per_pass(p: Plan) -> int:
    """Timed repetitions of each point in one pass (`p.reps` over all passes)."""
    return max(1, math.ceil(p.reps / p.passes))


def _key():
    return jax.random.PRNGKey(0)


# --- one function per benchmark family: the points, in plan order -------------------


def _time_stream(size: int, device, reps: int, target_seconds: float) -> list[float]:
    x = jax.device_put(jnp.ones((size // 4 // STREAM_COLUMNS, STREAM_COLUMNS), jnp.float32), device)
    return time_iterations(kernels.stream, (x,), reps, target_seconds)[0]


def stream_points(p: Plan, device) -> list[Point]:
    """f32 streams of `p.stream_sizes` bytes: one matrix-vector product over the array per call."""
    out = []
    for size in p.stream_sizes:
        rows = size // 4 // STREAM_COLUMNS
        row = {
            "kind": "stream",
            "label": f"stream {size / MB:.4g} MiB",
            "dtype": "f32",
            "bytes": float(size),
            "working_set": float(size),
            "flops": 2.0 * size / 4,
            "m": float(rows),
            "k": float(STREAM_COLUMNS),
            "n": 1.0,
        }
        timer = ft.partial(_time_stream, size, device, reps_per_pass(p), p.target_seconds)
        out.append(Point(f"stream {size / MB:.3g} MiB", row, timer))
    return out


def _time_gemv_chain(k: int, n: int, count: int, device, reps: int, target_seconds: float) -> list[float]:
    keys = jax.random.split(_key(), count)
    ws = [jax.device_put(jax.random.normal(kk, (k, n), jnp.float32), device) for kk in keys]
    xs = [jax.device_put(jax.random.normal(jax.random.fold_in(kk, 1), (1, k), jnp.float32), device) for kk in keys]
    return time_iterations(kernels.chain, (ws, xs), reps, target_seconds)[0]


def gemv_chain_points(p: Plan, device) -> list[Point]:
    """f32 GEMVs over `matrices` distinct `[k, n]` matrices per call, each read once (`p.chains`)."""
    out = []
    for k, n, count in p.chains:
        moved = count * (k * n + k + 1) * 4
        row = {
            "kind": "gemv",
            "label": f"gemv chain {count}x {k}x{n} f32",
            "dtype": "f32",
            "bytes": float(moved),
            "working_set": float(moved),
            "flops": 2.0 * count * k * n,
            "kernels": float(count),
            "m": 1.0,
            "k": float(k),
            "n": float(n),
        }
        timer = ft.partial(_time_gemv_chain, k, n, count, device, reps_per_pass(p), p.target_seconds)
        out.append(Point(f"gemv chain {count}x {k}x{n}", row, timer))
    return out


def _time_matmul(m: int, k: int, n: int, dtype: str, device, reps: int, target_seconds: float) -> list[float]:
    dt = jnp.dtype(_JNP_DTYPES[dtype])
    x = jax.device_put(jax.random.normal(_key(), (m, k), dt), device)
    w = jax.device_put(jax.random.normal(jax.random.fold_in(_key(), 1), (k, n), dt), device)
    return time_iterations(kernels.matmul, (x, w), reps, target_seconds)[0]


def matmul_points(p: Plan, device, kind: str, dtype: str) -> list[Point]:
    """`[m, k] @ [k, n]` matmuls in `dtype` over one hot weight: the GEMVs of
    `p.gemv_shapes` (`kind` "gemv", m = 1) or the GEMMs of `p.gemm_shapes` ("gemm")."""
    shapes = [(1, k, n) for k, n in p.gemv_shapes] if kind == "gemv" else list(p.gemm_shapes)
    out = []
    for m, k, n in shapes:
        moved = (m * k + k * n + m * n) * jnp.dtype(_JNP_DTYPES[dtype]).itemsize
        row = {
            "kind": kind,
            "label": f"{kind} {m}x{k}x{n} {dtype}",
            "dtype": dtype,
            "bytes": float(moved),
            "working_set": float(moved),
            "flops": 2.0 * m * k * n,
            "m": float(m),
            "k": float(k),
            "n": float(n),
        }
        description = f"gemv {k}x{n} {dtype}" if kind == "gemv" else f"gemm {m}x{k}x{n} {dtype}"
        timer = ft.partial(_time_matmul, m, k, n, dtype, device, reps_per_pass(p), p.target_seconds)
        out.append(Point(description, row, timer))
    return out


def _attention_row(label: str, batch: int, context: int, h: int, kvh: int, hd: int, layers: int, dtype: str) -> dict:
    """The trace row of decode attention in `dtype` over `layers` caches (one per layer)."""
    size = jnp.dtype(_JNP_DTYPES[dtype]).itemsize
    kv = layers * 2.0 * batch * context * kvh * hd * size
    row = {
        "kind": "attention_decode",
        "label": label,
        "dtype": dtype,
        "bytes": kv + layers * 2.0 * batch * h * hd * size,
        "working_set": kv,
        "flops": layers * 4.0 * batch * h * hd * context,
        "batch": float(batch),
        "context": float(context),
        "n_heads": float(h),
        "n_kv_heads": float(kvh),
        "head_dim": float(hd),
    }
    if layers > 1:
        row["kernels"] = float(layers)
    return row


def _attention_operands(key, batch: int, context: int, h: int, kvh: int, hd: int, device, dtype: str = "f32"):
    """A query `[batch * kv_heads, group, head_dim]` and the K (transposed) and V caches
    of one layer, in the layout of `calibration.measure.transformer`."""
    dt = jnp.dtype(_JNP_DTYPES[dtype])
    q = jax.random.normal(key, (batch * kvh, h // kvh, hd), dt)
    kc = jax.random.normal(jax.random.fold_in(key, 2), (batch * kvh, hd, context), dt)
    vc = jax.random.normal(jax.random.fold_in(key, 3), (batch * kvh, context, hd), dt)
    return tuple(jax.device_put(a, device) for a in (q, kc, vc))


def _time_attention(batch, context, h, kvh, hd, device, reps: int, target_seconds: float, dtype: str) -> list[float]:
    q, kc, vc = _attention_operands(_key(), batch, context, h, kvh, hd, device, dtype)
    return time_iterations(kernels.attention, (q, kc, vc), reps, target_seconds)[0]


def attention_points(p: Plan, device) -> list[Point]:
    """Decode attention in `p.attention_dtype` over one hot cache (`p.attention`)."""
    out = []
    dtype = p.attention_dtype
    for batch, context, h, kvh in p.attention:
        label = f"attention b{batch} t{context} h{h}/{kvh}" + ("" if dtype == "f32" else f" {dtype}")
        row = _attention_row(label, batch, context, h, kvh, p.head_dim, 1, dtype)
        timer = ft.partial(
            _time_attention, batch, context, h, kvh, p.head_dim, device, reps_per_pass(p), p.target_seconds, dtype
        )
        out.append(Point(label, row, timer))
    return out


def _time_attention_chain(
    batch, context, h, kvh, hd, layers, device, reps: int, target_seconds: float, dtype: str
) -> list[float]:
    operands = [
        _attention_operands(jax.random.fold_in(_key(), 10 + i), batch, context, h, kvh, hd, device, dtype)
        for i in range(layers)
    ]
    qs, kcs, vcs = (list(x) for x in zip(*operands))
    return time_iterations(kernels.attention_chain, (qs, kcs, vcs), reps, target_seconds)[0]


def attention_chain_points(p: Plan, device) -> list[Point]:
    """Decode attention in `p.attention_dtype` over `layers` distinct caches per call,
    each read once (`p.attention_chains`)."""
    out = []
    dtype = p.attention_dtype
    for batch, context, h, kvh, layers in p.attention_chains:
        label = f"attention chain {layers}x b{batch} t{context} h{h}/{kvh}" + ("" if dtype == "f32" else f" {dtype}")
        row = _attention_row(label, batch, context, h, kvh, p.head_dim, layers, dtype)
        timer = ft.partial(
            _time_attention_chain,
            batch,
            context,
            h,
            kvh,
            p.head_dim,
            layers,
            device,
            reps_per_pass(p),
            p.target_seconds,
            dtype,
        )
        out.append(Point(label, row, timer))
    return out


def _time_decode_step(
    cfg: Config, batch: int, context: int, device, reps: int, target_seconds: float, dtype: str = "f32"
) -> list[float]:
    from . import transformer  # flax: imported only when a decode step is measured

    with jax.default_device(device):
        model, params, tokens, kc, vc = transformer.init(cfg, batch, context, jnp.dtype(_JNP_DTYPES[dtype]))
        run = transformer.decode_loop(model)
        return time_iterations(run, (params, tokens, kc, vc), reps, target_seconds, carry=3, min_n=2)[0]


def decode_step_points(p: Plan, device) -> list[Point]:
    """Greedy decode steps in `p.decode_dtype` (weights and KV cache) of the flax
    decoders `p.decode_models` at each (batch, context) of `p.decode_points`, the KV
    cache full."""
    out = []
    dtype = p.decode_dtype
    size = jnp.dtype(_JNP_DTYPES[dtype]).itemsize
    for cfg in p.decode_models:
        for batch, context in p.decode_points:
            row = {
                "kind": "decode_step",
                "label": f"{cfg.name} ({cfg.n_params * size / MB:.0f} MiB {dtype}) b{batch} t{context}",
                "n_layers": float(cfg.n_layers),
                "d_model": float(cfg.d_model),
                "n_heads": float(cfg.n_heads),
                "n_kv_heads": float(cfg.n_kv_heads),
                "head_dim": float(cfg.head_dim),
                "d_ff": float(cfg.d_ff),
                "vocab": float(cfg.vocab),
                "ffn_matrices": 3.0,
                "tied_embeddings": 0.0,
                "batch": float(batch),
                "context": float(context),
                "weights": dtype,
                "kv": dtype,
            }
            timer = ft.partial(
                _time_decode_step, cfg, batch, context, device, reps_per_pass(p), p.target_seconds, dtype
            )
            out.append(Point(f"decode {cfg.name} b{batch} t{context}", row, timer))
    return out


# --- the driver -----------------------------------------------------------------


def plan_points(p: Plan, kinds: tuple[str, ...], device) -> list[Point]:
    """The points of plan `p` of the given kinds, in trace row order."""
    out = []
    if "stream" in kinds:
        out += stream_points(p, device)
    if "gemv" in kinds:
        out += gemv_chain_points(p, device)
    for dtype in p.dtypes:
        if "gemv" in kinds:
            out += matmul_points(p, device, "gemv", dtype)
        if "gemm" in kinds:
            out += matmul_points(p, device, "gemm", dtype)
    if "attention_decode" in kinds:
        out += attention_points(p, device) + attention_chain_points(p, device)
    if "decode_step" in kinds:
        out += decode_step_points(p, device)
    return out


def measure_points(points: list[Point], passes: int, progress: bool = False) -> list[list[float]]:
    """The per-repetition seconds of every point, pooled over `passes` passes.

    Every point is measured once per pass, each pass in a new shuffled order: on a
    shared machine the load drifts, and this spreads it evenly over the kinds instead
    of biasing whichever kind is measured last.
    """
    order_rng = np.random.default_rng(0)
    schedule = [int(i) for _ in range(passes) for i in order_rng.permutation(len(points))]
    times: list[list[float]] = [[] for _ in points]
    if not progress:
        for i in schedule:
            times[i] += points[i].measure()
        return times
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress(
        TextColumn("[bold]bench[/]"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("{task.description}"),
    ) as bar:
        task = bar.add_task("", total=len(schedule))
        for i in schedule:
            bar.update(task, description=points[i].description)
            times[i] += points[i].measure()
            bar.advance(task)
    return times


def run_bench(
    quick: bool = False,
    device=None,
    progress: bool = True,
    kinds: tuple[str, ...] | None = None,
    the_plan: Plan | None = None,
) -> list[dict]:
    """Measures a trace on `device` (default: `jax.devices()[0]`).

    Args:
        quick: the short plan (under two minutes on a 2-core CPU).
        device: a JAX device.
        progress: show a rich progress bar.
        kinds: restrict to these kinds (default all).
        the_plan: a custom `Plan` (overrides `quick`).

    Returns:
        Trace rows (see `calibration.trace`), in plan order.
    """
    p = the_plan or plan(quick)
    device = device or jax.devices()[0]
    points = plan_points(p, tuple(kinds or KINDS), device)
    times = measure_points(points, p.passes, progress)
    common = {"device": device_description(device), "software": software_description()}
    rows = []
    for point, t in zip(points, times):
        seconds, spread = median_and_spread(t)
        rows.append({**point.row, "seconds": seconds, "spread_seconds": spread, "reps": float(len(t)), **common})
    return rows
