"""Sweep folders: Parquet chunks written atomically, the manifest, resume, reading back.

Each finished chunk is written to Parquet under a temporary name and renamed into
place, so a folder only ever holds whole chunks; `resume=True` skips the chunks
already there and the final table is identical, row for row, to an uninterrupted run.

Multi-host: under `jax.distributed`, process `p` of `P` evaluates the contiguous range
of chunks `[n_chunks * p // P, n_chunks * (p + 1) // P)` on its own local devices
(no cross-host communication is needed), writing into a shared output folder. The
union of all processes' chunks is the whole sweep, each config exactly once.

pyarrow is optional (the `costmodel[sweep]` extra): it is imported when a chunk is
written or read, and its absence is an `InputError` saying how to install it.
"""

from __future__ import annotations

import dataclasses
import importlib.metadata
import json
import os
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import jax

from ..io import InputError, atomic_open, atomic_write, load_json
from ._arrow import pyarrow
from .program import Sweep, cached_sweep
from .spec import SweepSpec


FORMAT = "costmodel-sweep/2"
"""Version 2: configs generated inside the compiled program (uint32 Feistel and hash,
float32 values); version 1 drew them on the host (numpy, uint64) and its configs differ,
so a version-1 folder can be read (`pareto`) but not resumed or rewritten."""
_READABLE = ("costmodel-sweep/1", FORMAT)
MANIFEST = "sweep.json"


def chunk_path(out: Path, k: int) -> Path:
    """The file of chunk `k` in the sweep folder `out`."""
    return out / f"chunk-{k:08d}.parquet"


