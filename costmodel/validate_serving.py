"""Serving figures against published serving benchmarks (`costmodel validate --serving`).

Each row of `data/measurements/serving.toml` is one published run of a serving engine
under continuous batching: a model on an instance of `chips` chips split `tensor_parallel`
x `pipeline_parallel`, requests of `prompt_tokens` in and `output_tokens` out, a load
given as a `concurrency` (closed-loop clients: requests in flight) or a `request_rate`
(open loop, requests/s), and what was measured: the time per output token (TPOT), the
output-token throughput and the time to first token (TTFT).

The model serves the same load with `costmodel.serving.serve` (chunked prefill of the
arriving prompts inside the decode steps, Sarathi-Serve; the framework profile applied
to the chip) at mean context `prompt + output / 2`, on the row's split:

- **concurrency C**: the decode batch is C, or the largest the memory holds (and the
  engine's scheduler runs: a profile's `max_batch`, over the whole instance) if less
  (the rest wait in a queue). A request lasts TTFT + output x TPOT, so the instance
  delivers `batch x output / (TTFT + output x TPOT)` output tokens/s.
- **no load given** (a maximum-throughput run): the largest batch the memory holds (and
  the engine runs).
- **request rate r**: the batch is where Little's law closes, `batch = r x (TTFT +
  output x TPOT(batch))`, solved on a grid of whole batches (linear between them); the
  throughput is `r x output` while the instance keeps up, and the largest batch's
  rate when it does not (overloaded).

- **a burst** (`arrival = "burst"`: all `concurrency` requests sent at once, each served
  once, as `benchmark_throughput`, a static batch or a request rate of "inf" send
  them): `costmodel.serving.burst` serves them step by step, decode steps that prefill
  nothing, each prompt prefilled when its request is admitted, at most the largest
  batch the memory holds (and the engine runs) at once, until the longest request
  ends; the row's `output_lengths` say whether every request emits `output_tokens`
  ("fixed") or lengths vary around that mean ("varied": the maximum-entropy
  distribution with that mean, geometric, or over 1 ... `output_cap` where the row's
  client capped each request there, `costmodel.serving.output_length_pmf`). The
  throughput is all output tokens over that time; the TPOT is the mean over requests
  of each one's time per output token after its first, as serving benchmarks average
  it, or the median inter-token latency where the row's `tpot_statistic` says its
  figure is that.
- **closed-loop waves** (`concurrency` clients whose requests all emit `output_tokens`,
  `output_lengths = "fixed"`: a forced length, or every request reaching one cap):
  clients started together are admitted together, finish in the same step and send
  their next requests together, so the loop runs in waves, each a burst of `concurrency`
  requests served as above, and a request's first token waits for the prompts admitted
  with it; clients beyond what the memory holds wait in a queue for the next wave. (With
  lengths that vary the clients drift apart into the steady state above.)

Scored (`status = "test"`): TPOT and throughput, each a relative error (a TPOT that is
`concurrency / throughput`, `tpot_statistic = "per_stream"`, only as the throughput);
TTFT is shown but not scored: under load it is mostly waiting (for the prompts admitted
before or with a request, in a queue for a slot, in the client and the HTTP server),
which the model contains only for bursts and waves (a steady-state step time is not a
waiting time). Rows marked `fit` are those a serving
engine's profile was fitted on: its host times (`fit_host`, two rows) or its kernels'
bytes in flight (`fit_in_flight`, one row); and bursts of one request whose time to
first token calibrates their chip's `prefill_efficiency`
(benchmarks/prefill_calibration.py); they are shown, not scored. Rows marked
`blind` were gathered for a blind check (every check's rows together, `summary`'s
"blind"); BENCHMARKS.md records each check's one blind score.
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

import jax.numpy as jnp
import numpy as np

from .io import InputError
from .io.files import row_tables
from .io.frameworks import INFERENCE_MODES
from .io.measurements import serving_table_path
from .io.schema import check_table


if TYPE_CHECKING:
    from .io.frameworks import Framework


TARGET = 0.15
"""Goal: median relative error of the scored serving figures <= 15 % (issue 17)."""

STATUSES = ("test", "fit", "reference")

ARRIVALS = ("closed", "burst")
"""How the requests came: "closed" (closed-loop clients keeping `concurrency` in
flight, in waves where their requests' lengths are fixed, or open-loop arrivals at
`request_rate`), "burst" (all `concurrency` requests sent at once, each served once)."""

OUTPUT_LENGTHS = ("fixed", "varied")
"""Whether every request emits exactly `output_tokens` ("fixed") or lengths differ per
request around that mean ("varied"; `costmodel.serving.output_length_pmf`)."""

TPOT_STATISTICS = ("mean", "median_itl", "per_stream")
"""What a row's `tpot_ms` is: "mean" (the mean over requests of each one's time per
output token after its first, `benchmark_serving`'s "Mean TPOT"; median TPOTs are
compared as such too), "median_itl" (the median over all output tokens of the time
since the previous one, "Median ITL"), or "per_stream" (a closed-loop client's interval
between output tokens with its prefills included: `concurrency / throughput`, as
LMDeploy's static benchmark derives it). The first two differ where some steps stall
the decoding sequences (a burst's prompts prefilled between decode steps); in a steady
state the model's steps are alike and both are its step time."""

MAX_BATCH = 4096
"""Largest decode batch tried for a row (sequences per instance)."""


@dataclasses.dataclass(frozen=True)
class ServingRow:
    """One published serving run (the table's header documents every field)."""

    id: str
    status: str
    reason: str
    chip: str
    chips: int
    tensor_parallel: int
    pipeline_parallel: int
    framework: str
    model: str
    weights: str
    kv: str
    prompt_tokens: float | None
    output_tokens: float
    concurrency: float | None
    request_rate: float | None
    output_tokens_per_second: float | None
    tpot_ms: float | None
    ttft_ms: float | None
    tpot_limit_ms: float | None
    tag: str
    source: str
    conditions: str
    blind: str = ""
    arrival: str = "closed"
    output_lengths: str = ""
    output_cap: float | None = None
    tpot_statistic: str = "mean"
    max_batch: int | None = None
    memory_fraction: float | None = None
    inference: str = "online"

    @property
    def waves(self) -> bool:
        """Whether the row is served as a burst (`_burst`): all `concurrency` requests
        sent at once (`arrival = "burst"`), or closed-loop clients whose requests all emit
        `output_tokens` (`output_lengths = "fixed"`). Such clients, started together, are
        admitted in the same step, end in the same step and send their next requests
        together: the loop runs in waves, each a burst of `concurrency` requests, and
        each request's first token waits for the prompts admitted with it."""
        return self.arrival == "burst" or (self.concurrency is not None and self.output_lengths == "fixed")


def load_serving_rows(
    path: Path | str | None = None, frameworks: dict[str, Framework] | None = None
) -> list[ServingRow]:
    """The serving table, validated (each row's `framework` one of `frameworks`, by
    default data/frameworks.toml's).

    Raises:
        InputError: one line naming the file, the row, the field and the value.
    """
    path = Path(path) if path is not None else serving_table_path()
    rows = row_tables(path)
    from .io import chip_presets, formats, model_presets
    from .io.frameworks import framework_names

    chips, models, fmts = chip_presets(), model_presets(), formats()
    names = sorted({"native", *framework_names(frameworks)})  # a native row runs the bare chip
    out: list[ServingRow] = []
    seen: set[str] = set()
    for i, t in enumerate(rows):
        where = f"{path}: rows[{i}]"
        t = check_table(
            t,
            where,
            {"chips": "count", "tensor_parallel": "count", "pipeline_parallel": "count", "output_tokens": "positive"},
            {
                "prompt_tokens": "positive",
                "concurrency": "positive",
                "request_rate": "positive",
                "output_tokens_per_second": "positive",
                "tpot_ms": "positive",
                "ttft_ms": "positive",
                "tpot_limit_ms": "positive",
                "max_batch": "count",
                "memory_fraction": "fraction",
                "output_cap": "count",
            },
            strings=(
                "id",
                "status",
                "reason",
                "chip",
                "framework",
                "model",
                "weights",
                "kv",
                "tag",
                "source",
                "conditions",
                "blind",
                "arrival",
                "output_lengths",
                "tpot_statistic",
                "inference",
            ),
        )
        for key in ("id", "status", "chip", "framework", "model", "weights", "kv", "source"):
            if not t.get(key):
                raise InputError(f"{where}: missing field {key!r} (a non-empty string)")
        where = f"{path}: rows[{i}] ({t['id']})"
        if t["id"] in seen:
            raise InputError(f"{where}: field 'id' = {t['id']!r}: expected a unique id")
        seen.add(t["id"])
        checks = (
            ("status", STATUSES),
            ("chip", sorted(chips)),
            ("framework", names),
            ("model", sorted(models)),
            ("weights", sorted(fmts)),
            ("kv", sorted(fmts)),
            ("arrival", ARRIVALS),
            ("output_lengths", OUTPUT_LENGTHS),
            ("tpot_statistic", TPOT_STATISTICS),
            ("inference", INFERENCE_MODES),
        )
        for key, allowed in checks:
            if key in t and t[key] not in allowed:
                raise InputError(f"{where}: field {key!r} = {t[key]!r}: expected one of {list(allowed)}")
        if t["status"] == "reference" and not t.get("reason"):
            raise InputError(f"{where}: missing field 'reason': a reference row says why it is not scored")
        if t["chips"] != t["tensor_parallel"] * t["pipeline_parallel"]:
            raise InputError(
                f"{where}: field 'chips' = {t['chips']:g}: expected tensor_parallel x pipeline_parallel = "
                f"{t['tensor_parallel'] * t['pipeline_parallel']:g}"
            )
        if "concurrency" in t and "request_rate" in t:
            raise InputError(f"{where}: fields 'concurrency' and 'request_rate': expected one load, not both")
        if t["status"] in ("test", "fit"):
            if "prompt_tokens" not in t:
                raise InputError(f"{where}: missing field 'prompt_tokens': a scored row needs it")
            if "concurrency" not in t and "request_rate" not in t:
                raise InputError(f"{where}: missing field 'concurrency' or 'request_rate': a scored row needs its load")
            if "tpot_ms" not in t and "output_tokens_per_second" not in t:
                raise InputError(
                    f"{where}: missing field 'tpot_ms' or 'output_tokens_per_second': a scored row needs a figure"
                )
        if t.get("arrival") == "burst":
            if "concurrency" not in t or "output_lengths" not in t:
                raise InputError(
                    f"{where}: field 'arrival' = 'burst': expected 'concurrency' (the requests sent at once) and "
                    f"'output_lengths' (one of {list(OUTPUT_LENGTHS)})"
                )
        elif "output_lengths" in t and ("concurrency" not in t or t["output_lengths"] != "fixed"):
            raise InputError(
                f"{where}: field 'output_lengths' = {t['output_lengths']!r}: expected 'fixed' on a closed-loop "
                "row with 'concurrency' (its clients run in waves), or a burst (arrival = 'burst'); "
                "otherwise none (a steady load is served at its mean length)"
            )
        if "output_cap" in t and (t.get("output_lengths") != "varied" or not t["output_cap"] >= t["output_tokens"]):
            raise InputError(
                f"{where}: field 'output_cap' = {t['output_cap']:g}: expected the most tokens a request may emit "
                f"(its max_tokens), at least output_tokens = {t['output_tokens']:g}, on a burst whose "
                "output_lengths = 'varied'"
            )
        if t.get("tpot_statistic") == "per_stream" and "concurrency" not in t:
            raise InputError(
                f"{where}: field 'tpot_statistic' = 'per_stream': expected a row with 'concurrency' "
                "(concurrency / throughput is a closed-loop client's token interval)"
            )
        if t.get("arrival") == "burst" or t.get("output_lengths") == "fixed":
            from .serving import MAX_BURST, MAX_OUTPUT_TOKENS

            for key, hi in (
                ("concurrency", MAX_BURST),
                ("output_tokens", MAX_OUTPUT_TOKENS),
                ("output_cap", MAX_OUTPUT_TOKENS),
            ):
                if key in t and not 1 <= t[key] <= hi:
                    kind = "a burst" if t.get("arrival") == "burst" else "waves of fixed-length requests"
                    raise InputError(f"{where}: field {key!r} = {t[key]:g}: expected 1 to {hi} for {kind}")
        count = lambda key: int(t[key])
        out.append(
            ServingRow(
                id=t["id"],
                status=t["status"],
                reason=t.get("reason", ""),
                chip=t["chip"],
                chips=count("chips"),
                tensor_parallel=count("tensor_parallel"),
                pipeline_parallel=count("pipeline_parallel"),
                framework=t["framework"],
                model=t["model"],
                weights=t["weights"],
                kv=t["kv"],
                prompt_tokens=t.get("prompt_tokens"),
                output_tokens=t["output_tokens"],
                concurrency=t.get("concurrency"),
                request_rate=t.get("request_rate"),
                output_tokens_per_second=t.get("output_tokens_per_second"),
                tpot_ms=t.get("tpot_ms"),
                ttft_ms=t.get("ttft_ms"),
                tpot_limit_ms=t.get("tpot_limit_ms"),
                tag=t.get("tag", ""),
                source=t["source"],
                conditions=t.get("conditions", ""),
                blind=t.get("blind", ""),
                arrival=t.get("arrival", "closed"),
                output_lengths=t.get("output_lengths", ""),
                output_cap=t.get("output_cap"),
                tpot_statistic=t.get("tpot_statistic", "mean"),
                max_batch=int(t["max_batch"]) if "max_batch" in t else None,
                memory_fraction=t.get("memory_fraction"),
                inference=t.get("inference", "online"),
            )
        )
    return out


@dataclasses.dataclass(frozen=True)
class ServingResult:
    """A row with the model's figures at the row's load.

    Attributes:
        row: the published run.
        batch: the decode batch the model serves the load with (sequences).
        overloaded: the load exceeds what the memory holds (concurrency above the
            largest batch) or what the instance keeps up with (request rate).
        tpot_ms, ttft_ms: the model's time per output token and time to first token.
        output_tokens_per_second: the model's output throughput of the instance.
    """

    row: ServingRow
    batch: float
    overloaded: bool
    tpot_ms: float
    ttft_ms: float
    output_tokens_per_second: float

    def errors(self) -> dict[str, float]:
        """Signed relative errors, model / measured - 1, of the figures the row has."""
        out = {}
        for key in ("tpot_ms", "output_tokens_per_second", "ttft_ms"):
            measured = getattr(self.row, key)
            if measured is not None:
                out[key] = getattr(self, key) / measured - 1.0
        return out


def _row_chip(
    row: ServingRow,
    host_us: tuple[float, float] | None = None,
    in_flight_kb: float | None = None,
    frameworks: dict[str, Framework] | None = None,
):
    """The row's chip with its framework profile (from `frameworks`, by default
    data/frameworks.toml's) and the engine settings the row states (its `max_batch` and
    `memory_fraction` replace the profile's), its host time replaced by `host_us` (µs
    per step and per sequence) and its kernels' bytes in flight per parallel unit by
    `in_flight_kb` (kB) when given."""
    from .evaluation import allocate_dram, apply_framework, apply_host
    from .io import chip_info

    info = chip_info(row.chip)
    bare = info.chip.tiers.capacity
    if row.framework != "native":
        info = apply_framework(info, row.framework, frameworks, inference=row.inference, kv=row.kv)
    if row.max_batch is not None:
        info = dataclasses.replace(info, max_batch=row.max_batch)
    if row.memory_fraction is not None:  # of the chip's own DRAM, not the profile's share of it
        info = dataclasses.replace(info, chip=allocate_dram(info.chip, bare, row.memory_fraction))
    if host_us is not None:
        info = dataclasses.replace(info, chip=apply_host(info.chip, host_us))
    if in_flight_kb is not None:
        info = dataclasses.replace(info, chip=info.chip.replace(bytes_in_flight=in_flight_kb * 1e3))
    return info


def _curve(
    row: ServingRow,
    host_us: tuple[float, float] | None = None,
    in_flight_kb: float | None = None,
    *,
    decode_only: bool = False,
    context: float | None = None,
    frameworks: dict[str, Framework] | None = None,
):
    """(batches, TPOT s, TTFT s) of the feasible whole batches on the row's split, with
    the row's chip (`_row_chip`), at mean context `prompt + output / 2` unless `context`
    is given; `decode_only`: steps that prefill nothing (TTFT 0)."""
    from .io import economics_preset
    from .serving import serve

    info = _row_chip(row, host_us, in_flight_kb, frameworks)
    prompt = row.prompt_tokens if row.prompt_tokens is not None else 0.0
    want = row.concurrency if row.concurrency is not None else MAX_BATCH
    batches = np.unique(np.concatenate([np.arange(1, min(want, 64) + 1), np.geomspace(1, MAX_BATCH, 96).round()]))
    if info.max_batch is not None:  # the engine's cap itself, a batch it runs
        batches = np.unique(np.append(batches, min(info.max_batch, MAX_BATCH)))
    if row.concurrency is not None:
        batches = np.unique(np.append(batches[batches <= want], want))
    prefill = row.prompt_tokens is not None and not decode_only
    s = serve(
        row.model,
        info,
        economics_preset(),  # prices: not compared here
        chips=row.chips,
        context=prompt + row.output_tokens / 2 if context is None else context,
        weights=row.weights,
        kv=row.kv,
        batches=batches,
        prompt_tokens=row.prompt_tokens if prefill else None,
        output_tokens=row.output_tokens if prefill else None,
    )
    points = s.curve(row.tensor_parallel, row.pipeline_parallel)
    if not points:
        raise InputError(
            f"row {row.id}: {row.model} fits no batch on {row.chips} x {row.chip} "
            f"(TP {row.tensor_parallel} x PP {row.pipeline_parallel})"
        )
    b = np.array([p.batch for p in points])
    tpot = np.array([p.tpot for p in points])
    ttft = np.array([p.ttft or 0.0 for p in points])
    return b, tpot, ttft


def evaluate_serving_row(
    row: ServingRow, host_us: tuple[float, float] | None = None, frameworks: dict[str, Framework] | None = None
) -> ServingResult:
    """The model's TPOT, TTFT and throughput at the row's load (module docstring), with
    the framework's host time replaced by `host_us` (µs per step and per sequence) when
    given, and the profiles of `frameworks` (default data/frameworks.toml's)."""
    if row.waves:
        return _burst(row, host_us, frameworks=frameworks)
    return _at_load(row, *_curve(row, host_us, frameworks=frameworks))


@dataclasses.dataclass(frozen=True)
class _BurstParts:
    """What `costmodel.serving.burst` serves a row's burst with: the sequences decoded
    at once at most, the decode step by batch, the prompt pass by prompts admitted, and
    the output lengths' distribution."""

    slots: float
    decode: tuple[np.ndarray, np.ndarray]
    prefill: tuple[np.ndarray, np.ndarray]
    pmf: np.ndarray


def _burst(
    row: ServingRow,
    host_us: tuple[float, float] | None = None,
    in_flight_kb: float | None = None,
    *,
    frameworks: dict[str, Framework] | None = None,
) -> ServingResult:
    """A row served as a burst (`ServingRow.waves`): its `concurrency` requests served
    once (`costmodel.serving.burst`), with decode steps that prefill nothing, the prompts
    prefilled as they are admitted, at most the largest batch the memory holds (and
    the engine runs) at once, and output lengths as the row says. Requests of one fixed
    length grow together: the batch the memory holds is the one at their last token's
    context (a scheduler that reserves each request's whole length, or one that preempts
    when the cache fills, runs no more); lengths that vary hold the mean context.
    Closed-loop waves repeat that burst, so one burst's figures are the run's; clients
    beyond the slots wait in a queue for a wave (`_burst_served`)."""
    return _burst_served(row, _burst_parts(row, host_us, in_flight_kb, frameworks))


def _burst_parts(
    row: ServingRow,
    host_us: tuple[float, float] | None = None,
    in_flight_kb: float | None = None,
    frameworks: dict[str, Framework] | None = None,
) -> _BurstParts:
    """The curves `_burst` serves `row` with (host time and bytes in flight as
    `_row_chip` takes them)."""
    from .io import chip_info
    from .serving import output_length_pmf, prompt_seconds

    assert row.concurrency is not None
    b, step, _ = _curve(row, host_us, in_flight_kb, decode_only=True, frameworks=frameworks)
    slots = float(b[-1])
    if row.output_lengths == "fixed":
        end = (row.prompt_tokens or 0.0) + row.output_tokens
        last, _, _ = _curve(row, host_us, in_flight_kb, decode_only=True, context=end, frameworks=frameworks)
        slots = float(last[-1])
    most = float(min(row.concurrency, slots))
    admitted = np.unique(np.append(np.geomspace(1, most, 12).round(), most))
    # A profile's compute efficiency is fitted on, and prices, decode steps; a batch of
    # prompts runs its GEMMs over many rows at the chip's own rate, times the share of it
    # a pass of prompts alone reaches (`ChipInfo.prefill_efficiency`, which `prompt_seconds`
    # applies, as `costmodel validate` does for a static batch's prefill).
    info = _row_chip(row, host_us, in_flight_kb, frameworks)
    own = chip_info(row.chip).chip.compute_efficiency
    pre = prompt_seconds(
        row.model,
        dataclasses.replace(info, chip=info.chip.replace(compute_efficiency=own)),
        prompt_tokens=row.prompt_tokens or 1.0,
        batches=admitted,
        tensor_parallel=row.tensor_parallel,
        pipeline_parallel=row.pipeline_parallel,
        weights=row.weights,
        kv=row.kv,
    )
    return _BurstParts(
        slots, (b, step), (admitted, pre), output_length_pmf(row.output_tokens, row.output_lengths, row.output_cap)
    )


def _burst_served(row: ServingRow, parts: _BurstParts) -> ServingResult:
    """A burst row's figures from its curves (`_burst_parts`)."""
    from .serving import burst

    assert row.concurrency is not None
    # Closed-loop clients beyond the slots queue: the engine runs full waves of `slots`,
    # and by Little's law each request waits concurrency / slots - 1 waves to be admitted.
    loop = row.arrival == "closed"
    requests = min(row.concurrency, parts.slots) if loop else row.concurrency
    try:
        r = burst(requests, parts.pmf, parts.slots, parts.decode, parts.prefill)
    except InputError as e:
        raise InputError(f"row {row.id}: {e}") from None
    ttft = r.ttft + (max(row.concurrency / parts.slots, 1.0) - 1.0) * r.seconds if loop else r.ttft
    tpot = {"median_itl": r.itl_median, "per_stream": row.concurrency / r.output_tokens_per_second}.get(
        row.tpot_statistic, r.tpot
    )
    return ServingResult(
        row, r.batch, bool(row.concurrency > parts.slots), tpot * 1e3, ttft * 1e3, r.output_tokens_per_second
    )


def _at_load(row: ServingRow, b, tpot, ttft) -> ServingResult:
    """The row's load served on a curve of (batch, TPOT s, TTFT s) points."""
    out = row.output_tokens
    life = ttft + out * tpot  # s a request takes, admitted at once
    if row.concurrency is None and row.request_rate is None:  # a maximum-throughput run
        batch, t, f = float(b[-1]), float(tpot[-1]), float(ttft[-1])
        return ServingResult(row, batch, True, t * 1e3, f * 1e3, batch * out / (f + out * t))
    if row.concurrency is not None:
        overloaded = row.concurrency > b[-1]
        k = len(b) - 1 if overloaded else int(np.searchsorted(b, row.concurrency))
        batch, t, f = float(b[k]), float(tpot[k]), float(ttft[k])
        throughput = batch * out / (f + out * t)
    else:
        assert row.request_rate is not None
        gap = row.request_rate * life - b  # > 0: the load needs more in flight than b
        above = np.nonzero(gap <= 0)[0]
        overloaded = len(above) == 0
        if overloaded:
            batch, t, f = float(b[-1]), float(tpot[-1]), float(ttft[-1])
            throughput = batch * out / (f + out * t)
        else:
            k = int(above[0])
            if k == 0:
                w = 1.0
            else:  # linear between the last batch short of the load and the first enough
                w = gap[k - 1] / (gap[k - 1] - gap[k])
            lerp = lambda y: float(y[k] if k == 0 else y[k - 1] + w * (y[k] - y[k - 1]))
            batch, t, f = lerp(b), lerp(tpot), lerp(ttft)
            throughput = row.request_rate * out
    if row.tpot_statistic == "per_stream" and row.concurrency is not None:
        t = row.concurrency / throughput
    return ServingResult(row, batch, bool(overloaded), t * 1e3, f * 1e3, throughput)


def _host_time(row: ServingRow, host_us: tuple[float, float]):
    """`n -> costmodel.host_seconds(n)` of the row's chip with `host_us` (µs per step
    and per sequence): the serial host time of a pass over n sequences, exact on one
    pipeline stage (one group per pass), the only layout the host-time fits take."""
    from ._core.channels import host_seconds
    from .evaluation import apply_host
    from .io import chip_info

    if row.pipeline_parallel != 1:
        raise InputError(f"row {row.id}: pipeline_parallel = {row.pipeline_parallel}: a host-time fit needs 1 stage")
    chip = apply_host(chip_info(row.chip).chip, host_us)
    return lambda n: np.asarray(host_seconds(jnp.asarray(n, dtype=float), chip))


def with_host(row: ServingRow, curve, host_us: tuple[float, float]):
    """A curve computed with no host time (`_curve(row, (0, 0))`) with `host_us` added:
    each step, and each of the chunked-prefill steps before the first token, takes
    `costmodel.host_seconds` longer (`_host_time`); a test checks it against the full
    evaluation."""
    b, tpot, ttft = curve
    step = tpot + _host_time(row, host_us)(b)
    return b, step, ttft * step / tpot


def with_host_burst(row: ServingRow, parts: _BurstParts, host_us: tuple[float, float]) -> _BurstParts:
    """A burst's curves computed with no host time (`_burst_parts(row, (0, 0))`) with
    `host_us` added: each decode step of b sequences, and each prompt pass of a prompts,
    takes `costmodel.host_seconds` of them longer (`_host_time`)."""
    host = _host_time(row, host_us)
    (b, step), (a, pre) = parts.decode, parts.prefill
    return dataclasses.replace(parts, decode=(b, step + host(b)), prefill=(a, pre + host(a)))


def _squared_log_error(res: ServingResult) -> float:
    """The fits' loss for one row: the squared log errors of its TPOT and throughput
    (the figures it has), summed."""
    total = 0.0
    for key in ("tpot_ms", "output_tokens_per_second"):
        measured = getattr(res.row, key)
        if measured is not None:
            total += math.log(getattr(res, key) / measured) ** 2
    return total


def _closed_loop(rows: list[ServingRow]) -> None:
    """Raises InputError if a row to fit on was a burst sent once (the fits serve the
    loads of closed-loop clients: steady, or waves of fixed-length requests)."""
    for r in rows:
        if r.arrival != "closed":
            raise InputError(f"row {r.id}: arrival = {r.arrival!r}: a profile is fitted on closed-loop rows")


def fit_host(rows: list[ServingRow]) -> tuple[float, float]:
    """Fits a framework's unhidden host time (`HOST_FIELDS`, µs) to serving rows.

    Minimises the summed squared log error of each row's TPOT and throughput (the
    figures it has) over `host_step_us, host_per_sequence_us >= 0` (Nelder-Mead on
    their square roots, from three starts), each row served at its load as
    `evaluate_serving_row` does, with the row's framework's other fields as they are.

    Returns:
        (host_step_us, host_per_sequence_us).
    """
    offline = [r.id for r in rows if r.inference != "online"]
    if offline:
        raise InputError(
            f"rows {offline}: inference = 'offline': the online host time is fitted on online rows "
            "(an offline engine's is costmodel.validate.fit_engine_host's)"
        )
    from scipy.optimize import minimize

    _closed_loop(rows)
    curves = [(r, _burst_parts(r, (0.0, 0.0)) if r.waves else _curve(r, (0.0, 0.0))) for r in rows]

    def served(r, c, host):
        if isinstance(c, _BurstParts):
            return _burst_served(r, with_host_burst(r, c, host))
        return _at_load(r, *with_host(r, c, host))

    def loss(x):
        host = (float(x[0]) ** 2, float(x[1]) ** 2)
        return sum(_squared_log_error(served(r, c, host)) for r, c in curves)

    best = min(
        (
            minimize(loss, np.sqrt(start), method="Nelder-Mead", options={"xatol": 1e-3, "fatol": 1e-10})
            for start in ((1000.0, 10.0), (100.0, 300.0), (5000.0, 1000.0))
        ),
        key=lambda m: m.fun,
    )
    return float(best.x[0]) ** 2, float(best.x[1]) ** 2


def fit_in_flight(rows: list[ServingRow]) -> float:
    """Fits a framework's kernel concurrency (`bytes_in_flight_KB`, kB per parallel
    unit) to serving rows: the summed squared log error of each row's TPOT and
    throughput (the figures it has), each served at its load as `evaluate_serving_row`
    does with the row's framework's other fields as they are, minimised over the log of
    the bytes in flight between 0.5 and 64 kB (bounded Brent).

    Returns:
        bytes_in_flight_KB.
    """
    from scipy.optimize import minimize_scalar

    _closed_loop(rows)

    def served(r, kb):
        return _burst(r, in_flight_kb=kb) if r.waves else _at_load(r, *_curve(r, in_flight_kb=kb))

    def loss(log_kb):
        return sum(_squared_log_error(served(r, math.exp(log_kb))) for r in rows)

    best = minimize_scalar(loss, bounds=(math.log(0.5), math.log(64.0)), method="bounded", options={"xatol": 1e-4})
    return math.exp(float(best.x))


def evaluate_serving_rows(
    rows: list[ServingRow], frameworks: dict[str, Framework] | None = None
) -> list[ServingResult]:
    """Every row at its load (`evaluate_serving_row`), with the profiles of `frameworks`
    (default data/frameworks.toml's)."""
    return [evaluate_serving_row(r, frameworks=frameworks) for r in rows]


def summary(results: list[ServingResult]) -> dict[str, Any]:
    """Median and p90 absolute error of each scored figure over the test rows, and of
    both together (the goal's figure); the same over the blind checks' rows alone
    (`blind`: gathered without running the model, each check first scored blind; every
    check's rows together here, BENCHMARKS.md records each one's score and any change
    made after it) under "blind"."""
    test = [r for r in results if r.row.status == "test"]
    out: dict[str, Any] = {"target": TARGET, "test_rows": len(test), **_figures(test)}
    blind = [r for r in test if r.row.blind]
    out["blind"] = {"test_rows": len(blind), **_figures(blind)}
    return out


def _scored(row: ServingRow, key: str) -> bool:
    """Whether a row's figure `key` is its own measurement: a per-stream TPOT
    (`tpot_statistic = "per_stream"`) is the throughput restated (concurrency /
    throughput, in the table and in the model alike), shown and counted once, as the
    throughput."""
    return not (key == "tpot_ms" and row.tpot_statistic == "per_stream")


def _figures(test: list[ServingResult]) -> dict[str, Any]:
    stats = lambda errs: (
        {"n": len(errs), "median": float(np.median(errs)), "p90": float(np.percentile(errs, 90))}
        if errs
        else {"n": 0, "median": math.nan, "p90": math.nan}
    )
    out: dict[str, Any] = {}
    pooled: list[float] = []
    for key in ("tpot_ms", "output_tokens_per_second", "ttft_ms"):
        errs = [abs(r.errors()[key]) for r in test if key in r.errors() and _scored(r.row, key)]
        if key != "ttft_ms":
            pooled += errs
        out[key] = stats(errs)
    out["scored"] = stats(pooled)
    return out


def serving_record(r: ServingResult) -> dict[str, Any]:
    """One result as JSON-ready data."""
    row = r.row
    return {
        "id": row.id,
        "status": row.status,
        "blind": row.blind,
        "reason": row.reason,
        "system": f"{row.chips} x {row.chip} (TP {row.tensor_parallel} x PP {row.pipeline_parallel})",
        "framework": row.framework,
        "model": row.model,
        "load": (
            (
                f"burst of {row.concurrency:g}"
                if row.arrival == "burst"
                else f"concurrency {row.concurrency:g}" + (" (waves)" if row.waves else "")
            )
            if row.concurrency is not None
            else f"{row.request_rate:g} req/s"
        )
        if (row.concurrency is not None or row.request_rate is not None)
        else "unknown",
        "prompt_tokens": row.prompt_tokens,
        "output_tokens": row.output_tokens,
        "batch": r.batch,
        "overloaded": r.overloaded,
        "measured": {
            "tpot_ms": row.tpot_ms,
            "output_tokens_per_second": row.output_tokens_per_second,
            "ttft_ms": row.ttft_ms,
        },
        "predicted": {
            "tpot_ms": r.tpot_ms,
            "output_tokens_per_second": r.output_tokens_per_second,
            "ttft_ms": r.ttft_ms,
        },
        "errors": r.errors(),
        "source": row.source,
    }
