"""What is being decoded: a transformer and a decode scenario.

Every number is an array leaf (a float, even for counts) so that a sweep can `vmap`
over model sizes, batches and formats without recompiling. Only names are static.
"""

from collections.abc import Sequence

import equinox as eqx
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, ArrayLike, Float

from .types import IntScalarLike, RealScalarLike, Scalar


PRECISIONS = ("f32", "16", "8", "4")
"""Compute precision classes, indexing `Chip.peak_flops` and `Chip.energy_per_flop`."""

F32, BITS16, BITS8, BITS4 = range(len(PRECISIONS))
"""Indices into `PRECISIONS` (and every per-precision array)."""


class Model(eqx.Module):
    """A decoder-only transformer, as far as decode traffic is concerned.

    Attributes:
        n_layers: transformer blocks.
        n_sliding_layers: how many of them use sliding-window attention (the rest are
            global); `0 <= n_sliding_layers <= n_layers`.
        window: sliding window in tokens (ignored when `n_sliding_layers == 0`).
        d_model: residual width.
        n_heads: query heads per layer.
        n_kv_heads: key/value heads per layer (GQA when fewer than `n_heads`).
        head_dim: width of one head.
        d_ff: FFN hidden width (per expert for a mixture of experts).
        ffn_matrices: weight matrices per FFN (3 for SwiGLU/GeGLU, 2 for a plain MLP).
        vocab: vocabulary size.
        tied_embeddings: 1 if the output head shares the input embedding, else 0.
        n_experts: routed experts per layer (0 for a dense FFN).
        top_k: experts each token is routed to.
        n_shared_experts: always-active experts per layer (each `d_ff` wide).

    Names live outside the pytree (`costmodel.io`), so that every model shares one
    compiled program.
    """

    n_layers: Scalar
    n_sliding_layers: Scalar
    window: Scalar
    d_model: Scalar
    n_heads: Scalar
    n_kv_heads: Scalar
    head_dim: Scalar
    d_ff: Scalar
    ffn_matrices: Scalar
    vocab: Scalar
    tied_embeddings: Scalar
    n_experts: Scalar
    top_k: Scalar
    n_shared_experts: Scalar

    def __init__(
        self,
        *,
        n_layers: RealScalarLike,
        d_model: RealScalarLike,
        n_heads: RealScalarLike,
        n_kv_heads: RealScalarLike | None = None,
        head_dim: RealScalarLike | None = None,
        d_ff: RealScalarLike,
        vocab: RealScalarLike,
        ffn_matrices: RealScalarLike = 3,
        tied_embeddings: RealScalarLike = 0,
        n_experts: RealScalarLike = 0,
        top_k: RealScalarLike = 0,
        n_shared_experts: RealScalarLike = 0,
        n_sliding_layers: RealScalarLike = 0,
        window: RealScalarLike = 0,
    ):
        f = lambda x: jnp.asarray(x, dtype=float)
        self.n_layers = f(n_layers)
        self.d_model = f(d_model)
        self.n_heads = f(n_heads)
        self.n_kv_heads = f(n_heads if n_kv_heads is None else n_kv_heads)
        self.head_dim = f(d_model / n_heads if head_dim is None else head_dim)
        self.d_ff = f(d_ff)
        self.vocab = f(vocab)
        self.ffn_matrices = f(ffn_matrices)
        self.tied_embeddings = f(tied_embeddings)
        self.n_experts = f(n_experts)
        self.top_k = f(top_k)
        self.n_shared_experts = f(n_shared_experts)
        self.n_sliding_layers = f(n_sliding_layers)
        self.window = f(window)

    @property
    def n_global_layers(self) -> Scalar:
        return self.n_layers - self.n_sliding_layers

    @property
    def attention_params_per_layer(self) -> Scalar:
        """Q and O projections plus K and V projections."""
        q_o = 2 * self.d_model * self.n_heads * self.head_dim
        k_v = 2 * self.d_model * self.n_kv_heads * self.head_dim
        return q_o + k_v

    @property
    def ffn_params_per_expert(self) -> Scalar:
        return self.ffn_matrices * self.d_model * self.d_ff

    @property
    def dense_ffn_params_per_layer(self) -> Scalar:
        """FFN weights every token reads: the dense FFN, or the shared experts."""
        dense = jnp.where(self.n_experts > 0, self.n_shared_experts, 1.0)
        return dense * self.ffn_params_per_expert

    @property
    def n_params(self) -> Scalar:
        """Total parameter count (embeddings included)."""
        per_layer = (
            self.attention_params_per_layer
            + self.dense_ffn_params_per_layer
            + self.n_experts * self.ffn_params_per_expert
        )
        embed = (2 - self.tied_embeddings) * self.vocab * self.d_model
        return self.n_layers * per_layer + embed

    @property
    def kv_elements_per_token_per_layer(self) -> Scalar:
        """K and V elements one token adds to one layer's cache."""
        return 2 * self.n_kv_heads * self.head_dim


