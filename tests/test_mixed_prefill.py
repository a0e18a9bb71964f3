"""Mixed-context batches and chunked prefill in the step (issue 17): the neutral cases
reproduce the single-context decode step, the physics moves the right way, and the
gradients through the new leaves match float64 finite differences."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import costmodel as cm


def _step(workload, chip_name="h100-sxm"):
    chip = cm.chip_preset(chip_name)
    placement = cm.policy_placement("dram", cm.lower_traffic(workload), chip)
    return cm.decode_cost(workload, chip, placement)


def _close(a, b, rtol=1e-6):
    for f in ("seconds_per_step", "joules_per_token", "tier_bytes", "flops", "stored_bytes"):
        np.testing.assert_allclose(np.asarray(getattr(a, f)), np.asarray(getattr(b, f)), rtol=rtol, err_msg=f)


@pytest.mark.parametrize("model", ["llama-3-8b", "gemma-2-9b", "mixtral-8x7b"])
def test_one_bin_mix_is_the_single_context_step(model):
    m = cm.model_preset(model)
    s = cm.Scenario(batch=16, context=8192, prefix=1024)
    plain = _step(cm.Workload(m, s))
    mixed = _step(cm.Workload(m, s, mix=cm.ContextMix([1.0], [1.0])))
    _close(plain, mixed)


def test_dense_global_mix_keeps_the_mean_and_windows_do_not():
    # Dense global attention is linear in the context: any mix with the same mean
    # moves the same KV bytes. A sliding window caps each sequence's history, so a
    # spread of contexts (some below the window) reads fewer bytes than the mean.
    mix = cm.ContextMix.of([512, 2048, 16384], [0.5, 0.3, 0.2])
    assert abs(float(jnp.sum(mix.share * mix.ratio)) - 1.0) < 1e-6
    s = cm.Scenario(batch=32, context=4096)
    llama = cm.model_preset("llama-3-8b")
    a, b = cm.lower_traffic(cm.Workload(llama, s)), cm.lower_traffic(cm.Workload(llama, s, mix=mix))
    np.testing.assert_allclose(float(jnp.sum(a.read_bytes)), float(jnp.sum(b.read_bytes)), rtol=1e-5)
    gemma = cm.model_preset("gemma-2-9b")  # half its layers slide over a 4,096-token window
    a, b = cm.lower_traffic(cm.Workload(gemma, s)), cm.lower_traffic(cm.Workload(gemma, s, mix=mix))
    kv = np.asarray(cm.IS_KV)
    assert float(jnp.sum(b.read_bytes[kv])) < float(jnp.sum(a.read_bytes[kv])) * 0.95


def test_prefill_adds_its_flops_and_slows_the_step():
    m = cm.model_preset("llama-3-8b")
    s = cm.Scenario(batch=64, context=2048)
    pre = cm.Prefill(prompt_tokens=1024, output_tokens=256, chunk_tokens=512)
    plain, mixed = cm.Workload(m, s), cm.Workload(m, s, prefill=pre)
    g = cm.step_groups(mixed)
    prompt_tokens = float(jnp.sum(g.sequences[1:] * g.queries[1:]))
    assert prompt_tokens == pytest.approx(64 * 1024 / 256)  # batch x prompt / output
    a, b = cm.lower_traffic(plain), cm.lower_traffic(mixed)
    w = slice(0, 4)  # weight rows: read once, FLOPs for every query token
    np.testing.assert_allclose(np.asarray(a.read_bytes[w]), np.asarray(b.read_bytes[w]), rtol=1e-6)
    np.testing.assert_allclose(float(jnp.sum(b.flops[w])), float(jnp.sum(a.flops[w])) * (64 + 256) / 64, rtol=1e-5)
    ca, cb = _step(plain), _step(mixed)
    assert float(cb.seconds_per_step) > float(ca.seconds_per_step)
    # More prompt per output token: more prefill per step, never a faster step.
    longer = cm.Workload(m, s, prefill=cm.Prefill(prompt_tokens=4096, output_tokens=256))
    assert float(_step(longer).seconds_per_step) > float(cb.seconds_per_step)
    # A tiny prompt per long output tends to the decode-only step.
    tiny = cm.Workload(m, s, prefill=cm.Prefill(prompt_tokens=1e-3, output_tokens=1e6))
    _close(_step(tiny), ca, rtol=1e-4)


def test_first_token_after_the_prompts_chunks():
    m = cm.model_preset("llama-3-8b")
    w = cm.Workload(
        m,
        cm.Scenario(batch=8, context=2048),
        prefill=cm.Prefill(prompt_tokens=2000, output_tokens=100, chunk_tokens=500),
    )
    t = _step(w).seconds_per_step
    assert float(cm.first_token_seconds(w, t)) == pytest.approx(4 * float(t), rel=1e-6)
    whole = eqx.tree_at(lambda x: x.prefill.chunk_tokens, w, jnp.inf)
    assert float(cm.first_token_seconds(whole, t)) == pytest.approx(float(t), rel=1e-6)
    assert float(cm.first_token_seconds(cm.Workload(m, cm.Scenario()), t)) == 0.0


@pytest.mark.slow
def test_mixed_workloads_vmap_like_single_ones():
    m = cm.model_preset("llama-3-8b")
    mix = cm.ContextMix.of([256, 4096, 32768], [0.6, 0.3, 0.1])
    pre = cm.Prefill(prompt_tokens=800, output_tokens=200)
    batches = [1.0, 16.0, 128.0]
    ws = [cm.Workload(m, cm.Scenario(batch=b, context=3000), mix=mix, prefill=pre) for b in batches]
    stacked = jax.tree.map(lambda *a: jnp.stack(a), *ws)
    chip = cm.chip_preset("h100-sxm")
    place = cm.policy_placement("dram", cm.lower_traffic(ws[0]), chip)
    together = jax.vmap(lambda w: cm.decode_cost(w, chip, place).seconds_per_step)(stacked)
    apart = [float(cm.decode_cost(w, chip, place).seconds_per_step) for w in ws]
    np.testing.assert_allclose(np.asarray(together), apart, rtol=1e-6)


@pytest.mark.slow
def test_gradients_through_mix_and_prefill_match_finite_differences():
    with jax.enable_x64(True):
        m = cm.model_preset("gemma-2-9b")
        chip = cm.chip_preset("h100-sxm")
        base = cm.Workload(
            m,
            cm.Scenario(batch=24.0, context=6000.0),
            mix=cm.ContextMix(jnp.asarray([0.5, 0.3, 0.2]), jnp.asarray([0.3, 1.0, 2.75])),
            prefill=cm.Prefill(prompt_tokens=1500.0, output_tokens=300.0, chunk_tokens=512.0),
        )
        place = cm.policy_placement("dram", cm.lower_traffic(base), chip)
        leaves = lambda w: (w.mix.share, w.mix.ratio, w.prefill.prompt_tokens, w.prefill.output_tokens)

        def f(x):
            w = eqx.tree_at(leaves, base, x)
            return cm.decode_cost(w, chip, place).seconds_per_step

        x0 = tuple(jnp.asarray(v, dtype=jnp.float64) for v in leaves(base))
        grads = jax.grad(f)(x0)
        for i, (x, gr) in enumerate(zip(x0, grads)):
            flat = np.ravel(np.asarray(x))
            for j in range(flat.size):
                h = 1e-6 * max(abs(flat[j]), 1.0)
                up, dn = flat.copy(), flat.copy()
                up[j] += h
                dn[j] -= h
                sub = lambda v: tuple(jnp.asarray(v.reshape(np.shape(x))) if k == i else x0[k] for k in range(len(x0)))
                fd = (float(f(sub(up))) - float(f(sub(dn)))) / (2 * h)
                g = float(np.ravel(np.asarray(gr))[j])
                assert g == pytest.approx(fd, rel=1e-4, abs=1e-12), (i, j, g, fd)


def test_serving_with_prefill_and_a_ttft_target():
    from costmodel.serving import serve

    econ = cm.economics_preset("N5")
    kw = dict(chips=1, tpot=0.03, prompt_tokens=1024.0, output_tokens=256.0)
    decode_only = serve("llama-3-8b", "h100-sxm", econ, chips=1, tpot=0.03)
    loose = serve("llama-3-8b", "h100-sxm", econ, **kw)
    assert loose.best is not None and decode_only.best is not None
    # Prefill in the steps never raises the throughput a TPOT target allows.
    assert loose.best.tokens_per_second_per_chip <= decode_only.best.tokens_per_second_per_chip * (1 + 1e-6)
    assert loose.best.ttft is not None and decode_only.best.ttft is None
    # TTFT = prompt / chunk steps = 2 steps here.
    assert loose.best.ttft == pytest.approx(2 * loose.best.tpot, rel=1e-6)
    # Throughput never falls when a target is relaxed.
    previous = 0.0
    for ttft in (0.02, 0.04, 0.08, 1.0):
        s = serve("llama-3-8b", "h100-sxm", econ, ttft=ttft, **kw)
        rate = 0.0 if s.best is None else s.best.tokens_per_second_per_chip
        assert rate >= previous
        assert s.best is None or s.best.ttft <= ttft
        previous = rate
    with pytest.raises(cm.InputError, match="ttft"):
        serve("llama-3-8b", "h100-sxm", econ, chips=1, ttft=0.1)


@pytest.mark.slow
def test_serve_cli_unmet_ttft_is_one_line_exit_2():
    import subprocess
    import sys

    cmd = [
        sys.executable,
        "-m",
        "costmodel.cli",
        "serve",
        "--model",
        "llama-3-8b",
        "--chip",
        "h100-sxm",
        "--chips",
        "1",
    ]
    cmd += ["--ttft-ms", "1", "--prompt-tokens", "1024", "--output-tokens", "256"]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert r.returncode == 2, r.stderr
    assert "--ttft-ms 1" in r.stderr and "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


def test_disaggregated_prefill_pool():
    from costmodel.serving import disaggregated_prefill, serve

    econ = cm.economics_preset("N5")
    kw = dict(chips=1, prompt_tokens=2048.0, output_tokens=256.0)
    decode_only = serve("llama-3-8b", "h100-sxm", econ, chips=1)
    split = serve("llama-3-8b", "h100-sxm", econ, prefill_chips=1, **kw)
    assert split.best is not None and decode_only.best is not None
    # Two chips where one decoded: at most half the decode-only rate per chip.
    assert split.best.tokens_per_second_per_chip <= decode_only.best.tokens_per_second_per_chip / 2 * (1 + 1e-6)
    d = disaggregated_prefill(
        cm.model_preset("llama-3-8b"),
        cm.Scenario(),
        cm.chip_info("h100-sxm"),
        cm.Prefill(prompt_tokens=2048, output_tokens=256),
        1,
    )
    assert d.seconds > 0 and d.transfer_seconds > 0
    # A point is kept only while one prefill chip keeps up with the requests it finishes.
    for p in split.points:
        if p.feasible:
            assert p.batch / 256.0 / p.tpot * d.seconds <= 1.0 + 1e-6
            assert p.ttft == pytest.approx(d.seconds + d.transfer_seconds + p.tpot, rel=1e-6)
    with pytest.raises(cm.InputError, match="prefill_chips"):
        serve("llama-3-8b", "h100-sxm", econ, chips=1, prefill_chips=1)
