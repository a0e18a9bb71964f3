"""GEMV streaming rate against matrix shape, over distinct matrices: the kernel-size step.

For each shape `[k, n]` (f32) and each total size, a chain of `total / (4 k n)`
distinct matrices is streamed once per pass by the bench's GEMV-chain kernel
(`calibration.measure.kernels.chain`), one XLA:CPU thread, and the rate (GB/s) is printed as a k × n
table per total: 1 MB (inside a 2 MB L2), 16 MB (inside the L3) and 256 MB (DRAM).
On the development VM it shows the step `Chip.small_kernel_bytes` models: beyond the
L2, matrices of 2 MB or less stream at about half the rate of 3 MB and larger ones.

Run from the repository root on a quiet machine (about 2 minutes):

    python benchmarks/gemv_chain_grid.py [--totals-mb 1 16 256]
"""

import argparse
import os

from calibration.measure import kernels, timing


KS = (128, 256, 512, 1024, 2048)
NS = (128, 256, 512, 1024, 1536, 2048, 4096)
MAX_MATRICES = 512
"""Chains of more matrices than this are skipped (their Python-unrolled loop compiles slowly)."""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--totals-mb", type=float, nargs="+", default=[1, 16, 256])
    args = ap.parse_args()
    os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} {timing.xla_cpu_thread_flags(1)}".strip()
    import jax
    import jax.numpy as jnp

    key = jax.random.PRNGKey(0)
    print(f"GB/s of a GEMV chain over distinct f32 [k, n] matrices; {timing.device_description(jax.devices()[0])}")
    for total_mb in args.totals_mb:
        total = int(total_mb * 2**20)
        print(f"\ntotal {total_mb:g} MiB (a single matrix where one is larger)")
        print("k \\ n " + " ".join(f"{n:>6}" for n in NS))
        for k in KS:
            cells = []
            for n in NS:
                count = max(1, total // (k * n * 4))
                if count > MAX_MATRICES:
                    cells.append(f"{'-':>6}")
                    continue
                keys = jax.random.split(key, count)
                ws = [jax.random.normal(kk, (k, n), jnp.float32) for kk in keys]
                xs = [jax.random.normal(kk, (1, k), jnp.float32) for kk in keys]
                med, _, _ = timing.time_loop(kernels.chain, (ws, xs), 7, 0.02)
                cells.append(f"{count * k * n * 4 / med / 1e9:6.1f}")
                del ws, xs
            print(f"{k:>5} " + " ".join(cells), flush=True)


if __name__ == "__main__":
    main()
