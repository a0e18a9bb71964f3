"""Published GPU traces and the chips calibrated on them (issue 16); the trace's `source`
column and its one-line errors for a row cut short."""

import math
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from calibration.trace import SOURCE, load_trace, save_trace
from costmodel.evaluation import evaluate
from costmodel.io import InputError, chip_info

from helpers import load_script


ROOT = Path(__file__).resolve().parent.parent
PUBLISHED = ROOT / "data" / "traces" / "published"
CALIBRATED = ROOT / "data" / "calibrated"
PRESETS = ("a100-80gb-sxm", "h100-pcie", "h200-sxm")
TRACE_FILES = sorted(PUBLISHED.glob("*.csv"))
CITATION = re.compile(r"^github\.com/[\w.-]+/[\w.-]+/blob/[0-9a-f]{7,40}/\S+ line \d+\b")
"""A published row's citation: the file at a commit on GitHub and the line it was read from."""


def _stream(seconds: float = 1e-3, **extra) -> dict:
    row = {
        "kind": "stream",
        "label": "stream 4 MB",
        "seconds": seconds,
        "spread_seconds": seconds / 50,
        "reps": 5.0,
        "device": "gpu: test",
        "software": "test",
        "dtype": "f32",
        "bytes": 4e6,
        "working_set": 4e6,
        "flops": 0.0,
    }
    return row | extra


# --- the source column ------------------------------------------------------------------


@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
def test_source_round_trips_and_defaults_to_file_and_line(tmp_path, suffix):
    cited = "github.com/o/r/blob/0123abcd/results.txt line 7: 1,234 GB/s"
    rows = [_stream(source=cited), _stream(2e-3), _stream(3e-3, source="  ")]
    path = save_trace(rows, tmp_path / f"t{suffix}")
    back = load_trace(path)
    assert [r[SOURCE] for r in back] == [cited, f"t{suffix}:3", f"t{suffix}:4"]


def test_trace_without_source_column_cites_file_and_line(tmp_path):
    path = tmp_path / "old.csv"
    save_trace([_stream(), _stream(2e-3)], path)
    header, *lines = path.read_text().splitlines()
    cols = header.split(",")
    keep = [i for i, c in enumerate(cols) if c != SOURCE]
    path.write_text("\n".join(",".join(line.split(",")[i] for i in keep) for line in [header, *lines]) + "\n")
    assert SOURCE not in path.read_text().splitlines()[0]
    assert [r[SOURCE] for r in load_trace(path)] == ["old.csv:2", "old.csv:3"]


def test_source_with_a_line_break_is_a_one_line_error(tmp_path):
    path = save_trace([_stream(source="table 3\nfigure 2")], tmp_path / "t.csv")
    with pytest.raises(InputError, match=rf"{re.escape(str(path))}: line 2: column 'source' = .*one line of text"):
        load_trace(path)


# --- the published traces --------------------------------------------------------------


def test_published_traces_are_there():
    names = {p.name for p in TRACE_FILES}
    assert {"gpu-benches-a100-80gb.csv", "gpu-benches-h100-pcie.csv", "gpu-benches-h200.csv"} <= names
    assert {"mamf-a100-sxm.csv", "mamf-h100-sxm.csv", "mamf-h200-sxm.csv"} <= names


@pytest.mark.parametrize("path", TRACE_FILES, ids=lambda p: p.name)
def test_every_published_row_loads_and_cites_its_source(path):
    rows = load_trace(path)
    assert rows
    for r in rows:
        assert CITATION.match(r[SOURCE]), r[SOURCE]
        # A row's rate is in a plausible unit: GB/s of a stream, TFLOP/s of a matmul.
        if r["kind"] == "stream":
            assert 10e9 < r["bytes"] / r["seconds"] < 50e12, r["label"]
        else:
            assert r["kind"] == "gemm" and 50e12 < r["flops"] / r["seconds"] < 5e15, r["label"]
            assert r["flops"] == pytest.approx(2 * r["m"] * r["n"] * r["k"])


