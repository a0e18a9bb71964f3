"""Validation against published decode measurements, and serving-framework profiles.

Pure evaluation, fits and summaries; the parity plot is `costmodel.report.parity`.

The measurement table (`data/measurements/measurements.toml`) holds published decode
rates with their exact conditions and sources. Each row is evaluated with the chip
preset, the row's serving-framework profile (`data/frameworks.toml`) and the row's
system layout, and compared with the published value.

A framework profile is its kernels' concurrency and four multipliers applied to a chip
(and, apart from that vector, its host time, its attention's K/V re-reads and its
kernels' instructions to unpack each quantised weight and KV-cache format:
`with_profile_fields`):
the bytes its weights' decode kernels keep in flight per SM (`Chip.bytes_in_flight`: by
Little's law DRAM streams them at most SMs x bytes in flight / latency, so one framework
reaches different fractions of peak on different memories; the attention kernels' K/V is
not bound: `costmodel.class_in_flight`), and multipliers on every memory
tier's `efficiency` and on `compute_efficiency` (each result capped at 1), on the
per-layer `kernel_overhead` and on the all-reduce `link_latency`. The software term is
as large as the hardware one: llama.cpp's CUDA kernels keep ~3 kB in flight per SM
where gpt-fast keeps ~6 kB. A profile may also set its GEMMs' half-rate rows
(`Chip.half_rate_rows`, Hockney's n½ of the weight matmuls). The profiles are fitted (`fit_framework`, optax on logs) on
the rows each profile lists in `fitted_on`, which the table marks `status = "fit"`;
only the other rows (`status = "test"`) are scored. A serving engine's profile also
holds its unhidden host time (`apply_profile_fields`); such a profile, and a backend variant's
kernel concurrency fitted on serving rows, come from `costmodel.validate_serving`
(`fit_host`, `fit_in_flight`) and are not refitted here. `summarize` states beside each
group's figure the fitted numbers behind it and their rows (`fitted_behind`), and the
rows gathered for a blind check (`Row.blind`) apart.

Rows with a static batch (`output_tokens_per_second_per_chip`) include prefill, priced
here as compute-bound FLOPs plus all-reduces: each block class's FLOPs of a prefill of `batch x input_tokens`
tokens at the core's FLOP rate for that class (`costmodel.class_flop_rates`: the peak
x `compute_efficiency`, x the Hockney factor of its rows, the tokens sharing each
weight element), over the tensor-parallel group, then its all-reduces (one `d_model`
vector per prompt token, twice a layer: `costmodel.allreduce_seconds`, as a decode step's
and `costmodel.serving.prompt_seconds`'s; none on one chip). The prefill runs at the chip's own
compute efficiency (each preset's is an assumption its chip file states, e.g. good
cuBLAS bf16 GEMMs for the H100; applied to 8-bit GEMMs as well), not the profile's: a
profile's compute efficiency is fitted on decode steps (GEMMs over the batch's few
hundred rows, attention, sampling) and describes those. A pass that prefills prompts
alone reaches the share `ChipInfo.prefill_efficiency` of it (calibrated on the serving
table's long-prompt time to first token for the H100, H200 and MI300X; 1 elsewhere), as
`costmodel.serving.prompt_seconds` prices one. `costmodel serve` and `validate
--serving` price a chunked prefill inside the decode step, at the profile's.
A profile may also set its attention kernels' K/V re-reads (`Chip.attention_kv_rereads`:
TensorRT-LLM before its XQA kernel, profile `trt-llm`; `trt-llm-0.7` after; and
`Chip.attention_heads_per_block`: LMDeploy's TurboMind, 4 query heads of a group per
block) and run a layer's kernels in sequence (`Chip.serial_kernels`: every GPU engine).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from ._core.channels import allreduce_seconds, class_flop_rates
from ._core.chip import Chip
from ._core.cost import decode_cost
from ._core.traffic import lower_traffic
from ._core.workload import Workload
from .evaluation import (
    NEUTRAL_PROFILE,
    apply_dequant,
    apply_multipliers,
    apply_profile_fields,
    system_placement,
    system_size,
)
from .io import ChipInfo, InputError, chip_info, load_model, make_scenario
from .io.frameworks import PROFILE_FIELDS, SERVED_PER_SEQUENCE, Framework, load_frameworks, resolve_framework
from .io.measurements import GROUPS, Row, load_rows, serving_row_ids


TARGETS = {"batch1-gpu": 0.15, "apple": 0.15, "large-batch": 0.25}
"""Median absolute percentage error each group must stay within on held-out rows."""

SRAM_FACTOR = 2.0
"""The SRAM machines' held-out rows must be within this factor of the measurement."""

