"""Validation against published measurements: the table, the profiles, the figures."""

import dataclasses
import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import costmodel as cm
import costmodel.validate as v
from costmodel import io
from costmodel.cli import main


@pytest.fixture(scope="module")
def rows():
    return v.load_rows()


@pytest.fixture(scope="module")
def results(rows):
    return v.evaluate_rows(rows)


def test_every_measurement_row_has_a_source_and_conditions(rows):
    assert len(rows) >= 50
    for r in rows:
        assert len(r.source) > 20, r.id
        assert len(r.conditions) > 20, r.id
        assert r.status != "reference" or len(r.reason) > 20, r.id
    for group in v.GROUPS:
        assert sum(r.group == group and r.status == "test" for r in rows) >= 5, group


def test_every_chip_preset_and_tier_has_a_source():
    for name, t in io.chip_presets().items():
        assert len(t.get("source", "")) > 20, name
        for tier in ("sram", "pim", "dram"):
            if tier in t:
                assert len(t[tier].get("source", "")) > 10, f"{name}.{tier}"
        for field, text in t.get("sources", {}).items():
            assert isinstance(text, str) and text, f"{name}.sources.{field}"


def test_fitted_and_scored_rows_are_disjoint(rows):
    by_id = {r.id: r for r in rows}
    serving = v.serving_row_ids()
    frameworks = v.load_frameworks()
    fitted = set()
    for f in frameworks.values():
        assert f.source
        if v.fitted_on_serving_rows(f, by_id):
            continue  # fitted on serving rows (tests/test_host_time.py, tests/test_validate_serving.py)
        for i in f.fitted_on:
            if i in serving and i not in by_id:
                continue  # a serving row behind the profile's host time (tests/test_host_time.py)
            assert i in by_id, (f.name, i)
            assert by_id[i].status == "fit", i
            # a profile is fitted on its own rows only
            assert v.resolve_framework(by_id[i].framework, by_id[i].chip, frameworks).name == f.name
        fitted |= set(f.fitted_on)
    # Rows that fitted an assumed chip number are named in that chip's source text.
    chips_text = (io.data_dir() / "chips.toml").read_text()
    for r in rows:
        if r.status == "fit":
            assert r.id in fitted or f"measurement row {r.id}" in chips_text, r.id
    scored = {r.id for r in rows if r.status == "test"}
    assert not fitted & scored


@pytest.mark.slow
def test_held_out_errors_meet_the_targets(results):
    s = v.summarize(results)
    assert s["median_ape"]["apple"] <= 0.15
    assert s["max_factor"]["sram"] <= 2.0
    # fitted rows are reported apart and fit well
    for group in v.GROUPS:
        assert s["fit"][group]["n"] >= 1
        assert s["fit"][group]["median_ape"] < 0.05


def test_gpu_groups_meet_their_targets(results):
    """`TARGETS` (15 % batch-1 GPU, 25 % large batch; issue 16 asks for 8 % and 15 %: the large batch's not met)."""
    s = v.summarize(results)
    assert s["median_ape"]["batch1-gpu"] <= v.TARGETS["batch1-gpu"]
    assert s["median_ape"]["large-batch"] <= v.TARGETS["large-batch"]


