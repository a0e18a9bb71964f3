"""Lowering a workload to the memory traffic of one decode step.

A decode step reads every weight the batch routes through and, for every sequence,
the part of its KV history the access profile reads (all of it, or its window, for
dense attention), and writes one new token of KV per sequence, query and layer. The
traffic is grouped in a fixed set of *rows*: identical blocks with a count, so the
shapes are the same for every model and `vmap` sweeps them. A weight class is one
row; a KV history class is `N_BUCKETS` rows of different heat (the sinks, then the
history by age), so a placement can hold the hot part of the history on chip.
"""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from .numerics import safe_div
from .types import PerClass, PerRow, Scalar
from .workload import BITS16, N_AGE_BUCKETS, N_BUCKETS, AccessProfile, Workload


WEIGHT_CLASSES = ("weights.attention", "weights.ffn", "weights.experts", "weights.head")
"""The weight classes: one placement row each (the blocks of one are read alike)."""

HISTORY_CLASSES = ("kv.global", "kv.prefix", "kv.window")
"""The KV history classes, each split into `N_BUCKETS` heat buckets (placement rows):
the private history of global layers, the prefix shared by the batch (global layers),
and the window of sliding-window layers."""

CLASSES = WEIGHT_CLASSES + HISTORY_CLASSES + ("kv.idle",)
"""Names of the block classes: weights, the KV history, and the KV of stored but idle
conversations (one row: never read this step)."""

BUCKETS = ("sinks",) + tuple(f"age{i:02d}" for i in range(N_AGE_BUCKETS))
"""Heat buckets of a history class: the attention sinks, then the age buckets from the
newest tokens to the oldest (`AccessProfile.edges`)."""

ROWS = WEIGHT_CLASSES + tuple(f"{c}.{b}" for c in HISTORY_CLASSES for b in BUCKETS) + ("kv.idle",)
"""Names of the rows of a placement matrix (and of every per-row `Traffic` array)."""

ROW_CLASS = tuple(CLASSES.index(r if r in CLASSES else r.rsplit(".", 1)[0]) for r in ROWS)
"""Index into `CLASSES` of each row."""

IS_KV = tuple(name.startswith("kv.") for name in ROWS)
"""Which rows are KV cache (attention state), as opposed to weights."""

N_WEIGHT_CLASSES = len(WEIGHT_CLASSES)
"""Weight rows come first in `ROWS`, then the KV rows."""
N_ROWS = len(ROWS)
NEWEST = 1
"""Bucket index of the newest tokens (the first age bucket)."""

WEIGHT_TILE_ROWS = 256
"""A weight block is a tile of this many rows of `d_model` weights."""

KV_PAGE_TOKENS = 256
"""A KV block is a page of this many tokens of one layer of one sequence."""


CLASS_IS_KV = tuple(name.startswith("kv.") for name in CLASSES)
"""Which classes are KV cache."""

N_CLASSES = len(CLASSES)
"""Rows of the *class layout*: one row per class, the heat buckets of each history class
summed (`lower_traffic(..., buckets=False)`). Exact wherever the buckets of a class
share their tiers: a placement that keeps every class whole (`dram`), or a profile that
reads every bucket alike (dense), up to whole-block rounding. A per-row array says
which layout it is in by its length (`N_ROWS` or `N_CLASSES`, never equal)."""


def row_is_kv(n_rows: int) -> tuple[bool, ...]:
    """`IS_KV` of the layout with `n_rows` rows (`N_ROWS`, or `N_CLASSES`: `CLASS_IS_KV`)."""
    return CLASS_IS_KV if n_rows == N_CLASSES else IS_KV


_H0, _H1 = N_WEIGHT_CLASSES, N_WEIGHT_CLASSES + len(HISTORY_CLASSES) * N_BUCKETS  # history rows


# Sums by slices and reshapes, not by matmuls or gathers: XLA:CPU runs those several
# times slower under vmap (the sweep's hot path; measured with benchmarks/sweep_bench.py).