def _quoted(pattern: str, text: str) -> float:
    m = re.search(pattern, text)
    assert m is not None, text
    return float(m.group(1))


def test_published_rates_are_the_cited_figures():
    """The rate of each row is the figure its citation quotes (GB/s or TFLOPS)."""
    for path in TRACE_FILES:
        for r in load_trace(path):
            if r["kind"] == "stream":
                quoted = _quoted(r"([\d.]+) GB/s", r[SOURCE])
                assert r["bytes"] / r["seconds"] / 1e9 == pytest.approx(quoted, rel=1e-6), r[SOURCE]
            else:
                quoted = _quoted(r"([\d.]+) TFLOPS", r[SOURCE])
                assert r["flops"] / r["seconds"] / 1e12 == pytest.approx(quoted, rel=1e-6), r[SOURCE]


# --- the calibrated chips ----------------------------------------------------------------


@pytest.mark.parametrize("preset", PRESETS)
def test_calibrated_chip_loads_and_evaluates(preset):
    path = CALIBRATED / f"{preset}-published.toml"
    info = chip_info(str(path))
    assert chip_info(f"{preset}-published").name == info.name  # also found by name
    e = evaluate("llama-3-8b", info, batch=1, context=4096)
    assert math.isfinite(float(e.cost.seconds_per_step)) and float(e.cost.seconds_per_step) > 0
    big = evaluate("llama-3-8b", info, batch=16, context=4096)
    assert float(big.cost.seconds_per_step) > float(e.cost.seconds_per_step)


@pytest.mark.parametrize("preset", PRESETS)
def test_calibrated_chip_says_what_was_fitted_and_what_was_copied(preset):
    table = tomllib.loads((CALIBRATED / f"{preset}-published.toml").read_text())
    sources = table["sources"]
    assert "fitted" in table["dram"]["source"] and "fitted" in table["sram"]["source"]
    assert "held_at_preset" in sources and "from_preset" in sources
    for field in ("power_cap_w", "energy_pj_per_flop", "link_bandwidth_GBps", "parallel_units"):
        assert field in sources["from_preset"] and sources[field].startswith(f"preset {preset}")


@pytest.mark.parametrize("preset", PRESETS)
def test_what_the_traces_cannot_measure_is_the_presets_today(preset):
    """Every top-level number of the preset that the fit does not set (benchmarks/
    calibration_gpu.py `FITTED_TOP`), the DRAM's capacity and the tiers' energies are in the
    calibrated file with the preset's values now, and the prompt pass's efficiency keeps
    the preset's prompt-pass rate (`prompt_pass_share`): a field added to data/chips.toml
    after the file was written (as `prefill_efficiency` was) fails here until `python
    benchmarks/calibration_gpu.py --fit PRESET` is re-run."""
    script = load_script(ROOT / "benchmarks" / "calibration_gpu.py")
    p = tomllib.loads((ROOT / "data" / "chips.toml").read_text())["chips"][preset]
    table = tomllib.loads((CALIBRATED / f"{preset}-published.toml").read_text())
    copied = {k: v for k, v in p.items() if k not in script.FITTED_TOP and not isinstance(v, dict)}
    share = copied.pop("prefill_efficiency", None)
    assert {k: table.get(k) for k in copied} == copied
    assert table["dram"]["capacity_GB"] == p["dram"]["capacity_GB"]
    for tier in ("sram", "dram"):
        assert table[tier].get("energy_pj_per_byte") == p[tier].get("energy_pj_per_byte"), tier
    info, cal = chip_info(preset), chip_info(f"{preset}-published")
    if share is None:
        assert "prefill_efficiency" not in table and cal.prefill_efficiency == 1.0
        return
    # the same prompt-pass rate on both chips, at the file's six digits
    assert preset == "h200-sxm" and table["prefill_efficiency"] == script.prompt_pass_share(p, table)
    rate = lambda i: float(i.chip.peak_flops[1] * i.chip.compute_efficiency) * i.prefill_efficiency
    assert rate(cal) == pytest.approx(rate(info), rel=1e-5)
    assert cal.prefill_efficiency < info.prefill_efficiency  # the fitted GEMM rate is above the preset's


