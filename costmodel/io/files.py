"""Shipped data and files: where they are, reading TOML, writing atomically."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

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


def atomic_write(path: Path | str, text: str) -> None:
    """Writes `text` to `path` through a temporary file and a rename, so that an
    interruption never leaves a partial file behind."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        tmp.write_text(text)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def only_section(data: dict[str, Any], section: str, path: Path) -> Any:
    """`data[section]`, reporting any other top-level key as a typo."""
    for key in data:
        if key != section:
            raise InputError(f"{path}: unknown field {key!r}; expected only the {section!r} section")
    return data.get(section)
