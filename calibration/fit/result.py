"""`calibrate`: split a trace, fit the full model and the roofline baseline, report the errors."""

from __future__ import annotations

import math

import numpy as np

from costmodel.io import InputError

from .data import make_dataset
from .knobs import PARAMETERS, _from_knob, initial_knobs
from .metrics import mape, spearman
from .model import predict
from .optimise import Fit, fit_knobs, full_spec, roofline_knobs, roofline_spec


def split(rows: list[dict], holdout: tuple[str, ...]) -> tuple[list[dict], list[dict]]:
    train = [r for r in rows if r["kind"] not in holdout]
    held = [r for r in rows if r["kind"] in holdout]
    return train, held


def _metrics(knobs, train_data, held_data, hard: bool = False) -> dict:
    pt = np.asarray(predict(knobs, train_data)) if train_data.n else np.zeros(0)
    ph = np.asarray(predict(knobs, held_data, hard)) if held_data.n else np.zeros(0)
    return {
        "train_mape": mape(pt, train_data.measured),
        "holdout_mape": mape(ph, held_data.measured) if held_data.n else None,
        "train_rank_correlation": spearman(pt, train_data.measured),
        "holdout_rank_correlation": spearman(ph, held_data.measured) if held_data.n else None,
        "_train_pred": pt,
        "_held_pred": ph,
    }


def select_dtypes(rows: list[dict], dtypes: tuple[str, ...] | None) -> list[dict]:
    """Rows whose number format (`dtype`, or `weights` for a decode step) is in `dtypes`."""
    if not dtypes:
        return rows
    return [r for r in rows if (r["weights"] if r["kind"] == "decode_step" else r["dtype"]) in dtypes]


def calibrate(
    rows: list[dict],
    holdout: tuple[str, ...] = (),
    adam_steps: int = 1500,
    lbfgs_steps: int = 200,
    dtypes: tuple[str, ...] | None = None,
):
    """Fits the full model and the roofline baseline on the rows not held out.

    Args:
        rows: trace rows.
        holdout: kinds left out of the fit and predicted.
        adam_steps / lbfgs_steps: optimiser steps.
        dtypes: fit only rows of these number formats (default all).

    Returns:
        (result dict for `--json`, the full `Fit`, per-row predictions for plots).
    """
    n_rows = len(rows)
    rows = select_dtypes(rows, dtypes)
    if not rows:
        raise InputError(f"no rows of formats {list(dtypes or [])} in the trace ({n_rows} rows)")
    train, held = split(rows, holdout)
    if not train:
        raise InputError(f"nothing left to fit: every row is of a held-out kind {list(holdout)}")
    dt, dh = make_dataset(train), make_dataset(held)
    k0 = initial_knobs(train)
    full = fit_knobs(dt, k0, full_spec(train, k0), adam_steps=adam_steps, lbfgs_steps=lbfgs_steps)
    r0 = roofline_knobs(k0)
    base = fit_knobs(dt, r0, roofline_spec(r0), adam_steps=adam_steps, lbfgs_steps=lbfgs_steps)
    m_full = _metrics(full.knobs, dt, dh)
    m_base = _metrics(base.knobs, dt, dh)
    hard = _metrics(full.knobs, dt, dh, hard=True)
    result = {
        "status": full.status_name,
        "converged": full.status_name == "converged",
        "n_train": len(train),
        "n_holdout": len(held),
        "holdout_kinds": list(holdout),
        "dtypes": list(dtypes) if dtypes else "all",
        "n_rows_excluded_by_dtype": n_rows - len(rows),
        "train_mape": m_full["train_mape"],
        "holdout_mape": m_full["holdout_mape"],
        "train_rank_correlation": m_full["train_rank_correlation"],
        "holdout_rank_correlation": m_full["holdout_rank_correlation"],
        "holdout_mape_hard_placement": hard["holdout_mape"],
        "loss": full.loss,
        "gradient_norm": full.grad_norm,
        "steps": full.steps,
        "parameters": parameter_table(full),
        "per_kind_mape": _per_kind(rows, train, held, m_full),
        "holdout_by_config": _by_config(held, m_full["_held_pred"]),
        "baseline": {
            "model": "plain roofline: max(bytes / one bandwidth, FLOPs / one FLOP rate)",
            "status": base.status_name,
            "train_mape": m_base["train_mape"],
            "holdout_mape": m_base["holdout_mape"],
            "train_rank_correlation": m_base["train_rank_correlation"],
            "holdout_rank_correlation": m_base["holdout_rank_correlation"],
            "parameters": {k: v for k, v in parameter_table(base).items() if k in ("dram_bandwidth", "flops_f32")},
        },
    }
    if held and m_base["holdout_mape"] is not None:
        result["beats_baseline_on_holdout"] = bool(m_full["holdout_mape"] < m_base["holdout_mape"])
    predictions = {
        "train": (train, m_full["_train_pred"], m_base["_train_pred"]),
        "holdout": (held, m_full["_held_pred"], m_base["_held_pred"]),
    }
    return result, full, predictions


def _per_kind(rows, train, held, m) -> dict:
    out = {}
    for name, part, pred in (("train", train, m["_train_pred"]), ("holdout", held, m["_held_pred"])):
        for kind in sorted({r["kind"] for r in part}):
            idx = [i for i, r in enumerate(part) if r["kind"] == kind]
            out[f"{name}.{kind}"] = {
                "n": len(idx),
                "mape": mape(pred[idx], [part[i]["seconds"] for i in idx]),
            }
    return out


def _by_config(held, pred) -> dict:
    """Held-out decode MAPE grouped by model size, batch and context (unseen configs)."""
    out: dict = {}
    dec = [(i, r) for i, r in enumerate(held) if r["kind"] == "decode_step"]
    for key in ("d_model", "batch", "context"):
        groups: dict = {}
        for i, r in dec:
            groups.setdefault(f"{r[key]:g}", []).append(i)
        out[key] = {
            g: {"n": len(ix), "mape": mape(pred[ix], [held[i]["seconds"] for i in ix])} for g, ix in groups.items()
        }
    return out


def parameter_table(fit: Fit) -> dict[str, dict]:
    """Fitted parameters in report units, with start value, change factor and uncertainty."""
    out = {}
    for knob, (name, unit, scale) in PARAMETERS.items():
        value = float(_from_knob(knob, getattr(fit.knobs, knob)))
        start = float(_from_knob(knob, getattr(fit.initial, knob)))
        if knob == "log_overlap_m1":
            name, value, start = "overlap_p", value + 1.0, start + 1.0
        if knob == "log_inner_speedup_m1":
            name, value, start = "inner_cache_speedup", value + 1.0, start + 1.0
        if knob == "log_hot_speedup_m1":
            name, value, start = "hot_array_speedup", value + 1.0, start + 1.0
        entry = {
            "value": value * scale,
            "unit": unit,
            "initial": start * scale,
            "change_factor": value / start,
            "trained": knob in fit.trained,
        }
        if knob in fit.log_std:
            sd = fit.log_std[knob]
            if knob.startswith("logit_"):
                sd *= 1.0 - value  # d log f = (1 - f) d logit f
            # A log-normal interval: the value is known within a factor exp(sd).
            entry["uncertainty_factor"] = float(math.exp(sd)) if math.isfinite(sd) and sd < 50 else float("inf")
            entry["determined_by_data"] = bool(math.isfinite(sd) and sd < math.log(2.0))
        out[name] = entry
    return out
