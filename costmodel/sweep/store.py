"""Sweep folders: verified Parquet chunks, the manifest, one writer, resume, reading back.

A sweep folder holds `sweep.json` (the manifest: the spec, its hash, the chunk size
and, for every finished chunk, its config range, row count, size and SHA-256) and
one Parquet file per chunk. Every consumer reads a folder through one verified-chunk
reader (`iter_sweep`, `verify_sweep`): a chunk counts only if its record is there and
its bytes hash to the recorded SHA-256, and its `config` column is its own range. A
missing, truncated, altered, foreign or duplicated chunk (a copy of its neighbour)
is named in a one-line `InputError` that says how to recompute it.

Writing: a chunk is serialised, hashed and written (synced) under a temporary name;
its record goes into `sweep.json` (atomically) and only then is the file renamed into
place, so a chunk file on disk always has its record. `resume=True` keeps exactly
the chunks that verify and recomputes the rest (deleting the bad files first); since
a chunk is a pure function of the spec and its range, the folder ends with every
config exactly once and every file byte-identical to an uninterrupted run.

One writer: a run locks the bytes `[first, stop)` of `.sweep.lock` that stand for
the chunks it writes (POSIX record locks, `fcntl.lockf`; the kernel drops them when
the process dies, so a killed run never blocks the next one); a second run that
wants any of those chunks gets an `InputError` naming the folder. The manifest is
read, checked and rewritten under one more lock byte. Without `resume`, a folder
that holds anything but this sweep's manifest (and, under `jax.distributed`, the
other processes' chunks) is refused. The lock file is removed by the last writer
to finish.

Multi-host: under `jax.distributed`, process `p` of `P` evaluates the contiguous range
of chunks `[n_chunks * p // P, n_chunks * (p + 1) // P)` on its own local devices
(no cross-host communication is needed), writing into a shared output folder. The
union of all processes' chunks is the whole sweep, each config exactly once (record
locks across hosts need a file system that supports them, e.g. NFSv4).

pyarrow is optional (the `costmodel[sweep]` extra): it is imported when a chunk is
written or read, and its absence is an `InputError` saying how to install it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import fcntl
import hashlib
import importlib.metadata
import json
import os
import re
import shlex
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import jax
import numpy as np

from ..io import InputError, atomic_write, load_json
from ._arrow import pyarrow
from .program import Sweep, cached_sweep
from .sampling import MAX_CONFIGS
from .spec import SweepSpec


FORMAT = "costmodel-sweep/2"
"""Version 2: configs generated inside the compiled program (uint32 Feistel and hash,
float32 values); version 1 drew them on the host (numpy, uint64) and its configs differ,
so a version-1 folder can be read (`pareto`) but not resumed or rewritten."""
_READABLE = ("costmodel-sweep/1", FORMAT)
MANIFEST = "sweep.json"
LOCK = ".sweep.lock"
"""The lock file of a sweep folder (see the module docstring)."""
CHECKSUMS = "sha256"
"""`sweep.json`'s `checksums` field: its `chunks` records hold each chunk's SHA-256.
A manifest without it (written before chunk records existed) is read with structural
checks only (rows and config range), and resuming it recomputes every chunk."""
_MANIFEST_BYTE = 2**32
"""The lock byte that guards `sweep.json` (beyond any chunk's: there are < 2**32)."""
_FLUSH_SHARE = 32
"""Chunk records are written to `sweep.json` in batches of at least 1/32 of those
already there (and files renamed after them): rewriting the manifest costs
O(chunks), so writing it once per chunk would make a long sweep quadratic."""
_TMP = re.compile(r"^\.(chunk-\d{8}\.parquet|sweep\.json)\.tmp-.*$")
_CHUNK = re.compile(r"^chunk-(\d{8})\.parquet$")


def chunk_path(out: Path, k: int) -> Path:
    """The file of chunk `k` in the sweep folder `out`."""
    return out / f"chunk-{k:08d}.parquet"


def process_chunks(n_chunks: int, index: int, count: int) -> range:
    """The contiguous chunks process `index` of `count` evaluates."""
    return range(n_chunks * index // count, n_chunks * (index + 1) // count)


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
        "spec_file": sweep.spec.source,
        "n_configs": sweep.n_configs,
        "chunk": sweep.chunk,
        "n_chunks": sweep.n_chunks,
        "spec": sweep.spec.raw,
        "costmodel_version": provenance["costmodel_version"] if provenance else _version(),
        "provenance": provenance,
        "checksums": CHECKSUMS,
        "chunks": {},
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
    if data["n_configs"] > MAX_CONFIGS or data["n_chunks"] != -(-data["n_configs"] // data["chunk"]):
        raise InputError(
            f"{path}: field 'n_chunks' = {data['n_chunks']!r}: expected ceil(n_configs / chunk) = "
            f"{-(-data['n_configs'] // data['chunk'])} with n_configs <= {MAX_CONFIGS}"
        )
    if not isinstance(data.get("spec"), dict) or not isinstance(data["spec"].get("axes", {}), dict):
        raise InputError(f"{path}: field 'spec' = {data.get('spec')!r}: expected the sweep spec's table")
    if "chunks" in data and not isinstance(data["chunks"], dict):
        raise InputError(f"{path}: field 'chunks' = {data['chunks']!r}: expected a table of chunk records")
    return data


def _expected(manifest: dict[str, Any], k: int) -> tuple[int, int]:
    """Configs `[start, stop)` of chunk `k` of the sweep `manifest` describes."""
    size = manifest["chunk"]
    return k * size, min((k + 1) * size, manifest["n_configs"])


def _records(manifest: dict[str, Any]) -> dict[int, dict[str, Any]]:
    """The well-formed chunk records of a manifest, by chunk (a malformed one is no record:
    its chunk is unverified, so a resume recomputes it)."""
    out = {}
    chunks = manifest.get("chunks")
    if manifest.get("checksums") != CHECKSUMS or not isinstance(chunks, dict):
        return out
    for name, rec in chunks.items():
        m = _CHUNK.match(name) if isinstance(name, str) else None
        if m is None or not isinstance(rec, dict):
            continue
        configs, rows, size, digest = rec.get("configs"), rec.get("rows"), rec.get("bytes"), rec.get("sha256")
        ints = lambda *v: all(isinstance(x, int) and not isinstance(x, bool) for x in v)
        if not (isinstance(configs, list) and len(configs) == 2 and ints(*configs, rows, size)):
            continue
        if not (isinstance(digest, str) and re.fullmatch(r"[0-9a-f]{64}", digest)):
            continue
        out[int(m.group(1))] = rec
    return out


def _span(first: int, stop: int) -> str:
    return f"configs {first}..{stop - 1}" if stop > first else "no configs"


def _check_record(manifest: dict[str, Any], k: int, records: dict[int, dict[str, Any]]) -> str | None:
    """What is wrong with chunk `k` that its record and the file's size tell (no read)."""
    path = chunk_path(Path(manifest["_out"]), k)
    want = _expected(manifest, k)
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        return "missing (the sweep did not finish)"
    if manifest.get("checksums") != CHECKSUMS:
        return None  # an older folder: only the structural checks of `_check_table`
    rec = records.get(k)
    if rec is None:
        return f"not recorded in {MANIFEST} (left by a run stopped before it recorded the chunk, or not written by this sweep)"
    if tuple(rec["configs"]) != want or rec["rows"] != want[1] - want[0]:
        return f"{MANIFEST} records {_span(*rec['configs'])} for it, expected {_span(*want)}"
    if size != rec["bytes"]:
        return _size_problem(size, rec["bytes"])
    return None


def _size_problem(size: int, recorded: int) -> str:
    how = "cut short" if size < recorded else "grown"
    return f"{size} bytes where {MANIFEST} records {recorded} ({how} or replaced)"


def _check_bytes(manifest: dict[str, Any], k: int, records: dict[int, dict[str, Any]], data: bytes) -> str | None:
    """What is wrong with chunk `k`'s bytes against its record's SHA-256 (None: they match)."""
    rec = records.get(k)
    if manifest.get("checksums") != CHECKSUMS or rec is None:
        return None
    if len(data) != rec["bytes"]:
        return _size_problem(len(data), rec["bytes"])
    if hashlib.sha256(data).hexdigest() != rec["sha256"]:
        return f"its SHA-256 differs from the one in {MANIFEST} (changed or replaced since it was written)"
    return None


def _check_table(
    manifest: dict[str, Any], k: int, data: bytes, columns: Sequence[str] | None
) -> tuple[Any, str | None]:
    """(table, problem): chunk `k` parsed, and whether it holds exactly its own configs."""
    pa = pyarrow()
    cols = None if columns is None else list(dict.fromkeys(["config", *columns]))
    try:
        table = pa.parquet.read_table(pa.BufferReader(data), columns=cols)
    except (pa.ArrowException, OSError, ValueError) as e:
        return None, f"not a readable Parquet file ({type(e).__name__}: {e})"
    want = _expected(manifest, k)
    if "config" not in table.column_names:
        return None, "has no 'config' column (not a chunk of a sweep)"
    got = table.column("config").to_numpy(zero_copy_only=False)
    if not np.array_equal(got, np.arange(*want)):
        held = _span(int(got.min()), int(got.max()) + 1) if len(got) else "no configs"
        return None, f"holds {held} ({len(got)} rows), expected {_span(*want)} (a copy of another chunk?)"
    if columns is not None and "config" not in columns:
        table = table.drop_columns(["config"])
    return table, None


def _recover(out: Path, manifest: dict[str, Any], n: int) -> str:
    """How to recompute `n` damaged chunks: the `--resume` command line."""
    spec = manifest.get("spec_file")
    spec = shlex.quote(spec) if isinstance(spec, str) and spec and not spec.startswith("<") else "SPEC"
    which = "it" if n == 1 else "them"
    return f"`costmodel sweep {spec} --out {shlex.quote(str(out))} --resume` recomputes {which}"


def _damaged(out: Path, manifest: dict[str, Any], problems: dict[int, str]) -> InputError:
    """The one-line error for chunks that fail verification."""
    ks = sorted(problems)
    if len(ks) == 1:
        head = f"{out}: {chunk_path(out, ks[0]).name} {problems[ks[0]]}"
    else:
        shown = "; ".join(f"{chunk_path(out, k).name} {problems[k]}" for k in ks[:5])
        more = f"; and {len(ks) - 5} more" if len(ks) > 5 else ""
        head = f"{out}: {len(ks)} chunks of {manifest['n_chunks']} fail verification: {shown}{more}"
    return InputError(f"{head}; {_recover(out, manifest, len(ks))}")


def _opened(out: Path) -> dict[str, Any]:
    manifest = read_manifest(out)
    manifest["_out"] = str(out)
    return manifest


def verify_sweep(out: Path | str, chunks: Sequence[int] | None = None) -> dict[int, str]:
    """Checks chunks of a sweep folder as every reader does: each must exist, have its
    record in `sweep.json`, match the recorded size and SHA-256, parse as Parquet and
    hold exactly its own configs.

    Args:
        out: the sweep folder.
        chunks: which chunks (default: all).

    Returns:
        `{chunk: what is wrong}` for the chunks that fail (empty: all verify).

    Raises:
        InputError: if `sweep.json` is missing or malformed, or pyarrow is not installed.
    """
    out = Path(out)
    manifest = _opened(out)
    records = _records(manifest)
    problems = {}
    for k in range(manifest["n_chunks"]) if chunks is None else chunks:
        problem = _check_record(manifest, k, records)
        if problem is None:
            data = chunk_path(out, k).read_bytes()
            problem = _check_bytes(manifest, k, records, data) or _check_table(manifest, k, data, ["config"])[1]
        if problem is not None:
            problems[k] = problem
    return problems


def missing_chunks(out: Path | str) -> list[int]:
    """The chunks of the sweep in `out` whose files are not written (yet)."""
    manifest = read_manifest(out)
    return [k for k in range(manifest["n_chunks"]) if not chunk_path(Path(out), k).exists()]


def iter_sweep(out: Path | str, columns: Sequence[str] | None = None) -> Iterator[Any]:
    """The chunks of a finished sweep, in order, as `pyarrow.Table`s, each verified.

    Before the first chunk is read, every chunk's presence, record and size are
    checked; each chunk's SHA-256 and config range are checked as it is read. The
    chunks that are read thus hold every config of the sweep exactly once.

    Raises:
        InputError: naming the chunk(s) that are missing, not recorded, cut short,
            changed, unreadable or a copy of another, and the `--resume` command that
            recomputes them; or if pyarrow is not installed.
    """
    out = Path(out)
    manifest = _opened(out)
    pyarrow()
    records = _records(manifest)
    n = manifest["n_chunks"]
    problems = {k: p for k in range(n) if (p := _check_record(manifest, k, records)) is not None}
    if problems:
        raise _damaged(out, manifest, problems)
    for k in range(n):
        try:
            data = chunk_path(out, k).read_bytes()
        except FileNotFoundError:  # removed while we read
            raise _damaged(out, manifest, {k: "missing (removed while the sweep was read)"}) from None
        problem = _check_bytes(manifest, k, records, data)
        table = None
        if problem is None:
            table, problem = _check_table(manifest, k, data, columns)
        if problem is not None:
            raise _damaged(out, manifest, {k: problem})
        yield table


def read_sweep(out: Path | str, columns: Sequence[str] | None = None):
    """The whole table of a finished sweep (rows in config order), verified (`iter_sweep`)."""
    return pyarrow().concat_tables(list(iter_sweep(out, columns)))


# --- one writer per chunk ---------------------------------------------------------------


class _FolderLock:
    """The record locks of one writer on `out/.sweep.lock` (see the module docstring).

    Byte `k` of the file stands for chunk `k`, and byte `_MANIFEST_BYTE` for
    `sweep.json`. POSIX record locks belong to the process and vanish when it dies
    (kill -9 included); they also vanish when the process closes *any* descriptor of
    the file, so this class keeps the only one.
    """

    def __init__(self, out: Path, chunks: range):
        self.out, self.chunks = out, chunks
        self.path = out / LOCK
        self.fd: int | None = None

    def _busy(self) -> InputError:
        return InputError(
            f"{self.out}: another `costmodel sweep` is writing into this folder (it holds the lock "
            f"{self.path}); wait for it to finish, or choose another --out"
        )

    def acquire(self) -> None:
        while True:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                if len(self.chunks):
                    fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, len(self.chunks), self.chunks.start, os.SEEK_SET)
            except OSError as e:
                os.close(fd)
                if e.errno in (errno.EACCES, errno.EAGAIN):
                    raise self._busy() from None
                raise
            # A finishing writer unlinks the file: the one we locked must still be it.
            try:
                same = os.stat(self.path).st_ino == os.fstat(fd).st_ino
            except FileNotFoundError:
                same = False
            if same:
                self.fd = fd
                return
            os.close(fd)

    @contextlib.contextmanager
    def manifest(self) -> Iterator[None]:
        """Holds the manifest's lock byte (blocking: it is held for milliseconds)."""
        assert self.fd is not None
        fcntl.lockf(self.fd, fcntl.LOCK_EX, 1, _MANIFEST_BYTE, os.SEEK_SET)
        try:
            yield
        finally:
            fcntl.lockf(self.fd, fcntl.LOCK_UN, 1, _MANIFEST_BYTE, os.SEEK_SET)

    def release(self) -> None:
        """Drops the locks; the last writer (no other holds a byte) removes the file."""
        if self.fd is None:
            return
        try:
            fcntl.lockf(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 0, 0, os.SEEK_SET)  # the whole file
        except OSError:
            pass  # another writer is still at work: it removes the file
        else:
            self.path.unlink(missing_ok=True)
        finally:
            os.close(self.fd)
            self.fd = None


def _check_manifest(out: Path, mine: dict[str, Any]) -> dict[str, Any] | None:
    """The folder's manifest (None if there is none), checked to be this sweep's."""
    path = out / MANIFEST
    if not path.exists():
        return None
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
    return old


def _check_empty(out: Path, n_chunks: int, chunks: range) -> None:
    """Without `--resume` the folder must be new: nothing in it but this sweep's manifest,
    leftovers of a killed run's temporary files and lock, and other processes' chunks."""
    found = []
    for p in sorted(out.iterdir()):
        if p.name in (MANIFEST, LOCK) or _TMP.match(p.name):
            continue
        m = _CHUNK.match(p.name)
        if m is not None and int(m.group(1)) < n_chunks and int(m.group(1)) not in chunks:
            continue  # a sibling process's chunk (jax.distributed)
        found.append(p.name)
    if found:
        shown = ", ".join(found[:3]) + (", ..." if len(found) > 3 else "")
        raise InputError(
            f"{out}: folder is not empty ({len(found)} entries: {shown}); add --resume to continue the sweep "
            "it holds, or choose a new --out"
        )


def _write_manifest(out: Path, mine: dict[str, Any], add: dict[int, dict[str, Any]], drop: Sequence[int]) -> int:
    """Rewrites `sweep.json` (atomically): this run's fields, the records already there
    (other processes write theirs too) less `drop`, plus `add`. Hold the manifest lock.

    Returns:
        How many chunk records it now holds.
    """
    old = read_manifest(out) if (out / MANIFEST).exists() else {}
    records = {**_records(old), **add}
    for k in drop:
        records.pop(k, None)
    doc = {**mine, "chunks": {chunk_path(out, k).name: records[k] for k in sorted(records)}}
    atomic_write(out / MANIFEST, json.dumps(doc, indent=1, sort_keys=True, default=str))
    return len(records)


def _record_of(out: Path, sweep: Sweep, k: int) -> dict[str, Any]:
    """The record of chunk `k` as its file is now."""
    data = chunk_path(out, k).read_bytes()
    start, stop = sweep.chunk_range(k)
    return {
        "configs": [start, stop],
        "rows": stop - start,
        "bytes": len(data),
        "sha256": hashlib.sha256(data).hexdigest(),
    }


def _serialise(table) -> tuple[bytes, str]:
    """A chunk's Parquet bytes and their SHA-256."""
    pa = pyarrow()
    sink = pa.BufferOutputStream()
    pa.parquet.write_table(table, sink)
    data = sink.getvalue().to_pybytes()
    return data, hashlib.sha256(data).hexdigest()


def _write_synced(path: Path, data: bytes) -> None:
    with open(path, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())


@dataclasses.dataclass(frozen=True)
class SweepStats:
    """What a run did.

    Attributes:
        n_configs: configs in the whole sweep.
        evaluated: configs this process evaluated in this run.
        skipped: configs of this process's chunks already on disk and verified (resume).
        seconds: wall time of the evaluation loop (compilation included), s.
        chunks: chunk ids this process owns.
        recomputed: chunks of this process that were on disk but failed verification
            (resume), with what was wrong; they were deleted and evaluated again.
    """

    n_configs: int
    evaluated: int
    skipped: int
    seconds: float
    chunks: range
    recomputed: dict[int, str] = dataclasses.field(default_factory=dict)

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
            the spec, its hash, the chunk size and each written chunk's config range,
            rows, size and SHA-256.
        chunk: configs per chunk (default: the spec's; on resume, the folder's).
        resume: keep the chunks already written that verify (`verify_sweep`) and
            evaluate the rest; without it the folder must be new or empty.
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
        InputError: if `out` holds a different sweep or another chunk size, is not
            empty (without `resume`), or another run is writing these chunks into it.
    """
    out = Path(out)
    if progress:
        _progress(True, 0, 0)  # rich missing: say so before any work
    if resume and chunk is None and (out / MANIFEST).exists():
        chunk = read_manifest(out).get("chunk")
    pyarrow()
    sweep = cached_sweep(spec, chunk, devices)
    mine = _manifest(sweep, provenance)

    index = jax.process_index() if process_index is None else process_index
    count = jax.process_count() if process_count is None else process_count
    chunks = process_chunks(sweep.n_chunks, index, count)
    out.mkdir(parents=True, exist_ok=True)
    lock = _FolderLock(out, chunks)
    lock.acquire()
    try:
        with lock.manifest():
            old = _check_manifest(out, mine)
            if not resume or old is None:  # with no manifest, there is no sweep to resume
                _check_empty(out, sweep.n_chunks, chunks)
            # Temporary files of our chunks (and of the manifest, written only under this
            # lock) are what a killed run left half-written.
            for stale in out.iterdir():
                m = _TMP.match(stale.name)
                if m and (m.group(1) == MANIFEST or int(m.group(1)[6:14]) in chunks):
                    stale.unlink(missing_ok=True)
            bad: dict[int, str] = {}
            adopted: dict[int, dict[str, Any]] = {}
            if resume and old is not None:
                problems = verify_sweep(out, [k for k in chunks if chunk_path(out, k).exists()])
                for k, why in problems.items():
                    chunk_path(out, k).unlink(missing_ok=True)
                    bad[k] = why
                if old.get("checksums") != CHECKSUMS:
                    # A folder from before chunk records: its chunks passed the structural
                    # checks (rows, config range); they are recorded as they are now.
                    adopted = {k: _record_of(out, sweep, k) for k in chunks if chunk_path(out, k).exists()}
            todo = [k for k in chunks if not (resume and chunk_path(out, k).exists())]
            recorded = _write_manifest(out, mine, adopted, todo)

        sizes = {k: sweep.chunk_range(k)[1] - sweep.chunk_range(k)[0] for k in chunks}
        total = sum(sizes.values())
        skipped = total - sum(sizes[k] for k in todo)
        throttle = float(os.environ.get("COSTMODEL_SWEEP_THROTTLE_S", "0") or 0)

        # Written chunks wait under their temporary names until their records are in
        # sweep.json; then they are renamed: a chunk file on disk always has its record.
        waiting: list[tuple[int, Path, dict[str, Any]]] = []

        def publish() -> None:
            nonlocal recorded
            with lock.manifest():
                recorded = _write_manifest(out, mine, {k: rec for k, _, rec in waiting}, ())
            for k, tmp, _ in waiting:
                os.replace(tmp, chunk_path(out, k))
            waiting.clear()

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
                    data, digest = _serialise(sweep.to_table(pstart, pstop, host, results))
                    tmp = out / f".{chunk_path(out, pk).name}.tmp-{os.getpid()}"
                    _write_synced(tmp, data)
                    rec = {"configs": [pstart, pstop], "rows": pstop - pstart, "bytes": len(data), "sha256": digest}
                    waiting.append((pk, tmp, rec))
                    if k is None or len(waiting) * _FLUSH_SHARE >= recorded:
                        publish()
                    bar.advance(task, pstop - pstart)
                    if throttle:
                        time.sleep(throttle)  # only for tests/demos of interruption
                pending = nxt
            if waiting:
                publish()
        seconds = time.perf_counter() - t0
    finally:
        lock.release()
    return SweepStats(sweep.n_configs, total - skipped, skipped, seconds, chunks, bad)
