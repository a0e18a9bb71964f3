"""A small Llama-style decoder with a KV cache, written with flax, for timing decode steps.

Random weights; pre-norm (RMSNorm) blocks with grouped-query attention and a SwiGLU
FFN, untied input embedding and output head, no biases: the same parameter count as
`costmodel.Model` with `ffn_matrices=3` and `tied_embeddings=0`, so a measured step
can be predicted by `costmodel.decode_cost` from the same dimensions.

The cache is full: every step attends over all `context` positions (the history) and
overwrites one position with the new token's key and value, so each step reads the
weights once and the whole KV cache once, as the cost model assumes.
"""

from __future__ import annotations

from typing import cast

import flax.linen as nn
import jax
import jax.numpy as jnp

from .plans import Config


class Block(nn.Module):
    cfg: Config
    dtype: jnp.dtype

    @nn.compact
    def __call__(self, x, k_cache, v_cache, pos):
        c = self.cfg
        dense = lambda n, name: nn.Dense(n, use_bias=False, dtype=self.dtype, param_dtype=self.dtype, name=name)
        b = x.shape[0]
        h = nn.RMSNorm(dtype=self.dtype, param_dtype=self.dtype, name="norm_attn")(x)
        g = c.n_heads // c.n_kv_heads
        # Caches are 3-D, batch and KV heads merged (a 4-D cache made XLA:CPU copy it
        # every step): keys transposed, [batch * kv_heads, head_dim, context], values
        # [batch * kv_heads, context, head_dim]. Both dots are then plain batched
        # matmuls with the long axis contiguous (3.5x faster on XLA:CPU than keys
        # stored [.., context, head_dim]).
        q = dense(c.n_heads * c.head_dim, "q")(h).reshape(b * c.n_kv_heads, g, c.head_dim)
        k = dense(c.n_kv_heads * c.head_dim, "k")(h).reshape(b * c.n_kv_heads, c.head_dim, 1)
        v = dense(c.n_kv_heads * c.head_dim, "v")(h).reshape(b * c.n_kv_heads, 1, c.head_dim)
        k_cache = jax.lax.dynamic_update_slice(k_cache, k.astype(k_cache.dtype), (0, 0, pos))
        v_cache = jax.lax.dynamic_update_slice(v_cache, v.astype(v_cache.dtype), (0, pos, 0))
        scores = jnp.einsum("ngd,ndt->ngt", q, k_cache) / jnp.sqrt(jnp.asarray(c.head_dim, q.dtype))
        probs = jax.nn.softmax(scores.astype(jnp.float32), axis=-1).astype(v_cache.dtype)
        out = jnp.einsum("ngt,ntd->ngd", probs, v_cache).reshape(b, c.n_heads * c.head_dim)
        x = x + dense(c.d_model, "o")(out)
        h = nn.RMSNorm(dtype=self.dtype, param_dtype=self.dtype, name="norm_ffn")(x)
        ffn = nn.silu(dense(c.d_ff, "gate")(h)) * dense(c.d_ff, "up")(h)
        return x + dense(c.d_model, "down")(ffn), k_cache, v_cache


class Decoder(nn.Module):
    """One decode step: tokens `[batch]` and caches in, logits `[batch, vocab]` and caches out."""

    cfg: Config
    dtype: jnp.dtype = jnp.float32

    @nn.compact
    def __call__(self, tokens, k_caches, v_caches, pos):
        c = self.cfg
        x = nn.Embed(c.vocab, c.d_model, dtype=self.dtype, param_dtype=self.dtype, name="embed")(tokens)
        k_caches, v_caches = list(k_caches), list(v_caches)
        for i in range(c.n_layers):
            x, k_caches[i], v_caches[i] = Block(c, self.dtype, name=f"block_{i}")(x, k_caches[i], v_caches[i], pos)
        x = nn.RMSNorm(dtype=self.dtype, param_dtype=self.dtype, name="norm_out")(x)
        logits = nn.Dense(c.vocab, use_bias=False, dtype=self.dtype, param_dtype=self.dtype, name="head")(x)
        return logits, tuple(k_caches), tuple(v_caches)


def init(cfg: Config, batch: int, context: int, dtype=jnp.float32, seed: int = 0):
    """Random parameters, a random full KV cache and first tokens for `batch` sequences."""
    model = Decoder(cfg, dtype)
    key = jax.random.PRNGKey(seed)
    k_params, k_cache, k_tok = jax.random.split(key, 3)
    shape = (batch * cfg.n_kv_heads, context, cfg.head_dim)
    k_shape = (batch * cfg.n_kv_heads, cfg.head_dim, context)  # keys transposed
    tokens = jax.random.randint(k_tok, (batch,), 0, cfg.vocab)
    keys = jax.random.split(k_cache, 2 * cfg.n_layers)
    k_caches = tuple(jax.random.normal(keys[i], k_shape, dtype) for i in range(cfg.n_layers))
    v_caches = tuple(jax.random.normal(keys[cfg.n_layers + i], shape, dtype) for i in range(cfg.n_layers))
    params = jax.jit(model.init)(k_params, tokens, k_caches, v_caches, jnp.int32(0))
    return model, params, tokens, k_caches, v_caches


def decode_loop(model: Decoder):
    """A jitted function running `n` greedy decode steps; returns the last tokens and caches.

    `n` is traced (a while loop), so timing different step counts does not recompile.
    The tokens and caches are donated: feed the returned ones to the next call, so the
    cache is updated in place across calls (no copy, no fresh pages per call).
    """

    def run(params, tokens, k_caches, v_caches, n):
        context = v_caches[0].shape[1]

        def step(i, carry):
            tok, kc, vc = carry
            logits, kc, vc = cast(tuple, model.apply(params, tok, kc, vc, i % context))
            return jnp.argmax(logits, axis=-1).astype(tok.dtype), kc, vc

        return jax.lax.fori_loop(0, n, step, (tokens, k_caches, v_caches))

    return jax.jit(run, donate_argnums=(1, 2, 3))
