"""What a benchmark run measures: the plan (sizes, shapes, models, repetitions)."""

from __future__ import annotations

import dataclasses
import math


KB, MB, GB = 2**10, 2**20, 2**30


@dataclasses.dataclass(frozen=True)
class Config:
    """Dimensions of a flax decoder a plan times (see `costmodel.Model`; the decoder
    itself is `calibration.measure.transformer.Decoder`)."""

    name: str
    n_layers: int
    d_model: int
    n_heads: int
    n_kv_heads: int
    head_dim: int
    d_ff: int
    vocab: int

    @property
    def n_params(self) -> int:
        attn = 2 * self.d_model * self.n_heads * self.head_dim + 2 * self.d_model * self.n_kv_heads * self.head_dim
        ffn = 3 * self.d_model * self.d_ff
        return self.n_layers * (attn + ffn) + 2 * self.vocab * self.d_model


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
    decode_models: tuple[Config, ...]
    decode_points: tuple[tuple[int, int], ...]  # (batch, context)
    reps: int
    target_seconds: float
    passes: int = 1
    # (batch, context, n_heads, n_kv_heads, layers): attention over distinct caches
    attention_chains: tuple[tuple[int, int, int, int, int], ...] = ()
    # The format of the decode-attention operands and of the decoders' weights and KV
    # caches ("f32" on a CPU, whose bf16 dots are not roofline kernels; "bf16" on a GPU,
    # as decode is served there).
    attention_dtype: str = "f32"
    decode_dtype: str = "f32"


def _geometric(lo: int, hi: int, per_octave: int) -> tuple[int, ...]:
    n = int(round(math.log2(hi / lo) * per_octave))
    sizes = [int(round(lo * 2 ** (i / per_octave) / 4096)) * 4096 for i in range(n + 1)]
    return tuple(sorted({max(s, 4096) for s in sizes}))


def decode_models(quick: bool) -> tuple[Config, ...]:
    """Flax decoders whose f32 weights span ~3 MB to ~1 GB: below, around and above
    the caches of a CPU (2 MB L2 per core here; a shared L3 whose share is unknown)."""
    models = [
        Config("tiny", 2, 128, 2, 2, 64, 512, 1024),  # 3.1 MB
        Config("small", 4, 256, 4, 4, 64, 768, 2048),  # 18 MB
        Config("medium", 6, 512, 8, 4, 64, 1536, 4096),  # 92 MB
        Config("large", 8, 1024, 16, 4, 64, 2816, 8192),  # 428 MB
        Config("xl", 8, 1536, 24, 4, 64, 4096, 8192),  # 983 MB
    ]
    return tuple(models[:3] if quick else models)


PLANS = ("full", "quick", "gpu")
"""The plans `costmodel bench --plan` names: `full` and `quick` are sized for a CPU's
caches, `gpu` for a data-centre GPU's (`gpu_plan`)."""


def gpu_models() -> tuple[Config, ...]:
    """bf16 decoders from launch-bound to HBM-bound on a data-centre GPU: a small one,
    and two with the published dimensions of Llama 3.2 1B and Llama 3 8B (untied
    head, as `costmodel.Model` counts it with `tied_embeddings=0`).

    References:
        Llama 3.2 1B and Llama 3 8B `config.json` (huggingface.co/meta-llama): layers,
        hidden size, heads, KV heads, head dim, intermediate size, vocabulary.
    """
    return (
        Config("small", 8, 1024, 16, 4, 64, 2816, 8192),  # 214 MB bf16
        Config("llama-3.2-1b", 16, 2048, 32, 8, 64, 8192, 128256),  # 3.0 GB bf16 (untied)
        Config("llama-3-8b", 32, 4096, 32, 8, 128, 14336, 128256),  # 16 GB bf16
    )


def gpu_plan() -> Plan:
    """A plan for a data-centre GPU (sized on an H200: 60 MB of L2, 141 GB of HBM):
    streams from 64 KiB to 8 GiB, GEMV/GEMM over the layer shapes of Llama-class models,
    GEMV chains and attention chains far beyond the L2, bf16 decode attention with
    head_dim 128, and bf16 decode steps of the decoders of `gpu_models` at batch 1-64
    and context 1k-32k. One pass: a GPU held for a session is not shared, and each
    decode point compiles a decoder of up to 32 layers."""
    return Plan(
        stream_sizes=_geometric(64 * KB, 8 * GB, 2),
        gemv_shapes=(
            (1024, 1024),
            (4096, 4096),
            (4096, 14336),
            (14336, 4096),
            (8192, 8192),
            (8192, 28672),
            (16384, 16384),
        ),
        gemm_shapes=(
            (4, 4096, 14336),
            (16, 4096, 14336),
            (64, 4096, 14336),
            (256, 4096, 14336),
            (1024, 4096, 14336),
            (8, 8192, 8192),
            (128, 8192, 8192),
            (2048, 8192, 8192),
            (4096, 4096, 4096),
        ),
        # Distinct matrices, each read once per pass: 16 MB (inside the L2) to 1 GB.
        chains=(
            (512, 512, 16),
            (1024, 1024, 8),
            (1024, 1024, 64),
            (256, 1024, 64),
            (2048, 2048, 32),
            (4096, 4096, 16),
            (4096, 14336, 4),
            (14336, 4096, 4),
        ),
        dtypes=("f32", "bf16"),
        attention=(
            (1, 1024, 32, 8),
            (1, 8192, 32, 8),
            (1, 32768, 32, 8),
            (8, 4096, 32, 8),
            (16, 8192, 32, 8),
            (32, 2048, 32, 8),
            (64, 4096, 32, 8),
            (64, 8192, 64, 8),
            (4, 16384, 32, 32),
        ),
        attention_chains=(
            (1, 4096, 32, 8, 32),
            (16, 2048, 32, 8, 32),
            (4, 8192, 32, 8, 16),
        ),
        head_dim=128,
        decode_models=gpu_models(),
        decode_points=((1, 1024), (1, 16384), (16, 4096), (64, 2048)),
        reps=7,
        target_seconds=0.02,
        passes=1,
        attention_dtype="bf16",
        decode_dtype="bf16",
    )


def named_plan(name: str) -> Plan:
    """The plan `costmodel bench --plan NAME` measures (one of `PLANS`)."""
    if name == "gpu":
        return gpu_plan()
    if name not in PLANS:
        raise ValueError(f"unknown plan {name!r}: expected one of {list(PLANS)}")
    return plan(quick=name == "quick")


def plan(quick: bool = False) -> Plan:
    """The full plan, or with `quick` the short one (under two minutes on a 2-core CPU)."""
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
