"""The NVLink, Infinity Fabric and PCIe presets' all-reduce lines from published NCCL/RCCL measurements.

`allreduce_seconds` (costmodel/_core/channels.py) prices a tensor-parallel all-reduce of a
message of S bytes over n chips as `link_latency + 2 (n - 1) / n x (min(S, K) / link_bandwidth
+ max(S - K, 0) / link_bandwidth_large)` with K = `link_knee` (`costmodel.ring_seconds`; a
ring: Patarasuk and Yuan, J. Parallel Distrib. Comput. 69(2), 2009): two lines, the first
for a decode step's messages, the second for prompt chunks and prefills. The H100, H200, A100
and MI300X presets had taken their links' line rate per direction (NVLink4 450 GB/s, NVLink3
300 GB/s, xGMI 448 GB/s), which NCCL's all-reduce reaches at no message size a decode step
carries: "450GB/s is the line rate. With the protocol overhead (~20%) NCCL can get an
effective NVLink bandwidth of 370GB/s" on H100, and more than that only with NVLink SHARP
on messages of GiB (S. Jeaugey, NVIDIA, https://github.com/NVIDIA/nccl-tests/issues/212;
the p5 table below passes 450 at 4 GiB). A decode step's all-reduce carries one d_model
vector of 16-bit activations per query token (64-2,048 tokens x 4,096-16,384 x 2 B:
0.5-64 MiB, mostly 1-32 MiB, for the serving and decode tables' tensor-parallel rows),
where the measured bus bandwidth is well below that. A step with prompt chunks, or a
long prompt's prefill, carries tens of MiB to GiB, where these tables measure 1.3-1.5x
the first line's rate (H100 360-440 GB/s bus bandwidth, MI300X 270-315): the second line.

The first line: this script fits `link_bandwidth` by least squares (on time) to one published nccl-tests /
rccl-tests `all_reduce_perf` run per interconnect, eight GPUs of one host, out-of-place
times at 1-32 MiB. On the MI300X and the A100 `link_latency` is kept at the preset's
small-message value (all-reduces under CUDA graphs, which the engines' own small
all-reduces approach: NVIDIA/nccl issue 1259, on Hopper with NVLink SHARP; nccl-tests
launches each all-reduce without a graph): the fitted line meets the measured times at
16-32 MiB and sits under them at 1-4 MiB, 22-37 % on the MI300X, 48-69 % on the A100 (and
39-52 % on the H100 when it was fitted so, until 2026-12-07's twenty-third session).

The H100 (and the H200, the same NVLink4 and NVSwitch) has two protocols
(`Chip.link_latency_small`, `Chip.link_bandwidth_small`; `costmodel.allreduce_seconds`
takes the lesser of the two lines): its first line's latency and rate are both fitted
(`fit_line`, on the relative error, as the knee is: each size counts alike, where a fit on
time is ruled by the 16-32 MiB times) to the nccl-tests run at 1-32 MiB, and a small-message line, its latency the
preset's small-message value (8 us), its rate fitted (`fit`) on time to an engine's own
one-shot/two-shot all-reduce at 256 KiB-1 MiB on two, four and eight H100 (the ring's
2 (n - 1) / n for each): SGLang's custom all-reduce (`SGLANG_H100`), the kernels the
serving engines run below a few MiB (vLLM's and SGLang's custom all-reduce, TensorRT-LLM's
one-/two-shot). The lesser of the two lines is within -14 ... +14 % of SGLang's eight-GPU
times at 256 KiB-1 MiB and of nccl-tests' at 1-32 MiB (+48 % at two GPUs and 256 KiB, where
the launch weighs); alone, the bulk line is +68 % at 256 KiB on eight GPUs, the small line
+318 % at 32 MiB. The MI300X and the A100 have no such engine table here: one line each, as
before.

The fits are of eight GPUs and are taken for a group of two or four as they are (the
ring's 2 (n - 1) / n carries the group size, which SGLang's table bears out below 1 MiB;
NVLink SHARP gains less below five GPUs: NVIDIA/nccl issue 1455, so the second line, where
SHARP does much of its work, may be fast for two or four).

The second line (`fit_knee`): the knee and the rate past it, the first line kept, fitted by
least squares on the relative error of the same runs' times at 8 MiB-1 GiB (`KNEE_SIZES`),
for these three interconnects and for the L40S over PCIe (past ~8 MiB its rate falls).

The L40S (no NVLink) is fitted apart (`fit_line`): latency and rate both, by least squares
on time, to nccl-tests on eight L40S over PCIe (ring forced) at the sizes the decode table's
TensorRT-LLM L40S rows' all-reduces carry (one d_model vector of 16-bit activations per
sequence: 64 x 8192 x 2 B = 1 MiB to 256 x 8192 x 2 B = 4 MiB; Mixtral's 256 x 4096 x 2 B =
2 MiB). Its preset had taken the PCIe Gen4 x16 datasheet rate (32 GB/s per direction) and an
assumed 20 us. The latency is the fit's intercept over that range, not a measured
small-message latency (8-byte all-reduces on eight PCIe GPUs of other kinds take 42-54 us:
NVIDIA/nccl issues 1530 and 1439), and the range was chosen with those rows in view: over
1-8 MiB the fit gives 52.0 us and 20.9 GB/s. Above 8 MiB the measured bus bandwidth falls to
a flat ~11.4 GB/s from 32 MiB on (its cause not stated: perhaps a cross-socket or
host-bridge limit): the second line.

Sources (numbers as printed; each row checked: size / time gives its algbw, algbw x 7/4 its
busbw):
- H100 SXM (NVLink4, NVSwitch; the H200's links are the same): eight ranks (one process per
  GPU, as serving engines run them) on one AWS p5
  (8 x H100 SXM), aws-samples/awsome-distributed-training,
  1.architectures/3.aws-batch/README.md, "NCCL Tests on AWS Batch" (image
  public.ecr.aws/hpc-cloud/nccl-tests; NCCL's default algorithm, NVLink SHARP at large
  sizes: 483 GB/s bus bandwidth at 16 GiB). Not pinned to a commit (the stored copy's
  history was not reachable). Cross-check: an independent eight-rank run in kvcache-ai/Mooncake
  pull request 3484 (https://github.com/kvcache-ai/Mooncake/pull/3484; the pull request's
  other runs list eight H20, NVLink4 and NVSwitch) fits 25.2 us and 308.4 GB/s against this
  one's 26.5 us and 303.1 GB/s (both on the relative error).
- MI300X (xGMI, fully connected): `mpirun -np 8 ... all_reduce_perf -b 8 -e 8G -f 2 -g 1`,
  eight "AMD Instinct MI300X" on one host, rccl-tests develop:a7809b3, github.com/hisohara/ai-scripts,
  training/01_rccl-smoketest/README.md at 0780bb3c957ba1dd4254b3147c2027a44304db34.
- SGLang's custom all-reduce on H100 (`SGLANG_H100`): github.com/sgl-project/sglang pull
  request 2904 ("optimize custom allreduce kernel", 2025-01-15), "unit test performance in
  H100 (without cuda graph)", `python3 tests/test_trt_reduce.py`, the "custom allreduce"
  table, latency (ms) at tp size 2/4/8 for data sizes 512 B-1 MiB (TensorRT-LLM's kernels,
  adapted; copy-input mode). Without CUDA graphs each time carries a kernel launch (the
  512-byte ones, 3.7-5.9 us, sit under the preset's 8 us), so the rate is fitted where the
  bytes dominate, 256 KiB-1 MiB.
- L40S (PCIe, no NVLink; transcribed from the screenshot
  https://github.com/MayElbaz18/nccl-l40s-iommu-fix/blob/70cd1bfc6d17e8fddd6248c56cc4359da0192670/images/success.png,
  README "Fixing NCCL Hangs on NVIDIA L40S GPUs"): one run, `mpirun -np 8 all_reduce_perf -b 1M
  -e 4G -f 2 -g 1 -n 50` (one warm-up iteration), with NCCL_P2P_LEVEL=5 (peer-to-peer allowed
  across the whole system, sockets included), NCCL_P2P_DISABLE=0, NCCL_ALGO=Ring and the IOMMU
  in pass-through on an AMD host (amd_iommu=on iommu=pt: the repository's fix for NCCL hangs,
  not a default setup), nccl-tests 2.17.6, NCCL 2.23.4 (nccl-library=22304), eight "NVIDIA
  L40S" on one host, "PCIe-only GPU communication (no NVLink)". Eight GPUs of one host are
  likely split over two CPU sockets (not stated); rows on two or four may sit behind one switch
  and run faster, and hosts without peer-to-peer across sockets slower: assumptions the fit
  does not resolve. (These rows and their fit were benchmarks/l40s_allreduce_fit.py's until
  2026-12-07.)
- A100 SXM4 (NVLink3, NVSwitch): eight A100-SXM4-40GB (DGX A100 bus ids) in one process
  (`-g 8`), nccl-tests output kept as a test fixture in github.com/AFDWang/Hetu-Galvatron,
  tests/profiler/test_hardware_profile.py at 6f77a6cb29a6fc165db86b434010e306f76285ad (the
  NCCL version is not given). One process for all eight GPUs may be slower at 1-8 MiB than
  one per GPU (an assumption, not measured here), so the A100's rate may be low.

Run from the repository root (a second):

    python benchmarks/gpu_allreduce_fit.py
"""

