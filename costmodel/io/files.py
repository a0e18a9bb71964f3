"""Shipped data and files: where they are, reading TOML and JSON, writing atomically."""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import tomllib

from .errors import InputError


def data_dir() -> Path:
    """The folder of shipped data (`data/` in a checkout, `costmodel/_data` in a wheel)."""
    here = Path(__file__).resolve().parent.parent  # the costmodel package
    for candidate in (here.parent / "data", here / "_data"):
        if (candidate / "models.toml").exists():
            return candidate
    raise InputError(f"shipped data not found next to {here}: expected data/models.toml")


def load_toml(path: Path | str) -> dict[str, Any]:
    path = Path(path)
    try:
        with open(path, "rb") as f:
            return tomllib.load(f)
    except FileNotFoundError:
        raise InputError(f"{path}: file not found") from None
    except IsADirectoryError:
        raise InputError(f"{path}: is a folder, expected a TOML file") from None
    except tomllib.TOMLDecodeError as e:
        raise InputError(f"{path}: not valid TOML ({e})") from None
    except UnicodeDecodeError:
        raise InputError(f"{path}: not a UTF-8 text file") from None


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


def only_section(data: dict[str, Any], section: str, path: Path) -> Any:
    """`data[section]`, reporting any other top-level key as a typo."""
    for key in data:
        if key != section:
            raise InputError(f"{path}: unknown field {key!r}; expected only the {section!r} section")
    return data.get(section)