class Scenario(eqx.Module):
    """One decode operating point.

    Attributes:
        batch: sequences decoded together in one step.
        context: tokens already in each sequence's KV cache (its mean, for a mix of
            lengths: dense attention traffic is linear in it).
        prefix: of those, tokens of a prefix shared by all sequences of the batch,
            whose KV is stored once and read once per step; `prefix <= context`.
        weight_bytes: bytes per weight, scales included (2 for bf16, 0.5625 for q4_0).
        kv_bytes: bytes per KV-cache element, scales included.
        weight_precision: index into `PRECISIONS` of the weight matmuls' compute.
        kv_precision: index into `PRECISIONS` of the attention compute.
        activation_bytes: bytes per activation element exchanged between chips.
        weight_dequant_ops: ALU instructions per weight element the weight kernels spend
            unpacking it before the matmul uses it (the framework's kernel for the
            format: `costmodel.dequant_seconds`); 0: used as stored.
        plain_weight_bytes: bytes per weight of the attention projections and the
            embedding and output tables where a quantisation recipe leaves them wider
            than the rest (Meta's FP8 Llama 3.1 405B: FFN weights in FP8, those in
            BF16); 0: as `weight_bytes`.
        plain_weight_precision: index into `PRECISIONS` of those weights' matmuls; -1:
            as `weight_precision`.
        kv_dequant_ops: ALU instructions per K/V element the decode-attention kernels
            spend unpacking it each time a thread block reads it (the framework's kernel
            for the KV format, and a kernel on the CUDA cores its arithmetic on each
            element: `costmodel.kv_dequant_seconds`); 0: used as stored.
        micro_batches: groups the batch is split into, decoded one after another
            through a pipeline-parallel system so that its stages work on different
            groups at once (>= 1; 1: the whole batch passes through the stages
            together, and a pipeline adds capacity but no throughput). See
            `costmodel.decode_cost`.
        weight_copy_rows: rows (query tokens through the weights in one step) above
            which the weight kernels first write a 16-bit copy of the weights they
            stream and run a 16-bit GEMM over it, reading it back (vLLM's GPTQ kernel
            above 50 rows, its AWQ kernel from 256: `costmodel.weight_copy_bytes`);
            0: never.
        weight_dequant_rows: rows of a step each unpacking of the weights serves: a
            kernel that tiles the rows unpacks every weight once per tile, `ceil(rows /
            weight_dequant_rows)` times (vLLM's GPTQ kernel per 8 rows, its AWQ GEMM per
            16: `costmodel.unpack_passes`); 0: once per step.
    """

    batch: Scalar
    context: Scalar
    prefix: Scalar
    weight_bytes: Scalar
    kv_bytes: Scalar
    weight_precision: Scalar
    kv_precision: Scalar
    activation_bytes: Scalar
    micro_batches: Scalar
    weight_dequant_ops: Scalar
    plain_weight_bytes: Scalar
    plain_weight_precision: Scalar
    kv_dequant_ops: Scalar
    weight_copy_rows: Scalar
    weight_dequant_rows: Scalar

    def __init__(
        self,
        *,
        batch: RealScalarLike = 1,
        context: RealScalarLike = 4096,
        prefix: RealScalarLike = 0,
        weight_bytes: RealScalarLike = 2.0,
        kv_bytes: RealScalarLike = 2.0,
        weight_precision: IntScalarLike = BITS16,
        kv_precision: IntScalarLike = BITS16,
        activation_bytes: RealScalarLike = 2.0,
        micro_batches: RealScalarLike = 1.0,
        weight_dequant_ops: RealScalarLike = 0.0,
        plain_weight_bytes: RealScalarLike = 0.0,
        plain_weight_precision: IntScalarLike = -1,
        kv_dequant_ops: RealScalarLike = 0.0,
        weight_copy_rows: RealScalarLike = 0.0,
        weight_dequant_rows: RealScalarLike = 0.0,
    ):
        f = lambda x: jnp.asarray(x, dtype=float)
        self.batch = f(batch)
        self.context = f(context)
        self.prefix = f(prefix)
        self.weight_bytes = f(weight_bytes)
        self.kv_bytes = f(kv_bytes)
        self.weight_precision = jnp.asarray(weight_precision, dtype=jnp.int32)
        self.kv_precision = jnp.asarray(kv_precision, dtype=jnp.int32)
        self.activation_bytes = f(activation_bytes)
        self.micro_batches = f(micro_batches)
        self.weight_dequant_ops = f(weight_dequant_ops)
        self.plain_weight_bytes = f(plain_weight_bytes)
        self.plain_weight_precision = jnp.asarray(plain_weight_precision, dtype=jnp.int32)
        self.kv_dequant_ops = f(kv_dequant_ops)
        self.weight_copy_rows = f(weight_copy_rows)
        self.weight_dequant_rows = f(weight_dequant_rows)

    @property
    def class_weight_bytes(self) -> jnp.ndarray:
        """`[N_WEIGHT_CLASSES]` bytes per weight of each weight class (attention, FFN,
        experts, embedding/output head): `plain_weight_bytes` for the attention and the
        tables where a recipe gives it, `weight_bytes` otherwise."""
        plain = jnp.where(self.plain_weight_bytes > 0, self.plain_weight_bytes, self.weight_bytes)
        return jnp.stack([plain, self.weight_bytes, self.weight_bytes, plain])

    @property
    def class_weight_precision(self) -> jnp.ndarray:
        """`[N_WEIGHT_CLASSES]` compute precision of each weight class's matmuls, as
        `class_weight_bytes` picks them."""
        plain = jnp.where(self.plain_weight_precision >= 0, self.plain_weight_precision, self.weight_precision)
        return jnp.stack([plain, self.weight_precision, self.weight_precision, plain])


