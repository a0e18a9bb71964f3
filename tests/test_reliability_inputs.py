"""Input boundaries: every file loader, fuzzed (hypothesis).

For every file the tool reads — chip TOML, model TOML, Hugging Face `config.json`,
technology constants, sweep spec, workload mix, measurement table, framework
profiles, sweep manifest — a valid file is mutated (a value deleted, replaced by any
TOML/JSON value, or an unknown key added) or replaced by random bytes. The loader
must either return a valid object or raise `InputError` whose message names the
file; any other exception is a bug. An added key in a table the loader owns is a
typo that must be reported, never silently ignored.
"""

from __future__ import annotations

import atexit
import dataclasses
import json
import math
import shutil
import tempfile
import tomllib
from pathlib import Path
from unittest import mock

import jax
import jax.numpy as jnp
import pytest
from hypothesis import given, strategies as st
from test_reliability_fuzzlib import COUNTS, FUZZ, JSON_VALUES, dump_toml, get, mutated, tables, typo

import costmodel as cm
from costmodel import io, sweep, validate, validate_serving
from costmodel.io import InputError


DATA = io.data_dir()
_TMP = Path(tempfile.mkdtemp(prefix="costmodel-fuzz-"))
atexit.register(shutil.rmtree, _TMP, ignore_errors=True)


def _write(name: str, text: str | bytes) -> Path:
    path = _TMP / name
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text)
    return path


def outcome(loader: str, fn, path: Path | None = None):
    """Runs one load: ("ok", value) or ("error", message); anything else propagates."""
    COUNTS[loader] += 1
    try:
        return "ok", fn()
    except InputError as e:
        msg = str(e)
        assert "\n" not in msg, f"{loader}: a message must be one line: {msg!r}"
        if path is not None:
            assert str(path) in msg, f"{loader}: the message must name the file: {msg!r}"
        return "error", msg


def _all_finite(tree) -> bool:
    leaves = [x for x in jax.tree.leaves(tree) if isinstance(x, (jax.Array, float, int))]
    return all(bool(jnp.all(jnp.isfinite(jnp.asarray(x, dtype=float)))) for x in leaves)


# --- the valid starting points ------------------------------------------------------

_CHIPS = tomllib.loads((DATA / "chips.toml").read_text())["chips"]
_MODELS = tomllib.loads((DATA / "models.toml").read_text())["models"]
_TECH = tomllib.loads((DATA / "tech.toml").read_text())
_MIX = tomllib.loads((DATA / "workloads.toml").read_text())
_ROWS = {"rows": tomllib.loads((DATA / "measurements" / "measurements.toml").read_text())["rows"][:6]}
_FRAMEWORKS = tomllib.loads((DATA / "frameworks.toml").read_text())
_SERVING = {"rows": tomllib.loads((DATA / "measurements" / "serving.toml").read_text())["rows"][:6]}
_CONTEXTS = {
    "distributions": dict(list(tomllib.loads((DATA / "contexts.toml").read_text())["distributions"].items())[:2])
}
_SERVING_KNOWN = {f.name for f in dataclasses.fields(validate_serving.ServingRow)} | {"rows"}
_SPECS = {p.stem: tomllib.loads(p.read_text()) for p in sorted((DATA / "sweeps").glob("*.toml"))}
_HF = {
    "llama": {
        "model_type": "llama",
        "num_hidden_layers": 32,
        "hidden_size": 4096,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "intermediate_size": 14336,
        "vocab_size": 128256,
        "tie_word_embeddings": False,
        "rope_theta": 500000.0,
    },
    "mixtral": {
        "model_type": "mixtral",
        "num_hidden_layers": 32,
        "hidden_size": 4096,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "intermediate_size": 14336,
        "vocab_size": 32000,
        "num_local_experts": 8,
        "num_experts_per_tok": 2,
        "sliding_window": None,
    },
    "gemma2": {
        "model_type": "gemma2",
        "num_hidden_layers": 42,
        "hidden_size": 3584,
        "num_attention_heads": 16,
        "num_key_value_heads": 8,
        "head_dim": 256,
        "intermediate_size": 14336,
        "vocab_size": 256000,
        "sliding_window": 4096,
    },
}

