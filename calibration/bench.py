"""Microbenchmarks and decode steps measured with JAX on one device.

Every point is a jitted function that repeats its kernel `n` times in one program
(`lax.fori_loop` with a loop-carried dependency, so nothing is hoisted), timed with
`block_until_ready`: one warm-up call compiles, `n` is chosen so a call lasts about
`target_seconds`, then `reps` calls are timed and the trace row holds the median time
per kernel (or per decode step) and the interquartile range. Repeating inside one
program removes the per-call dispatch cost from the figures (a decode loop written
with `lax.fori_loop`, as here, does not pay it either).
"""

from __future__ import annotations

import dataclasses
import math
import platform
import time
from collections.abc import Callable

import numpy as np


KB, MB, GB = 2**10, 2**20, 2**30


@dataclasses.dataclass(frozen=True)
class Plan:
    """What a run measures (sizes in bytes)."""

    stream_sizes: tuple[int, ...]
    gemv_shapes: tuple[tuple[int, int], ...]  # (k, n), m = 1
    gemm_shapes: tuple[tuple[int, int, int], ...]  # (m, k, n)
    chains: tuple[tuple[int, int, int], ...]  # (k, n, matrices): GEMVs over distinct matrices
    dtypes: tuple[str, ...]
    attention: tuple[tuple[int, int, int, int], ...]  # (batch, context, n_heads, n_kv_heads)
    head_dim: int
    decode_models: tuple  # transformer.Config
    decode_points: tuple[tuple[int, int], ...]  # (batch, context)
    reps: int
    target_seconds: float
    passes: int = 1
    # (batch, context, n_heads, n_kv_heads, layers): attention over distinct caches
    attention_chains: tuple[tuple[int, int, int, int, int], ...] = ()


def xla_cpu_thread_flags(threads: int) -> str:
    """XLA_FLAGS that run XLA:CPU's kernels on `threads` intra-op threads (1: single-
    threaded Eigen); append them to `XLA_FLAGS` before JAX initialises."""
    multi = "false" if threads == 1 else "true"
    return f"--xla_cpu_multi_thread_eigen={multi} intra_op_parallelism_threads={threads}"


def _geometric(lo: int, hi: int, per_octave: int) -> tuple[int, ...]:
    n = int(round(math.log2(hi / lo) * per_octave))
    sizes = [int(round(lo * 2 ** (i / per_octave) / 4096)) * 4096 for i in range(n + 1)]
    return tuple(sorted({max(s, 4096) for s in sizes}))


def decode_models(quick: bool):
    """Flax decoders whose f32 weights span ~3 MB to ~1 GB: below, around and above
    the caches of a CPU (2 MB L2 per core here; a shared L3 whose share is unknown)."""
    from .transformer import Config

    models = [
        Config("tiny", 2, 128, 2, 2, 64, 512, 1024),  # 3.1 MB
        Config("small", 4, 256, 4, 4, 64, 768, 2048),  # 18 MB
        Config("medium", 6, 512, 8, 4, 64, 1536, 4096),  # 92 MB
        Config("large", 8, 1024, 16, 4, 64, 2816, 8192),  # 428 MB
        Config("xl", 8, 1536, 24, 4, 64, 4096, 8192),  # 983 MB
    ]
    return tuple(models[:3] if quick else models)