from __future__ import annotations

import numpy as np

from costmodel.io import chip_info


GPUS = 8
MIB = 1 << 20
FIT_SIZES = tuple(MIB << k for k in range(6))
"""1-32 MiB: the messages of the tables' tensor-parallel decode steps (see above)."""

TABLES = {  # preset: (the presets that take the fit, rows: size (B), out-of-place time (us), algbw, busbw)
    "h100-sxm": (
        ("h100-sxm", "h200-sxm", "hbm-pim-gpu"),
        (
            (1048576, 28.56, 36.71, 64.24),
            (2097152, 43.45, 48.27, 84.47),
            (4194304, 55.44, 75.66, 132.41),
            (8388608, 84.29, 99.52, 174.16),
            (16777216, 124.0, 135.33, 236.82),
            (33554432, 198.6, 168.93, 295.63),
            (67108864, 326.6, 205.45, 359.54),
            (134217728, 592.8, 226.39, 396.19),
            (268435456, 1121.4, 239.38, 418.91),
            (536870912, 2165.3, 247.94, 433.90),
            (1073741824, 4253.0, 252.47, 441.81),
        ),
    ),
    "mi300x": (
        ("mi300x",),
        (
            (1048576, 28.39, 36.94, 64.64),
            (2097152, 36.68, 57.17, 100.05),
            (4194304, 52.96, 79.20, 138.60),
            (8388608, 84.78, 98.95, 173.16),
            (16777216, 149.9, 111.92, 195.85),
            (33554432, 246.3, 136.25, 238.45),
            (67108864, 432.5, 155.15, 271.51),
            (134217728, 800.3, 167.72, 293.50),
            (268435456, 1540.4, 174.26, 304.96),
            (536870912, 3027.1, 177.35, 310.37),
            (1073741824, 5990.7, 179.24, 313.66),
        ),
    ),
    "a100-80gb-sxm": (
        ("a100-80gb-sxm", "a100-40gb-sxm"),
        (
            (1048576, 78.77, 13.31, 23.29),
            (2097152, 108.8, 19.28, 33.73),
            (4194304, 131.1, 31.98, 55.97),
            (8388608, 183.4, 45.74, 80.04),
            (16777216, 293.6, 57.14, 99.99),
            (33554432, 415.7, 80.73, 141.27),
            (67108864, 657.2, 102.11, 178.69),
            (134217728, 1256.7, 106.80, 186.91),
            (268435456, 2338.9, 114.77, 200.85),
            (536870912, 4651.2, 115.43, 202.00),
            (1073741824, 8139.9, 131.91, 230.84),
        ),
    ),
}
SGLANG_H100 = {  # GPUs: ((size B, time us), ...): SGLang's custom all-reduce, without CUDA graphs
    2: ((512, 3.7), (4096, 3.9), (32768, 4.5), (262144, 7.9), (524288, 12.5), (1048576, 19.9)),
    4: ((512, 4.8), (4096, 3.7), (32768, 4.8), (262144, 13.9), (524288, 20.2), (1048576, 31.1)),
    8: ((512, 5.9), (4096, 5.7), (32768, 7.8), (262144, 16.7), (524288, 22.1), (1048576, 33.8)),
}
SMALL_SIZES = (262144, 524288, 1048576)
"""256 KiB-1 MiB: where the small-message protocol's bytes, not its launch, set the time."""

