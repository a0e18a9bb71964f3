"""Sweep folders under damage, interruption and concurrent writers (issue 18).

* The verified-chunk reader: a chunk cut short, with a byte flipped, replaced by a
  copy of its neighbour, with wrong magic bytes, with bytes appended, deleted, or not
  recorded in `sweep.json` is named by `verify_sweep`, `read_sweep` and `costmodel
  pareto` (exit 2, one line, the `--resume` command that recomputes it); `--resume`
  recomputes exactly the damaged chunks and the folder ends byte-identical to an
  uninterrupted run.
* One writer: a sweep into a non-empty folder without `--resume`, a second sweep into
  a folder another is writing, and `--resume` with another spec exit 2 naming the
  folder; a killed writer's lock never blocks the next run.
* Infeasible rows say so: work at a rate of 0 (a DRAM bandwidth axis reaching 0 under
  a DRAM placement, 0 FLOP/s), a layout that does not split the heads and a system
  over `max_chips` are `feasible = False` with the reason in `infeasible`; a context
  above 1e12 tokens is a spec error (exit 2).
* Chaos: 10 seeded trials of `benchmarks/sweep_chaos.py`'s `trial` (kill -9 of a
  running `costmodel sweep`, a random kept chunk damaged, `--resume`): every config
  once, every file byte-identical to the uninterrupted run.

The CLI runs in a subprocess where a real process matters (kill -9, two writers at
once, the exit status a user sees); elsewhere through `costmodel.cli.main`.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import costmodel as cm
import costmodel.sweep as sw
from costmodel.cli import main

from helpers import load_script


REPO = Path(__file__).resolve().parent.parent


def _load_chaos():
    return load_script(REPO / "benchmarks" / "sweep_chaos.py")


chaos = _load_chaos()


@pytest.fixture(scope="module")
def ref(tmp_path_factory):
    """(work folder, env, spec file, reference folder, its digests): an uninterrupted
    run of the chaos spec by the CLI in a subprocess."""
    work = tmp_path_factory.mktemp("chaos")
    env = chaos.environment(work / "jax-cache")
    spec, want = chaos.reference(work, env)
    return work, env, spec, work / "reference", want


def _copy(ref, tmp_path: Path) -> Path:
    out = tmp_path / "out"
    shutil.copytree(ref[3], out)
    return out


def _chunk(out: Path, k: int) -> Path:
    return out / f"chunk-{k:08d}.parquet"


def _one_error_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("costmodel: error: "), err
    assert "internal error" not in err and "Traceback" not in err
    return lines[0]


# --- the verified-chunk reader ----------------------------------------------------------


@pytest.mark.slow
def test_every_kind_of_damage_is_named_and_resume_recomputes_only_it(ref, tmp_path, capsys):
    out = _copy(ref, tmp_path)
    for k, how in enumerate(chaos.DAMAGES):  # chunks 0..5: one damage each
        chaos.damage(out, ref[3], k, how)
    manifest = json.loads((out / sw.MANIFEST).read_text())
    del manifest["chunks"][_chunk(out, 6).name]  # chunk 6 intact but not recorded
    (out / sw.MANIFEST).write_text(json.dumps(manifest))
    problems = sw.verify_sweep(out)
    assert sorted(problems) == [0, 1, 2, 3, 4, 5, 6]
    assert "(cut short or replaced)" in problems[0] and "SHA-256" in problems[1]
    assert "SHA-256" in problems[2] or "or replaced" in problems[2]  # the neighbour's size may differ
    assert "SHA-256" in problems[3] and problems[4].startswith("missing") and "(grown or replaced)" in problems[5]
    assert "not recorded" in problems[6]
    with pytest.raises(cm.InputError) as e:
        sw.read_sweep(out)
    message = str(e.value)
    assert "\n" not in message and str(out) in message and "--resume" in message
    assert "chunk-00000000.parquet" in message and str(ref[2]) in message  # the spec that made it

    argv = ["sweep", str(ref[2]), "--out", str(out), "--resume", "--no-progress", "--cpu-devices", "0"]
    assert main(argv) == 0
    err = " ".join(capsys.readouterr().err.split())
    assert "recomputed 6 chunk(s) that failed verification" in err  # 4 was missing: evaluated, not "failed"
    assert "evaluated 56, skipped 8 already written" in err
    assert chaos.digests(out) == ref[4]


def test_a_copied_chunk_with_its_copied_record_is_still_a_duplicate(ref, tmp_path):
    """The neighbour's file and its record copied over chunk 3's: sizes and hashes agree,
    the config range does not."""
    out = _copy(ref, tmp_path)
    shutil.copyfile(_chunk(out, 2), _chunk(out, 3))
    m = json.loads((out / sw.MANIFEST).read_text())
    m["chunks"][_chunk(out, 3).name] = m["chunks"][_chunk(out, 2).name]
    (out / sw.MANIFEST).write_text(json.dumps(m))
    assert "records configs 16..23 for it, expected configs 24..31" in sw.verify_sweep(out)[3]
    # A folder from before chunk records: only the config column can tell.
    for rec in ("checksums", "chunks"):
        del m[rec]
    (out / sw.MANIFEST).write_text(json.dumps(m))
    assert (
        "holds configs 16..23 (8 rows), expected configs 24..31 (a copy of another chunk?)" in sw.verify_sweep(out)[3]
    )
    with pytest.raises(cm.InputError, match="a copy of another chunk"):
        sw.read_sweep(out)
    # Resuming it keeps the chunks that pass (and records them), recomputes the copy.
    stats = sw.run_sweep(sw.load_spec(ref[2]), out, resume=True)
    assert stats.evaluated == 8 and list(stats.recomputed) == [3]
    assert sw.verify_sweep(out) == {} and sw.read_sweep(out).column("config").to_pylist() == list(range(64))
    assert {k: chaos.digests(out)[k] for k in chaos.digests(out) if k.startswith("chunk")} == {
        k: v for k, v in ref[4].items() if k.startswith("chunk")
    }


@pytest.mark.parametrize("how", ["truncate", "neighbour", "magic", "delete"])
def test_pareto_on_a_damaged_folder_exits_2_naming_the_chunk(ref, tmp_path, capsys, how):
    out = _copy(ref, tmp_path)
    chaos.damage(out, ref[3], 5, how)
    argv = ["pareto", str(out), "--x", "tokens_per_second:max", "--y", "joules_per_token"]
    assert main(argv) == 2
    line = _one_error_line(capsys.readouterr().err)
    assert "chunk-00000005.parquet" in line and f"costmodel sweep {ref[2]} --out {out} --resume" in line


def test_pareto_cli_subprocess_on_wrong_magic_bytes(ref, tmp_path):
    """The issue's case as a user sees it: not 'internal error: ArrowInvalid'."""
    out = _copy(ref, tmp_path)
    chaos.damage(out, ref[3], 5, "magic")
    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "costmodel.cli",
            "pareto",
            str(out),
            "--x",
            "tokens_per_second:max",
            "--y",
            "joules_per_token",
        ],
        env=ref[1],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode == 2
    line = _one_error_line(res.stderr)
    assert "chunk-00000005.parquet" in line and "SHA-256" in line and "--resume" in line


