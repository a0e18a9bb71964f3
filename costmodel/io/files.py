"""Shipped data and files: where they are, reading TOML and JSON, writing atomically."""

from __future__ import annotations

import contextlib
import copy
import functools
import json
import os
import tempfile
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from .errors import InputError


def data_dir() -> Path:
    """The folder of shipped data (`data/` in a checkout, `costmodel/_data` in a wheel)."""
    here = Path(__file__).resolve().parent.parent  # the costmodel package
    for candidate in (here.parent / "data", here / "_data"):
        if (candidate / "models.toml").exists():
            return candidate
    raise InputError(f"shipped data not found next to {here}: expected data/models.toml")


def load_toml(path: Path | str) -> dict[str, Any]:
    """A TOML file's content (a fresh copy each call: callers may change it); a missing,
    unreadable or malformed file raises `InputError`. The shipped tables are read once
    per row by some callers (`costmodel validate`): a parse is kept per file content."""
    path = Path(path)
    try:
        return copy.deepcopy(_parse_toml(path.read_bytes()))
    except FileNotFoundError:
        raise InputError(f"{path}: file not found") from None
    except IsADirectoryError:
        raise InputError(f"{path}: is a folder, expected a TOML file") from None
    except PermissionError:
        raise InputError(f"{path}: not readable (permission denied)") from None
    except tomllib.TOMLDecodeError as e:
        raise InputError(f"{path}: not valid TOML ({e})") from None
    except UnicodeDecodeError:
        raise InputError(f"{path}: not a UTF-8 text file") from None


@functools.lru_cache(maxsize=64)
def _parse_toml(data: bytes) -> dict[str, Any]:
    return tomllib.loads(data.decode("utf-8"))


def load_json(path: Path | str) -> Any:
    """A JSON file's content; a missing, unreadable or malformed file raises `InputError`."""
    path = Path(path)
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        raise InputError(f"{path}: file not found") from None
    except IsADirectoryError:
        raise InputError(f"{path}: is a folder, expected a JSON file") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise InputError(f"{path}: not valid JSON ({e})") from None


@contextlib.contextmanager
def atomic_open(path: Path | str, mode: str = "w") -> Iterator[IO[Any]]:
    """Opens a temporary file beside `path` for writing; when the block ends without an
    error the file is synced to disk and renamed onto `path`, else it is removed. An
    interruption therefore never leaves a partial `path` behind, and a reader sees the
    old file or the whole new one.

    Args:
        path: the file to write.
        mode: "w" (text) or "wb" (bytes).
    """
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        with open(tmp, mode) as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def atomic_write(path: Path | str, text: str) -> None:
    """Writes `text` to `path` atomically (`atomic_open`)."""
    with atomic_open(path) as f:
        f.write(text)


PLOT_SUFFIXES = (".png", ".pdf", ".svg", ".svgz", ".eps", ".ps", ".jpg", ".jpeg", ".tif", ".tiff", ".webp")
"""File name endings a plot may have: formats matplotlib writes with no external tool
(its `pgf` needs LaTeX; `raw`/`rgba` are pixel buffers, not images)."""


def _check_parent(path: Path, option: str) -> None:
    parent = path.parent
    if not parent.is_dir():
        raise InputError(f"{option} {path}: folder {parent} does not exist; expected the output in an existing folder")
    # A real probe, not os.access: root passes access() for /proc and read-only mounts.
    try:
        fd, probe = tempfile.mkstemp(dir=parent, prefix=".costmodel-probe-")
    except OSError as e:
        raise InputError(f"{option} {path}: folder {parent} is not writable ({e.strerror or e})") from None
    os.close(fd)
    os.unlink(probe)


def check_output_path(path: str | Path, option: str, suffixes: tuple[str, ...] = PLOT_SUFFIXES) -> Path:
    """The one check of an output file a command will write, done before any work:
    its name ends in one of `suffixes` (any case), it is not a folder, and its folder
    exists and is writable.

    Args:
        path: the file name as given.
        option: the option it came from (`--plot`), for the message.
        suffixes: the endings the writer supports (`PLOT_SUFFIXES` for a plot).

    Returns:
        The path.

    Raises:
        InputError: naming the option, the path and what was expected.
    """
    p = Path(path)
    if p.suffix.lower() not in suffixes:
        raise InputError(f"{option} {path}: expected a file name ending in one of {', '.join(suffixes)}")
    if p.is_dir():
        raise InputError(f"{option} {path}: is a folder; expected a file name")
    _check_parent(p, option)
    return p


def check_output_folder(path: str | Path, option: str) -> Path:
    """`check_output_path` for an output folder (created if absent): not a file, and
    its parent folder exists and is writable."""
    p = Path(path)
    if p.exists() and not p.is_dir():
        raise InputError(f"{option} {path}: is a file; expected a folder")
    if not p.exists():
        _check_parent(p, option)
    return p


def only_section(data: dict[str, Any], section: str, path: Path) -> Any:
    """`data[section]`, reporting any other top-level key as a typo."""
    for key in data:
        if key != section:
            raise InputError(f"{path}: unknown field {key!r}; expected only the {section!r} section")
    return data.get(section)


def named_tables(path: Path, section: str) -> dict[str, Any]:
    """The `[section.NAME]` tables of a file of named entries (framework profiles, context
    distributions): its only section, a non-empty table, or one `InputError` naming the file."""
    data = only_section(load_toml(path), section, path)
    if not isinstance(data, dict) or not data:
        raise InputError(f"{path}: expected a non-empty [{section}] table")
    return data


def row_tables(path: Path) -> list[Any]:
    """The `[[rows]]` array of a table file (measurements, PIM results, serving runs):
    its only section, a non-empty array, or one `InputError` naming the file."""
    rows = only_section(load_toml(path), "rows", path)
    if not isinstance(rows, list) or not rows:
        raise InputError(f"{path}: expected a non-empty [[rows]] array")
    return rows