_CHIP_KNOWN = (
    {f.key for f in io.CHIP_SCHEMA}
    | set(io.chips.SYSTEM_FIELDS)
    | set(io.chips.OPTIONAL_SYSTEM_FIELDS)
    | set(io.chips.STRINGS)
    | set(io.chips.SECTIONS)
    | {"sources"}
)
_MODEL_KNOWN = set(io.models.MODEL_FIELDS) | set(io.models.MODEL_OPTIONAL) | {"source", "name"}


# --- chip files ----------------------------------------------------------------------


@FUZZ
@given(st.sampled_from(sorted(_CHIPS)).flatmap(lambda name: mutated(_CHIPS[name])))
def test_chip_file_fuzz(case):
    doc, op, path = case
    file = _write("chip.toml", dump_toml(doc))
    status, value = outcome("chip TOML", lambda: io.chip_info(str(file)), file)
    strict = [(), ("sram",), ("pim",), ("dram",)]
    if op == "add" and path[:-1] in strict and path[-1] not in _CHIP_KNOWN:
        assert status == "error" and repr(path[-1]) in value, f"typo {path[-1]!r} accepted: {value}"
    if status == "ok":
        assert _all_finite(value.chip)
        assert float(jnp.sum(value.chip.tiers.capacity)) > 0


# --- model files ---------------------------------------------------------------------


@FUZZ
@given(st.sampled_from(sorted(_MODELS)).flatmap(lambda name: mutated(_MODELS[name])))
def test_model_toml_fuzz(case):
    doc, op, path = case
    file = _write("model.toml", dump_toml(doc))
    status, value = outcome("model TOML", lambda: cm.load_model(str(file)), file)
    if op == "add" and path[:-1] == () and path[-1] not in _MODEL_KNOWN:
        assert status == "error" and repr(path[-1]) in value, f"typo {path[-1]!r} accepted: {value}"
    if status == "ok":
        assert _all_finite(value)
        assert value.n_layers >= 1 and value.n_kv_heads <= value.n_heads


@FUZZ
@given(st.sampled_from(sorted(_HF)).flatmap(lambda name: mutated(_HF[name], JSON_VALUES)))
def test_hf_config_fuzz(case):
    doc, _, _ = case
    file = _write("config.json", json.dumps(doc))
    status, value = outcome("config.json", lambda: cm.load_model(str(file)), file)
    if status == "ok":
        assert _all_finite(value)
        assert value.n_layers >= 1 and value.d_model >= 1 and value.vocab >= 1


@FUZZ
@given(JSON_VALUES)
def test_hf_config_any_json(doc):
    file = _write("config.json", json.dumps(doc))
    outcome("config.json", lambda: cm.load_model(str(file)), file)


# --- technology constants --------------------------------------------------------------


@FUZZ
@given(mutated(_TECH))
def test_technology_fuzz(case):
    doc, op, path = case
    where = DATA / "tech.toml"
    with mock.patch.object(io.tech, "tech_table", lambda: doc):
        status, value = outcome("technology TOML", lambda: io.tech_preset("N5"), where)
    strict = [("nodes", "N5"), ("pim",), ("dram",), ("io",)]
    if op == "add" and path[:-1] in strict and path[-1] not in get(_TECH, path[:-1]):
        assert status == "error" and repr(path[-1]) in value, f"typo {path[-1]!r} accepted: {value}"
    if status == "ok":
        assert _all_finite(value)


# --- sweep specs ----------------------------------------------------------------------


@FUZZ
@given(st.sampled_from(sorted(_SPECS)).flatmap(lambda name: mutated(_SPECS[name])))
def test_sweep_spec_fuzz(case):
    doc, op, path = case
    file = _write("spec.toml", dump_toml(doc))
    status, value = outcome("sweep spec", lambda: sweep.load_spec(file), file)
    known = set(sweep._known()) | {"sweep", "base", "axes", "name", "description"}
    known |= {"sampling", "samples", "seed", "chunk", "min", "max", "num", "scale"}
    if op == "add" and path[-1] not in known:
        assert status == "error", f"key {path[-1]!r} at {path[:-1]} accepted"
    if status == "ok":
        assert value.n_configs >= 1
        for axis in value.axes:
            grid = axis.grid() if value.sampling == "grid" else (axis.values or (axis.low, axis.high))
            assert all(isinstance(v, str) or math.isfinite(v) for v in grid)


# --- workload mix, measurement table, framework profiles -------------------------------