H20_CHECK = (  # kvcache-ai/Mooncake pull request 3484: eight ranks (H20), out-of-place time (us)
    (1048576, 27.76),
    (2097152, 40.66),
    (4194304, 53.24),
    (8388608, 81.16),
    (16777216, 121.33),
    (33554432, 195.40),
)


L40S_ROWS = (  # eight L40S over PCIe: size (B), out-of-place time (us), algbw (GB/s), busbw (GB/s)
    (1048576, 146.25, 7.17, 12.55),
    (2097152, 226.47, 9.26, 16.21),
    (4194304, 393.60, 10.66, 18.65),
    (8388608, 758.77, 11.06, 19.35),
    (16777216, 2037.97, 8.23, 14.41),
    (33554432, 5046.47, 6.65, 11.64),
    (67108864, 10114.5, 6.63, 11.61),
    (134217728, 20927.0, 6.41, 11.22),
    (268435456, 41021.9, 6.54, 11.45),
    (536870912, 81697.2, 6.57, 11.50),
    (1073741824, 163851.0, 6.55, 11.47),
)
L40S_FIT_SIZES = (MIB, 2 * MIB, 4 * MIB)
"""The sizes of the decode table's L40S rows' messages (see above)."""


def _rate(points, latency: float) -> float:
    """The rate, B/s, of a line of latency `latency` s fitted by least squares on time to
    `points` ((GPUs, size B, time us) each; each size with its ring share 2 (n - 1) / n)."""
    sent = np.array([2.0 * (n - 1) / n * s for n, s, _ in points])
    above = np.array([t * 1e-6 - latency for _, _, t in points])
    return float(np.sum(sent * sent) / np.sum(sent * above))


