"""A chip's `prefill_efficiency`: the share of its compute efficiency that a pass of
prompts alone reaches (`ChipInfo.prefill_efficiency`, `costmodel.serving.prompt_seconds`)."""

from __future__ import annotations

import dataclasses
import importlib.util
from pathlib import Path

import numpy as np
import pytest
import tomllib

from costmodel.io import InputError, chip_info
from costmodel.io.chips import chip_from_table, chip_presets
from costmodel.serving import prompt_seconds, serve


ROOT = Path(__file__).resolve().parents[1]


def _prefill(info, prompt, batches=(1.0,), tp=1):
    return prompt_seconds(
        "llama-3-8b", info, prompt_tokens=prompt, batches=np.asarray(batches), tensor_parallel=tp, weights="bf16"
    )


def test_absent_it_is_one_and_one_leaves_the_prefill_as_it_was():
    """A chip file without the field reads as 1, and at 1 a prefill is priced on the
    chip as it is (the compute efficiency unchanged): today's figures."""
    a100 = chip_info("a100-80gb-sxm")
    assert "prefill_efficiency" not in chip_presets()["a100-80gb-sxm"] and a100.prefill_efficiency == 1.0
    assert a100.prefill_chip() == a100.chip
    h100 = chip_info("h100-sxm")
    one = dataclasses.replace(h100, prefill_efficiency=1.0)
    plain = dataclasses.replace(h100, chip=h100.chip, prefill_efficiency=1.0)
    assert one.prefill_chip() == h100.chip
    np.testing.assert_array_equal(_prefill(one, 4096.0), _prefill(plain, 4096.0))


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


@pytest.mark.parametrize("bad", [0.0, -0.1, 1.5, "x"])
def test_a_bad_value_names_the_file_and_field(bad):
    table = dict(chip_presets()["h100-sxm"], prefill_efficiency=bad)
    with pytest.raises(InputError, match=r"chips.toml.*prefill_efficiency"):
        chip_from_table(table, "chips.toml: chips.h100-sxm", "h100-sxm")


def test_the_calibration_reproduces_the_h100_value():
    """`benchmarks/prefill_calibration.py`'s solve on H100's two rows gives the file's
    value (the median of measured / modelled TTFT is 1 there)."""
    spec = importlib.util.spec_from_file_location("prefill_calibration", ROOT / "benchmarks" / "prefill_calibration.py")
    assert spec is not None and spec.loader is not None
    cal = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(cal)
    import costmodel.validate_serving as vs

    by_id = {r.id: r for r in vs.load_serving_rows()}
    rows = [by_id[i] for i in cal.ROWS if by_id[i].chip == "h100-sxm"]
    assert len(rows) == 2 and all(r.status == "fit" for r in rows)
    value = tomllib.loads((ROOT / "data" / "chips.toml").read_text())["chips"]["h100-sxm"]["prefill_efficiency"]
    ratios = [cal.ratio(r, value) for r in rows]
    assert float(np.median(ratios)) == pytest.approx(1.0, abs=0.01)