def class_sum(per_row, axis: int = -1):
    """Sums a per-row array over the rows of each of `CLASSES` (along `axis`, of length
    `N_ROWS`): the weight rows as they are, each history class's buckets summed."""
    x = jnp.asarray(per_row)
    if x.shape[axis] == N_CLASSES:  # the class layout: one row per class already
        return x
    if axis in (0, -x.ndim) and x.ndim == 2:  # [rows, k]: slices and one reduction
        history = jnp.sum(jnp.reshape(x[_H0:_H1], (len(HISTORY_CLASSES), N_BUCKETS, x.shape[1])), axis=1)
        return jnp.concatenate([x[:_H0], history, x[_H1:]], axis=0)
    x = jnp.moveaxis(x, axis, -1)
    history = jnp.sum(jnp.reshape(x[..., _H0:_H1], (*x.shape[:-1], len(HISTORY_CLASSES), N_BUCKETS)), axis=-1)
    return jnp.moveaxis(jnp.concatenate([x[..., :_H0], history, x[..., _H1:]], axis=-1), -1, axis)


def class_rows(per_class, n_rows: int = N_ROWS):
    """A per-class array (last axis `CLASSES`) repeated over each class's rows (of the
    layout with `n_rows` rows: in the class layout, as it is)."""
    if n_rows == N_CLASSES:
        return jnp.asarray(per_class)
    return jnp.asarray(per_class)[..., np.asarray(ROW_CLASS)]


def to_rows(weights, history, idle):
    """A per-row array from its parts: `[N_WEIGHT_CLASSES]` weights, `[len(HISTORY_CLASSES),
    N_BUCKETS]` history buckets and the idle row (`[..., 1]`)."""
    flat = jnp.reshape(history, (*history.shape[:-2], -1))
    return jnp.concatenate([weights, flat, idle], axis=-1)


class Traffic(eqx.Module):
    """Per row (a weight class, or a heat bucket of a KV class), what one decode step
    stores, reads, writes and computes; per class, the kernels' precision and size.

    All figures are for the whole system (all chips together).

    Attributes:
        count: blocks in the row (may be fractional before hardening).
        block_bytes: bytes per block, B.
        reads: bytes read per step per byte stored (1 for dense weights and KV;
            the expected expert coverage for routed MoE experts; the read
            probability of the bucket for KV under an access profile).
        writes: bytes written per step (the new token's KV), B.
        flops: FLOPs per step on the bytes of this row, FLOP.
        precision: per class, compute precision class of its FLOPs (index into
            `costmodel.PRECISIONS`).
        heads_per_kv_head: the model's query heads per K/V head (1 without GQA): how
            many times a kernel that does not share a K/V read across a group
            streams it (`Chip.attention_kv_rereads`, `Chip.attention_heads_per_block`).
        kernel_bytes: per class, operand bytes of one kernel over the class, B: a
            weight matrix (the bytes-weighted geometric mean of the Q/O and K/V
            projections for attention; one expert's matrix for experts), or the
            K (or V) cache one layer's attention kernel reads for the whole batch
            (private history and shared prefix together; the window for sliding
            layers); what `Chip.small_kernel_bytes` is compared with.
    """

    count: PerRow
    block_bytes: PerRow
    reads: PerRow
    writes: PerRow
    flops: PerRow
    precision: PerClass
    kernel_bytes: PerClass
    heads_per_kv_head: Scalar

    @property
    def stored_bytes(self) -> PerRow:
        return self.count * self.block_bytes

    @property
    def read_bytes(self) -> PerRow:
        return self.stored_bytes * self.reads

    @property
    def intensity(self) -> PerClass:
        """FLOPs per byte read of each class (0 for an empty class)."""
        return safe_div(class_sum(self.flops), class_sum(self.read_bytes))


def expert_coverage(n_experts, top_k, batch):
    """Expected fraction of a layer's routed experts touched by a batch.

    Each of `batch` tokens picks `top_k` of `n_experts` experts; with uniform routing
    an expert is missed by one token with probability `1 - top_k / n_experts`, so the
    expected coverage is `1 - (1 - top_k/n_experts)**batch`.
    """
    # Double where: a dense model has n_experts == 0.
    moe = n_experts > 0
    picked = jnp.clip(top_k / jnp.where(moe, n_experts, 1.0), 0.0, 1.0)
    return jnp.where(moe, _union(picked, batch), 0.0)