AGE_EDGES = tuple(256.0 * 2.0**i for i in range(14))
"""Default interior edges of the age buckets, in tokens of age (0 is the newest token):
one KV page (256 tokens), then doubling to 2^21, so the buckets are `[0, 256)`,
`[256, 512)`, ..., `[2^21, inf)`. Log-spaced: the recent history, where windows and
recency rules cut, is resolved finely; a 128k history needs 10 of the 15 buckets."""

N_AGE_BUCKETS = len(AGE_EDGES) + 1
N_BUCKETS = N_AGE_BUCKETS + 1
"""Heat buckets per KV class: the attention sinks (the sequence's first tokens), then
the age buckets (a static count, so every model and profile has the same shapes)."""


class AccessProfile(eqx.Module):
    """Which part of the KV history a decode step stores and reads, and how often.

    The history of a sequence (per layer group: all of it for global layers, the
    window for sliding ones) is split into the attention *sinks* (its first
    `sink_tokens`), the *recent* tokens (the newest `recent_tokens +
    recent_fraction x context`) and the *rest*. Sinks and recent tokens are stored and
    read every step. Of the rest, a `kept_fraction` of the history is stored (the
    others are evicted: heavy-hitter retention) and `budget_tokens` of what is stored
    are read per step, each stored token selected with the same probability (top-k
    page selection). Every number is a differentiable leaf.

    Attributes:
        sink_tokens: first tokens of each sequence, always kept and read
            (StreamingLLM's attention sinks), tokens.
        recent_tokens: newest tokens always kept and read (a window), tokens.
        recent_fraction: further newest tokens, as a fraction of the context.
        kept_fraction: tokens of the rest kept, as a fraction of the context (1:
            nothing evicted; 0: only sinks and recent tokens are stored), in [0, 1].
        budget_tokens: tokens of the kept rest read per step per sequence (inf: all
            of them, dense attention), tokens.
        idle_sequences: stored conversations per active sequence whose KV is kept
            (multi-turn or prefix caching across requests) but not read this step:
            capacity without bandwidth. Each holds a private history as long as an
            active sequence's.
        queries: query tokens per sequence that share each KV read (speculative
            decoding verifies its draft tokens and one more in one step), >= 1.
        accepted: tokens each sequence emits per step, in `[1, queries]` (the
            expected accepted draft tokens plus one for speculative decoding).
        edges: `[N_AGE_BUCKETS - 1]` interior edges of the age buckets, tokens of
            age, non-decreasing (`inf` for unused buckets).
    """

    sink_tokens: Scalar
    recent_tokens: Scalar
    recent_fraction: Scalar
    kept_fraction: Scalar
    budget_tokens: Scalar
    idle_sequences: Scalar
    queries: Scalar
    accepted: Scalar
    edges: Float[Array, " edges"]

    def __init__(
        self,
        *,
        sink_tokens: RealScalarLike = 0,
        recent_tokens: RealScalarLike = 0,
        recent_fraction: RealScalarLike = 0,
        kept_fraction: RealScalarLike = 1,
        budget_tokens: RealScalarLike = float("inf"),
        idle_sequences: RealScalarLike = 0,
        queries: RealScalarLike = 1,
        accepted: RealScalarLike = 1,
        edges: ArrayLike | Sequence[float] = AGE_EDGES,
    ):
        f = lambda x: jnp.asarray(x, dtype=float)
        self.sink_tokens = f(sink_tokens)
        self.recent_tokens = f(recent_tokens)
        self.recent_fraction = f(recent_fraction)
        self.kept_fraction = f(kept_fraction)
        self.budget_tokens = f(budget_tokens)
        self.idle_sequences = f(idle_sequences)
        self.queries = f(queries)
        self.accepted = f(accepted)
        self.edges = f(edges)
        if np.shape(self.edges)[-1:] != (N_AGE_BUCKETS - 1,):
            raise ValueError(f"edges: expected {N_AGE_BUCKETS - 1} age edges, got shape {np.shape(self.edges)}")