_H100_PROMPT_ROWS = (
    "nim18-h100x2-tp2-llama33-70b-fp8-isl5000-osl500-c1",
    "b5-accelmark-h100-vllm073-llama31-8b-bf16-longctx28k-serial-c1",
)
PROMPT_PASS_FITS = {
    "h100-sxm": ("h100-sxm", _H100_PROMPT_ROWS),
    "h200-sxm": ("h100-sxm", _H100_PROMPT_ROWS),  # the chip file's: "as h100-sxm"
    "mi300x": (
        "mi300x",
        (
            "dstack-mi300x8-tp8-tgi-llama31-405b-bf16-in1000-single",
            "dstack-mi300x8-tp8-tgi-llama31-405b-bf16-in4000-single",
            "dstack-mi300x8-tp8-tgi-llama31-405b-bf16-in10000-n1",
            "dstack-mi300x8-tp8-tgi-llama31-405b-bf16-in16000-single",
            "dstack-mi300x8-tp8-tgi-llama31-405b-bf16-in64000-single",
            "dstack-mi300x8-tp8-vllm063-llama31-405b-bf16-in10000-n1",
        ),
    ),
}
"""The chips whose `prefill_efficiency` (data/chips.toml) was calibrated on serving rows'
time to first token (`benchmarks/prefill_calibration.py`): chip -> (the chip whose
number it is, the rows). A static-batch row's prefill uses it (`Prepared`)."""

SERIAL_LATENCY_FITS = {
    "groq-lpu": ("groq-llama2-70b", "kernel_overhead"),
    "cerebras-wse3": ("cerebras-llama31-70b", "kernel_overhead"),
}
"""The chip presets with a serial latency fitted on one row (`fit_serial_latency`; the
chip file's source says so): chip -> (the row, the field)."""


# --- predicting a row -----------------------------------------------------------------


class Prepared(eqx.Module):
    """Everything a row's prediction needs except the framework multipliers.

    `rate = numerator / (prefill_weight * prefill_seconds + steps * step_seconds)`;
    for a per-sequence rate `numerator = 1, prefill_weight = 0, steps = 1`. The prefill
    runs at the chip's own compute efficiency where `own_prefill_rate` is 1 and at the
    profile's where it is 0 (the model before 2026-12-04, for the ablation), in either
    case times `prefill_efficiency`: the share of it a pass of prompts alone reaches
    (`ChipInfo.prefill_efficiency`, as `costmodel serve` prices one; 1 for the ablation
    of it).
    """

    workload: Workload
    prefill: Workload
    chip: Chip
    placement: jnp.ndarray
    numerator: jnp.ndarray
    prefill_weight: jnp.ndarray
    steps: jnp.ndarray
    own_prefill_rate: jnp.ndarray
    prefill_efficiency: jnp.ndarray


def prepare(
    row: Row, *, prefill_at_chip_rate: bool = True, prompt_pass_efficiency: bool = True
) -> tuple[Prepared, ChipInfo]:
    """Builds a row's workload, system (chip x layout) and placement, without a profile
    (`prefill_at_chip_rate`, `prompt_pass_efficiency`: see `Prepared`)."""
    info = chip_info(row.chip)
    model = load_model(row.model)
    scenario = make_scenario(batch=row.batch, context=row.context, weights=row.weights, kv=row.kv)
    workload = Workload(model, scenario)
    if row.tensor_parallel is not None and row.pipeline_parallel is not None:
        tp, pp = row.tensor_parallel, row.pipeline_parallel
    else:
        tp, pp = system_size(info, workload)
    chip = info.chip.replace(tensor_parallel=tp, pipeline_parallel=pp)
    placement = system_placement(info.placement, lower_traffic(workload), chip)
    if row.metric == "output_tokens_per_second_per_chip":
        prefill_tokens = row.batch * max(row.input_tokens, 1.0)
        prefill = Workload(
            model,
            make_scenario(batch=prefill_tokens, context=row.input_tokens / 2, weights=row.weights, kv=row.kv),
        )
        numerator = row.batch * row.output_tokens / (tp * pp)
        prefill_weight, steps = 1.0, row.output_tokens
    else:
        prefill, numerator, prefill_weight, steps = workload, 1.0, 0.0, 1.0
    f = lambda x: jnp.asarray(x, dtype=float)
    own = f(1.0 if prefill_at_chip_rate else 0.0)
    pass_efficiency = f(info.prefill_efficiency if prompt_pass_efficiency else 1.0)
    return (
        Prepared(workload, prefill, chip, placement, f(numerator), f(prefill_weight), f(steps), own, pass_efficiency),
        info,
    )


