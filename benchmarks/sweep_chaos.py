"""Chaos trials of sweep folders: kill -9, damage, resume, and check every byte.

    python benchmarks/sweep_chaos.py [--trials 100] [--seed 18] [--out benchmarks/sweep_chaos_results.json]

One trial: `costmodel sweep` (a subprocess, a 64-config grid in 8 chunks, slowed by
`COSTMODEL_SWEEP_THROTTLE_S` so that kills land anywhere in its run) is killed with
SIGKILL at a seeded random moment (`trial`): after a random number of chunks plus a
random fraction of a chunk's time, or now and then before it has even started. Then one of the chunks on disk, chosen at random, is damaged in one of
`DAMAGES` ways (cut short, a byte flipped, replaced by a copy of its neighbour, its
Parquet magic bytes overwritten, deleted, bytes appended), and `costmodel sweep
--resume` runs. The trial passes when the resumed folder holds exactly the reference
run's files, byte for byte (every chunk and `sweep.json`), no temporary file and no
lock, `verify_sweep` finds nothing and the table has every config exactly once.

The same `trial` runs 10 times in `tests/test_sweep_reliability.py` (resume in the
test's process); this script runs more, each resume as its own subprocess, and writes
every trial's record and a summary to `--out` (JSON).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import numpy as np


SPEC = """
[sweep]
sampling = "grid"
chunk = 8

[base]
model = "llama-3-8b"
chip = "h100-sxm"
chips = 1

[axes]
batch = [1, 2, 4, 8, 16, 32, 64, 128]
context = [512, 1024, 2048, 4096, 8192, 16384, 32768, 65536]
"""
"""64 configs in 8 chunks: small enough to compile and run in about a second."""

N_CHUNKS = 8
THROTTLE_S = "0.1"
"""Seconds each chunk waits after it is written: a run's writing phase lasts ~1 s."""
DAMAGES = ("truncate", "flip", "neighbour", "magic", "delete", "append")
EARLY = 0.1
"""Share of trials killed before the run holds the folder (while Python/JAX start)."""


def cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "costmodel.cli", "sweep", *args, "--no-progress", "--cpu-devices", "1"]


def environment(cache: str | Path, **extra: str) -> dict[str, str]:
    """A CPU-only environment sharing one JAX compilation cache (the runs compile once)."""
    env = {k: v for k, v in os.environ.items() if k not in ("XLA_FLAGS", "COSTMODEL_SWEEP_THROTTLE_S")}
    env.update(
        JAX_PLATFORMS="cpu",
        JAX_COMPILATION_CACHE_DIR=str(cache),
        JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS="0",
        JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES="0",
        **extra,
    )
    return env


def digests(folder: Path) -> dict[str, str]:
    """SHA-256 of every file in a folder (hidden ones too: temporary files, the lock)."""
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir())}


