"""Core throughput: one evaluate after compile, and vmap over 1e4 / 1e5 configs.

Run: `python benchmarks/core_bench.py [--repeats 7] [--json out.json]`.

Configs are llama-3-8b decode points on an h100-sxm whose batch, context, DRAM and
SRAM bandwidth, peak FLOP/s and soft placement logits vary per config. Every figure
is the median of `--repeats` timed runs after one compile-and-warm-up run.
"""

import argparse
import json
import platform
import statistics
import time

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

import costmodel as cm


def configs(n: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    model = cm.model_preset("llama-3-8b")
    chip = cm.chip_preset("h100-sxm")
    batch = rng.integers(1, 257, n).astype(np.float32)
    context = rng.integers(128, 131073, n).astype(np.float32)
    scen = cm.Scenario(
        batch=batch,
        context=context,
        prefix=np.zeros(n, np.float32),
        weight_bytes=np.full(n, 2.0, np.float32),
        kv_bytes=np.full(n, 2.0, np.float32),
        weight_precision=np.ones(n, np.int32),
        kv_precision=np.ones(n, np.int32),
        activation_bytes=np.full(n, 2.0, np.float32),
    )
    # Fields the constructor leaves scalar (micro-batches) get the batch axis too.
    scen = jax.tree.map(lambda x: jnp.broadcast_to(x, (n,)) if jnp.ndim(x) == 0 else x, scen)
    models = jax.tree.map(lambda x: jnp.broadcast_to(x, (n,) + x.shape), model)
    chips = jax.tree.map(lambda x: jnp.broadcast_to(x, (n,) + x.shape), chip)
    scale = jnp.asarray(rng.uniform(0.5, 2.0, (n, 3)), jnp.float32)
    chips = eqx.tree_at(lambda c: c.tiers.bandwidth, chips, chips.tiers.bandwidth * scale)
    chips = eqx.tree_at(lambda c: c.peak_flops, chips, chips.peak_flops * scale[:, :1])
    logits = jnp.asarray(rng.normal(size=(n, len(cm.ROWS), 3)), jnp.float32)
    profiles = jax.tree.map(lambda x: jnp.broadcast_to(x, (n,) + x.shape), cm.AccessProfile())
    return cm.Workload(models, scen, profiles), chips, logits


def seconds(workload, chip, logits):
    return cm.decode_cost(workload, chip, cm.soft_placement(logits, 0.5)).seconds_per_step


forward = jax.jit(jax.vmap(seconds))
value_and_grad = jax.jit(jax.vmap(jax.value_and_grad(seconds, argnums=(1, 2))))
single = jax.jit(seconds)


def timed(fn, *args, repeats):
    jax.block_until_ready(fn(*args))  # compile and warm up
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        jax.block_until_ready(fn(*args))
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--repeats", type=int, default=7)
    p.add_argument("--json", default=None)
    args = p.parse_args()
    out = {
        "machine": f"{platform.machine()}, {jax.device_count()} {jax.devices()[0].platform} device(s), jax {jax.__version__}"
    }
    w, c, lg = configs(1)
    one = jax.tree.map(lambda x: x[0], (w, c, lg))
    out["single_evaluate_seconds"] = timed(single, *one, repeats=max(args.repeats, 51))
    e = cm.evaluate("llama-3-8b", "h100-sxm")  # the user-facing call (hard placement, presets parsed)
    t0 = time.perf_counter()
    for _ in range(20):
        cm.evaluate("llama-3-8b", "h100-sxm", batch=2, context=2048)
    out["api_evaluate_seconds"] = (time.perf_counter() - t0) / 20
    del e
    for n in (10_000, 100_000):
        w, c, lg = configs(n)
        out[f"forward_configs_per_second_{n}"] = n / timed(forward, w, c, lg, repeats=args.repeats)
        out[f"value_and_grad_configs_per_second_{n}"] = n / timed(value_and_grad, w, c, lg, repeats=args.repeats)
    print(json.dumps(out, indent=2))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=2)


if __name__ == "__main__":
    main()
