"""Lowering a workload to the memory traffic of one decode step.

A decode step reads every weight the batch routes through and, for every sequence,
its whole KV history (or its window), and writes one new token of KV per sequence
and layer. The traffic is grouped in a fixed set of *block classes*: identical blocks
with a count, so the shapes are the same for every model and `vmap` sweeps them.
"""

import equinox as eqx
import jax.numpy as jnp

from .types import PerClass
from .workload import Workload


CLASSES = (
    "weights.attention",
    "weights.ffn",
    "weights.experts",
    "weights.head",
    "kv.global",
    "kv.prefix",
    "kv.window",
)
"""Names of the block classes, in row order of a placement matrix."""

IS_KV = tuple(name.startswith("kv.") for name in CLASSES)
"""Which classes are KV cache (attention state), as opposed to weights."""

N_WEIGHT_CLASSES = IS_KV.index(True)
"""Weight classes come first in `CLASSES`, then the KV classes."""
N_KV_CLASSES = len(CLASSES) - N_WEIGHT_CLASSES

WEIGHT_TILE_ROWS = 256
"""A weight block is a tile of this many rows of `d_model` weights."""

KV_PAGE_TOKENS = 256
"""A KV block is a page of this many tokens of one layer of one sequence."""


class Traffic(eqx.Module):
    """Per block class, what one decode step stores, reads, writes and computes.

    All figures are for the whole system (all chips together).

    Attributes:
        count: blocks in the class (may be fractional before hardening).
        block_bytes: bytes per block, B.
        reads: bytes read per step per byte stored (1 for dense weights and KV;
            the expected expert coverage for routed MoE experts).
        writes: bytes written per step (the new token's KV), B.
        flops: FLOPs per step on the bytes of this class, FLOP.
        precision: compute precision class of those FLOPs (index into
            `costmodel.PRECISIONS`).
        kernel_bytes: operand bytes of one kernel over the class, B: a weight
            matrix (the bytes-weighted geometric mean of the Q/O and K/V projections
            for attention; one expert's matrix for experts), or one layer's K (or V)
            cache for the whole batch (private history and shared prefix together;
            the window for sliding layers); what `Chip.small_kernel_bytes` is
            compared with.
    """

    count: PerClass
    block_bytes: PerClass
    reads: PerClass
    writes: PerClass
    flops: PerClass
    precision: PerClass
    kernel_bytes: PerClass

    @property
    def stored_bytes(self) -> PerClass:
        return self.count * self.block_bytes

    @property
    def read_bytes(self) -> PerClass:
        return self.stored_bytes * self.reads

    @property
    def intensity(self) -> PerClass:
        """FLOPs per byte read (0 for an empty class)."""
        # Double where: an empty class (no experts, no prefix) has no bytes.
        read = self.read_bytes
        ok = read > 0
        return jnp.where(ok, self.flops / jnp.where(ok, read, 1.0), 0.0)


def expert_coverage(n_experts, top_k, batch):
    """Expected fraction of a layer's routed experts touched by a batch.

    Each of `batch` tokens picks `top_k` of `n_experts` experts; with uniform routing
    an expert is missed by one token with probability `1 - top_k / n_experts`, so the
    expected coverage is `1 - (1 - top_k/n_experts)**batch`.
    """
    # Double where: a dense model has n_experts == 0.
    moe = n_experts > 0
    miss = 1.0 - top_k / jnp.where(moe, n_experts, 1.0)
    return jnp.where(moe, 1.0 - jnp.clip(miss, 0.0, 1.0) ** batch, 0.0)