def plan(quick: bool = False) -> Plan:
    if quick:
        return Plan(
            stream_sizes=_geometric(16 * KB, 512 * MB, 1),
            gemv_shapes=((1024, 1024), (4096, 4096)),
            gemm_shapes=((8, 1024, 1024), (64, 1024, 1024)),
            chains=((256, 1024, 16), (1024, 2048, 8)),
            dtypes=("f32", "bf16"),
            attention=((1, 1024, 8, 4), (4, 4096, 8, 4)),
            attention_chains=((4, 1024, 8, 4, 8),),
            head_dim=64,
            decode_models=decode_models(True),
            decode_points=((1, 256), (4, 1024)),
            reps=7,
            target_seconds=0.01,
        )
    return Plan(
        stream_sizes=_geometric(16 * KB, 2 * GB, 2),
        # Square shapes, plus the shapes of the decoder layers (d x 3.5d FFNs, skinny
        # batches over large weights), since XLA:CPU's matmul efficiency depends on them.
        gemv_shapes=(
            (512, 512),
            (1024, 1024),
            (2048, 2048),
            (4096, 4096),
            (1536, 4096),
            (4096, 1536),
            (1024, 8192),
            (4096, 16384),
            (8192, 16384),
        ),
        gemm_shapes=(
            (2, 2048, 2048),
            (4, 2048, 2048),
            (8, 2048, 2048),
            (16, 2048, 2048),
            (4, 1536, 4096),
            (8, 1536, 4096),
            (4, 4096, 1536),
            (8, 4096, 1536),
            (8, 1024, 8192),
            (64, 1024, 1024),
            (256, 1024, 1024),
            (16, 4096, 4096),
            # Skinny batches over weights far beyond the caches, as a decode step of
            # a large model at batch 2-16 reads them.
            (2, 4096, 16384),
            (4, 4096, 16384),
            (8, 4096, 16384),
            (16, 4096, 16384),
        ),
        # GEMVs over many distinct matrices, each read once per pass, as a decode
        # step reads its layers: unlike a loop over one hot matrix, they show the
        # rate at which a kernel streams from a cache level or DRAM, which on XLA:CPU
        # halves for matrices under about 2.5 MB (`Chip.small_kernel_bytes`).
        # Matrices of 64 KB to 25 MB (the layer shapes of the decoders below, and
        # either side of that step), chains of 1 MB (inside the L2) to 256 MB (far
        # beyond the L3).
        chains=(
            # Inside the L2: distinct tensors that all fit the inner level.
            (128, 128, 16),
            (128, 512, 4),
            # Matrices of 2 MB and 4 MB, 8 MB (either side of the kernel-size step),
            # inside the L3 and far beyond it.
            (128, 4096, 8),
            (256, 4096, 4),
            (1024, 1024, 4),
            (2048, 1024, 2),
            (128, 4096, 128),
            (256, 4096, 64),
            (128, 128, 64),
            (128, 512, 16),
            (128, 512, 64),
            (128, 512, 256),
            (512, 1536, 5),
            (512, 1536, 20),
            (512, 1536, 80),
            (256, 1024, 16),
            (1536, 4096, 3),
            (1536, 4096, 10),
            # The FFN down projections of the same decoders (k > n: XLA:CPU's GEMV
            # streams these tall matrices slower than the wide ones above).
            (1536, 512, 20),
            (1536, 512, 80),
            (4096, 1536, 10),
        ),
        dtypes=("f32", "bf16"),
        # Batch, context and head layouts of decode attention (query heads per KV head
        # 1 to 6, as in the decoders below).
        attention=(
            (1, 256, 8, 4),
            (1, 4096, 8, 4),
            (4, 1024, 8, 4),
            (4, 8192, 8, 4),
            (16, 512, 8, 4),
            (16, 4096, 8, 4),
            (1, 2048, 24, 4),
            (4, 512, 16, 4),
            (8, 2048, 2, 2),
            (8, 2048, 24, 4),
            # Caches far beyond the L3.
            (8, 16384, 8, 4),
            (4, 16384, 24, 4),
        ),
        # Attention over the caches of several layers, each read once per pass, as a
        # decode step reads them (the GEMV chains' counterpart): 34 MB inside the L3,
        # 134-268 MB far beyond it.
        attention_chains=(
            (4, 512, 16, 4, 8),
            (1, 8192, 24, 4, 8),
            (4, 4096, 16, 4, 8),
            (16, 1024, 8, 4, 8),
        ),
        head_dim=64,
        decode_models=decode_models(False),
        decode_points=((1, 256), (1, 2048), (4, 512), (8, 2048)),
        reps=21,
        target_seconds=0.02,
        passes=3,
    )


def device_description(device) -> str:
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
        import os

        return f"cpu: {name} ({os.cpu_count()} cores)"
    return f"{device.platform}: {getattr(device, 'device_kind', str(device))}"


def software_description() -> str:
    from importlib.metadata import version

    import jax

    parts = [f"jax {jax.__version__}", f"jaxlib {version('jaxlib')}"]
    try:
        import flax

        parts.append(f"flax {flax.__version__}")
    except ImportError:
        pass
    parts.append(f"python {platform.python_version()}")
    return ", ".join(parts)


