#!/usr/bin/env bash
# The GPU checks of issues 3 and 5, as one script for a session that is lent a device
# machine (see the device tool: one run, results under $OUT). The device image has
# JAX with CUDA, equinox, optax, flax, pyarrow, pandas, rich and matplotlib, so the
# checkout runs from PYTHONPATH without installing. Writes:
#   $OUT/devices.txt      what JAX sees
#   $OUT/gpu_trace.csv    `costmodel bench` on the GPU (the full plan; QUICK=1: --quick)
#   $OUT/gpu_sweep.json   sweep throughput on the GPU (N configs, chunk CHUNK)
#   $OUT/log.txt          everything printed
# Run from the repository root, e.g. through the device tool:
#   bash benchmarks/device_check.sh
# and on this machine's CPU, as a dry run of the same script:
#   OUT=/tmp/out QUICK=1 N=200000 CHUNK=65536 PYTHON=.venv/bin/python bash benchmarks/device_check.sh
set -euo pipefail
: "${OUT:?set OUT to a folder for the results}"
N=${N:-50000000}
CHUNK=${CHUNK:-1048576}
mkdir -p "$OUT"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
PY=${PYTHON:-python3}
{
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv 2>/dev/null || true
  $PY -c "import jax; print('jax', jax.__version__, jax.devices())"
} 2>&1 | tee "$OUT/devices.txt"
{
  $PY -m costmodel.cli bench ${QUICK:+--quick} --no-progress --out "$OUT/gpu_trace.csv"
  $PY benchmarks/sweep_bench.py speed --n "$N" --chunk "$CHUNK" --loop 200 --rounds 3 --json "$OUT/gpu_sweep.json"
} 2>&1 | tee "$OUT/log.txt"
