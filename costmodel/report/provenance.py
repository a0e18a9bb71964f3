"""What an output file was made from: tool and JAX versions, platform, input hashes.

Every file the tool writes for later use (the main job's `report.json`, a sweep's
`sweep.json`, `optimize --json`) records a `provenance` object, so a result can be
traced to the exact inputs and software that produced it, and two results can be
told apart (or shown identical) without rerunning them.
"""

from __future__ import annotations

import hashlib
import platform as _platform
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ..io import InputError, data_dir


_BLOCK = 1 << 20
"""Bytes read per `sha256_file` step (1 MiB): large traces hash in constant memory."""


def sha256_file(path: Path | str) -> str:
    """SHA-256 of a file's bytes, as 64 hex digits.

    Raises:
        InputError: if the file cannot be read (naming the file).
    """
    path = Path(path)
    h = hashlib.sha256()
    try:
        with open(path, "rb") as f:
            while block := f.read(_BLOCK):
                h.update(block)
    except FileNotFoundError:
        raise InputError(f"{path}: file not found") from None
    except IsADirectoryError:
        raise InputError(f"{path}: is a folder, expected a file") from None
    except OSError as e:
        raise InputError(f"{path}: cannot be read ({e.strerror})") from None
    return h.hexdigest()


_DATA_SUFFIXES = (".toml", ".csv", ".json")


def shipped_inputs() -> list[Path]:
    """The shipped data files a run may read (`data/**/*.toml|csv|json`), sorted."""
    return sorted(p for p in data_dir().rglob("*") if p.is_file() and p.suffix in _DATA_SUFFIXES)


def _key(path: Path | str) -> str:
    """A shipped file as `data/...` (the same on every machine); any other as given."""
    resolved = Path(path).resolve()
    root = data_dir()
    if resolved.is_relative_to(root):
        return "data/" + resolved.relative_to(root).as_posix()
    return Path(path).as_posix()


def user_files(*specs: str | None) -> list[Path]:
    """Those of `specs` (preset ids or paths given on the command line) that are files."""
    out = []
    for spec in specs:
        if spec:
            p = Path(spec)
            p = p / "config.json" if p.is_dir() else p
            if p.is_file():
                out.append(p)
    return out


def provenance(inputs: Iterable[Path | str] = ()) -> dict[str, Any]:
    """The record of what produced an output: versions, platform and input hashes.

    Args:
        inputs: the files the output was computed from. Each is hashed; the keys
            are `data/...` for shipped data (whatever the checkout's location) and
            the paths as given otherwise (POSIX strings), in the order given.

    Returns:
        `{"costmodel_version", "jax_version", "python", "platform", "inputs":
        {path: sha256}}`, JSON-ready. The same inputs on the same machine give the
        same record.

    Raises:
        InputError: if an input cannot be read.

    Examples:
        >>> import costmodel.report.provenance as pv
        >>> p = pv.provenance([pv.shipped_inputs()[0]])
        >>> sorted(p)
        ['costmodel_version', 'inputs', 'jax_version', 'platform', 'python']
        >>> [(k.startswith("data/"), len(h)) for k, h in p["inputs"].items()]
        [(True, 64)]
    """
    import jax

    from .. import __version__

    return {
        "costmodel_version": __version__,
        "jax_version": jax.__version__,
        "python": _platform.python_version(),
        "platform": _platform.platform(),
        "inputs": {_key(p): sha256_file(p) for p in inputs},
    }
