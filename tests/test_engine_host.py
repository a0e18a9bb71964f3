"""The host time of an engine run offline, and what a tensor-parallel step adds to it
(`Chip.host_per_sequence_tp`; `data/frameworks.toml`'s `host_per_sequence_offline_us` and
`host_per_sequence_tp_us`; rows' `inference`)."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import costmodel as cm
import costmodel.validate as v
from costmodel._core.channels import host_seconds
from costmodel.evaluation import apply_framework
from costmodel.io import InputError, chip_info, chip_presets
from costmodel.io.files import data_dir
from costmodel.io.frameworks import ENGINE_HOST_FIELDS, load_frameworks


def _chip(**fields):
    return cm.chip_preset("h100-sxm").replace(host_step=1e-3, host_per_sequence=20e-6, **fields)


def test_host_seconds_adds_the_tensor_parallel_term_only_on_more_than_one_chip():
    chip = _chip(host_per_sequence_tp=50e-6)
    assert float(host_seconds(64.0, chip)) == pytest.approx(1e-3 + 64 * 20e-6)
    for tp in (2.0, 4.0, 8.0):  # one broadcast to all the workers, whatever their number
        assert float(host_seconds(64.0, chip.replace(tensor_parallel=tp))) == pytest.approx(1e-3 + 64 * 70e-6)
    # absent (0, every preset's): the host time as before, on any layout
    for tp in (1.0, 8.0):
        bare = _chip().replace(tensor_parallel=tp)
        assert float(host_seconds(64.0, bare)) == pytest.approx(1e-3 + 64 * 20e-6)
    for name in chip_presets():
        assert float(cm.chip_preset(name).host_per_sequence_tp) == 0.0, name


def test_the_tensor_parallel_term_is_differentiable_and_never_speeds_a_step(x64):
    w = cm.Workload(cm.model_preset("llama-3-8b"), cm.make_scenario(batch=32, context=1024))
    chip = _chip(host_per_sequence_tp=50e-6).replace(tensor_parallel=2.0)
    placement = cm.policy_placement("dram", cm.lower_traffic(w), chip)

    def step(x):
        return cm.decode_cost(w, chip.replace(host_per_sequence_tp=x), placement).seconds_per_step

    x = jnp.asarray(50e-6, dtype=jnp.float64)
    grad = float(jax.grad(step)(x))
    h = 1e-9
    fd = (float(step(x + h)) - float(step(x - h))) / (2 * h)
    assert grad == pytest.approx(32.0) and grad == pytest.approx(fd, rel=1e-6)
    steps = [float(step(jnp.asarray(v, dtype=jnp.float64))) for v in (0.0, 1e-5, 1e-4)]
    assert steps == sorted(steps) and steps[0] < steps[-1]


def test_the_profile_prices_an_offline_engine_apart():
    frameworks = load_frameworks()
    f = frameworks["vllm-0.6"]
    assert set(ENGINE_HOST_FIELDS) <= set(f.fit)
    assert f.host_us("online") == f.host and f.host_us("offline") == (f.host[0], f.host_offline)
    info = chip_info("h100-sxm")
    served = apply_framework(info, "vllm-0.6").chip
    local = apply_framework(info, "vllm-0.6", inference="offline").chip
    assert float(served.host_per_sequence) == pytest.approx(f.host[1] * 1e-6)
    assert float(local.host_per_sequence) == pytest.approx(f.host_offline * 1e-6)
    assert float(served.host_step) == float(local.host_step) == pytest.approx(f.host[0] * 1e-6)
    for chip in (served, local):
        assert float(chip.host_per_sequence_tp) == pytest.approx(f.host_tp * 1e-6)
    # a profile without the fields: both modes price the same
    for name in ("sglang", "nim", "gpt-fast", "native"):
        g = frameworks[name]
        assert g.host_offline is None and g.host_tp is None
        assert g.host_us("offline") == g.host_us("online")
    # the same engine's variants carry the fitted values (the loader checks the copy)
    for name in ("vllm-0.6-rocm", "vllm-0.5"):
        g = frameworks[name]
        assert (g.host_offline, g.host_tp) == (f.host_offline, f.host_tp), name
        assert {k for k, _ in g.carried} >= set(ENGINE_HOST_FIELDS), name


def test_evaluate_takes_the_mode_and_refuses_an_unknown_one():
    kw = dict(batch=64, context=256, framework="vllm-0.6")
    served = cm.evaluate("llama-3-8b", "h100-sxm", **kw)
    local = cm.evaluate("llama-3-8b", "h100-sxm", inference="offline", **kw)
    assert float(local.cost.seconds_per_step) < float(served.cost.seconds_per_step)
    f = load_frameworks()["vllm-0.6"]
    saved = 64 * (f.host[1] - f.host_offline) * 1e-6
    assert float(served.cost.seconds_per_step - local.cost.seconds_per_step) == pytest.approx(saved, rel=1e-4)
    for kwargs in (dict(framework="vllm-0.6"), {}):
        with pytest.raises(InputError, match="inference = 'http'"):
            cm.evaluate("llama-3-8b", "h100-sxm", inference="http", **kwargs)


def test_the_fit_reproduces_the_file_and_its_two_rows():
    rows = {r.id: r for r in v.load_rows()}
    f = load_frameworks()["vllm-0.6"]
    decode = [rows[i] for i in f.fitted_on if i in rows]
    one = next(r for r in decode if r.tensor_parallel == 1)
    many = next(r for r in decode if r.tensor_parallel > 1)
    assert one.status == many.status == "fit" and one.inference == many.inference == "offline"
    seq, tp = v.fit_engine_host(one, many, f)
    assert seq == pytest.approx(f.host_offline, abs=1e-3) and tp == pytest.approx(f.host_tp, abs=1e-3)
    for r in v.evaluate_rows([one, many]):
        assert r.predicted == pytest.approx(r.row.value, rel=2e-5)
    # the fit needs an offline row on one chip, then one on more than one
    with pytest.raises(InputError, match="expected an offline row on one chip"):
        v.fit_engine_host(many, one, f)
    with pytest.raises(InputError, match="inference = 'online'"):
        v.fit_engine_host(dataclasses.replace(one, inference="online"), many, f)


def test_offline_rows_are_the_engines_own_runs():
    """Every offline row of either table runs a vLLM V0 engine (the only profiles that
    price it apart) or, among the tenth, fourteenth, fifteenth and seventeenth blind checks'
    rows (recorded as gathered), an engine whose profile has no offline host time, which
    the field then leaves as it is online; and every vLLM 0.6 row of the decode table is
    offline."""
    import costmodel.validate_serving as vs

    decode = v.load_rows()
    serving = vs.load_serving_rows()
    profiles = load_frameworks()
    v0 = ("vllm-0.6", "vllm-0.5")
    offline = [r for r in [*decode, *serving] if r.inference == "offline"]
    others = [r for r in offline if r.framework not in v0]
    assert all(profiles[r.framework].host_offline is None for r in others)
    assert {r.framework for r in others} == {"sglang", "vllm-v1", "vllm"}
    checks = {
        "2026-12-07, tenth check",
        "2026-12-07, fourteenth check",
        "2026-12-07, fifteenth check",
        "2026-12-08, seventeenth check",
    }
    assert all(getattr(r, "blind", "") in checks for r in others)
    assert all(r.inference == "offline" for r in decode if r.framework == "vllm-0.6")
    assert sum(r.inference == "offline" for r in serving if r.framework in v0) == 82


@pytest.mark.parametrize(
    ("table", "text", "match"),
    [
        ("rows", 'inference = "batch"\n', "field 'inference' = 'batch': expected one of"),
        ("frameworks", "host_per_sequence_tp_us = -1.0\n", "field 'host_per_sequence_tp_us' = -1.0: expected"),
        ("frameworks", 'host_per_sequence_offline_us = "fast"\n', "field 'host_per_sequence_offline_us'"),
    ],
)
def test_bad_fields_are_refused_in_one_line(tmp_path, table, text, match):
    if table == "rows":
        shipped = (data_dir() / "measurements" / "measurements.toml").read_text()
        i = shipped.index('id = "gptfast-a100-llama2-7b-bf16-tp1"\n')
        path = tmp_path / "m.toml"
        path.write_text(shipped[:i] + text + shipped[i:])
        with pytest.raises(InputError, match=match):
            v.load_rows(path)
    else:
        shipped = (data_dir() / "frameworks.toml").read_text()
        i = shipped.index("[frameworks.sglang]")
        profile = (
            "[frameworks.x]\nmemory_efficiency = 1.0\ncompute_efficiency = 1.0\nkernel_overhead = 1.0\n"
            'link_latency = 1.0\nfit = []\nfitted_on = []\nsource = "test"\n' + text + "\n"
        )
        path = tmp_path / "f.toml"
        path.write_text(shipped[:i] + profile + shipped[i:])
        with pytest.raises(InputError, match=match):
            load_frameworks(path)


@pytest.mark.slow
def test_the_two_fields_move_only_their_rows():
    """Without them (the model before), an online row on one chip prices the same; an
    offline row moves by the offline host time, and an online row on more than one chip by
    the tensor-parallel term alone."""
    frameworks = load_frameworks()
    bare = {
        k: dataclasses.replace(
            f,
            host_offline=None,
            host_tp=None,
            carried=tuple(c for c in f.carried if c[0] not in ENGINE_HOST_FIELDS),
        )
        for k, f in frameworks.items()
    }
    all_rows = v.load_rows()
    offline = [r for r in all_rows if r.framework == "vllm-0.6" and r.metric == "output_tokens_per_second_per_chip"]
    online = [dataclasses.replace(r, inference="online") for r in offline]
    others = [r for r in all_rows if r.framework == "gpt-fast"][:4]
    rows = offline + online + others
    f = frameworks["vllm-0.6"]
    for now, before in zip(v.evaluate_rows(rows, frameworks), v.evaluate_rows(rows, bare)):
        v0 = now.framework in ("vllm-0.6", "vllm-0.6-rocm")
        moved = v0 and (now.row.inference == "offline" or now.tensor_parallel > 1)
        assert (not np.isclose(now.predicted, before.predicted, rtol=1e-9)) == moved, now.row.id
        if v0 and now.row.inference == "online" and now.tensor_parallel > 1:
            # the step grows by exactly the term: batch x host_tp per step
            r = now.row
            steps_time = r.batch * r.output_tokens / now.tensor_parallel
            added = steps_time / now.predicted - steps_time / before.predicted
            assert added == pytest.approx(r.output_tokens * r.batch * f.host_tp * 1e-6, rel=1e-4), r.id


def test_cli_evaluate_takes_the_inference_mode(capsys):
    import json

    from costmodel.cli import main

    base = ["evaluate", "--model", "llama-3-8b", "--chip", "h100-sxm", "--framework", "vllm-0.6"]
    base += ["--batch", "64", "--context", "256", "--json"]
    steps = {}
    for inference in ("online", "offline"):
        assert main([*base, "--inference", inference]) == 0
        steps[inference] = json.loads(capsys.readouterr().out)["seconds_per_step"]
    assert steps["offline"] < steps["online"]
    assert main([*base, "--inference", "batch"]) == 2
    assert "argument --inference: invalid choice: 'batch'" in capsys.readouterr().err


@pytest.mark.parametrize("command", ["evaluate", "serve"])
def test_cli_offline_without_a_framework_is_refused(command, capsys):
    """Without a profile the chip's one host time stands: `--inference offline` would change
    nothing, so it is refused in one line (exit 2)."""
    from costmodel.cli import main

    base = [command, "--model", "llama-3-8b", "--chip", "h100-sxm", "--inference", "offline"]
    assert main(base) == 2
    err = capsys.readouterr().err
    assert "--inference offline: expected with --framework" in err and "Traceback" not in err
    # a profile with no offline host time: the option would change nothing either
    assert main([*base, "--framework", "trt-llm"]) == 2
    err = capsys.readouterr().err
    assert "framework 'trt-llm' (profile 'trt-llm') has no host_per_sequence_offline_us" in err


def test_the_fits_refuse_rows_of_the_other_mode_and_a_negative_time(tmp_path):
    import costmodel.validate_serving as vs

    offline = [r for r in vs.load_serving_rows() if r.inference == "offline"][:1]
    with pytest.raises(InputError, match="inference = 'offline': the online host time is fitted on online rows"):
        vs.fit_host(offline)
    rows = {r.id: r for r in v.load_rows()}
    f = load_frameworks()["vllm-0.6"]
    one, many = (rows[i] for i in f.fitted_on if i in rows)
    fast = dataclasses.replace(one, value=one.value * 3)  # faster than the device alone
    with pytest.raises(InputError, match="faster than the model with no such host time"):
        v.fit_engine_host(fast, many, f)
    # an offline host time needs the online one it replaces
    shipped = (data_dir() / "frameworks.toml").read_text()
    i = shipped.index("[frameworks.sglang]")
    profile = (
        "[frameworks.x]\nmemory_efficiency = 1.0\ncompute_efficiency = 1.0\nkernel_overhead = 1.0\n"
        'link_latency = 1.0\nfit = []\nfitted_on = []\nsource = "test"\nhost_per_sequence_offline_us = 20.0\n\n'
    )
    path = tmp_path / "f.toml"
    path.write_text(shipped[:i] + profile + shipped[i:])
    with pytest.raises(InputError, match="expected with the online host time"):
        load_frameworks(path)