def _regions(lo, hi, context, profile: AccessProfile):
    """Tokens per sequence of the ages `[lo, hi)` (one span per history class, `[classes,
    1]`) in each bucket, split into sinks, recent tokens and the rest: three
    `[classes, N_BUCKETS]` arrays.

    Bucket 0 holds the ages of the sinks, `[context - sinks, context)`; the age buckets
    hold `[e_i, e_(i+1))` below them. Every split is one interval overlap, `max(min(b,
    hi) - max(a, lo), 0)`, so the whole is a few elementwise operations.
    """
    sinks = jnp.minimum(profile.sink_tokens, context)
    oldest = context - sinks  # ages [oldest, context) are the sinks
    recent = jnp.minimum(profile.recent_tokens + profile.recent_fraction * context, oldest)
    # Bucket edges without concatenating (which XLA:CPU runs slowly under vmap): the
    # sinks bucket by a mask, the age buckets from the edges shifted by one.
    edges = jnp.pad(profile.edges, (1, 1), constant_values=jnp.inf)  # [inf, e_1 .. e_14, inf]
    first = jnp.arange(N_BUCKETS) == 0
    is_age1 = jnp.arange(N_BUCKETS) == 1
    lower = jnp.where(first, oldest, jnp.where(is_age1, 0.0, jnp.minimum(jnp.roll(edges, 1), oldest)))
    upper = jnp.where(first, context, jnp.minimum(edges, oldest))
    lower, upper = lower[None, :], upper[None, :]
    total = jnp.maximum(jnp.minimum(upper, hi) - jnp.maximum(lower, lo), 0.0)
    near = jnp.maximum(jnp.minimum(upper, jnp.minimum(hi, recent)) - jnp.maximum(lower, lo), 0.0)
    sink = jnp.where(first[None, :], total, 0.0)
    return sink, near, total - near - sink


def _class_regions(lo, hi, context, profile: AccessProfile):
    """`_regions` summed over the buckets of each class: three `[classes, 1]` arrays.

    The buckets partition the ages `[0, context)`: the sinks `[oldest, context)` and the
    age buckets below, so their sums are the overlaps of `[lo, hi)` with the sinks, with
    the recent tokens below the sinks, and with the whole history. Exact for every
    profile, and `N_BUCKETS` times fewer numbers.
    """
    sinks = jnp.minimum(profile.sink_tokens, context)
    oldest = context - sinks
    recent = jnp.minimum(profile.recent_tokens + profile.recent_fraction * context, oldest)
    total = jnp.maximum(jnp.minimum(context, hi) - jnp.maximum(0.0, lo), 0.0)
    sink = jnp.maximum(jnp.minimum(context, hi) - jnp.maximum(oldest, lo), 0.0)
    near = jnp.maximum(jnp.minimum(oldest, jnp.minimum(hi, recent)) - jnp.maximum(0.0, lo), 0.0)
    return sink, near, total - near - sink


def _selected(rest_tokens, history, profile: AccessProfile):
    """(kept, selected) for one layer group whose history has `rest_tokens` tokens
    beyond sinks and recent ones: the fraction of them stored (`kept_fraction` of the
    `history`, at most all), and the probability a stored one is read this step
    (`budget_tokens` of the stored, at most all)."""
    want = profile.kept_fraction * history
    kept = jnp.where(want >= rest_tokens, 1.0, safe_div(want, rest_tokens))
    stored = kept * rest_tokens
    budget = profile.budget_tokens
    # Double where: an infinite budget (dense) must not reach the division.
    small = budget < stored
    selected = jnp.where(small, jnp.where(small, budget, 0.0) / jnp.where(small, stored, 1.0), 1.0)
    return kept, selected


def _union(p, n):
    """Probability that at least one of `n` independent readers reads a block each
    reads with probability `p`: `1 - (1 - p)**n`."""
    # Double where: p = 1 gives 0**n, whose derivative in n is NaN.
    some = p < 1.0
    return jnp.where(some, 1.0 - jnp.where(some, 1.0 - p, 0.5) ** n, 1.0)