@pytest.mark.parametrize("preset", PRESETS)
def test_fitted_knobs_are_physically_plausible(preset):
    """DRAM streams at 0.5-1.05x the datasheet bandwidth, the L2 knee lies within 0.5-1.5x
    the L2's size, and the 16-bit matmul rate at 0.5-1.05x the datasheet peak."""
    hand, cal = chip_info(preset).chip, chip_info(f"{preset}-published").chip
    spec_dram = float(hand.tiers.bandwidth[2])
    fitted_dram = float(cal.tiers.bandwidth[2] * cal.tiers.efficiency[2])
    assert 0.5 * spec_dram < fitted_dram < 1.05 * spec_dram
    assert 0.5 < float(cal.tiers.capacity[0] / hand.tiers.capacity[0]) < 1.5
    sixteen = 1  # costmodel.PRECISIONS: f32, 16, 8, 4
    ratio = float(cal.peak_flops[sixteen] * cal.compute_efficiency / hand.peak_flops[sixteen])
    assert 0.5 < ratio < 1.05
    # What the traces cannot measure is the preset's.
    assert float(cal.tiers.capacity[2]) == pytest.approx(float(hand.tiers.capacity[2]))
    assert float(cal.power_cap) == pytest.approx(float(hand.power_cap))


# --- a trace cut short ------------------------------------------------------------------


def _cut(tmp_path, text: str) -> Path:
    """A trace of three rows whose last line is replaced by `text` (no newline after it)."""
    path = save_trace([_stream(), _stream(2e-3), _stream(3e-3)], tmp_path / "cut.csv")
    lines = path.read_text().splitlines()
    path.write_text("\n".join([*lines[:3], text]))
    return path


def _last_line(tmp_path) -> str:
    path = save_trace([_stream(), _stream(2e-3), _stream(3e-3)], tmp_path / "full.csv")
    return path.read_text().splitlines()[3]


@pytest.mark.parametrize(
    "cut, field, value",
    [
        (lambda s: s[: s.index(",0.003") + 4], "seconds", "'0.0'"),
        (lambda s: ",".join(s.split(",")[:9]), "bytes", "'4000000'"),
        (lambda s: "stream,str", "label", "'str'"),
    ],
    ids=["in-a-number", "missing-columns", "after-the-label"],
)
def test_row_cut_short_names_file_line_field_and_value(tmp_path, cut, field, value):
    path = _cut(tmp_path, cut(_last_line(tmp_path)))
    with pytest.raises(InputError) as e:
        load_trace(path)
    message = str(e.value)
    assert message.startswith(f"{path}: line 4: ") and "\n" not in message
    assert f"column {field!r} = {value}" in message and "truncated" in message


def test_empty_numeric_cell_names_the_field(tmp_path):
    cells = _last_line(tmp_path).split(",")
    cells[8] = ""  # bytes
    path = _cut(tmp_path, ",".join(cells))
    with pytest.raises(InputError, match=rf"^{re.escape(str(path))}: line 4: column 'bytes' = '' is empty"):
        load_trace(path)


def test_open_quote_at_the_end_of_the_file(tmp_path):
    path = _cut(tmp_path, 'stream,"stream 4')
    with pytest.raises(InputError, match=rf"^{re.escape(str(path))}: line 4: .*truncated"):
        load_trace(path)


def test_calibrate_on_a_cut_trace_exits_2_with_one_line(tmp_path):
    path = _cut(tmp_path, ",".join(_last_line(tmp_path).split(",")[:9]))
    proc = subprocess.run(
        [sys.executable, "-m", "costmodel.cli", "calibrate", str(path), "--out", str(tmp_path / "chip.toml")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    err = proc.stderr.strip()
    assert proc.returncode == 2, err
    assert "Traceback" not in err and len(err.splitlines()) == 1
    assert f"{path}: line 4" in err and "column 'bytes'" in err
    assert not (tmp_path / "chip.toml").exists()
