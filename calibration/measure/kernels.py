"""The jitted microbenchmark kernels: each repeats its kernel `n` times in one program.

Every kernel carries a dependency from one iteration to the next (a tiny multiple of
the previous result added to an input), so XLA can hoist nothing out of the loop, and
returns a scalar or the carried array for `block_until_ready`.
"""

from __future__ import annotations

import math

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
    # layout of calibration.measure.transformer.
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
