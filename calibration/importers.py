"""Importers: traces people already have, mapped to `decode_step` rows.

* `llama-bench` (llama.cpp) records, from `-o json` (a list of objects), `-o jsonl` or
  `-o csv`: every text-generation test (`n_prompt == 0`, `n_gen > 0`) is one decode
  step of batch 1 at context `n_depth + n_gen / 2` (the mean KV length while the
  `n_gen` tokens are generated); seconds per step = `avg_ns / n_gen`, spread =
  `stddev_ns / n_gen`, reps = the number of `samples_ns` (or 5, llama-bench's
  default `-r`). The weight format is read from `model_type` ("llama 7B Q4_0" ->
  q4_0) unless given, the KV format from `type_k`.
* vLLM's serving benchmark result JSON (`benchmark_serving.py --save-result`,
  `vllm bench serve`): one decode step per file (or per object of a JSON list) at
  batch `max_concurrency` (or `num_prompts` when unbounded), context = mean input
  length + half the mean output length, seconds = `median_tpot_ms` (time per output
  token after the first), spread from `std_tpot_ms` when present.

Neither tool records the model's dimensions, so the caller names a model
(`costmodel` preset id, Hugging Face `config.json`, or model TOML).
"""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path

from costmodel.io import InputError, formats, load_model


_GGML_TYPES = {
    "F32": "f32",
    "F16": "f16",
    "BF16": "bf16",
    "Q8_0": "q8_0",
    "Q4_0": "q4_0",
    "Q4_K": "q4_k_m",
    "Q5_K": "q5_k_m",
    "Q6_K": "q6_k",
}


def _model_row(model: str) -> dict:
    m = load_model(model)
    f = lambda x: float(x)
    return {
        "n_layers": f(m.n_layers),
        "d_model": f(m.d_model),
        "n_heads": f(m.n_heads),
        "n_kv_heads": f(m.n_kv_heads),
        "head_dim": f(m.head_dim),
        "d_ff": f(m.d_ff),
        "vocab": f(m.vocab),
        "ffn_matrices": f(m.ffn_matrices),
        "tied_embeddings": f(m.tied_embeddings),
    }


def _format(name: str, where: str) -> str:
    known = formats()
    key = name.strip().lower()
    if key not in known:
        raise InputError(f"{where}: format {name!r}: expected one of {sorted(known)}")
    return key


def _weights_from_model_type(model_type: str, where: str) -> str:
    for token in model_type.replace("-", " ").split():
        t = token.upper()
        if t in _GGML_TYPES:
            return _GGML_TYPES[t]
    raise InputError(
        f"{where}: field 'model_type' = {model_type!r}: no known weight type in it "
        f"(expected one of {sorted(_GGML_TYPES)}); pass the format explicitly"
    )


def _num(rec: dict, key: str, where: str, positive: bool = False) -> float:
    if key not in rec:
        raise InputError(f"{where}: missing field {key!r}")
    v = rec[key]
    try:
        x = float(v)
    except (TypeError, ValueError, OverflowError):
        raise InputError(f"{where}: field {key!r} = {v!r}: expected a number") from None
    if not math.isfinite(x) or x < 0 or (positive and x == 0):
        raise InputError(f"{where}: field {key!r} = {v!r}: expected a number {'> 0' if positive else '>= 0'}")
    return x


def _mean_of(values: list, key: str, where: str) -> float:
    """Mean of a list of token counts, each checked like a field."""
    return sum(_num({key: v}, key, f"{where}: {key}[{i}]") for i, v in enumerate(values)) / len(values)


def _read_json_records(path: Path) -> list:
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise InputError(f"{path}: file not found") from None
    except IsADirectoryError:
        raise InputError(f"{path}: is a folder, expected a JSON file") from None
    except UnicodeDecodeError:
        raise InputError(f"{path}: not a UTF-8 text file") from None
    if not text.strip():
        raise InputError(f"{path}: empty file")
    try:
        data = json.loads(text)
        return data if isinstance(data, list) else [data]
    except json.JSONDecodeError:
        pass
    out = []
    for i, line in enumerate(text.splitlines(), 1):  # JSON lines
        if line.strip():
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError as e:
                raise InputError(f"{path}: line {i}: not valid JSON ({e.msg})") from None
    return out