def fit(rows, latency: float, sizes: tuple[int, ...] = FIT_SIZES) -> float:
    """The ring model's bandwidth, B/s, fitted by least squares on time to the rows of
    `sizes` ((size B, time us, ...) each, on `GPUS`), its latency fixed at `latency` s."""
    return _rate([(GPUS, r[0], r[1]) for r in rows if r[0] in sizes], latency)


def fit_small(latency: float, table=SGLANG_H100, sizes: tuple[int, ...] = SMALL_SIZES) -> float:
    """The small-message protocol's rate, B/s: least squares on time to `table`'s rows of
    `sizes` on every group size, the latency fixed at `latency` s."""
    return _rate([(n, s, t) for n, rows in table.items() for s, t in rows if s in sizes], latency)


def fit_line(rows, sizes: tuple[int, ...], relative: bool = False) -> tuple[float, float]:
    """(latency s, bandwidth B/s) of the ring model fitted, both, by least squares to the
    rows of `sizes` ((size B, time us, ...) each): on time, or with `relative` on the
    relative error (each size counts alike)."""
    pairs = [(r[0], r[1]) for r in rows if r[0] in sizes]
    sent = np.array([2.0 * (GPUS - 1) / GPUS * s for s, _ in pairs])
    seconds = np.array([t * 1e-6 for _, t in pairs])
    weight = 1.0 / seconds if relative else np.ones_like(seconds)
    design = np.stack([np.ones_like(sent), sent], axis=1) * weight[:, None]
    (latency, per_byte), *_ = np.linalg.lstsq(design, seconds * weight, rcond=None)
    return float(latency), float(1.0 / per_byte)


