"""Config sampling inside the compiled program, in uint32: a keyed Feistel permutation
and a Latin hypercube built on it.

Config `i` of a sweep is a pure function of the spec and `i`, so any range of configs
can be generated on its own (no shared state between chunks, devices or hosts). JAX
runs without 64-bit integers, so indices are uint32 and a sweep has at most
`MAX_CONFIGS` configs.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Sequence

import jax
import jax.numpy as jnp
import numpy as np


MAX_CONFIGS = 2**32 - 1
"""Most configs a sweep may have: config indices are uint32 inside the program (JAX
runs without 64-bit integers)."""


def _key(*parts: int) -> int:
    """A 32-bit key from integers (seed, dimension, purpose, round), on the host."""
    return int.from_bytes(hashlib.sha256(json.dumps(parts).encode()).digest()[:4], "little")


def _hash32(x: jax.Array) -> jax.Array:
    """`lowbias32` (C. Wellons' 32-bit integer hash): a bijection of uint32, wrapping."""
    x = x ^ (x >> 16)
    x = x * jnp.uint32(0x7FEB352D)
    x = x ^ (x >> 15)
    x = x * jnp.uint32(0x846CA68B)
    return x ^ (x >> 16)


def _bits(n: int) -> int:
    """Bits that hold every index of `[0, n)` (0 for n = 1); exact integer arithmetic."""
    return (n - 1).bit_length()


def _radices(n: int) -> tuple[int, int]:
    """(a, b): the smallest `a >= sqrt(n)` and `b = ceil(n / a)`, so `n <= a * b < n + a`."""
    a = max(1, math.isqrt(n - 1) + 1) if n > 1 else 1
    return a, -(-n // a)


def permute(index: jax.Array, n: int, keys: jax.Array | Sequence[int]) -> jax.Array:
    """Keyed pseudo-random permutations of `[0, n)`, evaluated at `index` (uint32).

    A 4-round alternating Feistel network with modular addition (as format-preserving
    encryption's FFX A2) on `[0, a * b)`, `a * b` just above `n` (`_radices`): a round
    maps the pair `(left, right) = (x // b, x % b)` in `[0, a) x [0, b)` to `(right,
    (left + F(right)) % a)` in `[0, b) x [0, a)` (then `a` and `b` swap roles; after
    the 4th the pair is back in `[0, a) x [0, b)`), with `F` the round key mixed by
    `_hash32` and scaled into `[0, a)`. It is cycle-walked back into `[0, n)` (an
    index that lands outside is permuted again until it lands inside, which keeps it a
    bijection), which is rarely needed: at most `a - 1 < sqrt(n)` of the `a * b`
    indices lie outside. Computed per index, so any slice of a permutation of 10^9
    items costs only its own length. Traceable.

    Args:
        index: uint32 indices in `[0, n)`, shape `(..., m)`.
        n: the permuted range, `1 <= n <= MAX_CONFIGS`.
        keys: one 32-bit key per permutation, shape `index.shape[:-1]` (e.g. one per
            dimension of a Latin hypercube, with `index` of shape `(dims, m)`).

    Examples:
        >>> import numpy as np, costmodel.sweep as sw
        >>> sorted(np.asarray(sw.permute(np.arange(10, dtype=np.uint32), 10, 3)).tolist())
        [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]
    """
    assert 1 <= n <= MAX_CONFIGS, n
    x = jnp.asarray(index, jnp.uint32)
    keys32 = np.asarray(keys, np.uint64).astype(np.uint32)
    assert keys32.shape == x.shape[:-1], (keys32.shape, x.shape)
    rounds = [
        jnp.asarray(np.vectorize(lambda k, r=r: _key(int(k), r), otypes=[np.uint32])(keys32))[..., None]
        for r in range(4)
    ]
    a, b = _radices(n)

    def once(x):
        # The state is the pair (x // b, x % b); a round maps (left, right) in [0, a) x [0, b)
        # to (right, (left + F(right)) % a) in [0, b) x [0, a): no division inside.
        left, right = x // jnp.uint32(b), x % jnp.uint32(b)
        for r, k in enumerate(rounds):
            ra = jnp.uint32(a if r % 2 == 0 else b)
            f = ((_hash32(right ^ k) >> 16) * ra) >> 16  # in [0, ra): ra <= 2**16
            mixed = left + f
            left, right = right, jnp.where(mixed >= ra, mixed - ra, mixed)
        return left * jnp.uint32(b) + right

    y = once(x)
    if a * b > n:
        top = jnp.uint32(n)
        y = jax.lax.while_loop(lambda y: jnp.any(y >= top), lambda y: jnp.where(y >= top, once(y), y), y)
    return y


def latin_hypercube(index: jax.Array, n: int, dims: int, seed: int) -> jax.Array:
    """Points `index` of an `n`-point Latin hypercube in [0, 1)**dims, shape `(dims, m)`.

    Along every dimension each of the `n` strata `[k/n, (k+1)/n)` holds exactly one
    point: `k` is `permute(index, n, _key(seed, dim, 1))`, an independent keyed
    permutation per dimension; the point's place inside its stratum is a keyed hash of
    `index`. Float32: the jitter has `24 - bits(n - 1)` bits (none past 2**24 points),
    so `k + jitter` is exact and below `k + 1`; the division by `n` rounds to float32.
    The same point whatever chunk `index` comes in (each point is its own function).
    """
    index = jnp.asarray(index, jnp.uint32)
    at = jnp.broadcast_to(index[None, :], (dims, index.shape[0]))
    stratum = permute(at, n, [_key(seed, d, 1) for d in range(dims)])
    # Through int32 where the value fits: x86 has no vector uint32 -> float32 conversion.
    x = (stratum.astype(jnp.int32) if n <= 2**31 else stratum).astype(jnp.float32)
    q = max(0, 24 - _bits(n))
    if q:
        jitter_keys = jnp.asarray(np.array([_key(seed, d, 2) for d in range(dims)], np.uint32))[:, None]
        h = _hash32(at ^ jitter_keys)
        x = x + (h >> (32 - q)).astype(jnp.int32).astype(jnp.float32) * jnp.float32(2.0**-q)
    return jnp.minimum(x / jnp.float32(n), jnp.float32(1 - 2**-24))
