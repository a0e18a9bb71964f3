"""A weight kernel that works on a 16-bit copy of the weights above a number of rows
(`Scenario.weight_copy_rows`): vLLM's own GPTQ kernel above 50 rows, its AWQ kernel from
256. The copy is written to DRAM and read back by a 16-bit GEMM, 2 + 2 B per element
streamed, and the GEMMs then run in 16 bits."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import costmodel as cm
from costmodel._core.chip import DRAM
from costmodel._core.traffic import N_WEIGHT_CLASSES
from costmodel._core.workload import BITS16, F32
from costmodel.io import InputError, load_frameworks, make_scenario

from helpers import bounded_chip


GPTQ_BYTES = 4.15625 / 8  # data/formats.toml: 4-bit weights, fp16 scale and 4-bit zero per group of 128


def _workload(batch, rows=50.0, precision=F32, weight_bytes=GPTQ_BYTES, ops=0.0, tile=0.0):
    """Llama 3 8B at 512 tokens of context, GPTQ-like weights: a copy above `rows`,
    `ops` instructions per weight unpacked once per `tile` rows."""
    scenario = cm.Scenario(
        batch=batch,
        context=512,
        weight_bytes=weight_bytes,
        weight_precision=precision,
        weight_copy_rows=rows,
        weight_dequant_ops=ops,
        weight_dequant_rows=tile,
    )
    return cm.Workload(cm.model_preset("llama-3-8b"), scenario)


def _cost(workload, chip=None):
    chip = bounded_chip(peak_flops=(20e12, 312e12, 624e12, 1248e12)) if chip is None else chip
    return cm.decode_cost(workload, chip, cm.policy_placement("dram", cm.lower_traffic(workload), chip))


def _matches_finite_differences(f, point, checked):
    """`jax.grad(f)` at `point` (float64), its first `checked` components asserted equal
    to central finite differences; returns the gradient."""
    x = jnp.asarray(point, dtype=jnp.float64)
    g = np.asarray(jax.grad(f)(x))
    for i in range(checked):
        h = 1e-6 * float(x[i])
        e = jnp.zeros(x.shape, dtype=jnp.float64).at[i].set(h)
        fd = (float(f(x + e)) - float(f(x - e))) / (2 * h)
        assert g[i] == pytest.approx(fd, rel=1e-5, abs=1e-20), (point, i)
    return g


def _weight_elements(workload):
    t = cm.lower_traffic(workload, buckets=False)
    read = t.read_bytes[:N_WEIGHT_CLASSES]
    return float(jnp.sum(read / workload.scenario.class_weight_bytes))


def test_copy_bytes_closed_form():
    """Above the rows, DRAM moves 4 B more per weight element streamed, and nothing else
    changes in what is stored or read; at the rows and below, nothing at all."""
    for batch, copies in ((8, False), (50, False), (51, True), (200, True)):
        w = _workload(batch)
        off = _cost(_workload(batch, rows=0.0))
        on = _cost(w)
        extra = float(on.tier_bytes[DRAM] - off.tier_bytes[DRAM])
        assert bool(cm.copies_weights(w)) == copies
        assert extra == pytest.approx(4.0 * _weight_elements(w) if copies else 0.0, rel=1e-5, abs=1.0), batch
        np.testing.assert_array_equal(np.asarray(on.stored_bytes), np.asarray(off.stored_bytes))


def test_no_copy_leaves_the_step_exactly_as_it_was():
    """`weight_copy_rows` 0, or a step at or below it, gives the cost of a scenario
    without the field, to the bit."""
    for batch in (1, 16, 50):
        base = cm.Workload(
            cm.model_preset("llama-3-8b"),
            cm.Scenario(batch=batch, context=512, weight_bytes=GPTQ_BYTES, weight_precision=F32),
        )
        for rows in (0.0, 50.0):
            a, b = _cost(base), _cost(_workload(batch, rows=rows))
            for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b)):
                np.testing.assert_array_equal(np.asarray(x), np.asarray(y))


def test_the_copy_runs_its_gemms_in_16_bits():
    below, above = cm.lower_traffic(_workload(50)), cm.lower_traffic(_workload(51))
    assert np.all(np.asarray(below.precision[:N_WEIGHT_CLASSES]) == F32)
    assert np.all(np.asarray(above.precision[:N_WEIGHT_CLASSES]) == BITS16)
    # The KV classes keep their own precision.
    np.testing.assert_array_equal(
        np.asarray(below.precision[N_WEIGHT_CLASSES:]), np.asarray(above.precision[N_WEIGHT_CLASSES:])
    )


def test_rows_count_prefilled_prompt_tokens():
    """A steady state's step runs its prefill chunks through the weights too: 8
    sequences with prompts 10 times their outputs make 88 rows, over 50."""
    scenario = cm.Scenario(batch=8, context=512, weight_bytes=GPTQ_BYTES, weight_copy_rows=50)
    model = cm.model_preset("llama-3-8b")
    alone = cm.Workload(model, scenario)
    mixed = cm.Workload(model, scenario, prefill=cm.Prefill(prompt_tokens=1000, output_tokens=100))
    assert float(cm.step_rows(alone)) == 8 and float(cm.step_rows(mixed)) == pytest.approx(88)
    assert not bool(cm.copies_weights(alone)) and bool(cm.copies_weights(mixed))


def test_a_copy_never_speeds_a_step_at_one_precision():
    """At one compute precision the copy only adds bytes: never faster, over batches
    on both sides of the threshold (vmapped, one compile)."""
    batches = jnp.arange(1.0, 300.0, 7.0)

    def seconds(rows):
        return jax.vmap(lambda b: _cost(_workload(b, rows=rows, precision=BITS16)).seconds_per_step)(batches)

    on, off = np.asarray(seconds(50.0)), np.asarray(seconds(0.0))
    assert np.all(on >= off * (1 - 1e-6))
    assert np.all(on[np.asarray(batches) > 50] > off[np.asarray(batches) > 50])


def test_jit_and_vmap_agree_with_single_points():
    batches = jnp.asarray([8.0, 50.0, 51.0, 120.0])
    f = jax.jit(lambda b: _cost(_workload(b)).seconds_per_step)
    vm = np.asarray(jax.vmap(f)(batches))
    one = np.asarray([float(_cost(_workload(float(b))).seconds_per_step) for b in batches])
    np.testing.assert_allclose(vm, one, rtol=1e-6)


def test_gradients_match_finite_differences_across_the_copy(x64):
    """Away from the switch the step is smooth in the batch and the bytes per weight;
    its derivative in the rows threshold is 0 (a kernel's constant, not a variable)."""
    chip = jax.tree.map(
        lambda x: jnp.asarray(x, jnp.float64), bounded_chip(peak_flops=(20e12, 312e12, 624e12, 1248e12))
    )

    def f(x):
        batch, weight_bytes, rows = x
        return _cost(_workload(batch, rows=rows, weight_bytes=weight_bytes), chip).seconds_per_step

    for batch in (20.0, 120.0):  # below, and above, the 50 rows
        g = _matches_finite_differences(f, [batch, GPTQ_BYTES, 50.0], checked=2)
        assert g[2] == 0.0 and np.all(np.isfinite(g))


def test_the_gptq_threshold_sits_near_where_the_two_paths_cost_alike():
    """vLLM's GPTQ kernel switches to the copy above 50 rows (exllamav2's threshold). On
    an H100 the model's two paths for Llama 3 8B (CUDA-core dot products over the 4-bit
    weights, unpacked again per 8 rows; or a 16-bit copy and a tensor-core GEMM) are
    within 2x of each other at 50 rows, and each is the cheaper one far from it: the
    direct path at 8 rows, the copy at 200."""
    chip = cm.chip_preset("h100-sxm")

    def seconds(batch, rows):
        return float(_cost(_workload(batch, rows=rows, ops=1.75, tile=8), chip).seconds_per_step)

    direct, copy = seconds(50, 0.0), seconds(50, 1.0)
    assert 0.5 < copy / direct < 2.0
    assert seconds(8, 0.0) * 3 < seconds(8, 1.0)
    assert seconds(200, 1.0) * 4 < seconds(200, 0.0)


def test_gptq_unpacks_on_the_lanes_its_matmuls_use():
    """Below its copy GPTQ multiplies on the FP32 lanes, which also unpack its weights:
    the unpacking adds to the step's compute (a tensor-core format's holds its loads'
    slots instead, and lengthens the step less). At 24 rows on an H100, 3 unpackings of
    1.75 slots beside 24 slots of multiply-adds: the step some 20 % longer."""
    chip = cm.chip_preset("h100-sxm")

    def seconds(ops, precision=F32):
        return float(_cost(_workload(24, rows=0.0, precision=precision, ops=ops, tile=8), chip).seconds_per_step)

    lanes = seconds(1.75) / seconds(0.0)
    assert 1.1 < lanes < 1.4
    assert 1.0 < seconds(1.75, BITS16) / seconds(0.0, BITS16) < lanes


# --- files ---------------------------------------------------------------------------


def test_vllm_profiles_copy_above_their_kernels_rows():
    frameworks = load_frameworks()
    for name in ("vllm-0.5", "vllm-0.6", "vllm-v1"):
        f = frameworks[name]
        assert f.copy("gptq") == 50 and f.copy("awq") == 255 and f.copy("int4") == 0 and f.copy("bf16") == 0
        assert f.dequant("gptq") == 1.75 and f.dequant("awq") == 2.75
    assert frameworks["gpt-fast"].copy("gptq") == 0


def test_evaluate_with_the_profile_copies_and_without_does_not():
    e = cm.evaluate("llama-3-8b", "h100-sxm", batch=64, context=512, weights="gptq", framework="vllm-0.6")
    assert float(e.workload.scenario.weight_copy_rows) == 50
    bare = cm.evaluate("llama-3-8b", "h100-sxm", batch=64, context=512, weights="gptq")
    assert float(bare.workload.scenario.weight_copy_rows) == 0
    # 4.2 GB of weights and 4 GB of K/V, and 32 GB of copy with the profile
    assert float(e.cost.tier_bytes[DRAM]) > 4 * float(bare.cost.tier_bytes[DRAM])


@pytest.mark.parametrize(
    "table, message",
    [
        ("{ gptq = 0 }", "a number of rows >= 1"),
        ("{ gptq = -5 }", "a number of rows >= 1"),
        ("{ nosuch = 50 }", "expected a format"),
        ("50", "expected a table of format = rows"),
    ],
)
def test_a_bad_copy_table_names_the_field(tmp_path, table, message):
    from costmodel.io.files import data_dir

    text = (data_dir() / "frameworks.toml").read_text()
    marker = "dequant_copy_rows = { gptq = 50, awq = 255 }"  # the first vLLM profile with both
    assert marker in text
    path = tmp_path / "frameworks.toml"
    path.write_text(text.replace(marker, f"dequant_copy_rows = {table}", 1))
    with pytest.raises(InputError, match="dequant_copy_rows") as err:
        load_frameworks(path)
    assert message in str(err.value)


def test_make_scenario_checks_the_rows():
    assert float(make_scenario(weights="gptq", copy_rows=50).weight_copy_rows) == 50
    with pytest.raises(InputError, match="copy_rows = -1"):
        make_scenario(weights="gptq", copy_rows=-1)
    with pytest.raises(InputError, match="dequant_rows = inf"):
        make_scenario(weights="gptq", dequant_rows=float("inf"))


def test_the_forced_kernel_rows_use_the_formats():
    """The serving rows whose runs forced vLLM's own GPTQ or AWQ kernels name them."""
    import tomllib

    from costmodel.io.files import data_dir

    rows = tomllib.loads((data_dir() / "measurements" / "serving.toml").read_text())["rows"]
    forced = {r["id"]: r["weights"] for r in rows if r["weights"] in ("gptq", "awq")}
    assert sum(w == "gptq" for w in forced.values()) >= 2 and sum(w == "awq" for w in forced.values()) >= 4
    frameworks = load_frameworks()
    for r in rows:
        if r["id"] in forced:  # an engine whose profile prices the kernel
            assert frameworks[r["framework"]].tile(r["weights"]) > 0, r["id"]


# --- unpacking per tile of rows ------------------------------------------------------


def test_unpack_passes_count_whole_tiles():
    def w(batch, tile, rows=0.0):
        scenario = cm.Scenario(batch=batch, weight_dequant_rows=tile, weight_copy_rows=rows)
        return cm.Workload(cm.model_preset("llama-3-8b"), scenario)

    assert [float(cm.unpack_passes(w(b, 8))) for b in (1, 8, 9, 50)] == [1.0, 1.0, 2.0, 7.0]
    assert float(cm.unpack_passes(w(50, 0))) == 1.0  # no tiling: once
    assert float(cm.unpack_passes(w(51, 8, rows=50))) == 1.0  # the copy's kernel unpacks once
    assert float(cm.unpack_passes(w(0.5, 8))) == 1.0  # a fraction of a sequence still unpacks once


def test_the_unpacking_repeats_per_tile_in_the_alu_time():
    """`dequant_seconds` is the one-pass time times `unpack_passes`, and a step's time
    never falls as its tiles (and so its ALU work) grow."""
    chip = bounded_chip(peak_flops=(20e12, 312e12, 624e12, 1248e12))

    def w(batch, tile):
        return _workload(batch, rows=0.0, precision=BITS16, ops=2.75, tile=tile)

    once = float(cm.dequant_seconds(1e9, w(40, 0), chip))
    assert float(cm.dequant_seconds(1e9, w(40, 16), chip)) == pytest.approx(3 * once, rel=1e-6)
    times = [float(_cost(w(40, tile), chip).seconds_per_step) for tile in (0.0, 40.0, 20.0, 16.0, 8.0, 1.0)]
    assert all(b >= a * (1 - 1e-6) for a, b in zip(times, times[1:]))
    assert times[-1] > times[0]


def test_vllm_profiles_unpack_per_tile():
    frameworks = load_frameworks()
    for name in ("vllm", "vllm-0.5", "vllm-0.6", "vllm-v1"):
        f = frameworks[name]
        assert f.tile("gptq") == 8 and f.tile("awq") == 16 and f.tile("int4") == 0
    # vLLM 0.2.x had no copy for AWQ (it came with pull request 2566, 0.3.0)
    assert frameworks["vllm"].copy("awq") == 0 and frameworks["vllm"].copy("gptq") == 50
    e = cm.evaluate("llama-3-8b", "a100-80gb-sxm", batch=40, context=512, weights="awq", framework="vllm")
    assert float(e.workload.scenario.weight_dequant_rows) == 16
    assert float(cm.unpack_passes(e.workload)) == 3.0


def test_a_bad_tile_table_names_the_field(tmp_path):
    from costmodel.io.files import data_dir

    text = (data_dir() / "frameworks.toml").read_text()
    marker = "dequant_rows = { gptq = 8, awq = 16 }"
    path = tmp_path / "frameworks.toml"
    path.write_text(text.replace(marker, "dequant_rows = { gptq = 0.5, awq = 16 }", 1))
    with pytest.raises(InputError, match=r"'dequant_rows': gptq = 0.5: expected a number of rows >= 1"):
        load_frameworks(path)


def test_the_copy_is_made_where_the_weights_are():
    """On a chip without DRAM (an SRAM machine holding the weights on its wafer) the
    copy is written and read in SRAM, not in a DRAM that is not there."""
    chip = cm.chip_preset("cerebras-wse3")

    def cost(rows):
        w = _workload(64, rows=rows, precision=BITS16)
        return cm.decode_cost(w, chip, cm.policy_placement("sram", cm.lower_traffic(w), chip))

    on, off = cost(50.0), cost(0.0)
    assert float(on.tier_bytes[DRAM]) == 0.0 == float(off.tier_bytes[DRAM])
    assert float(on.tier_bytes.sum()) > float(off.tier_bytes.sum())
    assert np.isfinite(float(on.seconds_per_step)) and float(on.seconds_per_step) < 20 * float(off.seconds_per_step)


def test_gradients_with_unpacking_per_tile_match_finite_differences(x64):
    chip = jax.tree.map(
        lambda x: jnp.asarray(x, jnp.float64), bounded_chip(peak_flops=(20e12, 312e12, 624e12, 1248e12))
    )

    def f(x):
        batch, ops = x
        return _cost(_workload(batch, ops=ops, tile=8.0), chip).seconds_per_step

    for batch in (20.0, 120.0):  # 3 unpackings on the lanes; one, before the copy
        g = _matches_finite_differences(f, [batch, 1.75], checked=2)
        assert g[1] > 0