def process_chunks(n_chunks: int, index: int, count: int) -> range:
    """The contiguous chunks process `index` of `count` evaluates."""
    return range(n_chunks * index // count, n_chunks * (index + 1) // count)


def _write_atomic(table, path: Path) -> None:
    """Writes a Parquet file through a temporary name (synced) and a rename."""
    with atomic_open(path, "wb") as f:
        pyarrow().parquet.write_table(table, f)


def _version() -> str:
    """The installed costmodel's version (the package's metadata, not its `__init__`)."""
    try:
        return importlib.metadata.version("costmodel")
    except importlib.metadata.PackageNotFoundError:  # a source tree on sys.path, not installed
        return "unknown"


def _manifest(sweep: Sweep, provenance: dict[str, Any] | None) -> dict[str, Any]:
    return {
        "format": FORMAT,
        "spec_sha256": sweep.spec.digest(),
        "n_configs": sweep.n_configs,
        "chunk": sweep.chunk,
        "n_chunks": sweep.n_chunks,
        "spec": sweep.spec.raw,
        "costmodel_version": provenance["costmodel_version"] if provenance else _version(),
        "provenance": provenance,
    }


def read_manifest(out: Path | str) -> dict[str, Any]:
    """The checked `sweep.json` of a sweep folder.

    Raises:
        InputError: if it is missing, not JSON, of an unknown format or lacks a field.
    """
    path = Path(out) / MANIFEST
    if not path.exists():
        raise InputError(f"{path}: file not found (not a sweep folder)")
    data = load_json(path)
    if not isinstance(data, dict) or data.get("format") not in _READABLE:
        raise InputError(
            f"{path}: field 'format' = {data.get('format') if isinstance(data, dict) else data!r}: expected one of {list(_READABLE)}"
        )
    for key, lo in (("n_configs", 1), ("chunk", 1), ("n_chunks", 1)):
        v = data.get(key)
        if isinstance(v, bool) or not isinstance(v, int) or v < lo:
            raise InputError(f"{path}: field {key!r} = {v!r}: expected a whole number >= {lo}")
    if not isinstance(data.get("spec"), dict) or not isinstance(data["spec"].get("axes", {}), dict):
        raise InputError(f"{path}: field 'spec' = {data.get('spec')!r}: expected the sweep spec's table")
    return data


def _check_manifest(out: Path, mine: dict[str, Any]) -> None:
    path = out / MANIFEST
    if not path.exists():
        return
    old = read_manifest(out)
    if old["format"] != mine["format"]:
        raise InputError(
            f"{path}: field 'format' = {old['format']!r}: expected {mine['format']!r} (the folder was written "
            "by an earlier version whose sampler drew other configs); choose a new --out"
        )
    if old.get("spec_sha256") != mine["spec_sha256"]:
        raise InputError(
            f"{path}: field 'spec_sha256' = {old.get('spec_sha256')!r}: expected {mine['spec_sha256']!r} "
            "(the folder holds a different sweep); choose a new --out"
        )
    if old.get("chunk") != mine["chunk"]:
        raise InputError(
            f"{path}: field 'chunk' = {old.get('chunk')!r}: expected {mine['chunk']!r}; "
            f"resume with --chunk {old.get('chunk')} (or without --chunk)"
        )


@dataclasses.dataclass(frozen=True)
class SweepStats:
    """What a run did.

    Attributes:
        n_configs: configs in the whole sweep.
        evaluated: configs this process evaluated in this run.
        skipped: configs of this process's chunks already on disk (resume).
        seconds: wall time of the evaluation loop (compilation included), s.
        chunks: chunk ids this process owns.
    """

    n_configs: int
    evaluated: int
    skipped: int
    seconds: float
    chunks: range

    @property
    def configs_per_second(self) -> float:
        return self.evaluated / self.seconds if self.seconds > 0 else 0.0


class _NoBar:
    """What `_progress` gives without a bar: rich (the `cli` extra) is not needed then."""

    def __enter__(self) -> _NoBar:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def advance(self, task_id: Any, advance: float) -> None:
        del task_id, advance


def _progress(enabled: bool, total: int, done: int) -> tuple[Any, Any]:
    """(bar, task): a rich progress bar on stderr counting configs/s, or a silent one."""
    if not enabled:
        return _NoBar(), None
    try:
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            ProgressColumn,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )
        from rich.text import Text
    except ImportError:
        raise InputError("a progress bar needs rich (not installed): pip install 'costmodel[all]'") from None

    class Rate(ProgressColumn):
        def render(self, task):
            speed = task.finished_speed or task.speed
            return Text("" if speed is None else f"{speed:,.0f} configs/s", style="progress.data.speed")

    progress = Progress(
        TextColumn("[progress.description]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        Rate(),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=Console(stderr=True),
        speed_estimate_period=10.0,
    )
    task = progress.add_task("sweep", total=total, completed=done)
    return progress, task


def run_sweep(
    spec: SweepSpec,
    out: Path | str,
    *,
    chunk: int | None = None,
    resume: bool = False,
    progress: bool = False,
    devices: Sequence[Any] | None = None,
    process_index: int | None = None,
    process_count: int | None = None,
    provenance: dict[str, Any] | None = None,
) -> SweepStats:
    """Evaluates a sweep chunk by chunk into `out/chunk-XXXXXXXX.parquet`.

    Args:
        spec: the sweep.
        out: the output folder (created). It also gets `sweep.json`, which records
            the spec, its hash and the chunk size, and `spec.toml`-free resumption.
        chunk: configs per chunk (default: the spec's; on resume, the folder's).
        resume: skip chunks already written; without it every chunk is rewritten.
        progress: show a progress bar (configs/s) on stderr.
        devices: devices to shard each chunk over (default: the local devices).
        process_index, process_count: this process's share of the chunks (default:
            `jax.process_index()` and `jax.process_count()`).
        provenance: what produced the sweep, recorded in `sweep.json` as given (the CLI
            passes versions, platform and the SHA-256 of `spec.input_files()` and the
            shipped data); None records none.

    Returns:
        A `SweepStats`.

    Raises:
        InputError: if `out` holds a different sweep or another chunk size.
    """
    out = Path(out)
    if resume and chunk is None and (out / MANIFEST).exists():
        chunk = read_manifest(out).get("chunk")
    sweep = cached_sweep(spec, chunk, devices)
    mine = _manifest(sweep, provenance)
    out.mkdir(parents=True, exist_ok=True)
    _check_manifest(out, mine)
    path = out / MANIFEST
    atomic_write(path, json.dumps(mine, indent=1, sort_keys=True, default=str))

    index = jax.process_index() if process_index is None else process_index
    count = jax.process_count() if process_count is None else process_count
    chunks = process_chunks(sweep.n_chunks, index, count)
    # Temporary files of our chunks are what a killed run left half-written.
    for k in chunks:
        for stale in out.glob(f".{chunk_path(out, k).name}.tmp-*"):
            stale.unlink(missing_ok=True)
    todo = [k for k in chunks if not (resume and chunk_path(out, k).exists())]
    sizes = {k: sweep.chunk_range(k)[1] - sweep.chunk_range(k)[0] for k in chunks}
    total = sum(sizes.values())
    skipped = total - sum(sizes[k] for k in todo)
    throttle = float(os.environ.get("COSTMODEL_SWEEP_THROTTLE_S", "0") or 0)

    bar, task = _progress(progress, total, skipped)
    t0 = time.perf_counter()
    with bar:
        # One chunk is evaluated while the previous one is written, so at most two
        # chunks of results are alive at a time, whatever the sweep's size.
        pending = None
        for k in [*todo, None]:
            nxt = None
            if k is not None:
                start, stop = sweep.chunk_range(k)
                nxt = (k, start, stop, *sweep.dispatch(start, stop))
            if pending is not None:
                pk, pstart, pstop, host, results = pending
                _write_atomic(sweep.to_table(pstart, pstop, host, results), chunk_path(out, pk))
                bar.advance(task, pstop - pstart)
                if throttle:
                    time.sleep(throttle)  # only for tests/demos of interruption
            pending = nxt
    seconds = time.perf_counter() - t0
    return SweepStats(sweep.n_configs, total - skipped, skipped, seconds, chunks)


def missing_chunks(out: Path | str) -> list[int]:
    """The chunks of the sweep in `out` that are not written (yet)."""
    manifest = read_manifest(out)
    return [k for k in range(manifest["n_chunks"]) if not chunk_path(Path(out), k).exists()]


def iter_sweep(out: Path | str, columns: Sequence[str] | None = None) -> Iterator[Any]:
    """The chunks of a finished sweep, in order, as `pyarrow.Table`s.

    Raises:
        InputError: if a chunk is missing (the sweep did not finish), or pyarrow is not
            installed.
    """
    pq = pyarrow().parquet

    out = Path(out)
    missing = missing_chunks(out)
    if missing:
        shown = ", ".join(map(str, missing[:5])) + (", ..." if len(missing) > 5 else "")
        raise InputError(
            f"{out}: {len(missing)} chunk(s) missing ({shown}): the sweep did not finish; rerun it with --resume"
        )
    n = read_manifest(out)["n_chunks"]
    for k in range(n):
        yield pq.read_table(chunk_path(out, k), columns=list(columns) if columns is not None else None)


def read_sweep(out: Path | str, columns: Sequence[str] | None = None):
    """The whole table of a finished sweep (rows in config order)."""
    return pyarrow().concat_tables(list(iter_sweep(out, columns)))