class ContextMix(eqx.Module):
    """The batch's sequences in bins of context length: a histogram, not one length.

    Bin `k` holds a `share[k]` of the batch's sequences, each with `ratio[k] x
    Scenario.context` tokens in its cache, so `Scenario.context` stays the mean when
    `sum(share x ratio) = 1` (`ContextMix.of` normalises a histogram so). KV traffic,
    capacity and attention FLOPs are summed over the bins, which matters wherever
    they are not linear in the context: sliding windows, attention sinks, top-k
    budgets, and the size of the attention kernels. The bin count is the leaves'
    length, fixed per mix, so mixes of one count `vmap` together.

    Attributes:
        share: `[bins]` fractions of the sequences, non-negative, summing to 1.
        ratio: `[bins]` context of each bin over the mean context, non-negative.
    """

    share: Float[Array, " bins"]
    ratio: Float[Array, " bins"]

    def __init__(self, share: ArrayLike | Sequence[float], ratio: ArrayLike | Sequence[float]):
        self.share = jnp.asarray(share, dtype=float)
        self.ratio = jnp.asarray(ratio, dtype=float)
        if np.shape(self.share) != np.shape(self.ratio) or np.ndim(self.share) < 1:
            raise ValueError(f"share {np.shape(self.share)} and ratio {np.shape(self.ratio)}: expected [bins] each")

    @classmethod
    def of(cls, lengths: ArrayLike | Sequence[float | int], share: ArrayLike | Sequence[float | int]) -> "ContextMix":
        """A mix from context lengths (tokens) and their shares of the sequences, the
        ratios taken to their share-weighted mean."""
        lengths_, share_ = np.asarray(lengths, dtype=float), np.asarray(share, dtype=float)
        mean = float(np.sum(lengths_ * share_) / np.sum(share_))
        return cls(share_ / np.sum(share_), lengths_ / mean)


