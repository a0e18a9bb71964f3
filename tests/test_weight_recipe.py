"""Weight recipes of two formats (`Scenario.plain_weight_bytes`, `data/formats.toml`'s
`plain`): Meta's FP8 Llama 3.1 405B keeps its attention projections and embedding tables
in BF16 and only the feed-forward weights in FP8."""

import importlib

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import costmodel as cm
import costmodel.sweep as sw
from costmodel._core.traffic import N_WEIGHT_CLASSES
from costmodel._core.workload import PRECISIONS
from costmodel.io import InputError, make_scenario
from costmodel.io.formats import formats


def _stored_weights(model: str, weights: str) -> np.ndarray:
    """Bytes each weight class stores (attention, FFN, experts, head), B."""
    w = cm.Workload(cm.model_preset(model), make_scenario(batch=1, context=128, weights=weights))
    t = cm.lower_traffic(w)
    return np.asarray(t.count * t.block_bytes)[:N_WEIGHT_CLASSES]


def _seconds(chip, plain_bytes, batch=1, model="llama-3-70b"):
    s = cm.Scenario(
        batch=batch,
        context=2048,
        weight_bytes=1.0,
        weight_precision=PRECISIONS.index("8"),
        plain_weight_bytes=plain_bytes,
        plain_weight_precision=PRECISIONS.index("16"),
    )
    w = cm.Workload(cm.model_preset(model), s)
    return cm.decode_cost(w, chip, cm.policy_placement("dram", cm.lower_traffic(w), chip)).seconds_per_step


def test_metas_fp8_405b_stores_its_attention_and_tables_in_bf16():
    m = cm.model_preset("llama-3.1-405b")
    attention = float(m.n_layers * m.attention_params_per_layer)
    ffn = float(m.n_layers * m.dense_ffn_params_per_layer)
    tables = 2.0 * float(m.vocab * m.d_model)  # untied embedding and output
    recipe = _stored_weights("llama-3.1-405b", "fp8-meta")
    np.testing.assert_allclose(recipe, [2 * attention, ffn, 0.0, 2 * tables], rtol=1e-5)
    # 482 GB against 406 GB for every linear layer in FP8 (NVIDIA's, AMD's checkpoints).
    assert recipe.sum() / _stored_weights("llama-3.1-405b", "fp8").sum() == pytest.approx(1.18, abs=0.01)


@pytest.mark.parametrize("name", sorted(n for n, f in formats().items() if f.plain is None))
def test_a_format_that_is_not_a_recipe_is_unchanged(name):
    """Every format of one kind gives the traffic it gave before recipes existed: the
    plain weights as the rest."""
    s = make_scenario(batch=4, context=1024, weights=name)
    assert float(s.plain_weight_bytes) == 0.0 and int(s.plain_weight_precision) == -1
    same = cm.Scenario(
        batch=4,
        context=1024,
        weight_bytes=s.weight_bytes,
        weight_precision=s.weight_precision,
        plain_weight_bytes=s.weight_bytes,
        plain_weight_precision=s.weight_precision,
    )
    model = cm.model_preset("mixtral-8x7b")
    a, b = cm.lower_traffic(cm.Workload(model, s)), cm.lower_traffic(cm.Workload(model, same))
    for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b)):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))


@pytest.mark.parametrize("batch", [1, 64])
def test_wider_plain_weights_never_speed_a_step(batch):
    chip = cm.chip_preset("h100-sxm")
    times = [float(_seconds(chip, b, batch)) for b in (0.5, 1.0, 2.0, 4.0)]
    assert all(t1 <= t2 * (1 + 1e-6) for t1, t2 in zip(times, times[1:]))
    assert times[-1] > times[0]


def test_gradient_matches_finite_differences(x64):
    chip = cm.chip_preset("h100-sxm")
    f = lambda b: _seconds(chip, b, batch=8)
    g = float(jax.grad(f)(jnp.asarray(2.0)))
    h = 1e-4
    fd = (float(f(jnp.asarray(2.0 + h))) - float(f(jnp.asarray(2.0 - h)))) / (2 * h)
    assert g > 0
    assert g == pytest.approx(fd, rel=1e-5)