def lower_traffic(workload: Workload) -> Traffic:
    """Lowers a workload to per-class decode traffic.

    Args:
        workload: the model and its decode scenario.

    Returns:
        The `Traffic` of one decode step, with one entry per class in `CLASSES`.

    Examples:
        >>> import costmodel as cm
        >>> t = cm.lower_traffic(cm.Workload(cm.model_preset("llama-3-8b"), cm.Scenario(batch=1, context=4096)))
        >>> round(float(t.read_bytes.sum()) / 1e9, 2)  # GB read per step: weights + KV
        15.55
    """
    m, s = workload.model, workload.scenario
    wb, kb = s.weight_bytes, s.kv_bytes
    tile = WEIGHT_TILE_ROWS * m.d_model  # weights per weight block
    kv_el = m.kv_elements_per_token_per_layer
    page = KV_PAGE_TOKENS

    attn_params = m.n_layers * m.attention_params_per_layer
    ffn_params = m.n_layers * m.dense_ffn_params_per_layer
    expert_params = m.n_layers * m.n_experts * m.ffn_params_per_expert
    head_stored = (2 - m.tied_embeddings) * m.vocab * m.d_model
    head_read = m.vocab * m.d_model
    coverage = expert_coverage(m.n_experts, m.top_k, s.batch)

    private = jnp.maximum(s.context - s.prefix, 0.0)
    window = jnp.minimum(m.window, s.context)
    # QK^T and softmax(.)V: 2 FLOPs per multiply-add, two matmuls, per query head.
    attn_flops_per_token = 4 * m.n_heads * m.head_dim
    new_kv = s.batch * kv_el * kb  # one new token of KV per sequence and layer

    count = jnp.stack(
        [
            attn_params / tile,
            ffn_params / tile,
            expert_params / tile,
            head_stored / tile,
            m.n_global_layers * s.batch * private / page,
            m.n_global_layers * s.prefix / page,
            m.n_sliding_layers * s.batch * window / page,
        ]
    )
    block_bytes = jnp.stack([tile * wb] * N_WEIGHT_CLASSES + [page * kv_el * kb] * N_KV_CLASSES)
    head_reads = head_read / head_stored
    reads = jnp.stack([jnp.ones_like(wb), jnp.ones_like(wb), coverage, head_reads])
    reads = jnp.concatenate([reads, jnp.ones((N_KV_CLASSES,), reads.dtype)])
    zero = jnp.zeros_like(wb)
    writes = jnp.stack([zero, zero, zero, zero, m.n_global_layers * new_kv, zero, m.n_sliding_layers * new_kv])
    flops = jnp.stack(
        [
            2 * s.batch * attn_params,
            2 * s.batch * ffn_params,
            jnp.where(m.n_experts > 0, 2 * s.batch * m.top_k * m.n_layers * m.ffn_params_per_expert, 0.0),
            2 * s.batch * head_read,
            attn_flops_per_token * s.batch * private * m.n_global_layers,
            attn_flops_per_token * s.batch * s.prefix * m.n_global_layers,
            attn_flops_per_token * s.batch * window * m.n_sliding_layers,
        ]
    )
    wp = s.weight_precision.astype(wb.dtype)
    kp = s.kv_precision.astype(wb.dtype)
    precision = jnp.stack([wp, wp, wp, wp, kp, kp, kp])

    # One kernel's operand: a weight matrix, or a layer's K (or V) for the batch.
    q_o = m.d_model * m.n_heads * m.head_dim * wb
    k_v = m.d_model * m.n_kv_heads * m.head_dim * wb
    # Geometric mean, weighted by bytes, of the attention projections' sizes (a
    # dense model always has both kinds, so the logs are of positive sizes).
    attention = jnp.exp((q_o * jnp.log(q_o) + k_v * jnp.log(k_v)) / (q_o + k_v))
    matrix = m.d_model * m.d_ff * wb
    per_token = m.n_kv_heads * m.head_dim * kb
    kernel_bytes = jnp.stack(
        [
            attention,
            matrix,
            matrix,
            m.vocab * m.d_model * wb,
            # One attention kernel reads a layer's shared prefix and private history
            # together (a paged cache), so both classes take the size of the two.
            (s.batch * private + s.prefix) * per_token,
            (s.batch * private + s.prefix) * per_token,
            s.batch * window * per_token,
        ]
    )
    return Traffic(count, block_bytes, reads, writes, flops, precision, kernel_bytes)