def with_profile_fields(prepared: Prepared, f: Framework, row: Row) -> Prepared:
    """A prepared row with the fields of profile `f` outside its log vector: on the chip
    (`apply_profile_fields`), on the decode step's weights and K/V (`apply_dequant`), and
    on the prefill's GEMMs (in 16 bits where the profile's kernel for the format copies
    at that many rows: `Scenario.weight_copy_rows`)."""
    chip = apply_profile_fields(prepared.chip, f, row.inference, row.kv)
    workload = apply_dequant(prepared.workload, f, row.weights, row.kv)
    prefill = eqx.tree_at(
        lambda w: w.scenario.weight_copy_rows, prepared.prefill, jnp.asarray(f.copy(row.weights), dtype=float)
    )
    return eqx.tree_at(lambda p: (p.chip, p.workload, p.prefill), prepared, (chip, workload, prefill))


def prefill_seconds(prefill: Workload, chip: Chip) -> jnp.ndarray:
    """Prefill time, compute-bound FLOPs plus all-reduces: each class's FLOPs at the rate
    the core gives that class (`class_flop_rates`: a weight matmul over all the prefill's
    tokens, at the Hockney factor of that many rows), over TP chips, then the prefill's
    all-reduces across them (`allreduce_seconds`: the prompt tokens' activations, on the
    link's second line past its knee). The whole `batch x prompt` prefill is one message
    per all-reduce; an engine chunks it (some thousands of tokens a step), each chunk
    paying the first line up to the knee and one latency more: on Llama 2 70B at TP2, 96 x
    2,048 tokens in 8k-token chunks, some 13 % more all-reduce time, about 1 % of the
    prefill (an approximation, not priced)."""
    t = lower_traffic(prefill, buckets=False)
    return jnp.sum(t.flops / class_flop_rates(prefill, t, chip)) / chip.tensor_parallel + allreduce_seconds(
        prefill, chip
    )


def predict(prepared: Prepared, log_multipliers: jnp.ndarray) -> jnp.ndarray:
    """The predicted value of a prepared row under a framework's log multipliers."""
    chip = apply_multipliers(prepared.chip, log_multipliers)
    step = decode_cost(prepared.workload, chip, prepared.placement).seconds_per_step
    # A profile's compute efficiency is fitted on, and describes, its decode steps; a
    # static batch's prefill runs GEMMs over batch x prompt rows at the chip's own rate.
    own = prepared.own_prefill_rate
    prefill_chip = apply_multipliers(prepared.chip, log_multipliers.at[COMPUTE].multiply(1.0 - own))
    prefill_chip = prefill_chip.replace(
        compute_efficiency=prefill_chip.compute_efficiency * prepared.prefill_efficiency
    )
    pre = prefill_seconds(prepared.prefill, prefill_chip)
    return prepared.numerator / (prepared.prefill_weight * pre + prepared.steps * step)


_predict_jit = eqx.filter_jit(predict)


@dataclasses.dataclass(frozen=True)
class Result:
    """A row with its prediction."""

    row: Row
    framework: str
    tensor_parallel: int
    pipeline_parallel: int
    predicted: float

    @property
    def error(self) -> float:
        """Signed relative error, (predicted - measured) / measured."""
        return self.predicted / self.row.value - 1.0

    @property
    def ape(self) -> float:
        return abs(self.error)

    @property
    def factor(self) -> float:
        """max(predicted/measured, measured/predicted)."""
        r = self.predicted / self.row.value
        return max(r, 1.0 / r)


def _log_multipliers(row: Row, frameworks: dict[str, Framework]) -> tuple[str, jnp.ndarray]:
    f = resolve_framework(row.framework, row.chip, frameworks)
    return f.name, jnp.log(jnp.asarray(f.multipliers, dtype=float))