def time_loop(
    fn: Callable, args: tuple, reps: int, target_seconds: float, carry: int = 0, min_n: int = 1
) -> tuple[float, float, int]:
    """Median and interquartile range of the time per iteration of `fn(*args, n)`.

    Args:
        fn: a jitted function whose last argument is the (traced) iteration count.
        args: its other arguments (already on the device).
        reps: timed calls.
        target_seconds: about how long one timed call should last.
        carry: when > 0, `fn` donates its last `carry` arguments and returns their
            new values, which are fed to the next call (a decode state).
        min_n: fewest iterations per timed call.

    Returns:
        (median s, IQR s, iterations per call).
    """
    import jax

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
    q1, med, q3 = np.percentile(times, [25, 50, 75])
    _LAST_TIMES[:] = times
    return float(med), float(q3 - q1), n


_LAST_TIMES: list[float] = []
"""The per-iteration times of the last `time_loop` call (for pooling over passes)."""


# --- the kernels ----------------------------------------------------------------


def _kernels():
    import jax
    import jax.numpy as jnp

    @jax.jit
    def stream(x, n):
        # Each pass reads all of x: a matrix-vector product with a vector that depends
        # on the previous pass, so XLA cannot hoist it out of the loop.
        ones = jnp.ones((x.shape[-1],), x.dtype)

        def body(i, acc):
            return acc + jnp.sum(x @ (ones + acc * 1e-30).astype(x.dtype)).astype(jnp.float32)

        return jax.lax.fori_loop(0, n, body, jnp.zeros((), jnp.float32))

    @jax.jit
    def matmul(x, w, n):
        def body(i, acc):
            y = (x + (acc * 1e-30).astype(x.dtype)) @ w
            return acc + jnp.sum(y.astype(jnp.float32))

        return jax.lax.fori_loop(0, n, body, jnp.zeros((), jnp.float32))

    @jax.jit
    def attention(q, k, v, n):
        # q [batch * kv_heads, group, head_dim]; keys transposed [batch * kv_heads,
        # head_dim, context]; values [batch * kv_heads, context, head_dim]: the cache
        # layout of calibration.transformer.
        scale = 1.0 / math.sqrt(q.shape[-1])

        def body(i, q):
            s = jnp.einsum("ngd,ndt->ngt", q, k) * scale
            p = jax.nn.softmax(s.astype(jnp.float32), axis=-1).astype(v.dtype)
            o = jnp.einsum("ngt,ntd->ngd", p, v)
            return q + (o * 1e-30).astype(q.dtype)

        return jax.lax.fori_loop(0, n, body, q)

    @jax.jit
    def chain(ws, xs, n):
        # One GEMV per matrix, each depending on the previous sum: nothing is hoisted
        # and the matrices are read in order, once per pass. The vectors are inputs,
        # not constants: XLA rewrites a dot with a broadcast scalar into a reduction.
        def body(i, acc):
            for w, x in zip(ws, xs):
                acc = acc + jnp.sum((x + (acc * 1e-30).astype(w.dtype)) @ w).astype(jnp.float32)
            return acc

        return jax.lax.fori_loop(0, n, body, jnp.zeros((), jnp.float32))

    @jax.jit
    def attention_chain(qs, ks, vs, n):
        # Decode attention over one cache per layer, each layer's query depending on
        # the previous layer's output: the caches are read in order, once per pass.
        scale = 1.0 / math.sqrt(qs[0].shape[-1])

        def body(i, acc):
            for q, k, v in zip(qs, ks, vs):
                s = jnp.einsum("ngd,ndt->ngt", q + (acc * 1e-30).astype(q.dtype), k) * scale
                p = jax.nn.softmax(s.astype(jnp.float32), axis=-1).astype(v.dtype)
                acc = acc + jnp.sum(jnp.einsum("ngt,ntd->ngd", p, v)).astype(jnp.float32)
            return acc

        return jax.lax.fori_loop(0, n, body, jnp.zeros((), jnp.float32))

    return stream, matmul, attention, chain, attention_chain