@FUZZ
@given(mutated(_MIX))
def test_mix_fuzz(case):
    doc, op, path = case
    file = _write("mix.toml", dump_toml(doc))
    status, value = outcome("workload mix", lambda: io.load_mix(file), file)
    strict = [()] + [("workloads", i) for i in range(len(_MIX["workloads"]))]
    known = {"workloads", "name", "model", "batch", "context", "weights", "kv", "weight", "prefix"}
    if op == "add" and path[:-1] in strict and path[-1] not in known:
        assert status == "error" and repr(path[-1]) in value, f"typo {path[-1]!r} accepted: {value}"
    if status == "ok":
        assert value and all(p.weight > 0 and p.batch >= 1 for p in value)


@FUZZ
@given(mutated(_ROWS))
def test_measurement_table_fuzz(case):
    doc, op, path = case
    file = _write("rows.toml", dump_toml(doc))
    status, value = outcome("measurement table", lambda: validate.load_rows(file), file)
    if op == "add" and path[:-1] == () and path[-1] != "rows":
        assert status == "error" and repr(path[-1]) in value, f"unknown section {path[-1]!r} accepted: {value}"
    if status == "ok":
        assert all(r.value > 0 and r.batch > 0 for r in value)


@FUZZ
@given(mutated(_CONTEXTS))
def test_context_distributions_fuzz(case):
    doc, op, path = case
    file = _write("contexts.toml", dump_toml(doc))
    status, value = outcome("context distributions", lambda: io.load_context_distributions(file), file)
    known = {k for d in _CONTEXTS["distributions"].values() for k in d}
    top = len(path) == 1 and path[0] != "distributions"
    if op == "add" and (top or (len(path) == 3 and path[-1] not in known)):
        assert status == "error" and repr(path[-1]) in value, f"unknown field {path[-1]!r} accepted: {value}"
    if status == "ok":
        for d in value.values():
            assert abs(math.fsum(d.shares) - 1) <= 1e-6 and len(d.shares) == len(d.lengths)
            assert all(n > 0 for n in d.lengths) and d.mean_context > 0


@FUZZ
@given(mutated(_SERVING))
def test_serving_table_fuzz(case):
    doc, op, path = case
    file = _write("serving.toml", dump_toml(doc))
    status, value = outcome("serving table", lambda: validate_serving.load_serving_rows(file), file)
    if op == "add" and path[:-1] in [(), *[("rows", i) for i in range(6)]] and path[-1] not in _SERVING_KNOWN:
        assert status == "error" and repr(path[-1]) in value, f"unknown field {path[-1]!r} accepted: {value}"
    if status == "ok":
        assert all(r.output_tokens > 0 and r.chips == r.tensor_parallel * r.pipeline_parallel for r in value)
        assert all(r.concurrency is None or r.request_rate is None for r in value)


@FUZZ
@given(mutated(_FRAMEWORKS))
def test_framework_profiles_fuzz(case):
    doc, op, path = case
    file = _write("frameworks.toml", dump_toml(doc))
    status, value = outcome("framework profiles", lambda: validate.load_frameworks(file), file)
    if op == "add" and path[:-1] == () and path[-1] != "frameworks":
        assert status == "error" and repr(path[-1]) in value, f"unknown section {path[-1]!r} accepted: {value}"
    if status == "ok":
        assert all(all(m > 0 and math.isfinite(m) for m in f.multipliers) for f in value.values())


# --- typos: every field of every strict table -------------------------------------------

_STRICT = {
    "chip": (lambda f: io.chip_info(str(f)), "toml", [(), ("sram",), ("dram",)], _CHIPS["h100-sxm"]),
    "chip (PIM)": (lambda f: io.chip_info(str(f)), "toml", [("pim",)], _CHIPS["hbm-pim-gpu"]),
    "model": (lambda f: cm.load_model(str(f)), "toml", [()], _MODELS["mixtral-8x7b"]),
    "sweep spec": (sweep.load_spec, "toml", None, _SPECS["default"]),
    "sweep spec (area)": (sweep.load_spec, "toml", None, _SPECS["area"]),
    "workload mix": (io.load_mix, "toml", [(), ("workloads", 0)], _MIX),
    "measurement table": (validate.load_rows, "toml", [(), ("rows", 0)], _ROWS),
    "framework profiles": (validate.load_frameworks, "toml", [(), ("frameworks", "vllm")], _FRAMEWORKS),
    "serving table": (validate_serving.load_serving_rows, "toml", [(), ("rows", 0)], _SERVING),
    "context distributions": (io.load_context_distributions, "toml", [(), ("distributions", "sharegpt")], _CONTEXTS),
}