def evaluate_rows(
    rows: list[Row] | None = None,
    frameworks: dict[str, Framework] | None = None,
    *,
    prefill_at_chip_rate: bool = True,
    prompt_pass_efficiency: bool = True,
) -> list[Result]:
    """Predicts every row with its framework profile (`prefill_at_chip_rate`,
    `prompt_pass_efficiency`: see `Prepared`)."""
    rows = rows if rows is not None else load_rows()
    frameworks = frameworks if frameworks is not None else load_frameworks()
    out = []
    for row in rows:
        prepared, _ = prepare(
            row, prefill_at_chip_rate=prefill_at_chip_rate, prompt_pass_efficiency=prompt_pass_efficiency
        )
        f = resolve_framework(row.framework, row.chip, frameworks)
        prepared = with_profile_fields(prepared, f, row)
        name, logm = _log_multipliers(row, frameworks)
        value = float(_predict_jit(prepared, logm))
        tp, pp = int(prepared.chip.tensor_parallel), int(prepared.chip.pipeline_parallel)
        out.append(Result(row, name, tp, pp, value))
    return out


# --- fitting a profile ------------------------------------------------------------------

FIT_PAD = 8
"""Fits pad their rows to a multiple of this, so one compiled program serves every fit."""


COMPUTE = PROFILE_FIELDS.index("compute_efficiency")
"""The compute efficiency's place in a profile's log vector."""

COMPUTE_START = 0.5
"""Where a fit of a profile's compute-efficiency multiplier starts, and what its ridge
pulls towards: a decode step at a large batch reaches well under a chip's sustained GEMM
rate. From 1 a fit can start where the step is memory-bound and the loss flat (the
TensorRT-LLM fit row at batch 768 is, once its prefill runs at the chip's rate), and not
move."""

HALF_RATE_START = 128.0
"""Where a fit of a profile's half-rate rows starts, and what its ridge pulls towards:
one thread-block tile of rows (CUTLASS's and cuBLAS's common 128-row tile: a GEMM with
fewer rows than a tile computes the whole tile, so about half its work is wasted at 64;
NVIDIA, "Matrix Multiplication Background User's Guide", tile quantization,
https://docs.nvidia.com/deeplearning/performance/dl-performance-matrix-multiplication/)."""


IN_FLIGHT_START_KB = 8.0
"""Where a fit of the bytes in flight per unit starts, and what its ridge pulls towards,
kB: about what a streaming kernel at full occupancy keeps per SM (gpu-benches'
gpu-stream on H100 PCIe reads 702 GB/s at a quarter of full occupancy against ~375 ns
HBM latency over 114 SMs: 2.3 kB per SM, so ~9 kB at full occupancy;
github.com/te42kyfo/gpu-benches README and gpu-latency/h100_pcie.txt)."""