def _attention_row(label, batch, context, h, kvh, hd, layers, med, iqr) -> dict:
    """The trace row of f32 decode attention over `layers` caches (one per layer)."""
    kv = layers * 2.0 * batch * context * kvh * hd * 4
    row = {
        "kind": "attention_decode",
        "label": label,
        "dtype": "f32",
        "bytes": kv + layers * 2.0 * batch * h * hd * 4,
        "working_set": kv,
        "flops": layers * 4.0 * batch * h * hd * context,
        "batch": float(batch),
        "context": float(context),
        "n_heads": float(h),
        "n_kv_heads": float(kvh),
        "head_dim": float(hd),
        "seconds": med,
        "spread_seconds": iqr,
    }
    if layers > 1:
        row["kernels"] = float(layers)
    return row


_JNP_DTYPES = {"f32": "float32", "bf16": "bfloat16", "f16": "float16"}


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
        Trace rows (see `calibration.trace`).
    """
    import jax
    import jax.numpy as jnp

    from . import transformer
    from .trace import KINDS

    p = the_plan or plan(quick)
    reps_pp = max(1, math.ceil(p.reps / p.passes))  # repetitions per pass
    kinds = tuple(kinds or KINDS)
    device = device or jax.devices()[0]
    common = {"device": device_description(device), "software": software_description()}
    stream, matmul, attention, chain, attention_chain = _kernels()
    key = jax.random.PRNGKey(0)

    tasks: list[tuple[str, Callable[[], dict]]] = []

    def put(x):
        return jax.device_put(x, device)

    def add(label, thunk):
        tasks.append((label, thunk))

    if "stream" in kinds:
        for size in p.stream_sizes:

            def t_stream(size=size):
                cols = 1024
                x = put(jnp.ones((size // 4 // cols, cols), jnp.float32))
                med, iqr, _ = time_loop(stream, (x,), reps_pp, p.target_seconds)
                del x
                return {
                    "kind": "stream",
                    "label": f"stream {size / MB:.4g} MiB",
                    "dtype": "f32",
                    "bytes": float(size),
                    "working_set": float(size),
                    "flops": 2.0 * size / 4,
                    "m": float(size // 4 // cols),
                    "k": float(cols),
                    "n": 1.0,
                    "seconds": med,
                    "spread_seconds": iqr,
                }

            add(f"stream {size / MB:.3g} MiB", t_stream)

    def matmul_task(kind, m, k, n, dt):
        def t():
            dtype = jnp.dtype(_JNP_DTYPES[dt])
            x = put(jax.random.normal(key, (m, k), dtype))
            w = put(jax.random.normal(jax.random.fold_in(key, 1), (k, n), dtype))
            med, iqr, _ = time_loop(matmul, (x, w), reps_pp, p.target_seconds)
            b = dtype.itemsize
            moved = (m * k + k * n + m * n) * b
            return {
                "kind": kind,
                "label": f"{kind} {m}x{k}x{n} {dt}",
                "dtype": dt,
                "bytes": float(moved),
                "working_set": float(moved),
                "flops": 2.0 * m * k * n,
                "m": float(m),
                "k": float(k),
                "n": float(n),
                "seconds": med,
                "spread_seconds": iqr,
            }

        return t

    def chain_task(k, n, count):
        def t():
            keys = jax.random.split(key, count)
            ws = [put(jax.random.normal(kk, (k, n), jnp.float32)) for kk in keys]
            xs = [put(jax.random.normal(jax.random.fold_in(kk, 1), (1, k), jnp.float32)) for kk in keys]
            med, iqr, _ = time_loop(chain, (ws, xs), reps_pp, p.target_seconds)
            del ws, xs
            moved = count * (k * n + k + 1) * 4
            return {
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
                "seconds": med,
                "spread_seconds": iqr,
            }

        return t

    if "gemv" in kinds:
        for k, n, count in p.chains:
            add(f"gemv chain {count}x {k}x{n}", chain_task(k, n, count))
    for dt in p.dtypes:
        if "gemv" in kinds:
            for k, n in p.gemv_shapes:
                add(f"gemv {k}x{n} {dt}", matmul_task("gemv", 1, k, n, dt))
        if "gemm" in kinds:
            for m, k, n in p.gemm_shapes:
                add(f"gemm {m}x{k}x{n} {dt}", matmul_task("gemm", m, k, n, dt))

    if "attention_decode" in kinds:
        hd = p.head_dim
        for batch, context, h, kvh in p.attention:

            def t_attention(batch=batch, context=context, h=h, kvh=kvh):
                q = put(jax.random.normal(key, (batch * kvh, h // kvh, hd), jnp.float32))
                kc = put(jax.random.normal(jax.random.fold_in(key, 2), (batch * kvh, hd, context), jnp.float32))
                vc = put(jax.random.normal(jax.random.fold_in(key, 3), (batch * kvh, context, hd), jnp.float32))
                med, iqr, _ = time_loop(attention, (q, kc, vc), reps_pp, p.target_seconds)
                return _attention_row(
                    f"attention b{batch} t{context} h{h}/{kvh}", batch, context, h, kvh, hd, 1, med, iqr
                )

            add(f"attention b{batch} t{context} h{h}/{kvh}", t_attention)

        for batch, context, h, kvh, layers in p.attention_chains:

            def t_attention_chain(batch=batch, context=context, h=h, kvh=kvh, layers=layers):
                keys = [jax.random.fold_in(key, 10 + i) for i in range(layers)]
                qs = [put(jax.random.normal(kk, (batch * kvh, h // kvh, hd), jnp.float32)) for kk in keys]
                kcs = [
                    put(jax.random.normal(jax.random.fold_in(kk, 2), (batch * kvh, hd, context), jnp.float32))
                    for kk in keys
                ]
                vcs = [
                    put(jax.random.normal(jax.random.fold_in(kk, 3), (batch * kvh, context, hd), jnp.float32))
                    for kk in keys
                ]
                med, iqr, _ = time_loop(attention_chain, (qs, kcs, vcs), reps_pp, p.target_seconds)
                del qs, kcs, vcs
                label = f"attention chain {layers}x b{batch} t{context} h{h}/{kvh}"
                return _attention_row(label, batch, context, h, kvh, hd, layers, med, iqr)

            add(f"attention chain {layers}x b{batch} t{context} h{h}/{kvh}", t_attention_chain)

    if "decode_step" in kinds:
        for cfg in p.decode_models:
            for batch, context in p.decode_points:

                def t_decode(cfg=cfg, batch=batch, context=context):
                    with jax.default_device(device):
                        model, params, tokens, kc, vc = transformer.init(cfg, batch, context)
                        run = transformer.decode_loop(model)
                        med, iqr, _ = time_loop(
                            run, (params, tokens, kc, vc), reps_pp, p.target_seconds, carry=3, min_n=2
                        )
                    del params
                    return {
                        "kind": "decode_step",
                        "label": f"{cfg.name} ({cfg.n_params * 4 / MB:.0f} MiB f32) b{batch} t{context}",
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
                        "weights": "f32",
                        "kv": "f32",
                        "seconds": med,
                        "spread_seconds": iqr,
                    }

                add(f"decode {cfg.name} b{batch} t{context}", t_decode)

    # Every point is measured in `passes` passes over all points, each in a new
    # shuffled order, and its median is over the repetitions of all passes: on a
    # shared machine the load drifts, and this spreads it evenly over the kinds
    # instead of biasing whichever kind is measured last.
    order_rng = np.random.default_rng(0)
    pooled: dict[int, tuple[dict, list[float]]] = {}

    def measure(i):
        row = tasks[i][1]()
        prev = pooled.get(i, (row, []))[1]
        pooled[i] = (row, prev + list(_LAST_TIMES))

    schedule = [int(i) for _ in range(p.passes) for i in order_rng.permutation(len(tasks))]
    if progress:
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
                bar.update(task, description=tasks[i][0])
                measure(i)
                bar.advance(task)
    else:
        for i in schedule:
            measure(i)
    rows = []
    for i in range(len(tasks)):
        row, times = pooled[i]
        q1, med, q3 = np.percentile(times, [25, 50, 75])
        row["seconds"], row["spread_seconds"], row["reps"] = float(med), float(q3 - q1), float(len(times))
        rows.append(row)
    for r in rows:
        r.update(common)
    return rows