@pytest.mark.parametrize("name", sorted(_STRICT))
def test_every_misspelt_key_is_reported(name):
    """Each key of each strict table, misspelt, gives an error naming the misspelling."""
    load, _, strict, base = _STRICT[name]
    strict = strict if strict is not None else [t for t in tables(base)]
    n = 0
    for where in strict:
        table = get(base, where)
        for i, key in enumerate(list(table)):
            if key == "sources":
                continue
            doc = json.loads(json.dumps(base))
            t = get(doc, where)
            bad = typo(key, i)
            if bad in t:
                continue
            t[bad] = t.pop(key)
            file = _write("typo.toml", dump_toml(doc))
            status, msg = outcome(name, lambda: load(file), file)
            assert status == "error" and bad in msg, f"{name}: {'.'.join(map(str, (*where, bad)))} accepted"
            n += 1
    assert n >= 3


# --- random bytes -----------------------------------------------------------------------

_FILE_LOADERS = {
    "chip TOML": ("x.toml", lambda f: io.chip_info(str(f))),
    "model TOML": ("x.toml", lambda f: cm.load_model(str(f))),
    "config.json": ("config.json", lambda f: cm.load_model(str(f))),
    "sweep spec": ("x.toml", sweep.load_spec),
    "workload mix": ("x.toml", io.load_mix),
    "measurement table": ("x.toml", validate.load_rows),
    "framework profiles": ("x.toml", validate.load_frameworks),
    "serving table": ("x.toml", validate_serving.load_serving_rows),
    "context distributions": ("x.toml", io.load_context_distributions),
}
_BYTES = st.one_of(
    st.binary(max_size=200),
    st.text(max_size=200).map(str.encode),
    st.sampled_from([b"", b"\xff\xfe", b"[", b"a = ", b"{}", b"[]", b"null", b"a = 1\na = 2", b"\x00"]),
)


@FUZZ
@given(st.sampled_from(sorted(_FILE_LOADERS)), _BYTES)
def test_random_bytes(loader, data):
    name, load = _FILE_LOADERS[loader]
    file = _write(name, data)
    status, _ = outcome(loader, lambda: load(file), file)
    assert status == "error" or loader == "sweep spec" or data.strip() not in (b"", b"\x00")


@pytest.mark.parametrize("loader", sorted(_FILE_LOADERS))
def test_missing_file_and_folder(loader):
    name, load = _FILE_LOADERS[loader]
    for path in (_TMP / "no-such" / name, _TMP):
        status, msg = outcome(loader, lambda: load(path))
        assert status == "error" and str(path) in msg


# --- sweep manifests (read back by `pareto`) ---------------------------------------------


def _manifest_base() -> dict:
    return {
        "format": sweep.FORMAT,
        "spec_sha256": "0" * 64,
        "n_configs": 2,
        "chunk": 2,
        "n_chunks": 1,
        "spec": {"axes": {"batch": [1, 8]}},
        "costmodel_version": cm.__version__,
    }


@FUZZ
@given(mutated(_manifest_base(), JSON_VALUES))
def test_sweep_manifest_fuzz(case):
    doc, _, _ = case
    folder = _TMP / "sweep"
    folder.mkdir(exist_ok=True)
    (folder / sweep.MANIFEST).write_text(json.dumps(doc))
    outcome("sweep manifest", lambda: (sweep.read_manifest(folder), sweep.missing_chunks(folder)), folder)


# --- traces and imported benchmark JSON (the calibration package) -------------------------

try:
    from calibration import importers as _importers, trace as _trace
except ModuleNotFoundError:  # calibration/ not installed: nothing to fuzz
    _importers = _trace = None
needs_calibration = pytest.mark.skipif(_trace is None, reason="the calibration package is not there")
_TESTS = Path(__file__).resolve().parent


def _trace_lines() -> list[str]:
    return (DATA / "traces" / "cpu.csv").read_text().splitlines()[:4]


def _vllm_base() -> dict:
    return json.loads((_TESTS / "test_calibration_vllm.json").read_text())


def _llama_bench_base() -> list:
    return json.loads((_TESTS / "test_calibration_llama_bench.json").read_text())


