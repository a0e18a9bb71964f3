"""The serving answer: the throughput a per-token latency target allows, and the whole
throughput-versus-interactivity curve.

For a model on `chips` chips of one kind, every tensor x pipeline split of those chips
is evaluated over a grid of batches in one compiled, vmapped call, with one
micro-batch per pipeline stage in flight (`Scenario.micro_batches`, as pipelined
serving runs; one group per sequence at most). A point is a batch on a split: its
time per output token (TPOT, the step time), tokens per second per chip and per user,
J/token and USD per million tokens (`token_cost`: manufacturing cost and energy, no
margin). Under a TPOT target the answer is the feasible point with the most tokens
per second per chip among those that meet it.

The curve is what serving benchmarks publish: tokens per second per chip against
tokens per second per user, one point per batch, up to the batch the memory holds.
"""

from __future__ import annotations

import dataclasses
import math

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from ._core.chip import Chip
from ._core.cost import decode_cost, first_token_seconds
from ._core.economics import Economics, token_cost
from ._core.traffic import lower_traffic
from ._core.workload import AccessProfile, ContextMix, Model, Prefill, Workload
from .evaluation import (
    MAX_TENSOR_PARALLEL,
    check_chip_count,
    layout_problem,
    resolve_profile,
    system_placement,
    system_size,
)
from .io import ChipInfo, InputError, chip_info, load_model, make_scenario


MAX_BATCH = 16384
"""Largest batch the grid goes to (sequences per system)."""

MAX_OUTPUT_TOKENS = 131072
"""Largest mean output length a burst is served with (`output_length_pmf`: its varied
lengths run to about 21 times the mean)."""

MAX_BURST = 100_000
"""Most requests a burst is served with (`burst` steps through every wave)."""

BATCH_POINTS = 48
"""Batches per split in the grid: whole numbers, log-spaced from 1 to `MAX_BATCH`."""


@dataclasses.dataclass(frozen=True)
class ServingPoint:
    """One batch on one split of the chips.

    Attributes:
        tensor_parallel, pipeline_parallel: the split.
        batch: sequences decoded together; micro_batches: groups in flight.
        tpot: time per output token of one sequence (the step), s.
        ttft: time to first token under chunked prefill (`costmodel.first_token_seconds`),
            s; None when no prompts are prefilled in the steps.
        tokens_per_second_per_chip: all sequences' tokens per second over the chips.
        tokens_per_second_per_user: one sequence's tokens per second.
        joules_per_token: energy per output token, all chips, J.
        usd_per_million_tokens: system price amortised plus energy, USD.
        feasible: whether the weights and KV cache fit.
    """

    tensor_parallel: int
    pipeline_parallel: int
    batch: float
    micro_batches: float
    tpot: float
    ttft: float | None
    tokens_per_second_per_chip: float
    tokens_per_second_per_user: float
    joules_per_token: float
    usd_per_million_tokens: float
    feasible: bool


@dataclasses.dataclass(frozen=True)
class Serving:
    """The serving answer and the curves it was chosen from.

    Attributes:
        model, chip: names; chips: the system size.
        tpot_target: the per-token latency target, s (None: no target, the most
            tokens per second per chip over every feasible point).
        ttft_target: the time-to-first-token target, s (None: no target).
        best: the chosen point, or None when no feasible point meets the target.
        points: every point of the grid, split by split (feasible or not).
    """

    model: str
    chip: str
    chips: int
    tpot_target: float | None
    best: ServingPoint | None
    points: list[ServingPoint]
    ttft_target: float | None = None

    def curve(self, tensor_parallel: int, pipeline_parallel: int) -> list[ServingPoint]:
        """The feasible points of one split, by batch."""
        return [
            p
            for p in self.points
            if p.feasible and (p.tensor_parallel, p.pipeline_parallel) == (tensor_parallel, pipeline_parallel)
        ]

    @property
    def splits(self) -> list[tuple[int, int]]:
        return sorted({(p.tensor_parallel, p.pipeline_parallel) for p in self.points})


