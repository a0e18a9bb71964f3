#!/usr/bin/env bash
# The GPU checks, as one script for a session that is lent a device machine (see the
# device tool: one run, results under $OUT). The device image has JAX with CUDA,
# equinox, optax, flax, pyarrow, pandas, rich and matplotlib, so the checkout runs
# from PYTHONPATH without installing. Each stage writes as it goes and has its own
# time budget, so a run cut off at its limit keeps what it finished. Writes:
#   $OUT/devices.txt        what JAX and nvidia-smi see
#   $OUT/gpu_micro.csv      `costmodel bench --plan gpu` microbenchmarks (stream, GEMV, GEMM, attention)
#   $OUT/gpu_sweep.json     sweep throughput on the GPU (N configs, chunk CHUNK)
#   $OUT/gpu_decode.csv     `costmodel bench --plan gpu` decode steps (bf16 small, Llama 3.2 1B, Llama 3 8B)
#   $OUT/log.txt            everything printed
# Run from the repository root, e.g. through the device tool:
#   bash benchmarks/device_check.sh
# and on this machine's CPU, as a dry run of the same script (the quick CPU plan):
#   OUT=/tmp/out PLAN=quick N=200000 CHUNK=65536 PYTHON=.venv/bin/python bash benchmarks/device_check.sh
set -uo pipefail
: "${OUT:?set OUT to a folder for the results}"
N=${N:-20000000}
CHUNK=${CHUNK:-1048576}
PLAN=${PLAN:-gpu}
MICRO_S=${MICRO_S:-170}
DECODE_S=${DECODE_S:-230}
mkdir -p "$OUT"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
PY=${PYTHON:-python3}
{
  date -u +%FT%TZ
  nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm,clocks.max.mem --format=csv 2>/dev/null || true
  $PY -c "import jax, jaxlib, flax; print('jax', jax.__version__, 'jaxlib', jaxlib.__version__, 'flax', flax.__version__, jax.devices())"
} 2>&1 | tee "$OUT/devices.txt"
{
  echo "== microbenchmarks (budget ${MICRO_S} s)"
  $PY benchmarks/gpu_trace.py --plan "$PLAN" --kinds stream,gemv,gemm,attention_decode --budget-s "$MICRO_S" \
    --out "$OUT/gpu_micro.csv"
  echo "== sweep throughput"
  timeout 90 $PY benchmarks/sweep_bench.py speed --n "$N" --chunk "$CHUNK" --loop 200 --rounds 3 \
    --json "$OUT/gpu_sweep.json"
  echo "== decode steps (budget ${DECODE_S} s)"
  $PY benchmarks/gpu_trace.py --plan "$PLAN" --kinds decode_step --budget-s "$DECODE_S" --out "$OUT/gpu_decode.csv"
  nvidia-smi --query-gpu=clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv 2>/dev/null || true
} 2>&1 | tee "$OUT/log.txt"
