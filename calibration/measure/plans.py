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