def fit_framework(
    rows: list[Row],
    fit: tuple[str, ...],
    *,
    fixed: tuple[float, ...] = NEUTRAL_PROFILE,
    steps: int = 600,
    learning_rate: float = 0.05,
    ridge: float = 1e-3,
    profile: Framework | None = None,
    prefill_at_chip_rate: bool = True,
    prompt_pass_efficiency: bool = True,
) -> tuple[float, float, float, float, float, float]:
    """Fits a profile's fields to rows, in log space, with optax.

    Minimises `mean((log predicted - log measured)**2) + ridge * |log m - log m0|**2`
    over the logs of the `PROFILE_FIELDS` named in `fit`; the others stay at `fixed`
    (by default neutral: multipliers of 1, unbounded bytes in flight, the chip's own
    half-rate rows). `m0` is 1 for a multiplier (`COMPUTE_START` for the compute
    efficiency's), `IN_FLIGHT_START_KB` for the bytes in flight and `HALF_RATE_START` for
    the half-rate rows.

    Args:
        rows: the rows to fit on (their framework field is ignored).
        fit: names from `PROFILE_FIELDS` that may move.
        fixed: the values of the fields not fitted, in `PROFILE_FIELDS` order (a
            profile's own: a value it sets from a source).
        steps, learning_rate: Adam schedule.
        ridge: pull towards `m0`, which also fixes what no row constrains.
        profile: the profile being fitted: its fields outside the log vector (host time,
            K/V re-reads, dequantisation: `with_profile_fields`, not fitted) apply;
            None: none.
        prefill_at_chip_rate, prompt_pass_efficiency: see `Prepared`.

    Returns:
        The six fields, in `PROFILE_FIELDS` order.
    """
    neutral = jnp.log(jnp.asarray(fixed, dtype=float))
    if not rows:
        return tuple(float(x) for x in jnp.exp(neutral))  # type: ignore[return-value]
    prepared = [
        prepare(r, prefill_at_chip_rate=prefill_at_chip_rate, prompt_pass_efficiency=prompt_pass_efficiency)[0]
        for r in rows
    ]
    if profile is not None:
        prepared = [with_profile_fields(p, profile, r) for p, r in zip(prepared, rows)]
    n = len(prepared)
    padded = math.ceil(n / FIT_PAD) * FIT_PAD
    prepared = prepared + [prepared[0]] * (padded - n)
    stacked = jax.tree.map(lambda *xs: jnp.stack(xs), *prepared)
    measured = jnp.asarray([r.value for r in rows] + [rows[0].value] * (padded - n), dtype=float)
    weight = jnp.asarray([1.0] * n + [0.0] * (padded - n), dtype=float)
    mask = jnp.asarray([1.0 if k in fit else 0.0 for k in PROFILE_FIELDS], dtype=float)
    starts = NEUTRAL_PROFILE[:4]
    starts = (starts[0], COMPUTE_START, *starts[2:4], IN_FLIGHT_START_KB, HALF_RATE_START)
    starts = jnp.log(jnp.asarray(starts, dtype=float))
    start = jnp.where(mask > 0, starts, neutral)
    params, history = _fit(stacked, measured, weight, mask, neutral, start, steps, learning_rate, ridge)
    del history
    return tuple(float(x) for x in jnp.exp(params))  # type: ignore[return-value]


@eqx.filter_jit
def _fit(stacked, measured, weight, mask, neutral, start, steps, learning_rate, ridge):
    import optax

    def full(logm):
        return jnp.where(mask > 0, logm, neutral)

    def loss(logm):
        pred = jax.vmap(predict, in_axes=(0, None))(stacked, full(logm))
        resid = jnp.log(pred) - jnp.log(measured)
        return jnp.sum(weight * resid**2) / jnp.sum(weight) + ridge * jnp.sum((mask * (logm - start)) ** 2)

    opt = optax.adam(learning_rate)
    params = start
    state = opt.init(params)

    def step(carry, _):
        params, state = carry
        value, grad = jax.value_and_grad(loss)(params)
        # optax's Adam mixes a Python float with its int32 step count (bias correction), which
        # strict dtype promotion (the tests' setting) rejects: allow the standard rules there.
        with jax.numpy_dtype_promotion("standard"):
            updates, state = opt.update(grad * mask, state)
        return (optax.apply_updates(params, updates), state), value

    (params, _), history = jax.lax.scan(step, (params, state), None, length=steps)
    return full(params), history


def fit_all(rows: list[Row] | None = None, frameworks: dict[str, Framework] | None = None) -> dict[str, tuple]:
    """Refits every profile on exactly its `fitted_on` rows; returns name -> multipliers.
    A serving engine's profile fitted on serving rows (its host time,
    `costmodel.validate_serving.fit_host`, or its kernel concurrency,
    `fit_in_flight`) is left out."""
    rows = rows if rows is not None else load_rows()
    frameworks = frameworks if frameworks is not None else load_frameworks()
    by_id = {r.id: r for r in rows}
    out = {}
    serving = serving_row_ids()
    for name, f in frameworks.items():
        unknown = [i for i in f.fitted_on if i not in by_id and i not in serving]
        if unknown:
            raise InputError(f"frameworks.{name}: fitted_on names unknown rows {unknown}")
        if fitted_on_serving_rows(f, by_id) or not set(f.fit) & set(PROFILE_FIELDS):
            continue  # fitted on serving rows, or no field of the log vector to fit
        missing = [i for i in f.fitted_on if i not in by_id]
        if missing:
            raise InputError(f"frameworks.{name}: fitted_on names unknown rows {missing}")
        out[name] = fit_framework([by_id[i] for i in f.fitted_on], f.fit, fixed=f.multipliers, profile=f)
    return out


def fitted_on_serving_rows(f: Framework, decode_rows: dict[str, Row]) -> bool:
    """Whether a profile was fitted on serving rows (`data/measurements/serving.toml`:
    its host time by `costmodel.validate_serving.fit_host`, or its kernel concurrency by
    `fit_in_flight`) rather than on these decode rows (`decode_rows`, by id)."""
    if not f.fitted_on or any(i in decode_rows for i in f.fitted_on):
        return False
    serving = serving_row_ids()
    return all(i in serving for i in f.fitted_on)