def test_jit_and_vmap_agree():
    chip = cm.chip_preset("h100-sxm")
    values = jnp.asarray([0.0, 1.0, 2.0])
    looped = [float(_seconds(chip, v)) for v in values]
    mapped = jax.vmap(jax.jit(lambda b: _seconds(chip, b)))(values)
    np.testing.assert_allclose(np.asarray(mapped), looped, rtol=1e-6)
    # 0 means "as the rest": FP8 everywhere.
    assert looped[0] == pytest.approx(looped[1], rel=1e-6)


def test_the_sweep_prices_a_recipe_as_evaluate_does(tmp_path):
    spec = tmp_path / "spec.toml"
    spec.write_text(
        '[base]\nmodel = "llama-3.1-405b"\nchip = "h100-sxm"\nchips = 8\nbatch = 16\ncontext = 2048\n'
        '[axes]\nweights = ["fp8", "fp8-meta"]\n'
    )
    rows = sw.Sweep(sw.load_spec(spec), chunk=2).table(0, 2).to_pylist()
    for r in rows:
        e = cm.evaluate("llama-3.1-405b", "h100-sxm", chips=8, batch=16, context=2048, weights=r["weights"])
        np.testing.assert_allclose(r["seconds_per_step"], float(e.cost.seconds_per_step), rtol=2e-5)
    assert rows[1]["seconds_per_step"] > rows[0]["seconds_per_step"]


def test_a_recipe_is_not_a_kv_format_nor_unpacked_and_a_bad_one_is_one_line(tmp_path, monkeypatch):
    with pytest.raises(InputError, match="kv 'fp8-meta': a weight recipe"):
        make_scenario(kv="fp8-meta")
    with pytest.raises(InputError, match="used as stored"):
        make_scenario(weights="fp8-meta", dequant_ops=1.0)
    from costmodel.io.frameworks import load_frameworks

    profile = tmp_path / "frameworks.toml"
    profile.write_text(
        "[frameworks.x]\nmemory_efficiency = 1.0\ncompute_efficiency = 1.0\nkernel_overhead = 1.0\n"
        'link_latency = 1.0\ndequant_ops = { fp8-meta = 1.0 }\nsource = "t"\n'
    )
    with pytest.raises(InputError, match="dequant_ops' has 'fp8-meta'"):
        load_frameworks(profile)
    spec = tmp_path / "spec.toml"
    spec.write_text('[base]\nmodel = "llama-3-8b"\nchip = "h100-sxm"\n[axes]\nkv = ["bf16", "fp8-meta"]\n')
    with pytest.raises(InputError, match=r"spec\.toml: \[axes\]: field 'kv' = 'fp8-meta': a weight recipe"):
        sw.load_spec(spec)
    fm = importlib.import_module("costmodel.io.formats")  # the module, not costmodel.io's function
    (tmp_path / "formats.toml").write_text(
        '[formats.a]\nbits_per_element = 8.0\nprecision = "8"\nplain = "nope"\nsource = "t"\n'
    )
    monkeypatch.setattr(fm, "data_dir", lambda: tmp_path)
    with pytest.raises(InputError, match=r"formats\.a: field 'plain' = 'nope'") as e:
        fm.formats()
    assert "\n" not in str(e.value)


@pytest.mark.parametrize(
    "model,chip,weights,batch,context,seconds,joules",
    [
        ("llama-3-70b", "h100-sxm", "fp8", 8, 2048, 0.02518351562321186, 0.6290719509124756),
        ("mixtral-8x7b", "a100-80gb-sxm", "int4", 16, 4096, 0.018583685159683228, 0.13833653926849365),
        ("llama-3-8b", "mi300x", "bf16", 64, 1024, 0.005779039580374956, 0.031282421201467514),
    ],
)
def test_formats_of_one_kind_price_as_before_recipes(model, chip, weights, batch, context, seconds, joules):
    """Pinned at commit fa7bf8a, before recipes: a format of one kind is priced exactly
    as it was."""
    e = cm.evaluate(model, chip, weights=weights, batch=batch, context=context)
    assert float(e.cost.seconds_per_step) == pytest.approx(seconds, rel=1e-6)
    assert float(e.cost.joules_per_token) == pytest.approx(joules, rel=1e-6)