# --- one writer -------------------------------------------------------------------------


def _cli(*args: str) -> list[str]:
    return chaos.cli(*args)


@pytest.mark.slow
def test_writers_exclude_each_other_and_a_killed_ones_lock_is_released(ref, tmp_path):
    work, env, spec, _, want = ref
    out = tmp_path / "out"
    other = tmp_path / "other.toml"
    other.write_text(chaos.SPEC.replace('chip = "h100-sxm"', 'chip = "mi300x"'))
    slow = subprocess.Popen(
        _cli(str(spec), "--out", str(out)),
        env={**env, "COSTMODEL_SWEEP_THROTTLE_S": "2"},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 120
    while not _chunk(out, 0).exists():  # it holds the folder and is writing
        assert slow.poll() is None and time.monotonic() < deadline, slow.communicate()
        time.sleep(0.01)
    second = [
        _cli(str(spec), "--out", str(out)),
        _cli(str(spec), "--out", str(out), "--resume"),
        _cli(str(other), "--out", str(out), "--resume"),
    ]
    procs = [subprocess.Popen(a, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for a in second]
    results = [(p.wait(timeout=120), p.communicate()[1]) for p in procs]
    assert slow.poll() is None  # still writing: nobody stopped it
    for status, err in results:
        assert status == 2
        line = _one_error_line(err)
        assert str(out) in line and "another `costmodel sweep` is writing into this folder" in line
    slow.send_signal(signal.SIGKILL)
    slow.communicate(timeout=30)
    assert (out / sw.LOCK).exists()  # left by the killed run, its lock released by the kernel

    # A different spec, now that nobody writes: refused for what it is.
    res = subprocess.run(
        _cli(str(other), "--out", str(out), "--resume"), env=env, capture_output=True, text=True, timeout=120
    )
    assert res.returncode == 2
    line = _one_error_line(res.stderr)
    assert f"{out}/sweep.json" in line and "different sweep" in line
    # The same spec resumes past the stale lock, and the last writer removes it.
    assert main(["sweep", str(spec), "--out", str(out), "--resume", "--no-progress", "--cpu-devices", "0"]) == 0
    assert chaos.digests(out) == want and not (out / sw.LOCK).exists()


def test_sweep_into_a_non_empty_folder_without_resume_exits_2(ref, tmp_path):
    finished = _copy(ref, tmp_path)
    foreign = tmp_path / "photos"
    foreign.mkdir()
    (foreign / "cat.jpg").write_bytes(b"\xff\xd8")
    procs = [
        subprocess.Popen(
            _cli(str(ref[2]), "--out", str(folder)),
            env=ref[1],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for folder in (finished, foreign)
    ]
    for p, folder, shown in zip(procs, (finished, foreign), ("chunk-00000000.parquet", "cat.jpg")):
        assert p.wait(timeout=120) == 2
        line = _one_error_line(p.communicate()[1])
        assert f"{folder}: folder is not empty" in line and shown in line and "--resume" in line
    assert chaos.digests(finished) == ref[4] and [p.name for p in foreign.iterdir()] == ["cat.jpg"]


def test_a_folder_holding_only_this_sweeps_manifest_counts_as_empty(ref, tmp_path):
    """A run killed before its first chunk left only `sweep.json` (and its lock): the same
    sweep may start again without --resume; the library refuses other leftovers too."""
    out = tmp_path / "out"
    out.mkdir()
    shutil.copyfile(ref[3] / sw.MANIFEST, out / sw.MANIFEST)
    (out / sw.LOCK).touch()
    (out / ".chunk-00000003.parquet.tmp-12345").write_bytes(b"half")
    stats = sw.run_sweep(sw.load_spec(ref[2]), out)
    assert stats.evaluated == 64 and sw.verify_sweep(out) == {}
    assert not list(out.glob(".*"))  # the temporary file and the lock are gone
    with pytest.raises(cm.InputError, match="folder is not empty"):
        sw.run_sweep(sw.load_spec(ref[2]), out)


# --- infeasible rows --------------------------------------------------------------------


def _rows(tmp_path: Path, text: str, name: str):
    spec = tmp_path / f"{name}.toml"
    spec.write_text(text)
    assert main(["sweep", str(spec), "--out", str(tmp_path / name), "--no-progress", "--cpu-devices", "0"]) == 0
    return sw.read_sweep(tmp_path / name).to_pylist()


def test_work_at_a_rate_of_zero_is_infeasible_not_a_real_looking_time(tmp_path, capsys):
    rows = _rows(
        tmp_path,
        """
[base]
model = "llama-3-8b"
chip = "h100-sxm"
chips = 1
placement = "dram"
[axes]
"chip.tiers.bandwidth.dram" = { min = 0, max = 3e12, num = 4 }
""",
        "bandwidth",
    )
    assert [r["chip.tiers.bandwidth.dram"] for r in rows] == [float(np.float32(v)) for v in (0, 1e12, 2e12, 3e12)]
    assert (rows[0]["feasible"], rows[0]["infeasible"]) == (False, "zero rate")
    assert np.isfinite(rows[0]["seconds_per_step"])  # finite, as every infeasible row, but flagged
    assert all(r["feasible"] and r["infeasible"] == "" for r in rows[1:])
    rows = _rows(
        tmp_path,
        """
[base]
model = "llama-3-8b"
chip = "hbm-pim-gpu"
chips = 1
[axes]
"chip.peak_flops" = [0, 1e15]
"chip.pim_flops" = [0, 1e14]
""",
        "flops",
    )
    assert [(r["feasible"], r["infeasible"]) for r in rows] == [(False, "zero rate")] * 3 + [(True, "")]
    # A tier with no bandwidth that holds nothing is an absent tier, not an error:
    rows = _rows(
        tmp_path,
        """
[base]
model = "llama-3-8b"
chip = "h100-sxm"
chips = 1
placement = "dram"
[axes]
"chip.tiers.bandwidth.sram" = [0, 1e13]
""",
        "sram",
    )
    assert all(r["feasible"] for r in rows)
    # pareto leaves the flagged rows out.
    capsys.readouterr()
    args = ["pareto", str(tmp_path / "bandwidth"), "--x", "tokens_per_second:max", "--y", "joules_per_token", "--json"]
    assert main(args) == 0
    front = json.loads(capsys.readouterr().out)
    assert front and all(r["chip.tiers.bandwidth.dram"] > 0 for r in front)


def test_layouts_evaluate_refuses_are_infeasible_rows(tmp_path):
    rows = _rows(
        tmp_path,
        """
[base]
model = "llama-3-8b"
chip = "h100-sxm"
[axes]
chips = [1, 3, 8, 16]
""",
        "chips",
    )
    got = {r["chips"]: (r["feasible"], r["infeasible"]) for r in rows}
    # 3-way TP does not split 32 query and 8 KV heads; 16 is above the H100's max_chips (8).
    assert got == {1.0: (True, ""), 3.0: (False, "layout"), 8.0: (True, ""), 16.0: (False, "layout")}


def test_a_context_beyond_1e12_tokens_is_a_spec_error(tmp_path, capsys):
    spec = tmp_path / "ctx.toml"
    spec.write_text("[axes]\ncontext = { min = 1e3, max = 1e13, num = 3, scale = 'log' }\n")
    assert main(["sweep", str(spec), "--out", str(tmp_path / "out"), "--no-progress"]) == 2
    line = _one_error_line(capsys.readouterr().err)
    assert str(spec) in line and "'context' = 10000000000000.0" in line and "<= 1e+12" in line
    assert not (tmp_path / "out").exists()
    # Within the bound, a context that no system holds is an infeasible row.
    rows = _rows(
        tmp_path,
        "[base]\nchip = 'h100-sxm'\n[axes]\ncontext = [4096, 1e12]\n",
        "long",
    )
    assert [(r["feasible"], r["infeasible"]) for r in rows] == [(True, ""), (False, "over capacity")]
    assert rows[1]["overflow_bytes_per_chip"] > 0


# --- chaos ------------------------------------------------------------------------------


@pytest.mark.slow
def test_chaos_kill_damage_resume(ref, tmp_path):
    """10 seeded trials: kill -9 at a random moment, damage a random kept chunk, resume."""
    work, env, spec, folder, want = ref
    rng = np.random.default_rng(2018)
    records = [
        chaos.trial(rng, spec, folder, want, tmp_path / f"trial-{i}", env, resume=main, throttle="0.05")
        for i in range(10)
    ]
    failed = [r for r in records if not r["passed"]]
    assert failed == [], [r["problems"] for r in failed]
    # The trials were chaos, not ten clean finishes: killed with work done and work left.
    assert sum(0 < r["chunks_at_kill"] < chaos.N_CHUNKS for r in records) >= 3, records
    assert sum(r["damage"] is not None for r in records) >= 3, records


def test_chunk_bytes_do_not_depend_on_how_the_run_went(ref):
    """The reference's records are the files' own hashes (what makes byte-identity checkable)."""
    m = json.loads((ref[3] / sw.MANIFEST).read_text())
    assert m["checksums"] == "sha256" and len(m["chunks"]) == chaos.N_CHUNKS
    for name, rec in m["chunks"].items():
        data = (ref[3] / name).read_bytes()
        assert rec["sha256"] == hashlib.sha256(data).hexdigest() and rec["bytes"] == len(data)
        k = int(name[6:14])
        assert rec["configs"] == [8 * k, 8 * k + 8] and rec["rows"] == 8
