"""`costmodel validate --serving`: published serving runs against the model (issue 17)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

import costmodel.validate_serving as vs
from costmodel.cli import main
from costmodel.io import InputError


ROW = """
[[rows]]
id = "{id}"
status = "test"
chip = "h100-sxm"
chips = 1
tensor_parallel = 1
pipeline_parallel = 1
framework = "native"
model = "llama-3-8b"
weights = "bf16"
kv = "bf16"
prompt_tokens = 512
output_tokens = 128
{load}
tpot_ms = 10.0
output_tokens_per_second = 500.0
ttft_ms = 50.0
tag = "M"
source = "a test"
"""


def _table(tmp_path: Path, *loads: str) -> Path:
    path = tmp_path / "serving.toml"
    path.write_text("".join(ROW.format(id=f"r{i}", load=load) for i, load in enumerate(loads)))
    return path


def test_shipped_table_loads_and_every_scored_row_has_a_load():
    rows = vs.load_serving_rows()
    test = [r for r in rows if r.status in ("test", "fit")]
    assert len(rows) >= 30 and len(test) >= 20 and sum(r.status == "fit" for r in rows) == 15
    assert all(r.prompt_tokens and (r.concurrency or r.request_rate) for r in test)
    assert all(r.source and r.conditions for r in rows)
    assert all(r.reason for r in rows if r.status == "reference")
    blind = [r for r in rows if r.blind]
    assert len(blind) >= 30 and all(r.status == "test" for r in blind)


def test_rocm_variant_is_chosen_on_mi300x_and_its_fit_reproduces():
    """vLLM 0.6 on ROCm is a backend variant: chosen on an MI300X, not on an H100; its
    bytes in flight are fitted on its one fit row (`fit_in_flight`), which reproduces the
    file's value; fewer bytes in flight never make a step faster."""
    from costmodel.io.frameworks import load_frameworks, resolve_framework

    frameworks = load_frameworks()
    rocm = resolve_framework("vllm-0.6", "mi300x", frameworks)
    assert rocm.name == "vllm-0.6-rocm" and resolve_framework("vllm-0.6", "h100-sxm", frameworks).name == "vllm-0.6"
    assert rocm.host == frameworks["vllm-0.6"].host and rocm.max_batch == frameworks["vllm-0.6"].max_batch
    by_id = {r.id: r for r in vs.load_serving_rows()}
    fit_rows = [by_id[i] for i in rocm.fitted_on]
    assert all(r.status == "fit" and r.framework == "vllm-0.6" and r.chip == "mi300x" for r in fit_rows)
    assert vs.fit_in_flight(fit_rows) == pytest.approx(rocm.multipliers[4], rel=0.01)
    row = fit_rows[0]
    tpots = [vs._at_load(row, *vs._curve(row, in_flight_kb=kb)).tpot_ms for kb in (2.0, 4.0, 8.0)]
    assert tpots[0] > tpots[1] > tpots[2]


def test_vllm_v1_on_rocm_carries_the_rocm_build():
    """vLLM >= 0.8 on MI300X resolves to vllm-v1-rocm, which carries vllm-0.6-rocm's
    kernel concurrency and vLLM 0.6's host loop (nothing fitted); on CUDA chips it stays
    vllm-v1 (no host time). A row of it is slower on MI300X than vllm-v1 itself would
    price it, by the host time and the fewer bytes in flight."""
    from costmodel.io.frameworks import load_frameworks, resolve_framework

    frameworks = load_frameworks()
    v1 = resolve_framework("vllm-v1", "mi300x", frameworks)
    assert v1.name == "vllm-v1-rocm" and resolve_framework("vllm-v1", "h200-sxm", frameworks).name == "vllm-v1"
    assert v1.fit == () and v1.fitted_on == ()
    assert v1.host == frameworks["vllm-0.6"].host and frameworks["vllm-v1"].host is None
    assert v1.multipliers[4] == frameworks["vllm-0.6-rocm"].multipliers[4] < frameworks["vllm-v1"].multipliers[4]
    row = next(r for r in vs.load_serving_rows() if r.framework == "vllm-v1" and r.chip == "mi300x")
    rocm = vs._at_load(dataclasses.replace(row, arrival="closed"), *vs._curve(row))
    cuda = vs._at_load(
        dataclasses.replace(row, arrival="closed"), *vs._curve(row, (0.0, 0.0), frameworks["vllm-v1"].multipliers[4])
    )
    assert rocm.tpot_ms > cuda.tpot_ms


@pytest.mark.slow
@pytest.mark.parametrize("name", ["lmdeploy-0.2", "vllm-v1", "trt-llm-0.7"])
def test_in_flight_profile_fit_reproduces_and_holds_out_the_rest(name):
    """LMDeploy 0.2's TurboMind kernels, vLLM's V1 engine and TensorRT-LLM >= 0.7: one
    number (bytes in flight per SM) fitted on one row (`fit_in_flight`) reproduces the
    file's value; the engine's other rows are scored (or, TensorRT-LLM's, shown as
    reference rows)."""
    from costmodel.io.frameworks import load_frameworks

    profile = load_frameworks()[name]
    assert profile.fit == ("bytes_in_flight_KB",) and profile.host is None
    rows = [r for r in vs.load_serving_rows() if r.framework == name]
    fit_rows = [r for r in rows if r.id in profile.fitted_on]
    assert len(fit_rows) == 1 and all(r.status == "fit" for r in fit_rows)
    rest = [r for r in rows if r.id != fit_rows[0].id]
    assert all(r.status in ("test", "reference") for r in rest) and sum(r.status == "test" for r in rest) >= 4
    if name != "trt-llm-0.7":  # its MLPerf, v1.0 and TTFT-only rows are shown, not scored
        assert all(r.status == "test" for r in rest)
    assert vs.fit_in_flight(fit_rows) == pytest.approx(profile.multipliers[4], rel=0.01)