KNEE_SIZES = tuple(MIB << k for k in range(3, 11))
"""8 MiB-1 GiB: prompt chunks and prefills (thousands of tokens x d_model x 2 B), where the
measured time leaves the 1-32 MiB line."""


def fit_knee(rows, latency: float, bandwidth: float, sizes: tuple[int, ...] = KNEE_SIZES) -> tuple[float, float]:
    """(knee B, rate beyond it B/s) of the two-line ring model (`costmodel.ring_seconds`),
    the first line (`latency`, `bandwidth`) kept: least squares on the relative error of
    the times of `sizes`, the rate in closed form for each knee of a fine grid."""
    pairs = np.array([(r[0], r[1] * 1e-6) for r in rows if r[0] in sizes])
    size, seconds = pairs[:, 0], pairs[:, 1]
    share = 2.0 * (GPUS - 1) / GPUS
    best = (np.inf, 0.0, 0.0)
    for knee in np.geomspace(MIB, 256 * MIB, 4001):
        base = latency + share * np.minimum(size, knee) / bandwidth  # the first line's part
        beyond = share * np.maximum(size - knee, 0.0)  # seconds = base + beyond / rate
        # Relative residual (base + beyond x) / t - 1, linear in x = 1 / rate.
        a, b = beyond / seconds, base / seconds - 1.0
        if not np.any(a > 0):
            continue
        x = max(-np.sum(a * b) / np.sum(a * a), 1e-15)
        loss = float(np.sum((a * x + b) ** 2))
        if loss < best[0]:
            best = (loss, float(knee), 1.0 / x)
    return best[1], best[2]


def two_lines(size: float, latency: float, bandwidth: float, knee: float, large: float) -> float:
    """The two-line ring model's time of one all-reduce of `size` bytes, s."""
    share = 2.0 * (GPUS - 1) / GPUS
    return latency + share * (min(size, knee) / bandwidth + max(size - knee, 0.0) / large)


def print_knee(preset: str, rows, latency: float, bandwidth: float) -> None:
    """The second line's fit for `preset`, its first line (`latency` s, `bandwidth` B/s) kept,
    and its errors."""
    knee, large = fit_knee(rows, latency, bandwidth)
    print(
        f"  second line (fitted on 8 MiB-1 GiB, the first kept): link_knee_MB {knee / 1e6:.1f}, "
        f"link_bandwidth_large_GBps {large / 1e9:.1f}"
    )
    for size, us, *_ in rows:
        if size >= 8 * MIB:
            model = two_lines(size, latency, bandwidth, knee, large)
            print(
                f"  {size / MIB:5.0f} MiB: measured {us:9.1f} us, two lines {model * 1e6:9.1f} us ({model / (us * 1e-6) - 1:+.1%})"
            )


def check_rows(name: str, rows) -> None:
    """The transcription's own consistency: size / time gives each row's algbw, algbw x 7/4 its busbw."""
    for size, us, algbw, busbw in rows:
        assert abs(size / us / 1e3 - algbw) < 0.01 * algbw + 0.01, (name, size)
        assert abs(algbw * 2 * (GPUS - 1) / GPUS - busbw) < 0.01 * busbw + 0.02, (name, size)