def test_reported_figures_are_the_shipped_ones(results):
    """Golden numbers quoted in README and BENCHMARKS.md (update both if they move)."""
    s = v.summarize(results)
    assert s["median_ape"]["batch1-gpu"] == pytest.approx(0.077, abs=0.002)
    assert s["median_ape"]["apple"] == pytest.approx(0.025, abs=0.002)
    assert s["median_ape"]["large-batch"] == pytest.approx(0.111, abs=0.002)
    assert s["n_test"] == {"batch1-gpu": 54, "apple": 9, "large-batch": 111, "sram": 5}
    assert s["max_factor"]["sram"] == pytest.approx(1.66, abs=0.01)
    # with the prompt pass's efficiency of the H100 (H200) and MI300X behind static batches
    # (and vLLM 0.6's offline host times, two numbers on two rows, since the fifteenth session)
    fitted = {"batch1-gpu": (12, 17), "apple": (2, 2), "large-batch": (11, 20), "sram": (2, 2)}
    assert {g: (f["parameters"], f["rows"]) for g, f in s["fitted"].items()} == fitted
    # the second blind check's ten H200 rows, apart (9.1 % until the twenty-first session's
    # K/V stream and prompt-pass refit, 10.4 % then, 10.0 % since the twenty-second session's
    # prompt-pass recalibration, 10.8 % since the twenty-third session's small-message
    # all-reduce protocol and its refits)
    second = s["blind"]["large-batch"]["2026-12-04, second check"]
    assert set(s["blind"]) == {"large-batch", "batch1-gpu"} and second["n"] == 10
    assert second["median_ape"] == pytest.approx(0.108, abs=0.002)
    # the tenth check's 19 rows: 27.0 % their one blind score, at a05f78d; 21.4 % since the
    # L40S's all-reduce took a published NCCL measurement (2026-12-07, not blind); 23.7 % since
    # the attention kernels' K/V streams at the tier's rate (twenty-first session, not blind);
    # 23.5 % since the twenty-second session's all-reduce in a static batch's prefill and its
    # refits; 24.4 % since the twenty-third session's small-message all-reduce protocol
    tenth = s["blind"]["large-batch"]["2026-12-06, tenth check"]
    assert tenth["n"] == 19 and tenth["median_ape"] == pytest.approx(0.244, abs=0.002)
    # the eleventh check's 21 new large-batch rows (7 more were serving rows already, now
    # reference rows) and 2 batch-1 rows: 27.3 % their one blind score (f5ac143); 20.9 % with
    # QServe's nine rows under the qserve profile (thirteenth session); 19 rows, 13.6 %, since
    # two of its vLLM rows fitted the offline engine's host times (fifteenth session); 12.2 %
    # since the twenty-first session's K/V stream, NVLink all-reduce and their refit; 10.7 %
    # since the twenty-second session's all-reduce in a static batch's prefill and its refits
    eleventh = "2026-12-06, eleventh check"
    assert s["blind"]["large-batch"][eleventh]["n"] == 19 and s["blind"]["batch1-gpu"][eleventh]["n"] == 2
    assert s["blind"]["large-batch"][eleventh]["median_ape"] == pytest.approx(0.107, abs=0.002)
    # the twelfth check's 19 vLLM 0.6 offline rows (Argonne): 14.2 % their one blind score;
    # 8.2 % with the offline engine's host times fitted after it (not blind), 6.6 % since the
    # K/V stream, the NVLink all-reduce and the refit of the twenty-first session; 5.8 % since
    # the twenty-second session's all-reduce in a static batch's prefill; 5.4 % since the
    # twenty-third session's small-message all-reduce protocol and its refits
    twelfth = s["blind"]["large-batch"]["2026-12-06, twelfth check"]
    assert twelfth["n"] == 19 and twelfth["median_ape"] == pytest.approx(0.054, abs=0.002)
    # the thirteenth check's 26 vLLM 0.6 rows (Argonne, Llama 3 8B with FP8 and 16-bit KV caches,
    # H100 and A100 40GB): their one blind score (10.2 % large batch), with the FP8 attention
    # fallback of the sixteenth session; 9.2 % since the twenty-first session's changes
    thirteenth = "2026-12-06, thirteenth check"
    assert s["blind"]["large-batch"][thirteenth]["n"] == 21 and s["blind"]["batch1-gpu"][thirteenth]["n"] == 5
    assert s["blind"]["large-batch"][thirteenth]["median_ape"] == pytest.approx(0.092, abs=0.002)
    assert s["blind"]["batch1-gpu"][thirteenth]["median_ape"] == pytest.approx(0.105, abs=0.002)


@pytest.mark.slow
def test_every_scored_row_is_feasible_and_finite(rows):
    for r in rows:
        if r.status == "reference":
            continue
        prepared, _ = v.prepare(r)
        cost = cm.decode_cost(prepared.workload, prepared.chip, prepared.placement)
        assert bool(cost.feasible), r.id
        assert np.isfinite(float(cost.seconds_per_step)), r.id


