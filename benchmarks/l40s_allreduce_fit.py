"""The L40S preset's all-reduce link from a published NCCL measurement on L40S over PCIe.

`allreduce_seconds` (costmodel/_core/channels.py) prices a tensor-parallel all-reduce of a
message of S bytes over n chips as `link_latency + 2 (n - 1) / n x S / link_bandwidth` up to
the knee `link_knee` (a ring: Patarasuk and Yuan, J. Parallel Distrib. Comput. 69(2), 2009;
past the knee `link_bandwidth_large`, fitted by benchmarks/gpu_allreduce_fit.py to this
script's rows). The L40S has no NVLink;
its preset had taken the PCIe Gen4 x16 datasheet rate (32 GB/s per direction) and an
assumed 20 us. This script fits the two numbers, by least squares, to nccl-tests'
`all_reduce_perf` on eight L40S over PCIe (float sum, ring forced, out-of-place times),
at the sizes the decode table's TensorRT-LLM L40S rows' all-reduces carry (one d_model
vector of 16-bit activations per sequence: 64 x 8192 x 2 B = 1 MiB to 256 x 8192 x 2 B =
4 MiB; Mixtral's 256 x 4096 x 2 B = 2 MiB). The latency is the fit's intercept over that
range, not a measured small-message latency (8-byte all-reduces on eight PCIe GPUs of other
kinds take 42-54 us: NVIDIA/nccl issues 1530 and 1439), and the range was chosen with those
rows in view: over 1-8 MiB the fit gives 52.0 us and 20.9 GB/s. Above 8 MiB the measured
bus bandwidth falls to a flat ~11.4 GB/s from 32 MiB on (its cause not stated: perhaps a
cross-socket or host-bridge limit), which this line does not follow; the second line of
`Chip.link_bandwidth_large` past `Chip.link_knee` does (`python benchmarks/gpu_allreduce_fit.py`
fits it to the rows to 1 GiB, with this script's latency and rate kept).

Source (transcribed from the screenshot
https://github.com/MayElbaz18/nccl-l40s-iommu-fix/blob/70cd1bfc6d17e8fddd6248c56cc4359da0192670/images/success.png,
README "Fixing NCCL Hangs on NVIDIA L40S GPUs"; each row checked: size / time gives its
algbw, algbw x 2 x 7 / 8 its busbw): one run, `mpirun -np 8 all_reduce_perf -b 1M -e 4G -f 2
-g 1 -n 50` (one warm-up iteration), with NCCL_P2P_LEVEL=5 (peer-to-peer allowed across the
whole system, sockets included), NCCL_P2P_DISABLE=0, NCCL_ALGO=Ring and the IOMMU in
pass-through on an AMD host (amd_iommu=on iommu=pt: the repository's fix for NCCL hangs, not
a default setup), nccl-tests 2.17.6, NCCL 2.23.4 (nccl-library=22304), eight "NVIDIA L40S" on
one host, "PCIe-only GPU communication (no NVLink)". Eight GPUs of one host are likely split
over two CPU sockets (not stated); rows on two or four may sit behind one switch and run
faster, and hosts without peer-to-peer across sockets slower: assumptions the fit does not
resolve.

Run from the repository root (a second):

    python benchmarks/l40s_allreduce_fit.py
"""

from __future__ import annotations

import numpy as np

from costmodel.io import chip_info


GPUS = 8
ROWS = (  # size (B), out-of-place time (us), algbw (GB/s), busbw (GB/s)
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
FIT_SIZES = (1048576, 2097152, 4194304)
"""The sizes of the decode table's L40S rows' messages (see above)."""


def fit(sizes: tuple[int, ...] = FIT_SIZES) -> tuple[float, float]:
    """(latency s, bandwidth B/s) of the ring model fitted to the rows of `sizes`."""
    rows = [r for r in ROWS if r[0] in sizes]
    size = np.array([r[0] for r in rows], dtype=float)
    seconds = np.array([r[1] for r in rows]) * 1e-6
    sent = 2.0 * (GPUS - 1) / GPUS * size
    design = np.stack([np.ones_like(sent), sent], axis=1)
    (latency, per_byte), *_ = np.linalg.lstsq(design, seconds, rcond=None)
    return float(latency), float(1.0 / per_byte)


def main() -> None:
    for size, us, algbw, busbw in ROWS:  # the transcription's own consistency
        assert abs(size / us / 1e3 - algbw) < 0.01 * algbw + 0.01, size
        assert abs(algbw * 2 * (GPUS - 1) / GPUS - busbw) < 0.01 * busbw + 0.02, size
    latency, bandwidth = fit()
    print(
        f"fit on {len(FIT_SIZES)} sizes (1-4 MiB), {GPUS} L40S: latency (the intercept) {latency * 1e6:.1f} us, bandwidth {bandwidth / 1e9:.1f} GB/s"
    )
    for size, us, *_ in ROWS:
        model = latency + 2.0 * (GPUS - 1) / GPUS * size / bandwidth
        print(
            f"  {size / 2**20:5.0f} MiB: measured {us:8.2f} us, ring model {model * 1e6:8.2f} us ({model / (us * 1e-6) - 1:+.1%})"
        )
    wider_latency, wider_bandwidth = fit(FIT_SIZES + (8388608,))
    print(
        f"sensitivity, fit on 1-8 MiB: latency {wider_latency * 1e6:.1f} us, bandwidth {wider_bandwidth / 1e9:.1f} GB/s"
    )
    chip = chip_info("l40s").chip
    print(
        f"preset l40s: link_latency {float(chip.link_latency) * 1e6:.1f} us, link_bandwidth {float(chip.link_bandwidth) / 1e9:.1f} GB/s"
    )


if __name__ == "__main__":
    main()
