"""A chip's `prefill_efficiency`: the share of its compute efficiency that a pass of
prompts alone reaches (`ChipInfo.prefill_efficiency`, `costmodel.serving.prompt_seconds`)."""

from __future__ import annotations

import dataclasses
import tomllib
from pathlib import Path

import numpy as np
import pytest

from costmodel.io import InputError, chip_info
from costmodel.io.chips import chip_presets
from costmodel.serving import prompt_seconds, serve

from helpers import load_script


ROOT = Path(__file__).resolve().parents[1]


def _prefill(info, prompt, batches=(1.0,), tp=1):
    return prompt_seconds(
        "llama-3-8b", info, prompt_tokens=prompt, batches=np.asarray(batches), tensor_parallel=tp, weights="bf16"
    )


def test_absent_it_is_one_and_it_scales_only_the_compute_efficiency():
    """A chip file without the field reads as 1, and at 1 a prefill is priced on the chip
    as it is (today's figures); at e it is priced exactly as the chip with e times its
    compute efficiency (no other field moves)."""
    a100 = chip_info("a100-80gb-sxm")
    assert "prefill_efficiency" not in chip_presets()["a100-80gb-sxm"] and a100.prefill_efficiency == 1.0
    assert a100.prefill_chip() == a100.chip
    h100 = chip_info("h100-sxm")
    e = h100.prefill_efficiency
    at_e = _prefill(h100, 4096.0, batches=(1.0, 4.0))
    slower = dataclasses.replace(
        h100, chip=h100.chip.replace(compute_efficiency=h100.chip.compute_efficiency * e), prefill_efficiency=1.0
    )
    np.testing.assert_allclose(at_e, _prefill(slower, 4096.0, batches=(1.0, 4.0)), rtol=1e-6)
    assert not np.allclose(at_e, _prefill(dataclasses.replace(h100, prefill_efficiency=1.0), 4096.0, (1.0, 4.0)))


def test_a_lower_efficiency_slows_a_long_prompt_by_its_share_and_a_short_one_little():
    """A long prompt's prefill is compute-bound: its time scales nearly as 1 / the
    efficiency; a prompt of a few tokens is bound by its weight reads and barely moves.
    Less efficiency never shortens a prefill."""
    h100 = chip_info("h100-sxm")
    at = lambda e, p: float(_prefill(dataclasses.replace(h100, prefill_efficiency=e), p)[0])
    assert at(0.5, 8192.0) / at(1.0, 8192.0) == pytest.approx(2.0, rel=0.05)
    assert at(0.5, 4.0) / at(1.0, 4.0) < 1.05
    times = [at(e, 2048.0) for e in (1.0, 0.8, 0.6, 0.4, 0.2)]
    assert all(b >= a for a, b in zip(times, times[1:]))


def test_the_presets_that_set_it_price_their_prefill_slower():
    for name in ("h100-sxm", "h200-sxm", "mi300x"):
        info = chip_info(name)
        assert 0.0 < info.prefill_efficiency < 1.0
        ones = dataclasses.replace(info, prefill_efficiency=1.0)
        assert _prefill(info, 4096.0, tp=2)[0] > _prefill(ones, 4096.0, tp=2)[0]


def test_disaggregated_prefill_pools_use_it():
    """The prefill pool of disaggregated serving runs prompts alone: its TTFT grows as the
    chip's prefill efficiency falls; the decode steps do not move."""
    from costmodel.io import economics_preset

    h100 = chip_info("h100-sxm")
    run = lambda e: serve(
        "llama-3-8b",
        dataclasses.replace(h100, prefill_efficiency=e),
        economics_preset(),
        chips=1,
        batches=np.array([8.0]),
        prompt_tokens=4096.0,
        output_tokens=256.0,
        prefill_chips=1,
    ).points[0]
    fast, slow = run(1.0), run(0.5)
    assert slow.ttft > fast.ttft and slow.tpot == pytest.approx(fast.tpot, rel=1e-9)


@pytest.mark.parametrize("bad", ["0.0", "-0.1", "1.5", '"x"'])
def test_a_bad_value_in_a_chip_file_names_the_file_field_and_value(tmp_path, bad):
    text = (ROOT / "data" / "chips.toml").read_text()
    table = tomllib.loads(text)["chips"]["h100-sxm"]
    import tomli_w

    path = tmp_path / "mychip.toml"
    path.write_text(tomli_w.dumps({**table, "prefill_efficiency": tomllib.loads(f"v = {bad}")["v"]}))
    with pytest.raises(InputError, match=r"mychip.toml.*'prefill_efficiency' = .*expected"):
        chip_info(str(path))


def test_a_serving_row_keeps_its_chips_value_and_a_burst_of_one_moves_with_it():
    """Through a row's framework profile (`validate_serving._row_chip`) the chip keeps its
    prefill efficiency, and a burst of one long prompt is slower at the chip's value
    than at 1 (its throughput counts the prefill)."""
    import costmodel.validate_serving as vs

    rows = {r.id: r for r in vs.load_serving_rows()}
    row = rows["dstack-mi300x8-tp8-tgi-llama31-405b-bf16-in16000-single"]
    assert row.arrival == "burst" and vs._row_chip(row).prefill_efficiency == chip_info("mi300x").prefill_efficiency
    at_value = vs.evaluate_serving_row(row)
    original = vs._row_chip
    try:
        vs._row_chip = lambda r, *a, **k: dataclasses.replace(original(r, *a, **k), prefill_efficiency=1.0)
        at_one = vs.evaluate_serving_row(row)
    finally:
        vs._row_chip = original
    # The prompt pass's compute takes 1 / efficiency as long (2.4x at the MI300X's 0.41);
    # its all-reduces and the host's time do not, so the TTFT grows by less than that.
    efficiency = chip_info("mi300x").prefill_efficiency
    assert 1.5 * at_one.ttft_ms < at_value.ttft_ms < at_one.ttft_ms / efficiency
    assert at_value.output_tokens_per_second < at_one.output_tokens_per_second


def test_the_calibration_reproduces_the_files_values():
    """`benchmarks/prefill_calibration.py`'s solve: at the file's value the median of
    measured / modelled TTFT is 1 on H100's rows and on MI300X's; h200-sxm is h100-sxm's."""
    cal = load_script(ROOT / "benchmarks" / "prefill_calibration.py")
    import costmodel.validate_serving as vs

    by_id = {r.id: r for r in vs.load_serving_rows()}
    chips = tomllib.loads((ROOT / "data" / "chips.toml").read_text())["chips"]
    assert chips["h200-sxm"]["prefill_efficiency"] == chips["h100-sxm"]["prefill_efficiency"]
    for name, count in (("h100-sxm", 2), ("mi300x", 6)):
        rows = [by_id[i] for i in cal.ROWS if by_id[i].chip == name]
        assert len(rows) == count
        ratios = [cal.ratio(r, chips[name]["prefill_efficiency"]) for r in rows]
        assert float(np.median(ratios)) == pytest.approx(1.0, abs=0.01)