@pytest.mark.slow
def test_refit_reproduces_the_shipped_profiles(rows):
    frameworks = v.load_frameworks()
    fitted = v.fit_all(rows, frameworks)
    for name, m in fitted.items():
        np.testing.assert_allclose(m, frameworks[name].multipliers, rtol=0.02, err_msg=name)
    # Without `fixed`, the fields not fitted are neutral (a profile's own values are kept
    # only because fit_all passes them).
    f = frameworks["gpt-fast"]
    by_id = {r.id: r for r in rows}
    m = v.fit_framework([by_id[i] for i in f.fitted_on], f.fit, steps=5)
    for key, value, neutral in zip(v.PROFILE_FIELDS, m, v.NEUTRAL_PROFILE):
        if key not in f.fit:
            assert value == pytest.approx(neutral, rel=1e-6), key


def test_fitted_numbers_behind_a_group_are_counted(rows):
    """Beside each group's figure: the fitted numbers its held-out predictions use and the
    rows they were fitted on (issue 16)."""
    from costmodel.io.frameworks import load_frameworks

    frameworks = load_frameworks()
    by_id = {r.id: r for r in rows}

    def behind(*pairs):
        return v.fitted_behind([v.Result(by_id[i], name, 1, 1, 1.0) for i, name in pairs], frameworks)

    # gpt-fast: bytes in flight, kernel overhead and all-reduce latency, on its three fit rows
    assert behind(("gptfast-a100-llama2-7b-bf16-tp2", "gpt-fast")) == {"parameters": 3, "rows": 3}
    # twice the same profile counts once
    twice = (("gptfast-a100-llama2-7b-bf16-tp2", "gpt-fast"), ("gptfast-a100-llama2-7b-bf16-tp4", "gpt-fast"))
    assert behind(*twice) == {"parameters": 3, "rows": 3}
    # the ROCm variant's bytes in flight (one row), three of the four host times it carries from
    # vllm-0.6 (the step time, fitted on two serving rows, and the offline and tensor-parallel ones,
    # on two decode rows: this row runs offline, so the served per-sequence time is not used) and,
    # behind the static batch's prefill, the MI300X's prompt pass efficiency (six rows)
    assert behind(("vllm-mi300x-tp8-llama31-405b-fp8-bs32-128-128", "vllm-0.6-rocm")) == {"parameters": 5, "rows": 11}
    # an offline row of vllm-0.6 does not use its served per-sequence time; an online one does
    offline = ("b11-argonne-h100-vllm-llama3-8b-fp16-tp1-b64-2048-2048", "vllm-0.6")
    assert behind(offline) == {"parameters": 5, "rows": 7}
    assert behind(offline, ("gptfast-a100-llama2-7b-bf16-tp2", "vllm-0.6")) == {"parameters": 6, "rows": 7}
    # llama.cpp's Metal variant fits its own two numbers and carries none of llama.cpp's
    assert behind(("llamacpp-m2max-llama2-7b-q8_0", "llama.cpp-metal")) == {"parameters": 2, "rows": 2}
    # vllm-0.6 (four host times) carries vllm's bytes in flight; with its ROCm variant the host times count once
    both = (
        ("vllm-mi300x-tp8-llama31-405b-fp8-bs32-128-128", "vllm-0.6-rocm"),
        ("gptfast-a100-llama2-7b-bf16-tp2", "vllm-0.6"),
    )
    assert behind(*both) == {"parameters": 7, "rows": 12}
    # an SRAM machine's fitted per-layer latency and its row; the native profile fits nothing
    assert behind(("groq-llama2-7b", "native")) == {"parameters": 1, "rows": 1}
    assert behind(("cerebras-llama31-8b", "native"), ("groq-llama2-7b", "native")) == {"parameters": 2, "rows": 2}