def _history(model, profile: AccessProfile, batch, context, prefix, buckets: bool = True):
    """Per history class and bucket, tokens of one sequence of a group of `batch`
    sequences at `context` (the prefix: of the group) stored, read per step, and read
    by the sequence itself: three `[len(HISTORY_CLASSES), N_BUCKETS]` arrays (`[...,
    1]`, the buckets summed, without `buckets`)."""
    c = context
    private = jnp.maximum(c - prefix, 0.0)
    window = jnp.minimum(model.window, c)
    zero = jnp.zeros_like(c)
    lo = jnp.stack([zero, private, zero])[:, None]
    hi = jnp.stack([private, c, window])[:, None]
    sink, near, rest = (_regions if buckets else _class_regions)(lo, hi, c, profile)
    rest_global = jnp.sum(rest[0]) + jnp.sum(rest[1])
    kept_g, sel_g = _selected(rest_global, c, profile)
    kept_w, sel_w = _selected(jnp.sum(rest[2]), window, profile)
    kept = jnp.stack([kept_g, kept_g, kept_w])[:, None]
    sel = jnp.stack([sel_g, sel_g, sel_w])[:, None]
    always = sink + near
    stored = always + kept * rest
    read_one = always + sel * kept * rest
    shared = jnp.stack([0.0 * sel_g, _union(sel_g, batch) - sel_g, 0.0 * sel_w])[:, None]
    read = read_one + shared * kept * rest  # the prefix: read by any of the batch
    return stored, read, read_one


def history_tokens(workload: Workload):
    """Per history class and bucket, tokens of one sequence (the prefix: of the batch)
    stored, and read per step: two `[len(HISTORY_CLASSES), N_BUCKETS]` arrays.

    A shared prefix's block is read when any sequence of the batch selects it. With
    the dense profile every token is stored and read. The sequence is one at the
    scenario's context (the mean, for a `ContextMix`), decoding.
    """
    s = workload.scenario
    return _history(workload.model, workload.profile, s.batch, s.context, s.prefix)


class Groups(eqx.Module):
    """The sequences of one step in groups alike: `[groups]` arrays of how many
    sequences, at which context, with how many query tokens per KV read, and whether
    they count as active conversations (for `AccessProfile.idle_sequences`)."""

    sequences: jnp.ndarray
    context: jnp.ndarray
    queries: jnp.ndarray
    active: jnp.ndarray


def step_groups(workload: Workload) -> Groups:
    """The groups of sequences one step serves: the decoding sequences (one group at
    the scenario's context, or one per bin of its `ContextMix`), then, with a
    `Prefill`, the prompts being prefilled (`Prefill`: `batch x accepted x prompt /
    output` prompt tokens per step, in chunks of `Prefill.chunk` queries, each chunk's
    prompt history `prompt / 2` tokens on average, causal)."""
    s, prof, mix, pre = workload.scenario, workload.profile, workload.mix, workload.prefill
    one = jnp.ones_like(s.context)
    if mix is None:
        sequences, context = s.batch[None], s.context[None]
    else:
        sequences, context = s.batch * mix.share, s.context * mix.ratio
    queries = prof.queries * jnp.ones_like(sequences)
    active = jnp.ones_like(sequences)
    if pre is not None:
        prefill_tokens = s.batch * prof.accepted * safe_div(pre.prompt_tokens, pre.output_tokens)
        chunk = pre.chunk
        sequences = jnp.concatenate([sequences, safe_div(prefill_tokens, chunk)[None]])
        context = jnp.concatenate([context, (pre.prompt_tokens / 2 * one)[None]])
        queries = jnp.concatenate([queries, (chunk * one)[None]])
        active = jnp.concatenate([active, 0.0 * one[None]])
    return Groups(sequences, context, queries, active)


def step_rows(workload: Workload):
    """Query tokens one step runs through the weights, the rows of its weight matmuls:
    the decoding sequences' (`AccessProfile.queries` each) and, with a `Prefill`, the
    prompt tokens prefilled in the step (`step_groups`)."""
    g = step_groups(workload)
    return jnp.sum(g.sequences * g.queries)


