"""Trace rows as the arrays the predictions take: microbenchmark points and stacked workloads."""

from __future__ import annotations

import dataclasses

import equinox as eqx
import jax
import jax.numpy as jnp
import jax.tree_util as jtu
import numpy as np

import costmodel as cm
from costmodel.io import formats
from costmodel.io.formats import plain_fields


class MicroPoints(eqx.Module):
    """Microbenchmark rows as arrays: bytes moved, working set (B), FLOPs, precision,
    whether the kernel is decode attention (1) or a stream or matmul (0), the
    distinct kernels one call runs (a GEMV chain: one per matrix), the rows sharing
    each operand element, and the operand bytes of one kernel (a matrix, the array
    of a stream, one of K and V of attention)."""

    bytes: jax.Array
    working_set: jax.Array
    flops: jax.Array
    precision: jax.Array
    attention: jax.Array
    kernels: jax.Array
    rows: jax.Array
    kernel_bytes: jax.Array


@dataclasses.dataclass
class Dataset:
    """Rows split by how they are predicted, with measured seconds."""

    rows: list[dict]
    micro_index: np.ndarray
    decode_index: np.ndarray
    micro: MicroPoints | None
    decode: cm.Workload | None

    @property
    def n(self) -> int:
        return len(self.rows)

    @property
    def measured(self) -> np.ndarray:
        return np.array([r["seconds"] for r in self.rows])


def _stack(trees):
    return jtu.tree_map(lambda *xs: jnp.stack(xs), *trees)


def _rows(r: dict, fmts) -> float:
    """Rows sharing each operand element of a microbenchmark (`Chip.half_rate_rows`):
    `m` of a GEMV/GEMM, query heads per KV head of attention, 1 for a stream."""
    if r["kind"] in ("gemv", "gemm"):
        return r.get("m", 1.0)
    if r["kind"] == "attention_decode" and "n_heads" in r and "n_kv_heads" in r:
        return r["n_heads"] / r["n_kv_heads"]
    return 1.0


def _kernel_bytes(r: dict, fmts) -> float:
    """Operand bytes of one kernel of a microbenchmark (`Chip.small_kernel_bytes`): the
    weight matrix of a GEMV/GEMM, one of K and V of attention, the array of a stream."""
    if r["kind"] in ("gemv", "gemm") and "k" in r and "n" in r:
        return r["k"] * r["n"] * fmts[r["dtype"]].bytes_per_element
    if r["kind"] == "attention_decode":
        return r["working_set"] / 2 / r.get("kernels", 1.0)  # K (or V) of one layer
    return r["bytes"] / r.get("kernels", 1.0)


def make_dataset(rows: list[dict]) -> Dataset:
    fmts = formats()
    micro_i = [i for i, r in enumerate(rows) if r["kind"] != "decode_step"]
    dec_i = [i for i, r in enumerate(rows) if r["kind"] == "decode_step"]
    micro = None
    if micro_i:
        sel = [rows[i] for i in micro_i]
        micro = MicroPoints(
            bytes=jnp.asarray([r["bytes"] for r in sel], dtype=float),
            working_set=jnp.asarray([r["working_set"] for r in sel], dtype=float),
            flops=jnp.asarray([r["flops"] for r in sel], dtype=float),
            precision=jnp.asarray([fmts[r["dtype"]].precision for r in sel], dtype=jnp.int32),
            attention=jnp.asarray([r["kind"] == "attention_decode" for r in sel], dtype=float),
            kernels=jnp.asarray([r.get("kernels", 1.0) for r in sel], dtype=float),
            rows=jnp.asarray([_rows(r, fmts) for r in sel], dtype=float),
            kernel_bytes=jnp.asarray([_kernel_bytes(r, fmts) for r in sel], dtype=float),
        )
    decode = None
    if dec_i:
        ws = []
        for i in dec_i:
            r = rows[i]
            model = cm.Model(
                n_layers=r["n_layers"],
                d_model=r["d_model"],
                n_heads=r["n_heads"],
                n_kv_heads=r["n_kv_heads"],
                head_dim=r["head_dim"],
                d_ff=r["d_ff"],
                vocab=r["vocab"],
                ffn_matrices=r.get("ffn_matrices", 3.0),
                tied_embeddings=r.get("tied_embeddings", 0.0),
            )
            w, k = fmts[r["weights"]], fmts[r["kv"]]
            scenario = cm.Scenario(
                batch=r["batch"],
                context=r["context"],
                weight_bytes=w.bytes_per_element,
                kv_bytes=k.bytes_per_element,
                weight_precision=w.precision,
                kv_precision=k.precision,
                activation_bytes=w.bytes_per_element,
                **plain_fields(w),
            )
            ws.append(cm.Workload(model, scenario))
        decode = _stack(ws)
    return Dataset(rows, np.asarray(micro_i, int), np.asarray(dec_i, int), micro, decode)
