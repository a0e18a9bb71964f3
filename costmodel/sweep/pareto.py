"""Pareto fronts of finished sweeps, computed chunk by chunk from verified chunks."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..io import InputError
from ._arrow import pyarrow
from .store import iter_sweep, read_manifest


def pareto_mask(x: np.ndarray, y: np.ndarray, maximize_x: bool = False, maximize_y: bool = False) -> np.ndarray:
    """Which points no other point dominates (NaNs never are on the front).

    A point dominates another when it is at least as good in both coordinates and
    better in one; of identical points the first is kept.

    Examples:
        >>> import numpy as np, costmodel.sweep as sw
        >>> sw.pareto_mask(np.array([1.0, 2, 3, 2]), np.array([3.0, 1, 0.5, 2])).tolist()
        [True, True, True, False]
    """
    x = np.asarray(x, np.float64) * (-1.0 if maximize_x else 1.0)
    y = np.asarray(y, np.float64) * (-1.0 if maximize_y else 1.0)
    ok = np.isfinite(x) & np.isfinite(y)
    order = np.lexsort((np.arange(len(x)), y, x))  # by x, then y, then position
    order = order[ok[order]]
    ys = y[order]
    best = np.minimum.accumulate(ys)
    keep = np.ones(len(order), bool)
    keep[1:] = ys[1:] < best[:-1]
    mask = np.zeros(len(x), bool)
    mask[order[keep]] = True
    return mask


def pareto_front(
    out: Path | str,
    x: str,
    y: str,
    *,
    maximize_x: bool = False,
    maximize_y: bool = False,
    feasible_only: bool = True,
    sample: int = 0,
):
    """The Pareto front of a finished sweep over two columns, chunk by chunk.

    Memory holds one chunk plus the front so far (the front of a union is the front
    of the fronts of its parts).

    Args:
        out: the sweep folder.
        x, y: result or config columns.
        maximize_x, maximize_y: which way each column is better.
        feasible_only: only rows with `feasible`.
        sample: also return about this many (x, y) points of all rows, for plotting.

    Returns:
        (front table sorted by x, sampled x, sampled y, rows considered).

    Raises:
        InputError: if a chunk fails verification (`iter_sweep`: missing, damaged or
            duplicated; the message names it and the `--resume` that recomputes it), a
            column is not in the sweep, or pyarrow is not installed.
    """
    pa = pyarrow()

    manifest = read_manifest(out)
    stride = max(1, manifest["n_configs"] // sample) if sample else 0
    front = None
    xs, ys = [], []
    considered = 0
    for t in iter_sweep(out):
        for col in (x, y):
            if col not in t.column_names:
                raise InputError(f"{out}: column {col!r}: not in the sweep; expected one of {t.column_names}")
        if feasible_only:
            t = t.filter(t.column("feasible"))
        considered += t.num_rows
        if stride and t.num_rows:
            xs.append(t.column(x).to_numpy()[::stride])
            ys.append(t.column(y).to_numpy()[::stride])
        cand = t if front is None else pa.concat_tables([front, t])
        mask = pareto_mask(cand.column(x).to_numpy(), cand.column(y).to_numpy(), maximize_x, maximize_y)
        front = cand.filter(pa.array(mask))
    assert front is not None
    order = np.argsort(front.column(x).to_numpy() * (-1.0 if maximize_x else 1.0), kind="stable")
    front = front.take(pa.array(order))
    cat = lambda parts: np.concatenate(parts) if parts else np.zeros(0)
    return front, cat(xs), cat(ys), considered