@needs_calibration
@FUZZ
@given(mutated(_vllm_base(), JSON_VALUES))
def test_vllm_benchmark_json_fuzz(case):
    doc, _, _ = case
    file = _write("bench.json", json.dumps(doc))
    status, rows = outcome("vLLM JSON", lambda: _importers.import_vllm(file, "llama-3-8b"), file)
    if status == "ok":
        assert all(math.isfinite(r["seconds"]) and r["seconds"] > 0 for r in rows)


@needs_calibration
@FUZZ
@given(mutated(_llama_bench_base(), JSON_VALUES))
def test_llama_bench_json_fuzz(case):
    """Each format fuzzed on its own (one `one_of` shared 100 inputs between them, and
    how many each got moved with the order the tests ran in)."""
    doc, _, _ = case
    file = _write("bench.json", json.dumps(doc))
    status, rows = outcome("llama-bench JSON", lambda: _importers.import_llama_bench(file, "llama-2-7b"), file)
    if status == "ok":
        assert all(math.isfinite(r["seconds"]) and r["seconds"] > 0 for r in rows)


@needs_calibration
@FUZZ
@given(st.data())
def test_trace_csv_fuzz(data):
    lines = (DATA / "traces" / "cpu.csv").read_text().splitlines()
    header, rows = lines[0].split(","), lines[1:]
    pick = [rows[0], rows[1], next(r for r in rows if r.startswith("decode_step"))]
    cells = [r.split(",") for r in pick]
    i = data.draw(st.integers(0, len(cells) - 1))
    j = data.draw(st.integers(0, len(cells[i]) - 1))
    cells[i][j] = data.draw(st.sampled_from(["nan", "inf", "-1", "0", "1e400", "1e-300", "x", "", "true", "3.5"]))
    file = _write("trace.csv", "\n".join([",".join(header), *(",".join(c) for c in cells)]) + "\n")
    status, rows = outcome("trace CSV", lambda: _trace.load_trace(file), file)
    if status == "ok":
        assert all(math.isfinite(r["seconds"]) and r["seconds"] > 0 for r in rows)


_CALIBRATION_BUGS = {
    # Found by the fuzzing above and by hand, then fixed in calibration/: regressions.
    "vllm input_lens of text": ("vllm.json", lambda: json.dumps({**_vllm_base(), "input_lens": ["a"]})),
    "vllm output_lens with null": ("vllm.json", lambda: json.dumps({**_vllm_base(), "output_lens": [None]})),
    "vllm input_lens inf": ("vllm.json", lambda: json.dumps({**_vllm_base(), "input_lens": [1e400]})),
    "vllm completed 1e400 as an int": ("vllm.json", lambda: json.dumps({**_vllm_base(), "completed": 10**400})),
    "llama-bench CSV not UTF-8": ("lb.csv", lambda: b"\xff\xfe\x00garbage"),
    "trace CSV with an unknown column": (
        "trace.csv",
        lambda: "".join(line + (",ffn_matrix\n" if i == 0 else ",2\n") for i, line in enumerate(_trace_lines())),
    ),
}


@needs_calibration
@pytest.mark.parametrize("bug", sorted(_CALIBRATION_BUGS))
def test_known_calibration_input_bugs(bug):
    name, content = _CALIBRATION_BUGS[bug]
    file = _write(name, content())
    if name == "vllm.json":
        load = lambda: _importers.import_vllm(file, "llama-3-8b")
    elif name == "lb.csv":
        load = lambda: _importers.import_llama_bench(file, "llama-2-7b")
    else:
        load = lambda: _trace.load_trace(file)
    status, rows = outcome(f"calibration bug: {bug}", load, file)
    assert status == "error"


def test_counts_reported(capsys):
    """How many inputs each loader took (printed with -s; quoted in RELIABILITY.md):
    every loader of RELIABILITY.md's table saw at least 40, and the run at least 1,000."""
    if not COUNTS:
        pytest.skip("run with the fuzz tests above (they fill the counts)")
    with capsys.disabled():
        for name, n in sorted(COUNTS.items()):
            print(f"  {name}: {n} inputs")
    fuzzed = (
        "chip TOML",
        "model TOML",
        "config.json",
        "technology TOML",
        "sweep spec",
        "workload mix",
        "measurement table",
        "framework profiles",
        "serving table",
        "context distributions",
        "sweep manifest",
        "trace CSV",
        "llama-bench JSON",
        "vLLM JSON",
    )
    assert {name: COUNTS.get(name, 0) for name in fuzzed if COUNTS.get(name, 0) < 40} == {}
    assert sum(COUNTS.values()) >= 1000, sum(COUNTS.values())
