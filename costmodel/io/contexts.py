"""Named context distributions (`data/contexts.toml`): the contexts a decoding sequence
has at a random step of real serving traffic, as histograms computed from published
per-request traces (`benchmarks/contexts/`)."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

from .errors import InputError
from .files import data_dir, named_tables
from .schema import check_table


SHARE_SUM_TOLERANCE = 1e-6
"""How far from 1 a distribution's shares may sum (decimal rounding in the file)."""


@dataclasses.dataclass(frozen=True)
class ContextDistribution:
    """One named distribution.

    Attributes:
        name: its id (`costmodel serve --context-mix NAME`).
        lengths: each bin's context, tokens (the mean context of the decode steps in it).
        shares: each bin's share of the decode steps, summing to 1.
        prompt_tokens, output_tokens: mean prompt and output tokens per request of the trace.
        description, source, derivation: what it is, where it comes from, how it was computed.
    """

    name: str
    lengths: tuple[float, ...]
    shares: tuple[float, ...]
    prompt_tokens: float
    output_tokens: float
    description: str
    source: str
    derivation: str

    @property
    def mean_context(self) -> float:
        """The share-weighted mean context, tokens."""
        return math.fsum(n * s for n, s in zip(self.lengths, self.shares))

    def mix(self):
        """The distribution as a `costmodel.ContextMix` around `mean_context`."""
        from .._core.workload import ContextMix

        return ContextMix.of(self.lengths, self.shares)


def contexts_path() -> Path:
    return data_dir() / "contexts.toml"


def load_context_distributions(path: Path | str | None = None) -> dict[str, ContextDistribution]:
    """Every distribution of a contexts file, validated.

    Raises:
        InputError: one line naming the file, the distribution, the field and the value.
    """
    path = Path(path) if path is not None else contexts_path()
    data = named_tables(path, "distributions")
    out = {}
    for name, t in data.items():
        where = f"{path}: distributions.{name}"
        t = check_table(
            t,
            where,
            {"prompt_tokens_mean": "positive", "output_tokens_mean": "positive"},
            {"step_context_mean": "positive", "n_requests": "count"},
            strings=("description", "source", "derivation"),
            tables=("bins", "shares", "bin_lower_edges"),
        )
        for key in ("source", "derivation"):
            if not t.get(key):
                raise InputError(f"{where}: missing field {key!r} (where the distribution comes from, and how)")
        lists = {}
        for key, ok, expected in (
            ("bins", lambda v: v > 0, "numbers > 0 (tokens)"),
            ("shares", lambda v: 0 <= v <= 1, "numbers in [0, 1]"),
            ("bin_lower_edges", lambda v: v >= 0, "numbers >= 0 (tokens)"),
        ):
            value = t.get(key)
            if value is None and key == "bin_lower_edges":
                continue
            if (
                not isinstance(value, list)
                or not value
                or not all(
                    isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and ok(v)
                    for v in value
                )
            ):
                raise InputError(f"{where}: field {key!r} = {value!r}: expected a non-empty list of {expected}")
            lists[key] = tuple(float(v) for v in value)
        edges = lists.get("bin_lower_edges")
        if edges is not None and (len(edges) != len(lists["bins"]) or list(edges) != sorted(set(edges))):
            raise InputError(
                f"{where}: field 'bin_lower_edges' = {list(edges)!r}: expected one increasing edge per bin "
                f"({len(lists['bins'])} bins)"
            )
        if len(lists["bins"]) != len(lists["shares"]):
            raise InputError(
                f"{where}: fields 'bins' ({len(lists['bins'])} entries) and 'shares' ({len(lists['shares'])}): "
                "expected one share per bin"
            )
        total = math.fsum(lists["shares"])
        if not abs(total - 1.0) <= SHARE_SUM_TOLERANCE:
            raise InputError(f"{where}: field 'shares' sums to {total:.9g}: expected 1 (shares of the decode steps)")
        out[name] = ContextDistribution(
            name=name,
            lengths=lists["bins"],
            shares=lists["shares"],
            prompt_tokens=float(t["prompt_tokens_mean"]),
            output_tokens=float(t["output_tokens_mean"]),
            description=t.get("description", ""),
            source=t["source"],
            derivation=t["derivation"],
        )
    return out


def context_distribution(name: str, path: Path | str | None = None) -> ContextDistribution:
    """One named distribution (`data/contexts.toml`).

    Raises:
        InputError: an unknown name, listing the known ones.

    Examples:
        >>> import costmodel as cm
        >>> d = cm.context_distribution("azure-conversation")
        >>> round(d.mean_context)
        1228
    """
    known = load_context_distributions(path)
    if name not in known:
        where = Path(path) if path is not None else contexts_path()
        raise InputError(
            f"context distribution {name!r}: unknown; expected one of {sorted(known)} ({where}), or bins as "
            "TOKENS:SHARE,... (e.g. --context-mix 4096:1)"
        )
    return known[name]