def test_a_carried_value_must_match_its_source(tmp_path):
    """A profile that carries another's fitted value (`carried`) is checked against it, so
    a refit of the source that is not copied over fails to load, naming both values."""
    from costmodel.io import InputError
    from costmodel.io.frameworks import frameworks_path, load_frameworks

    text = frameworks_path().read_text()
    # vllm-0.6 and the profiles that carry it (its ROCm variant, tgi, tgi-rocm, vllm-0.5, vllm-v1-rocm)
    assert text.count("host_step_us = 2535.7") == 6
    bad = tmp_path / "frameworks.toml"
    i = text.index("host_step_us = 2535.7", text.index('[frameworks."vllm-0.6-rocm"]'))
    bad.write_text(text[:i] + "host_step_us = 2600.0" + text[i + len("host_step_us = 2535.7") :])
    with pytest.raises(InputError, match=r"vllm-0.6-rocm.*'carried'.*host_step_us.*2600.*2535.7"):
        load_frameworks(bad)
    unknown = tmp_path / "unknown.toml"
    unknown.write_text(
        text.replace('carried = { bytes_in_flight_KB = "vllm" }', 'carried = { bytes_in_flight_KB = "sglang" }')
    )
    with pytest.raises(InputError, match=r"vllm-0.6.*'carried'.*bytes_in_flight_KB = 'sglang'"):
        load_frameworks(unknown)