def _run(spec: Path, out: Path, env: dict[str, str]) -> None:
    """Runs the sweep into `out`, uninterrupted."""
    res = subprocess.run(
        cli(str(spec), "--out", str(out)),
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    if res.returncode != 0:
        raise RuntimeError(f"the uninterrupted run into {out} failed (exit {res.returncode}): {res.stderr}")


def reference(work: Path, env: dict[str, str], twice: bool = False) -> tuple[Path, dict[str, str]]:
    """(spec file, digests of an uninterrupted run's folder `work/reference`); with
    `twice`, a second run (warm compilation cache) must write the same bytes."""
    spec = work / "chaos.toml"
    spec.write_text(SPEC)
    _run(spec, work / "reference", env)
    want = digests(work / "reference")
    if twice:
        _run(spec, work / "reference-2", env)
        if digests(work / "reference-2") != want:
            raise RuntimeError("two uninterrupted runs wrote different bytes")
    return spec, want


def damage(out: Path, ref: Path, k: int, how: str) -> None:
    """Damages chunk `k` of `out` (`ref`: an intact folder of the same sweep)."""
    path = out / f"chunk-{k:08d}.parquet"
    data = path.read_bytes()
    if how == "truncate":
        path.write_bytes(data[: len(data) // 2])
    elif how == "flip":
        i = len(data) // 2
        path.write_bytes(data[:i] + bytes([data[i] ^ 0x10]) + data[i + 1 :])
    elif how == "neighbour":
        j = k + 1 if k + 1 < N_CHUNKS else k - 1
        shutil.copyfile(ref / f"chunk-{j:08d}.parquet", path)
    elif how == "magic":
        path.write_bytes(b"XXXX" + data[4:])
    elif how == "delete":
        path.unlink()
    elif how == "append":
        path.write_bytes(data + b"\0" * 64)
    else:
        raise ValueError(how)


def trial(
    rng: np.random.Generator,
    spec: Path,
    ref: Path,
    want: dict[str, str],
    out: Path,
    env: dict[str, str],
    resume=None,
    throttle: str = THROTTLE_S,
) -> dict:
    """One kill -9 / damage / resume trial into the new folder `out`; returns its record.

    The kill moment: with probability `EARLY` a random time up to 2 s after the start
    (Python and JAX still starting, or the folder just taken); otherwise once `m`
    chunks are on disk (`m` uniform in 0..8; 0: once `sweep.json` is), plus a random
    delay of up to 1.5 throttle intervals, so that it lands while the run waits, while
    it evaluates the next chunk, or while it writes it.

    Args:
        rng: the seeded generator (the kill moment, the chunk and the damage).
        spec, ref, want: the spec file, the reference folder and its digests.
        out: the trial's folder (must not exist).
        env: the subprocesses' environment (`environment`).
        resume: a function `argv -> exit status` that runs the CLI (e.g.
            `costmodel.cli.main`, in this process); default: a subprocess.
        throttle: `COSTMODEL_SWEEP_THROTTLE_S` of the killed run, s.
    """
    early = bool(rng.random() < EARLY)
    wait_for = int(rng.integers(0, N_CHUNKS + 1))
    delay = float(rng.uniform(0.0, 2.0)) if early else float(rng.uniform(0.0, 1.5 * float(throttle)))
    proc = subprocess.Popen(
        cli(str(spec), "--out", str(out)),
        env={**env, "COSTMODEL_SWEEP_THROTTLE_S": throttle},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    if not early:
        deadline = time.monotonic() + 300
        while proc.poll() is None and time.monotonic() < deadline:
            if (out / "sweep.json").exists() and len(list(out.glob("chunk-*.parquet"))) >= wait_for:
                break
            time.sleep(0.002)
    time.sleep(delay)
    proc.send_signal(signal.SIGKILL)
    err = proc.communicate(timeout=120)[1].decode(errors="replace")
    finished = proc.returncode == 0
    if proc.returncode not in (0, -signal.SIGKILL):
        raise RuntimeError(f"the run failed before it was killed (exit {proc.returncode}): {err}")
    names = sorted(p.name for p in out.iterdir()) if out.exists() else []
    chunks = [int(n[6:14]) for n in names if n.startswith("chunk-")]
    record = {
        "early": early,
        "wait_for_chunks": None if early else wait_for,
        "delay_s": round(delay, 4),
        "finished_before_kill": finished,
        "chunks_at_kill": len(chunks),
        "temporary_files_at_kill": sum(".tmp-" in n for n in names),
        "lock_left": ".sweep.lock" in names,
        "damaged": None,
        "damage": None,
    }
    if chunks:
        k = int(rng.choice(chunks))
        how = str(rng.choice(DAMAGES))
        damage(out, ref, k, how)
        record.update(damaged=k, damage=how)
    argv = ["sweep", str(spec), "--out", str(out), "--resume", "--no-progress"]
    if resume is None:
        res = subprocess.run(cli(*argv[1:-1]), env=env, capture_output=True, text=True, timeout=300)
        status, message = res.returncode, res.stderr
    else:
        status, message = resume([*argv, "--cpu-devices", "0"]), ""
    record["resume_exit"] = status
    got = digests(out)
    record["identical"] = got == want
    problems = []
    if status != 0:
        problems.append(f"resume exited {status}: {message.strip()[-300:]}")
    if got != want:
        diff = sorted(n for n in set(got) | set(want) if got.get(n) != want.get(n))
        problems.append(f"files differ from the reference: {diff}")
    import costmodel.sweep as sw

    if status == 0:
        if sw.verify_sweep(out):
            problems.append(f"verify_sweep: {sw.verify_sweep(out)}")
        configs = sw.read_sweep(out, ["config"]).column("config").to_numpy()
        if not np.array_equal(configs, np.arange(len(configs))) or len(configs) != 64:
            problems.append("configs not 0..63 exactly once")
    record["problems"] = problems
    record["passed"] = not problems
    return record


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    p.add_argument("--trials", type=int, default=100)
    p.add_argument("--seed", type=int, default=18)
    p.add_argument("--out", default=str(Path(__file__).with_name("sweep_chaos_results.json")))
    args = p.parse_args(argv)
    rng = np.random.default_rng(args.seed)
    with tempfile.TemporaryDirectory(prefix="sweep-chaos-") as tmp:
        work = Path(tmp)
        env = environment(work / "jax-cache")
        spec, want = reference(work, env, twice=True)
        records = []
        t0 = time.monotonic()
        for i in range(args.trials):
            r = trial(rng, spec, work / "reference", want, work / f"trial-{i:04d}", env)
            r["trial"] = i
            records.append(r)
            shutil.rmtree(work / f"trial-{i:04d}", ignore_errors=True)
            print(
                f"trial {i}: {'pass' if r['passed'] else 'FAIL'}; killed {r['delay_s']:.3f} s after "
                f"{'the start' if r['early'] else str(r['wait_for_chunks']) + ' chunks'}, with "
                f"{r['chunks_at_kill']} chunks ({r['temporary_files_at_kill']} temporary), damage "
                f"{r['damage']} of chunk {r['damaged']}" + (f": {r['problems']}" if r["problems"] else ""),
                flush=True,
            )
        seconds = time.monotonic() - t0
    summary = {
        "command": " ".join(["python", "benchmarks/sweep_chaos.py", *(argv if argv is not None else sys.argv[1:])]),
        "seed": args.seed,
        "trials": len(records),
        "passed": sum(r["passed"] for r in records),
        "killed_before_start": sum(r["early"] for r in records),
        "finished_before_kill": sum(r["finished_before_kill"] for r in records),
        "killed_with_a_temporary_chunk": sum(r["temporary_files_at_kill"] > 0 for r in records),
        "lock_left_by_the_kill": sum(r["lock_left"] for r in records),
        "chunks_at_kill": dict(sorted(Counter(r["chunks_at_kill"] for r in records).items())),
        "damages": dict(sorted(Counter(str(r["damage"]) for r in records).items())),
        "seconds": round(seconds, 1),
    }
    Path(args.out).write_text(json.dumps({"summary": summary, "trials": records}, indent=1) + "\n")
    print(json.dumps(summary, indent=1))
    return 0 if summary["passed"] == summary["trials"] else 1


if __name__ == "__main__":
    sys.exit(main())