def copies_weights(workload: Workload):
    """Whether the step's weight kernels write a 16-bit copy of the weights and run a
    16-bit GEMM over it: its rows (`step_rows`) above `Scenario.weight_copy_rows` (0:
    never). vLLM's GPTQ kernel does so above 50 rows (`MAX_Q_GEMM_ROWS` in
    csrc/quantization/gptq/q_gemm.cu: `reconstruct_exllama`, then `cublasHgemm`), its
    AWQ kernel from 256 (`FP16_MATMUL_HEURISTIC_CONDITION` in
    vllm/model_executor/layers/quantization/awq.py: `awq_dequantize`, then
    `torch.matmul`), github.com/vllm-project/vllm. A switch: its derivative in the
    batch is 0 (the threshold is a kernel's, not a design variable)."""
    rows = workload.scenario.weight_copy_rows
    return (rows > 0) & (step_rows(workload) > rows)


def lower_traffic(workload: Workload, buckets: bool = True) -> Traffic:
    """Lowers a workload to per-row decode traffic.

    Args:
        workload: the model, its decode scenario and its KV access profile.
        buckets: split each history class into its heat buckets (`ROWS`); False: one
            row per class (`CLASSES`, the class layout: the same bytes, reads and
            FLOPs per class, for a placement that keeps each class's buckets together).

    Returns:
        The `Traffic` of one decode step, with one entry per row in `ROWS` (or in
        `CLASSES`).

    Examples:
        >>> import costmodel as cm
        >>> t = cm.lower_traffic(cm.Workload(cm.model_preset("llama-3-8b"), cm.Scenario(batch=1, context=4096)))
        >>> round(float(t.read_bytes.sum()) / 1e9, 2)  # GB read per step: weights + KV
        15.55
    """
    m, s, prof = workload.model, workload.scenario, workload.profile
    wb, kb = s.weight_bytes, s.kv_bytes
    tile = WEIGHT_TILE_ROWS * m.d_model  # weights per weight block
    kv_el = m.kv_elements_per_token_per_layer
    page = KV_PAGE_TOKENS

    attn_params = m.n_layers * m.attention_params_per_layer
    ffn_params = m.n_layers * m.dense_ffn_params_per_layer
    expert_params = m.n_layers * m.n_experts * m.ffn_params_per_expert
    head_stored = (2 - m.tied_embeddings) * m.vocab * m.d_model
    head_read = m.vocab * m.d_model

    # Per group of sequences alike (one, unless the contexts are mixed or prompts are
    # prefilled in the step), per history class and bucket, tokens of one sequence.
    g = step_groups(workload)
    stored, read, read_one = jax.vmap(lambda b, c: _history(m, prof, b, c, s.prefix, buckets))(g.sequences, g.context)
    tokens = jnp.sum(g.sequences * g.queries)  # query tokens through the weights per step
    coverage = expert_coverage(m.n_experts, m.top_k, tokens)
    each = lambda x: x[:, None, None]  # a per-group scalar against [groups, 3, N_BUCKETS]
    # Sequences and layers per history class: the prefix is stored once for the batch,
    # and read by any group that reads it (its largest reads).
    layers = jnp.stack([m.n_global_layers, m.n_global_layers, m.n_sliding_layers])[:, None]
    is_prefix = (jnp.arange(len(HISTORY_CLASSES)) == 1)[:, None]
    copies = jnp.where(is_prefix[None], 1.0, each(g.sequences))

    def over_groups(x):  # [groups, 3, N_BUCKETS] -> [3, N_BUCKETS]
        return jnp.where(is_prefix, jnp.max(x, axis=0), jnp.sum(x, axis=0))

    stored_tokens = over_groups(copies * stored)  # all sequences, per layer
    read_tokens = over_groups(copies * read)
    kv_count = layers * stored_tokens / page
    kv_reads = jnp.where(stored_tokens > 0, safe_div(read_tokens, stored_tokens), 1.0)
    # QK^T and softmax(.)V: 2 FLOPs per multiply-add, two matmuls, per query head.
    attn_flops_per_token = 4 * m.n_heads * m.head_dim
    kv_flops = attn_flops_per_token * layers * jnp.sum(each(g.sequences * g.queries) * read_one, axis=0)
    # A paged cache appends each query's new token to a page of the class, wherever
    # its pages are: the writes follow the class's stored bytes (the newest bucket, if
    # none). The prefix is never written.
    new_kv = each(g.sequences * g.queries) * kv_el * kb
    total = jnp.sum(stored, axis=-1, keepdims=True)
    newest = jnp.asarray(np.eye(N_BUCKETS, dtype=np.float32)[NEWEST] if buckets else [1.0], stored.dtype)
    share = jnp.where(total > 0, stored / jnp.where(total > 0, total, 1.0), newest)
    written = jnp.stack([m.n_global_layers, 0.0 * m.n_global_layers, m.n_sliding_layers])[:, None]
    kv_writes = written * jnp.sum(new_kv * share, axis=0)
    per_token = m.n_kv_heads * m.head_dim * kb
    # One attention kernel reads a layer's shared prefix and private history together
    # (a paged cache), so both classes take the size of the two: what it reads.
    global_kernel = (
        jnp.sum(g.sequences * jnp.sum(read[:, 0], axis=-1)) + jnp.max(jnp.sum(read[:, 1], axis=-1))
    ) * per_token
    window_kernel = jnp.sum(g.sequences * jnp.sum(read[:, 2], axis=-1)) * per_token
    # Stored but idle conversations: per active sequence, a private history as long.
    private_stored = jnp.sum(layers[None, ::2, 0] * jnp.sum(stored[:, ::2], axis=-1), axis=-1)  # [groups], per sequence
    idle_count = prof.idle_sequences * jnp.sum(g.active * g.sequences * private_stored) / page

    def rows(weights, kv, idle):
        return to_rows(jnp.stack(weights), kv, jnp.reshape(idle, (1,)))

    zero, one = jnp.zeros_like(wb), jnp.ones_like(wb)
    count = rows(
        [attn_params / tile, ffn_params / tile, expert_params / tile, head_stored / tile], kv_count, idle_count
    )
    kv_block = page * kv_el * kb
    cwb = s.class_weight_bytes  # per weight class: a recipe may keep some wider
    block_bytes = rows(list(tile * cwb), kv_block * jnp.ones_like(kv_count), kv_block)
    reads = rows([one, one, coverage, head_read / head_stored], kv_reads, zero)
    writes = rows([zero] * N_WEIGHT_CLASSES, kv_writes, zero)
    flops = rows(
        [
            2 * tokens * attn_params,
            2 * tokens * ffn_params,
            jnp.where(m.n_experts > 0, 2 * tokens * m.top_k * m.n_layers * m.ffn_params_per_expert, 0.0),
            2 * tokens * head_read,
        ],
        kv_flops,
        zero,
    )
    # Over a 16-bit copy of the weights (`copies_weights`) the GEMMs run in 16 bits.
    wp = jnp.where(copies_weights(workload), BITS16, s.class_weight_precision).astype(wb.dtype)
    kp = s.kv_precision.astype(wb.dtype)
    precision = jnp.concatenate([wp, jnp.stack([kp] * (len(CLASSES) - N_WEIGHT_CLASSES))])

    # One kernel's operand: a weight matrix, or a layer's K (or V) for the batch.
    q_o = m.d_model * m.n_heads * m.head_dim * cwb[0]
    k_v = m.d_model * m.n_kv_heads * m.head_dim * cwb[0]
    # Geometric mean, weighted by bytes, of the attention projections' sizes (a
    # dense model always has both kinds, so the logs are of positive sizes).
    attention = jnp.exp((q_o * jnp.log(q_o) + k_v * jnp.log(k_v)) / (q_o + k_v))
    matrix = m.d_model * m.d_ff * wb
    kernel_bytes = jnp.stack(
        [attention, matrix, matrix, m.vocab * m.d_model * cwb[3], global_kernel, global_kernel, window_kernel, kv_block]
    )
    # A model without K/V heads (none in the presets) has nothing to re-read: 1.
    group = jnp.where(m.n_kv_heads > 0, m.n_heads / jnp.where(m.n_kv_heads > 0, m.n_kv_heads, 1.0), 1.0)
    return Traffic(count, block_bytes, reads, writes, flops, precision, kernel_bytes, group)