def print_line(rows, latency: float, bandwidth: float) -> None:
    """Each row's measured time beside the first line's."""
    for size, us, *_ in rows:
        model = latency + 2.0 * (GPUS - 1) / GPUS * size / bandwidth
        print(
            f"  {size / MIB:4.0f} MiB: measured {us:8.2f} us, ring model {model * 1e6:8.2f} us ({model / (us * 1e-6) - 1:+.1%})"
        )


TWO_PROTOCOLS = ("h100-sxm",)
"""The presets whose first line is fitted whole, beside a small-message line (see above)."""


def print_small(latency: float, rate: float, bulk_latency: float, bulk_rate: float) -> None:
    """SGLang's custom all-reduce times beside the small-message line and the lesser of the two lines."""
    for n, rows in SGLANG_H100.items():
        share = 2.0 * (n - 1) / n
        for size, us in rows:
            small = latency + share * size / rate
            both = min(small, bulk_latency + share * size / bulk_rate)
            print(
                f"  {n} GPUs, {size / 1024:6.1f} KiB: SGLang {us:5.1f} us, small line {small * 1e6:5.1f} us "
                f"({small / (us * 1e-6) - 1:+.1%}), lesser of the two {both * 1e6:5.1f} us"
            )


def main() -> None:
    for preset, (takers, rows) in TABLES.items():
        check_rows(preset, rows)
        chip = chip_info(preset).chip
        if preset in TWO_PROTOCOLS:
            latency, bandwidth = fit_line(rows, FIT_SIZES, relative=True)
            small_latency = float(chip.link_latency_small)
            small = fit_small(small_latency)
            print(
                f"{preset} (for {', '.join(takers)}): first line, both fitted on 1-32 MiB (relative error): latency "
                f"{latency * 1e6:.1f} us, bandwidth {bandwidth / 1e9:.1f} GB/s; small-message line: latency "
                f"{small_latency * 1e6:.1f} us (the preset's), rate fitted on SGLang's 256 KiB-1 MiB {small / 1e9:.1f} GB/s"
            )
            print_line(rows, latency, bandwidth)
            print_small(small_latency, small, latency, bandwidth)
        else:
            latency = float(chip.link_latency)
            bandwidth = fit(rows, latency)
            print(
                f"{preset} (for {', '.join(takers)}): latency {latency * 1e6:.1f} us (the preset's), "
                f"bandwidth fitted on 1-32 MiB {bandwidth / 1e9:.1f} GB/s"
            )
            print_line(rows, latency, bandwidth)
        print_knee(preset, rows, latency, bandwidth)
    check_rows("l40s", L40S_ROWS)
    latency, bandwidth = fit_line(L40S_ROWS, L40S_FIT_SIZES)
    print(
        f"l40s: latency (the intercept) {latency * 1e6:.1f} us, bandwidth {bandwidth / 1e9:.1f} GB/s, "
        f"both fitted on {len(L40S_FIT_SIZES)} sizes (1-4 MiB)"
    )
    print_line(L40S_ROWS, latency, bandwidth)
    wider_latency, wider_bandwidth = fit_line(L40S_ROWS, L40S_FIT_SIZES + (8 * MIB,))
    print(
        f"  sensitivity, fit on 1-8 MiB: latency {wider_latency * 1e6:.1f} us, bandwidth {wider_bandwidth / 1e9:.1f} GB/s"
    )
    chip = chip_info("l40s").chip
    print(
        f"  preset l40s: link_latency {float(chip.link_latency) * 1e6:.1f} us, link_bandwidth {float(chip.link_bandwidth) / 1e9:.1f} GB/s"
    )
    print_knee("l40s", L40S_ROWS, latency, bandwidth)
    latency, bandwidth = fit_line(H20_CHECK, FIT_SIZES, relative=True)
    print(
        f"cross-check, eight H20 (NVLink4), both fitted (relative error): {latency * 1e6:.1f} us, {bandwidth / 1e9:.1f} GB/s"
    )


if __name__ == "__main__":
    main()
