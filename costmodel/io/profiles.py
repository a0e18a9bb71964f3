"""KV access profiles (`data/profiles.toml`) and profile TOML files, validated.

A profile table sets fields of `costmodel.AccessProfile` (the rest keep their defaults:
dense attention) plus the strings `description` and `source`. A user's file holds either
one `[profile]` table (the profile is named after the file) or a `[profiles]` table with
exactly one entry (named by its key).
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import Any

import numpy as np

from .._core.workload import N_AGE_BUCKETS, AccessProfile
from .errors import InputError
from .files import data_dir, load_toml, only_section
from .schema import KINDS, MAX_NUMBER


N_EDGES = N_AGE_BUCKETS - 1
"""Interior edges of the age buckets an `AccessProfile` holds."""

PROFILE_FIELDS = {
    "sink_tokens": "nonneg",
    "recent_tokens": "nonneg",
    "recent_fraction": "unit",
    "kept_fraction": "unit",
    "budget_tokens": "budget",
    "idle_sequences": "nonneg",
    "queries": "overlap",
    "accepted": "overlap",
    "edges": "edges",
}
"""The numeric fields of a profile table and their kinds: `nonneg` (tokens or counts,
>= 0), `unit` (fractions of the context, in [0, 1]), `overlap` (>= 1; `accepted` is
also at most `queries`), `budget` (>= 0, or `inf` for dense attention: TOML's `inf`),
and `edges` (a list of at most `N_EDGES` positive, strictly increasing token ages,
padded with `inf`)."""

PROFILE_STRINGS = ("description", "source")

_BUDGET_TEXT = "a number >= 0, or inf (every kept token read: dense)"
_EDGES_TEXT = f"a list of at most {N_EDGES} positive, strictly increasing numbers (tokens of age; inf pads)"


@dataclasses.dataclass(frozen=True)
class ProfileInfo:
    """An access profile with what is not part of the pytree.

    Attributes:
        name: the preset id, the key of a one-entry `[profiles]` table, or the stem of a
            file holding a `[profile]` table.
        profile: the `AccessProfile`.
        description: what the profile models.
        source: where its numbers come from.
        where: the file and table it was read from (the prefix of error messages).
    """

    name: str
    profile: AccessProfile
    description: str
    source: str
    where: str = ""


def profiles_path() -> Path:
    return data_dir() / "profiles.toml"


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _edges(value: Any, where: str) -> np.ndarray:
    """The `N_EDGES` edges of a profile's `edges` list, padded with inf."""
    if not isinstance(value, list) or len(value) > N_EDGES:
        size = f" ({len(value)} edges)" if isinstance(value, list) else ""
        raise InputError(f"{where}.edges = {value!r}{size}: expected {_EDGES_TEXT}")
    n = len(value)
    while n and _is_number(value[n - 1]) and value[n - 1] == math.inf:
        n -= 1  # trailing infs are padding
    finite = value[:n]
    for i, v in enumerate(finite):
        if not _is_number(v) or not 0 < v <= MAX_NUMBER:
            raise InputError(
                f"{where}.edges[{i}] = {v!r}: expected a number > 0 (tokens of age, at most {MAX_NUMBER:g})"
            )
        if i > 0 and v <= finite[i - 1]:
            raise InputError(
                f"{where}.edges[{i}] = {v!r}: expected > edges[{i - 1}] = {finite[i - 1]!r} (strictly increasing)"
            )
    return np.array([float(v) for v in finite] + [math.inf] * (N_EDGES - n))


def _check_number(key: str, value: Any, where: str) -> float:
    kind = PROFILE_FIELDS[key]
    if kind == "budget":
        text = _BUDGET_TEXT
        ok = _is_number(value) and (value == math.inf or 0 <= value <= MAX_NUMBER)
    else:
        text, test = KINDS[kind]
        text = f"{text} (at most {MAX_NUMBER:g})"
        ok = _is_number(value) and abs(value) <= MAX_NUMBER and test(value)
    if not ok:
        raise InputError(f"{where}.{key} = {value!r}: expected {text}")
    return float(value)


def profile_from_table(table: Any, where: str, name: str) -> ProfileInfo:
    """A validated `ProfileInfo` from one profile table.

    Args:
        table: the parsed table (fields of `PROFILE_FIELDS` and `PROFILE_STRINGS`).
        where: the "file: profiles.NAME" prefix of error messages.
        name: the profile's name.

    Raises:
        InputError: one line naming the file, the field, the value and what was expected.
    """
    if not isinstance(table, dict):
        raise InputError(f"{where}: expected a table of profile fields, got {table!r}")
    known = sorted(set(PROFILE_FIELDS) | set(PROFILE_STRINGS))
    values: dict[str, Any] = {}
    strings = {key: "" for key in PROFILE_STRINGS}
    for key, value in table.items():
        if key in PROFILE_STRINGS:
            if not isinstance(value, str):
                raise InputError(f"{where}.{key} = {value!r}: expected a string")
            strings[key] = value
        elif key == "edges":
            values[key] = _edges(value, where)
        elif key in PROFILE_FIELDS:
            values[key] = _check_number(key, value, where)
        else:
            raise InputError(f"{where}.{key}: unknown field; expected one of {known}")
    queries, accepted = values.get("queries", 1.0), values.get("accepted", 1.0)
    if accepted > queries:
        raise InputError(f"{where}.accepted = {table['accepted']!r}: expected at most queries ({queries:g})")
    return ProfileInfo(name, AccessProfile(**values), strings["description"], strings["source"], where)


def profile_presets() -> dict[str, dict[str, Any]]:
    """The raw tables of the shipped presets (`data/profiles.toml`), by id."""
    return load_toml(profiles_path())["profiles"]


def load_profiles(path: Path | str | None = None) -> dict[str, ProfileInfo]:
    """Every profile of a `[profiles]` file (the shipped presets by default), validated."""
    path = Path(path) if path is not None else profiles_path()
    data = only_section(load_toml(path), "profiles", path)
    if not isinstance(data, dict) or not data:
        raise InputError(f"{path}: expected a non-empty [profiles] table")
    return {name: profile_from_table(t, f"{path}: profiles.{name}", name) for name, t in data.items()}


def _profile_file(path: Path) -> ProfileInfo:
    data = load_toml(path)
    for key in data:
        if key not in ("profile", "profiles"):
            raise InputError(f"{path}: unknown field {key!r}; expected one [profile] table")
    if "profile" in data and "profiles" in data:
        raise InputError(f"{path}: both [profile] and [profiles]: expected one [profile] table")
    if "profile" in data:
        return profile_from_table(data["profile"], f"{path}: profile", path.stem)
    profiles = data.get("profiles")
    if not isinstance(profiles, dict) or len(profiles) != 1:
        names = sorted(profiles) if isinstance(profiles, dict) else []
        raise InputError(
            f"{path}: [profiles] holds {len(names)} profiles {names}: expected exactly one (or one [profile] table)"
        )
    ((name, table),) = profiles.items()
    return profile_from_table(table, f"{path}: profiles.{name}", name)


def profile_info(spec: str) -> ProfileInfo:
    """A profile from a preset id (`costmodel presets`) or a profile TOML file.

    Args:
        spec: a preset id of `data/profiles.toml`, or the path of a TOML file holding
            one `[profile]` table (named after the file) or a `[profiles]` table with
            exactly one entry (named by its key).

    Raises:
        InputError: an unknown id (the message lists the known ones), or a bad file.

    Examples:
        >>> from costmodel.io.profiles import profile_info
        >>> info = profile_info("window-sinks")
        >>> float(info.profile.sink_tokens), float(info.profile.recent_tokens)
        (4.0, 2044.0)
    """
    presets = profile_presets()
    if spec in presets:
        return profile_from_table(presets[spec], f"{profiles_path()}: profiles.{spec}", spec)
    p = Path(spec)
    if p.suffix == ".toml" or p.exists():
        return _profile_file(p)
    raise InputError(f"profile {spec!r}: unknown preset; expected one of {sorted(presets)} or a path to a TOML file")


def check_profile(
    info_or_profile: ProfileInfo | AccessProfile,
    context: float,
    window: float | None = None,
    where: str | None = None,
) -> None:
    """Checks that a profile fits the history it is used on.

    A budget larger than the history, or sinks and recent tokens that cover more than
    the history, would silently turn the profile into dense attention: both are errors
    (equal is fine).

    Args:
        info_or_profile: a `ProfileInfo` (its `where` names it in messages) or one
            (unbatched) `AccessProfile`.
        context: tokens in each sequence's cache.
        window: the sliding window of a model whose every layer slides, tokens; the
            history is then `min(window, context)`. None (the default) when any layer is
            global: its history is the whole context.
        where: the message prefix; by default the profile's `where`, or "profile".

    Raises:
        InputError: `<where>.<field> = <value>: expected ...`, naming the history.
    """
    if isinstance(info_or_profile, ProfileInfo):
        prof = info_or_profile.profile
        where = where or info_or_profile.where or f"profile {info_or_profile.name!r}"
    else:
        prof = info_or_profile
        where = where or "profile"
    history = float(context) if window is None else min(float(window), float(context))
    what = (
        f"the context, {history:g} tokens"
        if window is None
        else f"the history, min(window, context) = {history:g} tokens"
    )
    budget = float(prof.budget_tokens)
    if budget != math.inf and budget > history:
        raise InputError(
            f"{where}.budget_tokens = {budget:g}: expected at most {what} (a larger budget reads it all: dense attention)"
        )
    sinks = float(prof.sink_tokens)
    if sinks > history:
        raise InputError(f"{where}.sink_tokens = {sinks:g}: expected at most {what}")
    recent = float(prof.recent_tokens) + float(prof.recent_fraction) * float(context)
    if sinks + recent > history:
        raise InputError(
            f"{where}.recent_tokens = {float(prof.recent_tokens):g}: expected sink_tokens + recent_tokens "
            f"+ recent_fraction x context ({sinks + recent:g}) at most {what} (more covers it all: dense attention)"
        )