def splits(model: Model, chips: int) -> list[tuple[int, int]]:
    """Every (tensor, pipeline) split of `chips`: the tensor-parallel width divides the
    query and KV heads (`evaluation.layout_problem`) and is at most
    `MAX_TENSOR_PARALLEL`, and there are no more pipeline stages than layers."""
    layers = int(round(float(model.n_layers)))
    out = []
    for tp in range(1, min(chips, MAX_TENSOR_PARALLEL) + 1):
        if chips % tp == 0 and chips // tp <= layers and layout_problem(model, tp, chips // tp) is None:
            out.append((tp, chips // tp))
    return out


def batch_grid(points: int = BATCH_POINTS, largest: int = MAX_BATCH) -> np.ndarray:
    """Whole-number batches, log-spaced from 1 to `largest` (duplicates removed)."""
    return np.unique(np.round(np.geomspace(1, largest, points)))


@eqx.filter_jit
def _grid(workloads: Workload, chips: Chip, econ: Economics, policy: str):
    def one(w, c):
        placement = system_placement(policy, lower_traffic(w), c)
        cost = decode_cost(w, c, placement)
        usd = token_cost(cost, c, econ).usd_per_million_tokens
        ttft = first_token_seconds(w, cost.seconds_per_step)
        return cost.seconds_per_step, ttft, cost.tokens_per_second, cost.joules_per_token, usd, cost.feasible

    return jax.vmap(one)(workloads, chips)


def serve(
    model: str | Model,
    chip: str | ChipInfo,
    econ: Economics,
    *,
    chips: int | None = None,
    tpot: float | None = None,
    context: float = 4096,
    weights: str = "bf16",
    kv: str = "bf16",
    profile: str = "dense",
    batches: np.ndarray | None = None,
    prompt_tokens: float | None = None,
    output_tokens: float | None = None,
    chunk_tokens: float = 512,
    ttft: float | None = None,
    mix: ContextMix | None = None,
    prefill_chips: int | None = None,
) -> Serving:
    """The largest throughput per chip that meets a TPOT target, over splits and batches.

    Args:
        model: a model preset id, a `config.json` path, or a `Model`.
        chip: a chip preset id, a chip TOML path, or a `ChipInfo` (a framework profile
            already applied, if any: a batch above its `max_batch` is infeasible).
        econ: prices for USD per million tokens.
        chips: the system size; by default the fewest chips that hold the model at
            batch 1 and have a split (`splits`).
        tpot: the per-token latency target, s; None: no target.
        context: mean tokens in each sequence's KV cache.
        weights, kv: number formats by name.
        profile: the KV access profile (preset id or TOML path).
        batches: the batch grid (default `batch_grid()`).
        prompt_tokens, output_tokens: mean prompt and output tokens per request: each
            step also prefills the prompts of the requests that replace finished ones
            (`costmodel.Prefill`, chunked prefill under continuous batching); None (both):
            decode only.
        chunk_tokens: largest chunk of one prompt prefilled per step (inf: whole prompts).
        ttft: the time-to-first-token target, s (needs the prompt and output tokens).
        mix: the batch's contexts in bins (`costmodel.ContextMix`) around `context`.
        prefill_chips: disaggregated serving: prompts are prefilled on a separate pool
            of this many chips of the same kind (one tensor-parallel instance), their
            KV sent to the decode chips over the links, and the decode steps prefill
            nothing (`Disaggregated`); None: prefill in the decode steps.

    Returns:
        A `Serving`; `best` is None when no feasible point meets the target.

    Raises:
        InputError: a bad target or size, or a model that fits no split of the chips.

    Examples:
        >>> import costmodel as cm
        >>> from costmodel.serving import serve
        >>> s = serve("llama-3-8b", "h100-sxm", cm.economics_preset("N5"), chips=1, tpot=0.02)
        >>> s.best.tpot <= 0.02 and s.best.batch > 1
        True
    """
    for name, value in (
        ("tpot", tpot),
        ("ttft", ttft),
        ("prompt_tokens", prompt_tokens),
        ("output_tokens", output_tokens),
        ("chunk_tokens", chunk_tokens),
    ):
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0):
            raise InputError(f"{name} = {value!r}: expected a number > 0")
    if (prompt_tokens is None) != (output_tokens is None):
        raise InputError(
            f"prompt_tokens = {prompt_tokens!r}, output_tokens = {output_tokens!r}: expected both (prefill in the steps) or neither"
        )
    if ttft is not None and prompt_tokens is None:
        raise InputError(
            f"ttft = {ttft!r}: a time-to-first-token target needs the prompt and output tokens per request"
        )
    prefill = None
    if prompt_tokens is not None and output_tokens is not None:
        prefill = Prefill(prompt_tokens=prompt_tokens, output_tokens=output_tokens, chunk_tokens=chunk_tokens)
    if prefill_chips is not None and prefill is None:
        raise InputError(f"prefill_chips = {prefill_chips!r}: disaggregated prefill needs the prompt and output tokens")
    m = model if isinstance(model, Model) else load_model(model)
    info = chip if isinstance(chip, ChipInfo) else chip_info(chip)
    profile_name, prof = resolve_profile(profile, context)
    del profile_name
    base = make_scenario(
        batch=1,
        context=context,
        weights=weights,
        kv=kv,
        dequant_ops=info.dequant(weights),
        kv_dequant_ops=info.kv_dequant(kv),
        copy_rows=info.copy(weights),
        dequant_rows=info.tile(weights),
    )
    if chips is None:
        tp, pp = system_size(info, Workload(m, base, prof))
        chips = tp * pp
        # The fewest at least that many with a split of their own (332 = 4 x 83 Groq
        # chips have none for 80 layers: 336 = 8 x 42 has).
        while not splits(m, chips) and chips < info.max_chips:
            chips += 1
    check_chip_count(info, chips)
    layouts = splits(m, chips)
    if not layouts:
        raise InputError(
            f"chips = {chips}: no tensor x pipeline split of {chips} chips divides the model's "
            f"{int(m.n_heads)} query and {int(m.n_kv_heads)} KV heads with at most {MAX_TENSOR_PARALLEL}-way "
            "tensor parallelism"
        )
    grid = batch_grid() if batches is None else np.asarray(batches, dtype=float)
    rows = [(tp, pp, b) for tp, pp in layouts for b in grid]
    groups = [float(min(pp, b)) for tp, pp, b in rows]

    def scenario(b, g):
        return eqx.tree_at(lambda s: (s.batch, s.micro_batches), base, (jnp.asarray(b), jnp.asarray(g)))

    in_step = None if prefill_chips is not None else prefill
    workloads = [Workload(m, scenario(float(b), g), prof, mix, in_step) for (_, _, b), g in zip(rows, groups)]
    systems = [info.chip.replace(tensor_parallel=tp, pipeline_parallel=pp) for tp, pp, _ in rows]
    stack = lambda xs: jax.tree.map(lambda *a: jnp.stack(a), *xs)
    tpot_s, ttft_s, tps, jpt, usd, ok = (
        np.asarray(a) for a in _grid(stack(workloads), stack(systems), econ, info.placement)
    )
    if info.max_batch is not None:  # the engine's scheduler runs no more at once
        ok = ok & (np.asarray([b for _, _, b in rows]) <= info.max_batch)
    pool = 0
    if prefill_chips is not None and prefill is not None:
        d = disaggregated_prefill(m, base, info, prefill, prefill_chips)
        pool = prefill_chips
        # Requests finish at batch x accepted / output per step; the prefill pool takes
        # each for `d.seconds`, so it is busy `rate x seconds` of the time (<= 1 to keep up).
        rate = np.asarray([b for _, _, b in rows]) * float(prof.accepted) / float(prefill.output_tokens) / tpot_s
        ok = ok & (rate * d.seconds <= 1.0)
        ttft_s = d.seconds + d.transfer_seconds + tpot_s
        jpt = jpt + d.joules / float(prefill.output_tokens)
        usd = usd * (chips + pool) / chips  # the prefill chips' share, priced like the decode chips'
    points = [
        ServingPoint(
            tensor_parallel=tp,
            pipeline_parallel=pp,
            batch=float(b),
            micro_batches=g,
            tpot=float(t),
            ttft=None if prefill is None else float(f1),
            tokens_per_second_per_chip=float(x) / (chips + pool),
            tokens_per_second_per_user=float(x) / float(b),
            joules_per_token=float(j),
            usd_per_million_tokens=float(u),
            feasible=bool(f) and math.isfinite(float(t)),
        )
        for (tp, pp, b), g, t, f1, x, j, u, f in zip(rows, groups, tpot_s, ttft_s, tps, jpt, usd, ok)
    ]
    candidates = [p for p in points if p.feasible and meets(p, tpot, ttft)]
    best = max(candidates, key=lambda p: (p.tokens_per_second_per_chip, -p.tpot)) if candidates else None
    name = model if isinstance(model, str) else "custom"
    return Serving(name, info.name, chips, tpot, best, points, ttft)


@dataclasses.dataclass(frozen=True)
class Disaggregated:
    """One prompt prefilled on a separate pool of chips, and its KV sent to the decode
    chips (DistServe, Splitwise).

    Attributes:
        seconds: prefill time of one prompt on the pool, s.
        transfer_seconds: time to send its KV cache over the pool's links, s.
        joules: prefill energy of one prompt, all pool chips, J.
    """

    seconds: float
    transfer_seconds: float
    joules: float


def _prompt_workload(m: Model, base, prompt: float, batch: float = 1.0, groups: float = 1.0) -> Workload:
    """A step that prefills `batch` prompts of `prompt` tokens together: each
    sequence's `prompt` queries share each KV read of its prompt (causal: `prompt / 2`
    tokens of history on average), in `groups` micro-batches."""
    scenario = eqx.tree_at(
        lambda s: (s.batch, s.context, s.micro_batches),
        base,
        (jnp.asarray(float(batch)), jnp.asarray(prompt / 2), jnp.asarray(float(groups))),
    )
    return Workload(m, scenario, AccessProfile(queries=prompt))


def prompt_seconds(
    model: str | Model,
    chip: ChipInfo,
    *,
    prompt_tokens: float,
    batches: np.ndarray,
    tensor_parallel: int = 1,
    pipeline_parallel: int = 1,
    weights: str = "bf16",
    kv: str = "bf16",
) -> np.ndarray:
    """Time to prefill `batch` prompts of `prompt_tokens` tokens together, s, for each
    batch of `batches`: one step of `batch` sequences whose prompt tokens share each
    weight read (the step `disaggregated_prefill` prices for one prompt), on the split,
    with `chip`'s framework profile (host time included) as it is, at the share of its
    compute efficiency a pass of prompts alone reaches (`ChipInfo.prefill_efficiency`)."""
    m = model if isinstance(model, Model) else load_model(model)
    base = make_scenario(
        batch=1,
        context=prompt_tokens,
        weights=weights,
        kv=kv,
        dequant_ops=chip.dequant(weights),
        copy_rows=chip.copy(weights),
        dequant_rows=chip.tile(weights),
        # A pass of prompts attends over the K/V it has just computed, in 16 bits: no
        # cache is read, so none is unpacked (`Scenario.kv_dequant_ops` 0).
    )
    b = np.asarray(batches, dtype=float)
    workloads = [_prompt_workload(m, base, prompt_tokens, x, min(pipeline_parallel, x)) for x in b]
    system = chip.prefill_chip().replace(tensor_parallel=tensor_parallel, pipeline_parallel=pipeline_parallel)
    stack = lambda xs: jax.tree.map(lambda *a: jnp.stack(a), *xs)
    from .io import economics_preset

    seconds, *_ = _grid(stack(workloads), stack([system] * len(b)), economics_preset(), chip.placement)
    return np.asarray(seconds, dtype=float)


def output_length_pmf(mean: float, lengths: str, cap: float | None = None) -> np.ndarray:
    """P(a request emits k output tokens) for k = 1, 2, ... (index k - 1).

    - "fixed": every request emits the same number (`ignore_eos` with a fixed
      length): `mean` itself, split between the two whole numbers around it so the
      mean is exact.
    - "varied": lengths differ per request (dataset completions stopping at EOS): the
      maximum-entropy distribution of a positive whole number with a given mean
      (E. T. Jaynes, "Information Theory and Statistical Mechanics", Phys. Rev. 106,
      1957). With no bound it is geometric, every token ending its request with the
      same probability `1 / mean`; where the client caps each request at `cap` tokens
      (its `max_tokens`) the lengths run over 1 ... `cap` only and the distribution
      is `P(k) ∝ exp(λ k)` with λ set by the mean (`_tilted`): falling where the mean
      is below `(1 + cap) / 2`, uniform at it, rising towards the cap above it (lengths
      piled towards the cap, as when sonnet prompts that ask for at most 150 tokens
      average 119). An assumption either way: a published length distribution is not
      in the rows; its tail sets how long a burst drains, its head how much a short
      request's time per token counts. A "fixed" length ignores the cap (checked only).

    Raises:
        InputError: a mean below 1, a cap below the mean or not a whole number, or an
            unknown kind.
    """
    if not 1 <= mean <= MAX_OUTPUT_TOKENS:
        raise InputError(
            f"output_tokens = {mean!r}: expected a mean of at least 1 token and at most {MAX_OUTPUT_TOKENS}"
        )
    if cap is not None and not (mean <= cap <= MAX_OUTPUT_TOKENS and cap == math.floor(cap)):
        raise InputError(
            f"output_cap = {cap!r}: expected a whole number of tokens, at least the mean output length {mean:g} "
            f"and at most {MAX_OUTPUT_TOKENS}"
        )
    if lengths == "fixed":
        lo = math.floor(mean)
        pmf = np.zeros(lo + 1)
        pmf[lo - 1] = 1.0 - (mean - lo)
        pmf[lo] = mean - lo
        return pmf if pmf[-1] > 0 else pmf[:-1]
    if lengths == "varied":
        if cap is not None:
            return _tilted(mean, int(cap))
        q = 1.0 / mean
        if q >= 1.0:
            return np.ones(1)
        k = np.arange(1, math.ceil(mean * math.log(1e9)) + 1)
        pmf = q * (1.0 - q) ** (k - 1)
        pmf[-1] += 1.0 - pmf.sum()  # the tail's mass on the last length (< 1e-9)
        return pmf
    raise InputError(f"output_lengths = {lengths!r}: expected one of ['fixed', 'varied']")


def _tilted(mean: float, n: int) -> np.ndarray:
    """The maximum-entropy distribution on 1 ... n with mean `mean` (1 <= mean <= n):
    `P(k) ∝ exp(λ k)`, λ found by bisection (the mean rises with λ); a point mass at 1
    or n where the mean is there."""
    k = np.arange(1.0, n + 1.0)
    if mean <= 1.0 or n == 1:
        return np.eye(1, n)[0]
    if mean >= n:
        return np.eye(1, n, n - 1)[0]

    def pmf(lam: float) -> np.ndarray:
        w = np.exp(lam * (k - (n if lam > 0 else 1.0)))  # the largest weight is 1: no overflow
        return w / w.sum()

    lo, hi = -60.0, 60.0  # means within about e^-60 of 1 or n: the point masses above
    for _ in range(200):
        mid = (lo + hi) / 2.0
        if mid in (lo, hi):  # the interval is down to adjacent floats
            break
        lo, hi = (mid, hi) if float(np.dot(k, pmf(mid))) < mean else (lo, mid)
    return pmf((lo + hi) / 2.0)


@dataclasses.dataclass(frozen=True)
class Burst:
    """N requests sent at once, each served once, until the last one's last token.

    Attributes:
        seconds: from the burst to the last output token, s.
        output_tokens_per_second: output tokens over `seconds`.
        tpot: mean over requests of at least two tokens of (last token - first token)
            / (tokens - 1), s: the per-request time per output token serving benchmarks
            average (vLLM's `benchmark_serving`).
        ttft: mean time to first token, s.
        batch: the most sequences decoded at once.
        itl_median: median over every output token after a request's first of the time
            since its previous token, s: the inter-token latency serving benchmarks also
            report ("Median ITL"). A step that prefills prompts stalls every sequence
            decoding in it, which the mean `tpot` averages in; the median sees the
            typical step.
    """

    seconds: float
    output_tokens_per_second: float
    tpot: float
    ttft: float
    batch: float
    itl_median: float


def burst(
    requests: float,
    pmf: np.ndarray,
    capacity: float,
    decode: tuple[np.ndarray, np.ndarray],
    prefill: tuple[np.ndarray, np.ndarray],
) -> Burst:
    """A burst of `requests` served by a continuous-batching engine, step by step, in
    expectation (a fluid model: expected numbers of requests, by tokens emitted).

    Each engine step admits waiting requests into free slots (at most `capacity`
    sequences at once), prefills their prompts (their first token), and decodes one
    token of every sequence admitted before; a sequence leaves when it has emitted its
    length, drawn from `pmf` (`output_length_pmf`) independently of the others. A step
    takes the prefill time of the prompts it admits plus the decode time of its batch.
    A step decodes when at least one sequence is left, with probability `1 - prod
    P(finished)` over the admitted requests, and then a batch of the expected number
    left over that probability: the burst lasts until its longest request ends (the
    drain that makes a burst of varied lengths slower than a steady state). A request's
    time per token is read off its own clock: every step of its life after its admission
    decodes a batch of itself and the others expected alive (`(N - 1) / N` of the
    expected number). The prompts
    a step admits are prefilled one after another before its decode (vLLM's default
    scheduler puts prefills first), so the j-th of `a` has its first token `j / a` of
    the way through the step's prefill, and waits out the rest before its second.

    Args:
        requests: N, sent at once.
        pmf: P(k output tokens), k = 1, 2, ...
        capacity: most sequences decoded at once (memory, the engine's cap).
        decode: (batches, s): the decode step's time by batch (linear between).
        prefill: (batches, s): the time to prefill that many prompts together (linear
            between, 0 at 0).
    """
    if not 1 <= requests <= MAX_BURST or not capacity >= 1:
        raise InputError(
            f"requests = {requests!r}, capacity = {capacity!r}: expected 1 <= requests <= {MAX_BURST} and capacity >= 1"
        )
    pmf = np.asarray(pmf, dtype=float)
    # beyond[i]: P(length > i + 1), the chance a request that has emitted i + 1 tokens decodes on
    beyond = np.append(np.cumsum(pmf[::-1])[::-1][1:], 0.0)
    with np.errstate(divide="ignore"):
        log_done = np.log1p(-np.minimum(beyond, 1.0))  # log P(finished), -inf where it cannot be
    db, ds = (np.asarray(x, dtype=float) for x in decode)
    pb, ps = (np.asarray(x, dtype=float) for x in prefill)
    step = lambda b: float(np.interp(b, db, ds))
    prompts = lambda a: float(np.interp(a, np.concatenate([[0.0], pb]), np.concatenate([[0.0], ps])))
    first = lambda a: (1.0 + 1.0 / max(a, 1.0)) / 2.0  # mean (j / a) over the a prompts of a step
    varied = int(np.count_nonzero(pmf)) > 2  # lengths that vary, not one length split in two
    cohort = np.zeros(len(pmf))  # requests admitted i + 1 steps ago (index i): emitted i + 1 tokens
    queue, now = float(requests), 0.0
    starts, admitted, prefills, ends, alongside = [], [], [], [], []
    gaps: list[tuple[float, float]] = []  # (inter-token time, expected tokens with it)
    for _ in range(int(10 * (requests / capacity + 1) * (len(pmf) + 10))):
        mask = cohort > 0
        old = float(np.sum(cohort * beyond))  # expected sequences decoding this step
        # each request's length is independent: P(some sequence decodes) over every cohort
        busy = -math.expm1(float(np.sum(cohort[mask] * log_done[mask])))
        a = min(queue, max(capacity - old, 0.0))
        queue -= a
        pre = prompts(a)
        dec = busy * step(max(1.0, old / busy)) if busy > 0 else 0.0
        starts.append(now)
        admitted.append(a)
        prefills.append(pre)
        now += pre + dec
        ends.append(now)
        # a step as a sequence still decoding sees it: itself and the others expected alive
        alongside.append(pre + step(1.0 + old * (1.0 - 1.0 / requests)))
        # The tokens this step emits, and the time since each one's previous token: this
        # step as its sequences see it, and for a request admitted in the step before, the
        # rest of that step after its first token too (its prompt's place among the step's
        # m at the mean, (1 + 1 / m) / 2). Where lengths vary, requests finish one by one
        # and the prompts a step admits into the freed slots are Poisson around the fluid
        # number `a` (a step admits none with probability exp(-a)); a request admitted in
        # a step shares it with 1 + Poisson(a) prompts. The first step's admissions, and
        # fixed lengths' waves, are as the fluid timeline has them.
        second = float(cohort[0] * beyond[0])
        alone = step(1.0 + old * (1.0 - 1.0 / requests))
        index = len(starts) - 1
        before = []
        if second > 0:
            decode_part = ends[-2] - starts[-2] - prefills[-2]
            before = [
                (decode_part + (1.0 - first(m)) * prompts(m), q)
                for m, q in _admissions(admitted[-2], varied and index > 1, plus_one=True)
            ]
        for k, q in _admissions(a, varied and index > 0):
            gap = alone + prompts(k)
            gaps.append((gap, q * (old - second)))
            gaps.extend((rest + gap, q * r * second) for rest, r in before)
        cohort[1:] = cohort[:-1]
        cohort[0] = a
        if queue <= 0 and float(np.sum(cohort * beyond)) < 1e-9:
            break
    else:
        raise InputError(f"a burst of {requests:g} requests did not drain: capacity {capacity!r}")
    own = np.cumsum(alongside)  # a decoding sequence's clock, for its time per token
    last = step(1.0)
    k = np.arange(2, len(pmf) + 1)  # lengths of at least two tokens
    weight = total = 0.0
    for c, a in enumerate(admitted):
        if a <= 0:
            continue
        idx = c + k - 1  # the step of each length's last token
        done = np.where(idx < len(own), own[np.minimum(idx, len(own) - 1)], own[-1] + (idx - len(own) + 1) * last)
        # its admission step as it is (it does not decode in it), then its own clock
        per = (ends[c] - starts[c] - first(a) * prefills[c] + done - own[c]) / (k - 1)
        total += a * float(np.sum(pmf[1:] * per))
        weight += a * float(np.sum(pmf[1:]))
    tpot = total / weight if weight > 0 else step(1.0)
    ttft = sum(a * (s + first(a) * p) for a, s, p in zip(admitted, starts, prefills)) / requests
    mean = float(np.sum(np.arange(1, len(pmf) + 1) * pmf))
    return Burst(now, requests * mean / now, tpot, ttft, float(min(requests, capacity)), _weighted_median(gaps, last))


def _admissions(a: float, poisson: bool, plus_one: bool = False) -> list[tuple[float, float]]:
    """(prompts, probability) pairs of one step's admissions with mean `a`: Poisson when
    `poisson` (up to 8 standard deviations past the mean, renormalised; its mean where it
    is over 50, a narrow spread), else `a` itself; `plus_one` adds one (the prompts of a
    step seen by a request it admitted: 1 + Poisson, the size-biased count)."""
    if not poisson:  # as the fluid timeline has them: a step of `a` prompts (at least this one)
        return [(max(a, 1.0) if plus_one else a, 1.0)]
    if a <= 0.0 or a > 50.0:  # none to spread, or a spread narrow against the mean
        return [(a + 1.0 if plus_one else a, 1.0)]
    k = np.arange(0, math.ceil(a + 8.0 * math.sqrt(a) + 8.0) + 1)
    logp = -a + k * math.log(a) - np.array([math.lgamma(x + 1.0) for x in k])
    p = np.exp(logp)
    p /= p.sum()
    return [(float(x) + (1.0 if plus_one else 0.0), float(q)) for x, q in zip(k, p) if q > 1e-12]


def _weighted_median(pairs: list[tuple[float, float]], default: float) -> float:
    """The median of values given with weights (the smallest value with at least half the
    weight at or below it); `default` when no weight is positive."""
    pairs = sorted((v, w) for v, w in pairs if w > 1e-12)
    total = sum(w for _, w in pairs)
    seen = 0.0
    for v, w in pairs:
        seen += w
        if seen >= total / 2.0:
            return v
    return default


def disaggregated_prefill(m: Model, base, info: ChipInfo, prefill: Prefill, chips: int) -> Disaggregated:
    """The prefill of one prompt on `chips` chips of `info`'s kind, one tensor-parallel
    instance: a step of one sequence whose `prompt_tokens` queries share each KV read
    of the prompt (causal: `prompt / 2` tokens of history on average), at the share of
    the chip's compute efficiency a pass of prompts alone reaches
    (`ChipInfo.prefill_efficiency`), and the KV it writes sent to the decode chips, each
    pool chip its share over its link.

    References:
        Y. Zhong et al., "DistServe: Disaggregating Prefill and Decoding for
        Goodput-optimized Large Language Model Serving", OSDI 2024; P. Patel et al.,
        "Splitwise: Efficient Generative LLM Inference Using Phase Splitting", ISCA 2024.
    """
    check_chip_count(info, chips)
    problem = layout_problem(m, chips, 1)
    if problem is not None:
        raise InputError(f"prefill_chips = {chips}: {problem}")
    prompt = float(prefill.prompt_tokens)
    w = _prompt_workload(m, base, prompt)
    chip = info.prefill_chip().replace(tensor_parallel=chips, pipeline_parallel=1)
    traffic = lower_traffic(w)
    cost = decode_cost(w, chip, system_placement(info.placement, traffic, chip))
    if not bool(cost.feasible):
        raise InputError(f"prefill_chips = {chips}: a {prompt:g}-token prompt does not fit in {chips} x {info.name}")
    kv_bytes = float(jnp.sum(traffic.writes))
    link = float(chip.link_bandwidth)
    if not link > 0:
        raise InputError(
            f"prefill_chips = {chips}: {info.name} has no chip-to-chip links (link_bandwidth) for the KV transfer"
        )
    return Disaggregated(float(cost.seconds_per_step), kv_bytes / (chips * link), float(cost.joules_per_token))


def meets(p: ServingPoint, tpot: float | None, ttft: float | None) -> bool:
    """Whether a point meets the TPOT and TTFT targets (None: no target)."""
    return (tpot is None or p.tpot <= tpot) and (ttft is None or (p.ttft is not None and p.ttft <= ttft))


def unmet_target_message(s: Serving) -> str:
    """One line saying that no point meets the targets, and the fastest there is."""
    feasible = [p for p in s.points if p.feasible]
    if not feasible:
        return f"{s.model} on {s.chips} x {s.chip}: no batch fits in memory on any split"
    targets = []
    if s.tpot_target is not None:
        fastest = min(feasible, key=lambda p: p.tpot)
        targets.append(
            f"--tpot-ms {s.tpot_target * 1e3:g} (the fastest is {fastest.tpot * 1e3:.3g} ms per token at batch "
            f"{fastest.batch:g}, TP {fastest.tensor_parallel} x PP {fastest.pipeline_parallel})"
        )
    if s.ttft_target is not None:
        first = min((p for p in feasible if p.ttft is not None), key=lambda p: p.ttft or 0.0)
        targets.append(
            f"--ttft-ms {s.ttft_target * 1e3:g} (the soonest first token is {(first.ttft or 0.0) * 1e3:.3g} ms at batch "
            f"{first.batch:g}, TP {first.tensor_parallel} x PP {first.pipeline_parallel})"
        )
    return (
        f"{' and '.join(targets)}: no batch meets {'them' if len(targets) > 1 else 'it'} for {s.model} on "
        f"{s.chips} x {s.chip}; expected a target of at least that"
    )