def fit_engine_host(offline: Row, tensor_parallel: Row, profile: Framework) -> tuple[float, float]:
    """Closed-form host times of an engine run offline (`Framework.host_offline`,
    `Framework.host_tp`, µs per sequence per step) that make two rows' predictions exact.

    A step's host time is linear in both: `t = t0 + steps x batch x x` with `t0` the
    time with none (prefill included). `offline`, a one-chip row run offline, gives
    the per-sequence time; `tensor_parallel`, an offline row on more than one
    chip, gives what a tensor-parallel step adds to it. Every other field of `profile`
    applies as it is (its host time per step among them).
    """
    for row, one_chip in ((offline, True), (tensor_parallel, False)):
        if row.inference != "offline" or (row.tensor_parallel == 1) != one_chip or row.pipeline_parallel != 1:
            # (a row with no stated layout, tensor_parallel None, fits neither)
            raise InputError(
                f"row {row.id}: inference = {row.inference!r}, tensor_parallel = {row.tensor_parallel}, pipeline_parallel = "
                f"{row.pipeline_parallel}: expected an offline row on {'one chip' if one_chip else 'more than one'}"
                ", one pipeline stage"
            )
    logm = jnp.log(jnp.asarray(profile.multipliers, dtype=float))

    def per_sequence(row: Row, fields: dict[str, float]) -> float:
        prepared = with_profile_fields(prepare(row)[0], profile, row)
        prepared = eqx.tree_at(lambda p: p.chip, prepared, prepared.chip.replace(**fields))
        t0 = float(prepared.numerator) / float(predict(prepared, logm))
        return (float(prepared.numerator) / row.value - t0) / (float(prepared.steps) * row.batch)

    seq = per_sequence(offline, {"host_per_sequence": 0.0, "host_per_sequence_tp": 0.0})
    tp = per_sequence(tensor_parallel, {"host_per_sequence": seq, "host_per_sequence_tp": 0.0})
    for row, value in ((offline, seq), (tensor_parallel, tp)):
        if value < 0:
            raise InputError(
                f"row {row.id}: measured {row.value:g} is faster than the model with no such host time "
                f"({value * 1e6:.4g} µs per sequence): expected a host time >= 0"
            )
    return seq * 1e6, tp * 1e6


def fit_serial_latency(row: Row, field: str) -> float:
    """Closed-form value of a chip's serial latency (`hop_latency` or `kernel_overhead`,
    s) that makes a per-sequence row's prediction exact.

    The step time is linear in either: `t = t0 + k * x`, with `k` the number of pipeline
    hops (`pipeline_parallel - 1`) or layers. So `x = (1 / value - t0) / k`.
    """
    if field not in ("hop_latency", "kernel_overhead"):
        raise ValueError(f"field {field!r}: expected 'hop_latency' or 'kernel_overhead'")
    prepared, _ = prepare(row)
    chip0 = prepared.chip.replace(**{field: 0.0})
    prepared0 = eqx.tree_at(lambda p: p.chip, prepared, chip0)
    neutral = jnp.log(jnp.asarray(NEUTRAL_PROFILE, dtype=float))
    t0 = 1.0 / float(predict(prepared0, neutral))
    if field == "hop_latency":
        k = float(prepared.chip.pipeline_parallel) - 1.0
    else:
        k = float(prepared.workload.model.n_layers)
    return (1.0 / row.value - t0) / k


# --- summaries ----------------------------------------------------------------------------


def _percentile(values: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(values), q)) if values else float("nan")