def test_validate_with_a_profile_file_of_its_own(tmp_path, capsys, rows):
    """`--frameworks FILE` with a profile the shipped file lacks: its rows are predicted and
    the fitted numbers behind each group are counted from that file."""
    from costmodel.io.frameworks import frameworks_path
    from costmodel.io.measurements import measurements_path

    frameworks = tmp_path / "frameworks.toml"
    extra = "\n[frameworks.trtx]\nmemory_efficiency = 1.0\ncompute_efficiency = 0.5\nkernel_overhead = 1.0\n"
    extra += 'link_latency = 1.0\nfit = ["compute_efficiency"]\nfitted_on = ["x", "y"]\nsource = "test"\n'
    frameworks.write_text(frameworks_path().read_text() + extra)
    table = tmp_path / "rows.toml"
    text = measurements_path().read_text()
    start = text.index('[[rows]]\nid = "trtllm-h100-llama-7b-fp8-bs112-128-2048"')
    row = text[start : text.index("[[rows]]", start + 8)].replace('framework = "trt-llm"', 'framework = "trtx"')
    table.write_text(row)
    assert main(["validate", "--table", str(table), "--frameworks", str(frameworks), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["rows"][0]["framework"] == "trtx"
    # its compute efficiency, and the H100's prompt pass efficiency (a static batch's prefill)
    assert out["fitted"]["large-batch"] == {"parameters": 2, "rows": 4}


def test_serial_latency_fits_are_the_chips_marked_fitted():
    """`SERIAL_LATENCY_FITS` names exactly the chip presets whose kernel overhead the chip
    file says was fitted to a measurement row, and that row."""
    import tomllib

    from costmodel.io.files import data_dir

    chips = tomllib.loads((data_dir() / "chips.toml").read_text())["chips"]
    marked = {
        name: c["sources"]["kernel_overhead_us"]
        for name, c in chips.items()
        if "FITTED" in c.get("sources", {}).get("kernel_overhead_us", "")
    }
    assert set(marked) == set(v.SERIAL_LATENCY_FITS)
    for chip, (row, field) in v.SERIAL_LATENCY_FITS.items():
        assert field == "kernel_overhead" and row in marked[chip]


def test_prompt_pass_fits_are_the_calibrated_chips_and_rows():
    """`PROMPT_PASS_FITS` names exactly the chip presets with a `prefill_efficiency` below 1,
    each with the rows of its own chip that `benchmarks/prefill_calibration.py` calibrates
    it on (it takes them from there)."""
    from pathlib import Path

    from costmodel.io import chip_info, chip_presets
    from costmodel.validate_serving import load_serving_rows

    from helpers import load_script

    calibrated = {name for name in chip_presets() if chip_info(name).prefill_efficiency != 1.0}
    assert calibrated == set(v.PROMPT_PASS_FITS)
    script = load_script(Path(__file__).parents[1] / "benchmarks" / "prefill_calibration.py")
    serving = {r.id: r for r in load_serving_rows()}
    for chip, (owner, fitted_on) in v.PROMPT_PASS_FITS.items():
        assert chip_info(chip).prefill_efficiency == chip_info(owner).prefill_efficiency
        assert {serving[i].chip for i in fitted_on} == {owner}
    assert len(script.ROWS) == 8
    # the stored efficiencies reproduce: the median of measured / modelled TTFT is 1 at them
    for chip, (owner, fitted_on) in v.PROMPT_PASS_FITS.items():
        if chip != owner:
            continue
        rows = [serving[i] for i in fitted_on]
        ratios = sorted(script.ratio(r, chip_info(chip).prefill_efficiency) for r in rows)
        median = (ratios[(len(ratios) - 1) // 2] + ratios[len(ratios) // 2]) / 2
        assert median == pytest.approx(1.0, abs=0.01), chip


def test_a_static_batch_prefills_at_the_prompt_pass_efficiency(rows):
    """A static batch's prefill takes 1 / `prefill_efficiency` as long with the chip's prompt
    pass efficiency as without (0.756 on the H100); a chip without one (the A100) is
    unchanged; a per-sequence row has no prefill to change."""
    import equinox as eqx

    by_id = {r.id: r for r in rows}
    neutral = jnp.log(jnp.asarray(v.NEUTRAL_PROFILE))

    def predicted(row_id, on, prefill_only):
        prepared = v.prepare(by_id[row_id], prompt_pass_efficiency=on)[0]
        if prefill_only:
            prepared = eqx.tree_at(lambda p: p.steps, prepared, jnp.asarray(0.0))
        return float(v.predict(prepared, neutral))

    for row_id, factor in (
        ("trtllm-h100-llama-7b-fp8-bs80-2048-128", 1 / 0.756),
        ("trtllm-a100-llama-7b-fp16-bs52-2048-128", 1.0),
    ):
        ratio = predicted(row_id, False, True) / predicted(row_id, True, True)
        assert ratio == pytest.approx(factor, rel=2e-3), row_id
    one = "vllm-h100sxm-llama31-8b-bf16-c1"
    assert predicted(one, True, False) == predicted(one, False, False)


def test_fitted_sram_latencies_reproduce_the_presets(rows):
    by_id = {r.id: r for r in rows}
    groq = v.fit_serial_latency(by_id[v.SERIAL_LATENCY_FITS["groq-lpu"][0]], "kernel_overhead")
    cerebras = v.fit_serial_latency(by_id[v.SERIAL_LATENCY_FITS["cerebras-wse3"][0]], "kernel_overhead")
    assert float(cm.chip_preset("groq-lpu").kernel_overhead) == pytest.approx(groq, rel=0.01)
    assert float(cm.chip_preset("cerebras-wse3").kernel_overhead) == pytest.approx(cerebras, rel=0.01)


@pytest.mark.slow
def test_apply_multipliers_identity_caps_and_gradients():
    chip = cm.chip_preset("a100-80gb-sxm")
    neutral = jnp.log(jnp.asarray(v.NEUTRAL_PROFILE))
    same = v.apply_multipliers(chip, neutral).replace(bytes_in_flight=chip.bytes_in_flight)
    assert jax.tree.all(jax.tree.map(lambda a, b: bool(jnp.allclose(a, b)), same, chip))
    up = v.apply_multipliers(chip, jnp.log(jnp.asarray([2.0, 2.0, 3.0, 0.5, 4.0, 64.0])))
    assert float(up.half_rate_rows) == pytest.approx(64.0)  # the profile's replaces the chip's own
    with pytest.raises(ValueError, match="expected \\(6,\\)"):  # an old five-entry vector is not misread
        v.apply_multipliers(chip, jnp.zeros(5))
    own = chip.replace(half_rate_rows=7.0)
    assert float(v.apply_multipliers(own, neutral).half_rate_rows) == pytest.approx(7.0)  # none given: the chip's
    assert float(jnp.max(up.tiers.efficiency)) == 1.0
    assert float(up.compute_efficiency) == 1.0
    assert float(up.kernel_overhead) == pytest.approx(3 * float(chip.kernel_overhead))
    assert float(up.link_latency) == pytest.approx(0.5 * float(chip.link_latency))
    prepared, _ = v.prepare(v.load_rows()[0])
    g = jax.grad(lambda m: jnp.log(v.predict(prepared, m)))(neutral.at[4].set(jnp.log(4.0)))
    assert np.all(np.isfinite(np.asarray(g)))
    assert float(g[0]) > 0  # more bandwidth, more tokens/s
    assert float(g[2]) < 0  # more per-layer overhead, fewer
    assert float(g[4]) > 0  # more bytes in flight (an A100 has SMs), more


@pytest.mark.slow
def test_half_rate_rows_of_a_profile(x64):
    """A profile's half-rate rows (Hockney's n-half of its GEMMs): a batch-1 step is
    unchanged, a large batch's compute-bound step and a prefill slow down as
    b / (b + n(1 - 1/b)), more n never speeds anything, and the gradient through it
    matches finite differences."""
    from costmodel._core.traffic import lower_traffic

    rows = {r.id: r for r in v.load_rows()}
    prepared, _ = v.prepare(rows["trtllm-h100-llama-7b-fp8-bs80-2048-128"])
    neutral = jnp.log(jnp.asarray(v.NEUTRAL_PROFILE, dtype=float))
    with_n = lambda n: neutral.at[5].set(jnp.log(n))
    # Prefill of 80 x 2048 tokens: every weight class at the factor of that many rows.
    chip = prepared.chip
    t = lower_traffic(prepared.prefill, buckets=False)
    rate = chip.peak_flops[t.precision.astype(jnp.int32)] * chip.compute_efficiency
    rows_w = 80 * 2048
    factor = rows_w / (rows_w + 512 * (1 - 1 / rows_w))
    weights = ~np.asarray(cm.CLASS_IS_KV)
    expected = float(jnp.sum(jnp.where(weights, t.flops / (rate * factor), t.flops / rate))) / float(
        chip.tensor_parallel
    )
    slow = v.apply_multipliers(chip, with_n(512.0))
    assert float(v.prefill_seconds(prepared.prefill, slow)) == pytest.approx(expected, rel=1e-9)
    # Monotone: more n-half, never more tokens/s.
    values = [float(v.predict(prepared, with_n(n))) for n in (1e-3, 16.0, 128.0, 1024.0)]
    assert all(a >= b for a, b in zip(values, values[1:])) and values[0] > values[-1]
    # Batch 1: a GEMV, untouched.
    one, _ = v.prepare(rows["gptfast-a100-llama2-7b-bf16-tp1"])
    assert float(v.predict(one, with_n(1024.0))) == pytest.approx(float(v.predict(one, neutral)), rel=1e-12)
    # Finite differences of the log rate in log n-half.
    f = lambda x: jnp.log(v.predict(prepared, neutral.at[5].set(x)))
    x0 = jnp.log(128.0)
    g = float(jax.grad(f)(x0))
    fd = (float(f(x0 + 1e-6)) - float(f(x0 - 1e-6))) / 2e-6
    assert g < 0 and g == pytest.approx(fd, rel=1e-5)
    # The profile's n-half is its GEMMs': decode attention keeps the chip's own (0 here).
    slowed = v.apply_multipliers(prepared.chip, with_n(512.0))
    assert float(slowed.half_rate_rows) == pytest.approx(512.0) and float(slowed.attention_half_rate_rows) == 0.0
    rates = cm.class_flop_rates(prepared.workload, lower_traffic(prepared.workload, buckets=False), slowed)
    full = cm.class_flop_rates(prepared.workload, lower_traffic(prepared.workload, buckets=False), prepared.chip)
    kv = np.asarray(cm.CLASS_IS_KV)
    np.testing.assert_allclose(np.asarray(rates)[kv], np.asarray(full)[kv], rtol=1e-12)
    assert np.all(np.asarray(rates)[~kv] <= np.asarray(full)[~kv])


def test_evaluate_with_a_framework():
    base = cm.evaluate("llama-3-8b", "a100-80gb-sxm", context=512)
    slow = cm.evaluate("llama-3-8b", "a100-80gb-sxm", context=512, framework="llama.cpp")
    fast = cm.evaluate("llama-3-8b", "a100-80gb-sxm", context=512, framework="gpt-fast")
    assert float(slow.cost.tokens_per_second) < float(fast.cost.tokens_per_second) < float(base.cost.tokens_per_second)
    metal = cm.evaluate("llama-2-7b", "m2-max-30c", context=64, weights="f16", framework="llama.cpp")
    assert "llama.cpp-metal" in metal.info.label
    with pytest.raises(cm.InputError, match="framework 'nope'"):
        cm.evaluate("llama-3-8b", "h100-sxm", framework="nope")
    with pytest.raises(cm.InputError, match="framework 'llama.cpp-metal'"):
        cm.evaluate("llama-3-8b", "h100-sxm", framework="llama.cpp-metal")  # variants are chosen, not named


def test_explicit_layout_and_its_errors():
    e = cm.evaluate("llama-3-70b", "a100-80gb-sxm", weights="f16", tensor_parallel=1, pipeline_parallel=4)
    assert (e.tensor_parallel, e.pipeline_parallel) == (1, 4)
    with pytest.raises(cm.InputError, match="both or neither"):
        cm.evaluate("llama-3-8b", "h100-sxm", tensor_parallel=2)


def test_sram_machines_are_sized_as_layer_pipelines():
    big = cm.evaluate("llama-2-70b", "groq-lpu", weights="int8", context=4096)
    small = cm.evaluate("llama-2-7b", "groq-lpu", weights="int8", context=2048)
    assert 250 <= big.tensor_parallel * big.pipeline_parallel <= 600  # hundreds of chips for 70B
    assert big.pipeline_parallel >= 40
    # per-user rate set by per-layer latency: no longer ~10k tok/s for a 7B model
    assert 400 < float(small.cost.tokens_per_second_per_sequence) < 1500
    assert cm.BOUNDS[int(small.cost.bound)] == "latency"
    # GPUs are unchanged: tensor parallel first
    gpu = cm.evaluate("llama-2-70b", "h100-sxm")
    assert (gpu.tensor_parallel, gpu.pipeline_parallel) == (2, 1)


def test_bad_measurement_rows_name_the_field(tmp_path):
    good = (io.data_dir() / "measurements" / "measurements.toml").read_text()
    first = good.index("\n[[rows]]\n")
    second = good.index("\n[[rows]]\n", first + 1)
    one = good[first:second]
    bad = tmp_path / "m.toml"
    assert '\nsource = "' in one
    bad.write_text(one.replace('\nsource = "', '\nsauce = "', 1))
    with pytest.raises(cm.InputError, match="sauce"):
        v.load_rows(bad)
    bad.write_text(one.replace('status = "fit"', 'status = "maybe"'))
    with pytest.raises(cm.InputError, match="status"):
        v.load_rows(bad)
    bad.write_text(one.replace('chip = "a100-80gb-sxm"\n', ""))
    with pytest.raises(cm.InputError, match="chip"):
        v.load_rows(bad)
    bad.write_text(one.replace("value = 104.9", "value = -1"))
    with pytest.raises(cm.InputError, match="value"):
        v.load_rows(bad)


@pytest.mark.slow
def test_cli_validate_json_and_plot(tmp_path, capsys):
    png = tmp_path / "parity.png"
    # --check exits 0: every group meets its target (test_gpu_groups_meet_their_targets);
    # the JSON and the plot are written either way.
    assert main(["validate", "--json", "--plot", str(png), "--check"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert set(v.GROUPS) <= set(data["median_ape"]) and set(v.GROUPS) <= set(data["p90_ape"])
    assert len(data["rows"]) == len(v.load_rows())
    row = data["rows"][0]
    for key in ("id", "measured", "predicted", "error", "ape", "source", "status"):
        assert key in row
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # each blind check apart, in the JSON and in the table's footer
    assert set(data["blind"]["large-batch"]) == {
        "2026-12-04, second check",
        "2026-12-06, tenth check",
        "2026-12-06, eleventh check",
        "2026-12-06, twelfth check",
        "2026-12-06, thirteenth check",
    }
    assert main(["validate"]) == 0
    text = capsys.readouterr().out
    for check in data["blind"]["large-batch"]:
        assert f"blind check '{check}'" in text


def test_cli_validate_bad_table_exits_2(tmp_path, capsys):
    bad = tmp_path / "m.toml"
    bad.write_text("[[rows]]\nid = 'x'\n")
    assert main(["validate", "--table", str(bad)]) == 2
    assert "rows[0]" in capsys.readouterr().err


def test_with_carried_hands_a_sources_value_on():
    """A refit of gpt-fast's link latency reaches the lmdeploy profiles that carry it, and
    lmdeploy-0.1's carried bytes in flight follow lmdeploy-0.2's; nothing else moves."""
    from costmodel.io.frameworks import PROFILE_FIELDS, with_carried

    frameworks = v.load_frameworks()
    assert with_carried(frameworks) == frameworks  # the shipped file is consistent
    link, kb = PROFILE_FIELDS.index("link_latency"), PROFILE_FIELDS.index("bytes_in_flight_KB")
    changed = dict(frameworks)
    m = list(frameworks["gpt-fast"].multipliers)
    m[link] = 1.5
    changed["gpt-fast"] = dataclasses.replace(frameworks["gpt-fast"], multipliers=tuple(m))
    m = list(frameworks["lmdeploy-0.2"].multipliers)
    m[kb] = 9.0
    changed["lmdeploy-0.2"] = dataclasses.replace(frameworks["lmdeploy-0.2"], multipliers=tuple(m))
    out = with_carried(changed)
    assert out["lmdeploy-0.1"].multipliers[link] == out["lmdeploy-0.2"].multipliers[link] == 1.5
    assert out["lmdeploy-0.1"].multipliers[kb] == 9.0
    assert {k for k in out if out[k] != changed[k]} == {"lmdeploy-0.1", "lmdeploy-0.2"}


def test_a_static_batchs_prefill_pays_its_all_reduces():
    """A static batch's prefill on more than one chip adds its all-reduces (the prompt
    tokens' activations, twice a layer, `allreduce_seconds`) to its compute-bound time, on
    the link's second line past its knee; on one chip it adds nothing."""
    from costmodel._core.channels import allreduce_seconds, class_flop_rates
    from costmodel._core.traffic import lower_traffic

    rows = {r.id: r for r in v.load_rows()}
    for row_id, tp in (
        ("trtllm-h100-tp2-llama-70b-fp8-bs96-2048-128", 2),
        ("trtllm-h100-llama-7b-fp8-bs80-2048-128", 1),
    ):
        prepared, _ = v.prepare(rows[row_id])
        chip, prefill = prepared.chip, prepared.prefill
        assert int(chip.tensor_parallel) == tp
        t = lower_traffic(prefill, buckets=False)
        compute = float(jnp.sum(t.flops / class_flop_rates(prefill, t, chip))) / tp
        links = float(allreduce_seconds(prefill, chip))
        assert float(v.prefill_seconds(prefill, chip)) == pytest.approx(compute + links, rel=1e-6)
        assert (links > 0) == (tp > 1)
    # Llama 2 70B at TP2, 96 x 2,048 prompt tokens of 8,192 16-bit activations: 3.2 GB a
    # message, twice in each of 80 layers, nearly all of it on the second line past the knee.
    prepared, _ = v.prepare(rows["trtllm-h100-tp2-llama-70b-fp8-bs96-2048-128"])
    h100 = io.chip_info("h100-sxm").chip
    message = 96 * 2048 * 8192 * 2
    knee, first, second = (float(x) for x in (h100.link_knee, h100.link_bandwidth, h100.link_bandwidth_large))
    ring = 2 * (2 - 1) / 2 * (knee / first + (message - knee) / second)
    closed = 2 * 80 * (float(h100.link_latency) + ring)
    assert float(allreduce_seconds(prepared.prefill, prepared.chip)) == pytest.approx(closed, rel=1e-5)
    assert 1.0 < closed < 1.3  # s: 160 all-reduces of 3.2 GB at ~450 GB/s