class Prefill(eqx.Module):
    """Prompts prefilled inside the decode steps: continuous batching with chunked
    prefill (Sarathi-Serve), in steady state.

    Every request brings `prompt_tokens` to prefill and leaves after `output_tokens`.
    A sequence emits `AccessProfile.accepted` tokens per step, so over its life it
    spends `output_tokens / accepted` steps decoding; in steady state (as many
    requests arriving as leaving) each decode step therefore also prefills
    `batch x accepted x prompt_tokens / output_tokens` prompt tokens, whatever the
    arrival rate (it sets the batch, by Little's law). The scheduler prefills a
    prompt in chunks of at most `chunk_tokens` tokens per step, so the queries of
    one chunk share each KV read of its prompt, and its first token comes after
    `prompt_tokens / min(chunk_tokens, prompt_tokens)` steps (`first_token_seconds`).

    Attributes:
        prompt_tokens: mean prompt tokens per request, > 0.
        output_tokens: mean output tokens per request, > 0.
        chunk_tokens: largest chunk of one prompt prefilled in one step, tokens (inf:
            the whole prompt in one step, no chunking).

    References:
        A. Agrawal et al., "Taming Throughput-Latency Tradeoff in LLM Inference with
        Sarathi-Serve", OSDI 2024 (chunked prefill piggybacked on decode steps;
        token budgets of 512-2048 per step).
    """

    prompt_tokens: Scalar
    output_tokens: Scalar
    chunk_tokens: Scalar

    def __init__(
        self,
        *,
        prompt_tokens: RealScalarLike,
        output_tokens: RealScalarLike,
        chunk_tokens: RealScalarLike = 512,
    ):
        f = lambda x: jnp.asarray(x, dtype=float)
        self.prompt_tokens = f(prompt_tokens)
        self.output_tokens = f(output_tokens)
        self.chunk_tokens = f(chunk_tokens)

    @property
    def chunk(self) -> Scalar:
        """Prompt tokens of one request prefilled per step (its queries per KV read)."""
        return jnp.minimum(self.chunk_tokens, self.prompt_tokens)


class Workload(eqx.Module):
    """A model decoded at a scenario, with an access profile of its KV history.

    `mix` (a `ContextMix`) spreads the batch's contexts over bins; `prefill` (a
    `Prefill`) adds the prompts a continuously batched engine prefills in each step.
    Both default to None: one context, decode only.
    """

    model: Model
    scenario: Scenario
    profile: AccessProfile
    mix: ContextMix | None
    prefill: Prefill | None

    def __init__(
        self,
        model: Model,
        scenario: Scenario,
        profile: AccessProfile | None = None,
        mix: ContextMix | None = None,
        prefill: Prefill | None = None,
    ):
        self.model = model
        self.scenario = scenario
        self.profile = AccessProfile() if profile is None else profile
        self.mix = mix
        self.prefill = prefill