def summarize(results: list[Result], frameworks: dict[str, Framework] | None = None) -> dict[str, Any]:
    """Median and 90th-percentile APE per group, for held-out and fitted rows apart; what
    the group's held-out figures rest on (`fitted_behind`); and the same figures over the
    held-out rows gathered for each blind check (`blind`: group -> check label -> figures,
    for the groups that have such rows)."""
    frameworks = frameworks if frameworks is not None else load_frameworks()
    out: dict[str, Any] = {
        "median_ape": {},
        "p90_ape": {},
        "max_factor": {},
        "n_test": {},
        "fit": {},
        "fitted": {},
        "blind": {},
    }
    for group in GROUPS:
        test = [r for r in results if r.row.group == group and r.row.status == "test"]
        fit = [r for r in results if r.row.group == group and r.row.status == "fit"]
        apes = [r.ape for r in test]
        out["median_ape"][group] = _percentile(apes, 50)
        out["p90_ape"][group] = _percentile(apes, 90)
        out["max_factor"][group] = max((r.factor for r in test), default=float("nan"))
        out["n_test"][group] = len(test)
        out["fit"][group] = {"n": len(fit), "median_ape": _percentile([r.ape for r in fit], 50)}
        out["fitted"][group] = fitted_behind(test, frameworks)
        checks = sorted({r.row.blind for r in test if r.row.blind})
        for check in checks:  # each blind check's rows, apart (`Row.blind`)
            blind = [r.ape for r in test if r.row.blind == check]
            out["blind"].setdefault(group, {})[check] = {
                "n": len(blind),
                "median_ape": _percentile(blind, 50),
                "p90_ape": _percentile(blind, 90),
            }
    return out


def fitted_behind(results: list[Result], frameworks: dict[str, Framework]) -> dict[str, int]:
    """The fitted numbers the predictions of `results` use, and the measured rows they were
    fitted on (of either table): each profile's `fit` fields on its `fitted_on` rows, the
    fitted values it carries from another profile (`Framework.carried`) on that one's rows,
    a chip's serial latency fitted on one row (`SERIAL_LATENCY_FITS`), and a chip's prompt
    pass efficiency calibrated on serving rows (`PROMPT_PASS_FITS`), for the static-batch
    rows whose prefill uses it. A number used by several rows or profiles counts once; a
    profile's online host time per sequence is not counted where every result using the
    profile runs offline and the profile prices that apart (`Framework.host_offline`)."""
    numbers: set[tuple[str, str]] = set()
    rows: set[str] = set()
    for name in sorted({r.framework for r in results}):
        if name not in frameworks:
            raise InputError(f"framework {name!r}: expected one of {sorted(frameworks)}")
        f = frameworks[name]
        offline = f.host_offline is not None and {r.row.inference for r in results if r.framework == name} == {
            "offline"
        }
        unused = {SERVED_PER_SEQUENCE} if offline else set()
        numbers |= {(name, k) for k in f.fit if k not in unused}
        rows |= set(f.fitted_on)
        for key, source in f.carried:
            if key not in unused:
                numbers.add((source, key))
                rows |= set(frameworks[source].fitted_on)
    for chip in sorted({r.row.chip for r in results} & set(SERIAL_LATENCY_FITS)):
        row, field = SERIAL_LATENCY_FITS[chip]
        numbers.add((chip, field))
        rows.add(row)
    static = {r.row.chip for r in results if r.row.metric == "output_tokens_per_second_per_chip"}
    for chip in sorted(static & set(PROMPT_PASS_FITS)):
        owner, fitted_on = PROMPT_PASS_FITS[chip]
        numbers.add((owner, "prefill_efficiency"))
        rows |= set(fitted_on)
    return {"parameters": len(numbers), "rows": len(rows)}


def result_record(r: Result) -> dict[str, Any]:
    return {
        "id": r.row.id,
        "group": r.row.group,
        "status": r.row.status,
        "chip": r.row.chip,
        "model": r.row.model,
        "framework": r.framework,
        "weights": r.row.weights,
        "batch": r.row.batch,
        "context": r.row.context,
        "tensor_parallel": r.tensor_parallel,
        "pipeline_parallel": r.pipeline_parallel,
        "metric": r.row.metric,
        "measured": r.row.value,
        "predicted": r.predicted,
        "error": r.error,
        "ape": r.ape,
        "source": r.row.source,
        "reason": r.row.reason,
    }


def missed_targets(summary: dict[str, Any]) -> list[str]:
    """The held-out targets a `summarize` result misses (`TARGETS`, `SRAM_FACTOR`), in words."""
    missed = [
        f"{g}: median APE {summary['median_ape'][g]:.1%} > {t:.0%}"
        for g, t in TARGETS.items()
        if not summary["median_ape"][g] <= t
    ]
    if not summary["max_factor"]["sram"] <= SRAM_FACTOR:
        missed.append(f"sram: worst factor {summary['max_factor']['sram']:.2f} > {SRAM_FACTOR:g}")
    return missed