def import_llama_bench(path, model: str, weights: str | None = None, kv: str | None = None) -> list[dict]:
    """Decode-step rows from a llama-bench `-o json`, `-o jsonl` or `-o csv` file.

    Args:
        path: the llama-bench output.
        model: the model that was benchmarked (preset id, config.json or model TOML).
        weights: weight format; default read from each record's `model_type`.
        kv: KV format; default each record's `type_k`.
    """
    path = Path(path)
    if path.suffix.lower() == ".csv":
        try:
            with open(path, newline="") as f:
                records = list(csv.DictReader(f))
        except FileNotFoundError:
            raise InputError(f"{path}: file not found") from None
        except IsADirectoryError:
            raise InputError(f"{path}: is a folder, expected a llama-bench CSV file") from None
        except UnicodeDecodeError:
            raise InputError(f"{path}: not a UTF-8 text file") from None
        except csv.Error as e:
            raise InputError(f"{path}: not a valid CSV file ({e})") from None
        lines = [i + 2 for i in range(len(records))]
    else:
        records = _read_json_records(path)
        lines = [i + 1 for i in range(len(records))]
    if not records:
        raise InputError(f"{path}: no llama-bench records")
    dims = _model_row(model)
    rows = []
    for rec, n in zip(records, lines):
        where = f"{path}: record {n}"
        if not isinstance(rec, dict):
            raise InputError(f"{where}: expected a JSON object")
        n_prompt = _num(rec, "n_prompt", where)
        n_gen = _num(rec, "n_gen", where)
        if n_prompt > 0 or n_gen == 0:
            continue  # prompt processing, not decode
        depth = _num(rec, "n_depth", where) if "n_depth" in rec else 0.0
        avg = _num(rec, "avg_ns", where, positive=True)
        std = _num(rec, "stddev_ns", where) if "stddev_ns" in rec else 0.0
        samples = rec.get("samples_ns")
        reps = float(len(samples)) if isinstance(samples, list) and samples else 5.0
        w = _format(weights, where) if weights else _weights_from_model_type(str(rec.get("model_type", "")), where)
        k = _format(kv or str(rec.get("type_k", "f16")), where)
        backend = rec.get("backends") or rec.get("backend", "")
        gpu = rec.get("gpu_info", "")
        device = f"{backend}: {gpu or rec.get('cpu_info', '')}".strip()
        rows.append(
            {
                "kind": "decode_step",
                "label": f"llama-bench {rec.get('model_type', model)} tg{n_gen:g} @ d{depth:g}",
                **dims,
                "batch": 1.0,
                "context": depth + n_gen / 2,
                "weights": w,
                "kv": k,
                "seconds": avg / n_gen * 1e-9,
                "spread_seconds": std / n_gen * 1e-9,
                "reps": reps,
                "device": device,
                "software": f"llama.cpp {rec.get('build_commit', '?')} (build {rec.get('build_number', '?')}), "
                f"{rec.get('n_threads', '?')} threads, ngl {rec.get('n_gpu_layers', '?')}",
            }
        )
    if not rows:
        raise InputError(f"{path}: no text-generation records (n_prompt = 0, n_gen > 0)")
    return rows


def import_vllm(path, model: str, weights: str = "bf16", kv: str | None = None, device: str = "") -> list[dict]:
    """Decode-step rows from vLLM serving-benchmark result JSON (one object or a list)."""
    path = Path(path)
    records = _read_json_records(path)
    if not records:
        raise InputError(f"{path}: no vLLM benchmark results")
    dims = _model_row(model)
    w = _format(weights, str(path))
    k = _format(kv or weights, str(path))
    rows = []
    for i, rec in enumerate(records, 1):
        where = f"{path}: result {i}"
        if not isinstance(rec, dict):
            raise InputError(f"{where}: expected a JSON object")
        tpot = _num(rec, "median_tpot_ms", where, positive=True)
        completed = _num(rec, "completed", where, positive=True)
        conc = rec.get("max_concurrency")
        batch = float(conc) if isinstance(conc, (int, float)) and conc > 0 else _num(rec, "num_prompts", where, True)
        if isinstance(rec.get("input_lens"), list) and rec["input_lens"]:
            mean_in = _mean_of(rec["input_lens"], "input_lens", where)
        else:
            mean_in = _num(rec, "total_input_tokens", where) / completed
        if isinstance(rec.get("output_lens"), list) and rec["output_lens"]:
            mean_out = _mean_of(rec["output_lens"], "output_lens", where)
        else:
            mean_out = _num(rec, "total_output_tokens", where) / completed
        std = _num(rec, "std_tpot_ms", where) if "std_tpot_ms" in rec else 0.0
        rows.append(
            {
                "kind": "decode_step",
                "label": f"vllm {rec.get('model_id', model)} c{batch:g}",
                **dims,
                "batch": batch,
                "context": mean_in + mean_out / 2,
                "weights": w,
                "kv": k,
                "seconds": tpot * 1e-3,
                "spread_seconds": std * 1e-3,
                "reps": completed,
                "device": device or "unknown (vLLM results do not record it)",
                "software": f"vllm benchmark ({rec.get('backend', '?')}, {rec.get('date', '?')})",
            }
        )
    return rows