def test_summary_reports_the_blind_rows_apart(tmp_path):
    path = _table(tmp_path, "concurrency = 4", "concurrency = 64")
    path.write_text(path.read_text().replace('status = "test"\n', 'status = "test"\nblind = "2026-12-04"\n', 1))
    results = vs.evaluate_serving_rows(vs.load_serving_rows(path))
    s = vs.summary(results)
    assert s["test_rows"] == 2 and s["blind"]["test_rows"] == 1
    assert s["blind"]["tpot_ms"]["median"] == pytest.approx(abs(results[0].errors()["tpot_ms"]))


def test_closed_loop_throughput_is_littles_law(tmp_path):
    low, high = vs.evaluate_serving_rows(vs.load_serving_rows(_table(tmp_path, "concurrency = 4", "concurrency = 64")))
    for r, c in ((low, 4), (high, 64)):
        assert r.batch == c and not r.overloaded
        life = r.ttft_ms + 128 * r.tpot_ms  # ms a request takes
        assert r.output_tokens_per_second == pytest.approx(c * 128 / life * 1e3, rel=1e-6)
        assert r.errors()["tpot_ms"] == pytest.approx(r.tpot_ms / 10.0 - 1)
    # More in flight: never a faster step, always more tokens per second.
    assert high.tpot_ms >= low.tpot_ms and high.output_tokens_per_second > low.output_tokens_per_second


def test_open_loop_batch_closes_littles_law(tmp_path):
    (r,) = vs.evaluate_serving_rows(vs.load_serving_rows(_table(tmp_path, "request_rate = 20.0")))
    assert not r.overloaded and r.output_tokens_per_second == pytest.approx(20.0 * 128)
    # In flight = rate x time in the system, to the grid's linear interpolation.
    assert r.batch == pytest.approx(20.0 * (r.ttft_ms + 128 * r.tpot_ms) * 1e-3, rel=0.02)


def test_a_concurrency_beyond_memory_is_capped_and_flagged(tmp_path):
    (r,) = vs.evaluate_serving_rows(vs.load_serving_rows(_table(tmp_path, "concurrency = 100000")))
    assert r.overloaded and 1 < r.batch < 100000


@pytest.mark.parametrize(
    "edit,needles",
    [
        (('status = "test"', 'status = "fitted"'), ("field 'status' = 'fitted'", "expected one of")),
        (("chips = 1", "chips = 2"), ("field 'chips' = 2", "tensor_parallel x pipeline_parallel")),
        (('chip = "h100-sxm"', 'chip = "h100"'), ("field 'chip' = 'h100'",)),
        (("concurrency = 4", "concurrency = 4\nrequest_rate = 2.0"), ("expected one load",)),
        (("concurrency = 4", ""), ("missing field 'concurrency' or 'request_rate'",)),
        (("tpot_ms = 10.0", "tpot_ms = -1"), ("field 'tpot_ms' = -1",)),
        (('tag = "M"', 'tga = "M"'), ("unknown field 'tga'",)),
    ],
)
def test_bad_rows_are_one_line_naming_file_row_and_field(tmp_path, edit, needles):
    path = _table(tmp_path, "concurrency = 4")
    path.write_text(path.read_text().replace(*edit))
    with pytest.raises(InputError) as e:
        vs.load_serving_rows(path)
    text = str(e.value)
    assert "\n" not in text and str(path) in text and "rows[0]" in text
    for n in needles:
        assert n in text, text


def test_cli_serving_json_and_a_bad_table(tmp_path, capsys):
    path = _table(tmp_path, "concurrency = 8")
    assert main(["validate", "--serving", "--table", str(path), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["test_rows"] == 1 and out["rows"][0]["predicted"]["tpot_ms"] > 0
    assert set(out["rows"][0]["errors"]) == {"tpot_ms", "output_tokens_per_second", "ttft_ms"}
    path.write_text(path.read_text().replace("output_tokens = 128", "output_tokens = 0"))
    assert main(["validate", "--serving", "--table", str(path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "output_tokens" in err[0]
    assert main(["validate", "--serving", "--pim"]) == 2


def test_cli_serving_takes_the_frameworks_file(tmp_path, capsys):
    """`--frameworks` reaches the serving rows: a profile only that file has is accepted
    there (and is an error naming the field without it), and its host time is the one
    the rows are served with: more host time per step, a longer TPOT."""
    from costmodel.io.frameworks import frameworks_path

    shipped = frameworks_path().read_text()
    profile = """
[frameworks.mine]
description = "a test engine"
memory_efficiency = 1.0
compute_efficiency = 1.0
kernel_overhead = 1.0
link_latency = 1.0
host_step_us = {host}
fit = []
fitted_on = []
source = "a test"
"""
    table = _table(tmp_path, "concurrency = 8")
    table.write_text(table.read_text().replace('framework = "native"', 'framework = "mine"'))
    tpot = []
    for host in (0.0, 5000.0):
        frameworks = tmp_path / f"frameworks{host:g}.toml"
        frameworks.write_text(shipped + profile.format(host=host))
        args = ["validate", "--serving", "--table", str(table), "--frameworks", str(frameworks), "--json"]
        assert main(args) == 0
        tpot.append(json.loads(capsys.readouterr().out)["rows"][0]["predicted"]["tpot_ms"])
    assert tpot[1] > tpot[0] + 4.0, tpot  # 5 ms more per step, less the batch the load then holds
    assert main(["validate", "--serving", "--table", str(table)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "'framework' = 'mine'" in err[0] and str(table) in err[0], err
    assert main(["validate", "--pim", "--frameworks", str(frameworks)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--frameworks" in err[0], err
