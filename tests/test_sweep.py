"""Sweeps: spec validation, sampling, agreement with `evaluate`, resume, Pareto."""

import itertools
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import costmodel as cm
import costmodel.sweep as sw
from costmodel._core.area import REFERENCE_DIE_AREA
from costmodel._core.chip import DEFAULT_OVERLAP
from costmodel.cli import main
from costmodel.sweep import sampling


REPO = Path(__file__).resolve().parent.parent
RESULT_COLUMNS = [*sw.RESULTS, "bound", "feasible", "chips_used", "placement"]


def write_spec(tmp_path: Path, text: str, name: str = "spec.toml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


SMALL = """
[sweep]
sampling = "grid"

[base]
chips = "auto"

[axes]
model = ["llama-3-8b", "llama-3-70b", "mixtral-8x7b"]
chip = ["h100-sxm", "groq-lpu", "hbm-pim-gpu"]
batch = [1, 16, 128]
context = { min = 512, max = 32768, num = 4, scale = "log" }
kv = ["bf16", "fp8"]
"""
"""216 configs over presets (three placement policies among the chips' own)."""

BIG = """
[sweep]
sampling = "random"
samples = 3000
seed = 7

[base]
model = "llama-3-8b"
chips = 1

[axes]
chip = ["h100-sxm", "mi300x"]
batch = { min = 1, max = 256, scale = "log" }
context = { min = 128, max = 131072, scale = "log" }
placement = ["dram", "greedy"]
"chip.tiers.bandwidth.dram" = { min = 1e12, max = 8e12 }
"""
"""3,000 configs for the interruption, sharding and multi-process tests."""

CHUNK = 250
"""One chunk size for BIG everywhere, so that one compiled program serves the tests."""


@pytest.fixture(scope="module")
def small_spec(tmp_path_factory):
    return sw.load_spec(write_spec(tmp_path_factory.mktemp("small"), SMALL))


@pytest.fixture(scope="module")
def small_table(small_spec):
    return sw.cached_sweep(small_spec, chunk=small_spec.n_configs).table(0, small_spec.n_configs)


@pytest.fixture(scope="module")
def big(tmp_path_factory):
    """(spec path, finished reference folder, its table), evaluated in this process."""
    folder = tmp_path_factory.mktemp("big")
    path = write_spec(folder, BIG)
    sw.run_sweep(sw.load_spec(path), folder / "ref", chunk=CHUNK)
    return path, folder / "ref", sw.read_sweep(folder / "ref")


@pytest.fixture(scope="module")
def jax_cache(tmp_path_factory):
    """A compilation cache shared by the subprocesses (they compile the same program)."""
    return str(tmp_path_factory.mktemp("jax-cache"))


# --- spec validation ------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, needles",
    [
        ("[sweep]\nsampling = 'grid'\nspeed = 1\n", ["[sweep]", "'speed'"]),
        ("[axes]\nbatchsize = [1, 2]\n", ["[axes]", "'batchsize'", "did you mean 'batch'"]),
        ("[axes]\nbatch = [0, 2]\n", ["[axes]", "'batch'", "0", ">= 1"]),
        ("[axes]\ncontext = { min = 1, max = 10 }\n", ["'context'", "'num'"]),
        ("[axes]\ncontext = { min = 0, max = 10, num = 3, scale = 'log' }\n", ["'context'", "min = 0", "> 0"]),
        ("[axes]\ncontext = { min = 10, max = 1, num = 3 }\n", ["'context'", "max = 1", ">= min"]),
        ("[axes]\ncontext = { min = 1, max = 2, num = 3, step = 1 }\n", ["'context'", "'step'"]),
        ("[axes]\nmodel = ['llama-3-8b', 'llama-9']\n", ["'model'", "'llama-9'", "unknown preset"]),
        ("[axes]\nweights = ['bf16', 'bf17']\n", ["'weights'", "'bf17'", "format"]),
        ("[axes]\nplacement = ['dram', 'cache']\n", ["'placement'", "'cache'", "greedy"]),
        ("[axes]\nchips = { min = 1, max = 8 }\n", ["'chips'", "list of values"]),
        ("[axes]\n'chip.tiers.efficiency.dram' = [0.5, 1.5]\n", ["'chip.tiers.efficiency.dram'", "1.5", "(0, 1]"]),
        ("[axes]\nbatch = 4\n", ["'batch'", "= 4", "list of values or a range"]),
        ("[base]\nbatch = [1, 2]\n", ["[base]", "'batch'", "one value"]),
        ("[base]\nbatch = 2\n[axes]\nbatch = [1, 2]\n", ["'batch'", "also set in [base]"]),
        ("[base]\nchip = 'h100-sxm'\n[axes]\n'area.sram' = [0.1]\n", ["'chip'", "area"]),
        ("[sweep]\nsampling = 'random'\n[axes]\nbatch = [1, 2]\n", ["'samples'"]),
        ("[sweep]\nsampling = 'grid'\nsamples = 10\n", ["'samples'", "random"]),
        ("[sweep]\nsampling = 'sobol'\n", ["'sampling'", "'sobol'", "'grid' or 'random'"]),
        ("[plot]\nx = 1\n", ["unknown section 'plot'"]),
        ("[axes]\nbatch = [1, 2\n", ["not valid TOML"]),
        (
            "[sweep]\nsampling = 'random'\nsamples = 4294967296\n[axes]\nbatch = [1, 2]\n",
            ["[sweep]", "'samples'", "4294967296", "32-bit"],
        ),
        (
            "[axes]\ncontext = { min = 1, max = 2, num = 65536 }\nprefix = { min = 0, max = 1, num = 65536 }\n",
            ["[axes]", "4294967296 configs", "32-bit"],
        ),
    ],
)
def test_bad_spec_names_file_field_value(tmp_path, text, needles):
    path = write_spec(tmp_path, text)
    with pytest.raises(cm.InputError) as e:
        sw.load_spec(path)
    message = str(e.value)
    assert str(path) in message
    for needle in needles:
        assert needle in message, (needle, message)


def test_nested_tables_flatten_to_dotted_names(tmp_path):
    nested = write_spec(tmp_path, "[axes.chip.tiers.bandwidth]\ndram = [1e12, 2e12]\n", "a.toml")
    dotted = write_spec(tmp_path, "[axes]\n'chip.tiers.bandwidth.dram' = [1e12, 2e12]\n", "b.toml")
    a, b = sw.load_spec(nested), sw.load_spec(dotted)
    assert a.axes == b.axes and a.axes[0].name == "chip.tiers.bandwidth.dram"


def test_shipped_specs_load():
    for path in sorted(sw.data_sweeps().glob("*.toml")):
        spec = sw.load_spec(path)
        assert spec.n_configs >= 1, path


def test_cli_bad_spec_exits_2_with_one_line(tmp_path, capsys):
    path = write_spec(tmp_path, "[axes]\nbatch = [-1]\n")
    assert main(["sweep", str(path), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and str(path) in err and "'batch'" in err and "-1" in err


# --- sampling -----------------------------------------------------------------------------


@pytest.mark.parametrize("n", [1, 2, 3, 7, 64, 1000, 4097, 2**20 + 1])
def test_permute_is_a_bijection(n):
    # 1000 and 2**20 + 1 are not a * b of their radices: some indices cycle-walk.
    a, b = sampling._radices(n)
    assert n <= a * b < n + a
    y = np.asarray(sw.permute(np.arange(n, dtype=np.uint32), n, sampling._key(3, 1)))
    assert y.dtype == np.uint32 and np.array_equal(np.sort(y), np.arange(n))
    if n >= 64:  # and not the identity
        assert np.mean(y == np.arange(n)) < 0.1


def test_permute_near_the_uint32_limit_stays_in_range_and_distinct():
    n = sw.MAX_CONFIGS  # a * b = 2**32: the largest values uint32 holds
    index = np.concatenate([np.arange(2048), n - 1 - np.arange(2048)]).astype(np.uint32)
    y = np.asarray(sw.permute(index, n, sampling._key(0, 1)))
    assert (y < n).all() and len(np.unique(y)) == len(index)
    assert (y > n // 2).any() and (y < n // 2).any()  # spread over the whole range


def test_latin_hypercube_one_point_per_stratum_and_chunk_independent():
    n, dims = 1000, 3
    u = np.asarray(sw.latin_hypercube(np.arange(n, dtype=np.uint32), n, dims, seed=5))
    assert u.shape == (dims, n) and u.dtype == np.float32
    assert np.all((u >= 0) & (u < 1))
    for dim in range(dims):
        k = np.asarray(sw.permute(np.arange(n, dtype=np.uint32), n, sampling._key(5, dim, 1))).astype(np.float64)
        assert np.array_equal(np.sort(k), np.arange(n))  # one point per stratum...
        lo, hi = k / n, (k + 1) / n  # ...and the point is in it (to float32 rounding)
        assert np.all(u[dim] >= lo - 2.0**-24) and np.all(u[dim] < hi + 2.0**-24)
        assert len(np.unique(u[dim] * n - k)) > n // 2  # jittered inside the stratum
    parts = [sw.latin_hypercube(np.arange(a, b, dtype=np.uint32), n, dims, 5) for a, b in [(0, 333), (333, 1000)]]
    np.testing.assert_array_equal(u, np.concatenate([np.asarray(p) for p in parts], axis=1))
    assert abs(np.corrcoef(u[0], u[1])[0, 1]) < 0.1  # dimensions are paired at random


def test_configs_are_the_values_the_table_holds(big):
    spec_path, _, want = big
    s = sw.cached_sweep(sw.load_spec(spec_path), chunk=CHUNK)
    values = s.configs(CHUNK, 3 * CHUNK)  # spans two chunks
    for name, v in values.items():
        col = want.column(name).slice(CHUNK, 2 * CHUNK)
        if name in sw.CHOICES:
            assert v.dtype == np.int32 and col.to_pylist() == [s.choices[name][i] for i in v]
        else:
            assert v.dtype == np.float32 and col.type == pa.float32()
            np.testing.assert_array_equal(col.to_numpy(), v)


def test_grid_enumerates_every_combination_last_axis_fastest(small_spec, small_table):
    spec = small_spec
    assert spec.n_configs == 3 * 3 * 3 * 4 * 2
    t = small_table.to_pydict()
    got = list(zip(t["model"], t["chip"], t["batch"], t["context"], t["kv"]))
    grids = [a.grid() for a in spec.axes]
    assert got == list(itertools.product(*grids))
    np.testing.assert_allclose(grids[3], [512, 2048, 8192, 32768], rtol=1e-12)


def test_random_ranges_and_choices_stay_in_bounds(big):
    t = big[2].to_pandas()
    assert t.batch.between(1, 256).all() and t.context.between(128, 131072).all()
    # Latin hypercube: each choice of a 2-value axis is drawn n/2 times (+-1).
    assert abs((t.chip == "h100-sxm").sum() - 1500) <= 1
    assert abs(np.log(t.batch).mean() - np.log(16)) < 0.05  # log-uniform on [1, 256]


# --- agreement with the one-config API ---------------------------------------------------------


def test_rows_equal_evaluate(small_table):
    t = small_table.to_pylist()
    checked = 0
    for r in t[::9]:  # system sizing, placement and cost as `evaluate` does them
        try:
            e = cm.evaluate(r["model"], r["chip"], batch=r["batch"], context=r["context"], kv=r["kv"])
        except cm.InputError:  # fits on no system of max_chips: the sweep marks it infeasible
            assert not r["feasible"]
            continue
        checked += 1
        assert r["chips_used"] == e.tensor_parallel * e.pipeline_parallel
        assert r["placement"] == e.info.placement
        assert r["bound"] == cm.BOUNDS[int(e.cost.bound)]
        assert r["feasible"] == bool(e.cost.feasible)
        for col, val in [
            ("seconds_per_step", e.cost.seconds_per_step),
            ("tokens_per_second", e.cost.tokens_per_second),
            ("joules_per_token", e.cost.joules_per_token),
            ("power_watts_per_chip", e.cost.power),
        ]:
            np.testing.assert_allclose(r[col], float(val), rtol=2e-5, err_msg=col)
    assert checked >= 18


def test_chip_field_axes_override_the_chip(tmp_path):
    text = """
[base]
model = "llama-3-8b"
chip = "h100-sxm"
chips = 1
batch = 8
[axes]
"chip.tiers.bandwidth.dram" = [1e12, 4e12]
"chip.peak_flops" = [1e14, 1e15]
"""
    spec = sw.load_spec(write_spec(tmp_path, text))
    rows = sw.Sweep(spec, chunk=4).table(0, 4).to_pylist()
    base = cm.chip_preset("h100-sxm")
    w = cm.Workload(cm.model_preset("llama-3-8b"), cm.make_scenario(batch=8))
    for r in rows:
        tiers = base.tiers.replace(bandwidth=base.tiers.bandwidth.at[2].set(r["chip.tiers.bandwidth.dram"]))
        chip = base.replace(tiers=tiers, peak_flops=jnp.full((4,), r["chip.peak_flops"]))
        cost, _ = cm.evaluate_policy(w, chip, "dram")
        np.testing.assert_allclose(r["seconds_per_step"], float(cost.seconds_per_step), rtol=1e-5)
    # The table holds the float32 values the program used.
    s = {(r["chip.tiers.bandwidth.dram"], r["chip.peak_flops"]): r["seconds_per_step"] for r in rows}
    f = lambda *v: tuple(float(np.float32(x)) for x in v)
    assert set(s) == {f(bw, fl) for bw in (1e12, 4e12) for fl in (1e14, 1e15)}
    # More bandwidth never slows a step down; more FLOP/s neither.
    assert s[f(4e12, 1e14)] < s[f(1e12, 1e14)] and s[f(1e12, 1e15)] <= s[f(1e12, 1e14)]


AREA = """
[base]
model = "llama-3-8b"
context = 32768
placement = "greedy"
chips = 1
[axes]
"area.node" = ["N5", "N3"]
"area.sram" = [0.0, 0.2, 1.0]
"area.pim_share" = [0.0, 0.375]
"area.stacks" = [4, 6]
"""
"""24 two-die designs: no SRAM, some, and no compute; no PIM die and 3 of 8 per stack."""


def _direct_design(row):
    """The design of a sweep row built straight from co-design's vector (not the sweep's path)."""
    tech, econ = cm.tech_preset(row["area.node"]), cm.economics_preset(row["area.node"])
    x = cm.design_logits(1 - row["area.sram"], row["area.pim_share"], row["area.stacks"], tech, econ)
    design = cm.design_point(x, tech, econ, logic_area=row["area.logic_mm2"] * 1e-6, n_stacks=row["area.stacks"])
    return tech, design


def test_area_rows_equal_chip_from_design(tmp_path):
    """Each area config is `chip_from_design` of the same design, evaluated directly:
    the same decode time and energy, and the design's numbers in the row."""
    spec = sw.load_spec(write_spec(tmp_path, AREA))
    rows = sw.Sweep(spec, chunk=24).table(0, 24).to_pylist()
    w = cm.Workload(cm.model_preset("llama-3-8b"), cm.make_scenario(context=32768))
    for r in rows:
        tech, design = _direct_design(r)
        if r["area.sram"] == 1:  # no compute area: nowhere for the host's FLOPs to run
            assert not r["feasible"] and np.isfinite(r["seconds_per_step"]) and r["area.compute_mm2"] == 0
            continue
        chip = cm.chip_from_design(design, tech, memory_efficiency=jnp.array([0.9, 1.0, 0.9]))
        cost, _ = cm.evaluate_policy(w, chip, "greedy")
        np.testing.assert_allclose(r["seconds_per_step"], float(cost.seconds_per_step), rtol=1e-5)
        np.testing.assert_allclose(r["joules_per_token"], float(cost.joules_per_token), rtol=1e-5)
        assert r["feasible"] == bool(cost.feasible)
        np.testing.assert_allclose(r["area.compute"], 1 - r["area.sram"], rtol=1e-6)
        np.testing.assert_allclose(r["area.compute_mm2"], float(design.compute_area) * 1e6, rtol=1e-5)
        np.testing.assert_allclose(r["area.sram_mm2"], float(design.sram_area) * 1e6, rtol=1e-5)
        np.testing.assert_allclose(r["area.pim_dies"], r["area.pim_share"] * r["area.stacks"] * 8, rtol=1e-6)
        np.testing.assert_allclose(r["area.chip_usd"], float(design.chip_usd), rtol=1e-5)
        # The logic die is its I/O and PHYs and the two parts; PIM is not on it.
        total = r["area.io_and_phys_mm2"] + r["area.compute_mm2"] + r["area.sram_mm2"]
        np.testing.assert_allclose(total, r["area.logic_mm2"], rtol=1e-5)
        if r["area.sram"] == 0:  # an empty share gets no area at all
            assert r["area.sram_mm2"] == 0.0 and float(chip.tiers.capacity[0]) == 0.0
        if r["area.pim_share"] == 0:  # and no PIM die
            assert r["area.pim_dies"] == 0.0 and float(chip.pim_flops) == 0.0


def test_area_configs_vmapped_in_one_call_equal_each_config_alone(tmp_path):
    """One compiled, vmapped call over random two-die designs (continuous shares) agrees
    with the same config function jitted without vmap, config by config, and neither
    recompiles per config."""
    text = """
[sweep]
sampling = "random"
samples = 12
seed = 3
[base]
model = "llama-3-8b"
chips = "auto"
[axes]
"area.node" = ["N5", "N3"]
"area.logic_mm2" = { min = 300, max = 858 }
"area.sram" = { min = 0.0, max = 0.9 }
"area.pim_share" = { min = 0.0, max = 1.0 }
"area.stacks" = [2, 5, 6]
batch = { min = 1, max = 64, scale = "log" }
"""
    s = sw.Sweep(sw.load_spec(write_spec(tmp_path, text)), chunk=12)
    values, results = s.dispatch(0, 12)
    assert s.traces == 1
    configs = s.configs(0, 12)
    for name, column in configs.items():  # the program evaluated the configs it reports
        np.testing.assert_array_equal(np.asarray(values[name]), column)
    assert len(set(configs["area.pim_share"].tolist())) == 12  # every config its own design
    for i in range(12):
        one = s.single({k: v[i] for k, v in configs.items()})
        for name in ("seconds_per_step", "joules_per_token", "area.compute_mm2", "area.chip_usd"):
            np.testing.assert_allclose(np.asarray(results[name])[i], np.asarray(one[name]), rtol=1e-5, err_msg=name)
        assert bool(np.asarray(results["feasible"])[i]) == bool(one["feasible"])
    assert s.traces == 2  # the vmapped program once, the single-config function once
    assert np.any(np.asarray(results["feasible"]))


def test_compiled_once_and_last_chunk_padded(small_spec, small_table):
    s = sw.Sweep(small_spec, chunk=50)  # 216 configs
    tables = [s.table(*s.chunk_range(k)) for k in range(s.n_chunks)]
    assert s.traces == 1 and s.n_chunks == 5 and tables[-1].num_rows == 16
    assert pa.concat_tables(tables).equals(small_table)


# --- streaming, resume, sharding, processes ------------------------------------------------------


def test_resume_after_lost_chunks_equals_uninterrupted_run(tmp_path, big):
    spec_path, ref, want = big
    spec = sw.load_spec(spec_path)
    assert sorted(p.name for p in ref.glob("chunk-*")) == [f"chunk-{k:08d}.parquet" for k in range(12)]
    out = tmp_path / "out"
    stats = sw.run_sweep(spec, out, chunk=CHUNK)
    assert (stats.evaluated, stats.skipped) == (3000, 0)
    (out / "chunk-00000002.parquet").unlink()
    (out / "chunk-00000011.parquet").rename(out / ".chunk-00000011.parquet.tmp-999")  # as a kill mid-write leaves
    with pytest.raises(cm.InputError, match="2 chunk"):
        sw.read_sweep(out)
    stats = sw.run_sweep(spec, out, resume=True)  # chunk size read from sweep.json
    assert (stats.evaluated, stats.skipped) == (500, 2500)
    assert not list(out.glob(".*tmp*"))
    assert sw.read_sweep(out).equals(want)
    with pytest.raises(cm.InputError, match="chunk"):
        sw.run_sweep(spec, out, chunk=400, resume=True)
    other = sw.load_spec(write_spec(tmp_path, BIG.replace("seed = 7", "seed = 8"), "other.toml"))
    with pytest.raises(cm.InputError, match="different sweep"):
        sw.run_sweep(other, out, resume=True)


def test_folder_of_the_old_host_sampler_is_read_but_not_resumed(tmp_path, big):
    import shutil

    spec_path, ref, _ = big
    out = tmp_path / "out"
    shutil.copytree(ref, out)
    m = json.loads((out / sw.MANIFEST).read_text())
    m["format"] = "costmodel-sweep/1"  # the numpy sampler drew other configs
    (out / sw.MANIFEST).write_text(json.dumps(m))
    assert sw.read_manifest(out)["n_chunks"] == 12 and sw.read_sweep(out).num_rows == 3000
    for resume in (True, False):
        with pytest.raises(cm.InputError, match="'format' = 'costmodel-sweep/1': expected 'costmodel-sweep/2'"):
            sw.run_sweep(sw.load_spec(spec_path), out, resume=resume)


def _cli(*args: str, env: dict | None = None) -> list[str]:
    return [sys.executable, "-m", "costmodel.cli", "sweep", *args, "--no-progress"]


def _env(cache: str, **extra: str) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("XLA_FLAGS", "COSTMODEL_SWEEP_THROTTLE_S")}
    env.update(
        JAX_PLATFORMS="cpu",
        JAX_COMPILATION_CACHE_DIR=cache,
        JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS="0",
        JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES="0",
        **extra,
    )
    return env


@pytest.mark.slow
def test_killed_sweep_resumes_to_the_uninterrupted_table(tmp_path, big, jax_cache):
    spec_path, _, want = big
    out = tmp_path / "out"
    proc = subprocess.Popen(
        _cli(str(spec_path), "--out", str(out), "--chunk", str(CHUNK), "--cpu-devices", "1"),
        env=_env(jax_cache, COSTMODEL_SWEEP_THROTTLE_S="0.1"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 60
    while len(list(out.glob("chunk-*.parquet"))) < 3:
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=30)
    assert proc.returncode == -signal.SIGKILL  # it was killed, not finished
    done = len(list(out.glob("chunk-*.parquet")))
    assert 3 <= done < 12
    res = subprocess.run(
        _cli(str(spec_path), "--out", str(out), "--resume", "--cpu-devices", "1"),
        env=_env(jax_cache),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode == 0, res.stderr
    assert f"skipped {done * CHUNK} already written" in " ".join(res.stderr.split())
    got = sw.read_sweep(out)
    assert got.num_rows == 3000 and got.equals(want)


@pytest.mark.slow
def test_sharded_over_4_devices_equals_single_device(tmp_path, big, jax_cache):
    spec_path, _, want = big
    assert jax.device_count() == 1  # the reference ran on one device
    out = tmp_path / "out"
    res = subprocess.run(
        # 250 is not a multiple of 4: each chunk is padded to 252 for the mesh.
        _cli(str(spec_path), "--out", str(out), "--chunk", str(CHUNK)),
        env=_env(jax_cache, XLA_FLAGS="--xla_force_host_platform_device_count=4"),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode == 0, res.stderr
    assert "on 4 devices" in " ".join(res.stderr.split())
    assert sw.read_sweep(out).equals(want)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("localhost", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_two_processes_cover_every_config_exactly_once(tmp_path, big, jax_cache):
    spec_path, _, want = big
    out = tmp_path / "out"
    port = _free_port()
    procs = [
        subprocess.Popen(
            _cli(str(spec_path), "--out", str(out), "--chunk", str(CHUNK), "--cpu-devices", "1")
            + ["--coordinator", f"localhost:{port}", "--num-processes", "2", "--process-id", str(i)],
            env=_env(jax_cache),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(2)
    ]
    errs = [p.communicate(timeout=120)[1] for p in procs]
    assert [p.returncode for p in procs] == [0, 0], errs
    errs = [" ".join(e.split()) for e in errs]
    assert "process 0 of 2 on 1 devices: chunks 0..5, evaluated 1500" in errs[0]
    assert "process 1 of 2 on 1 devices: chunks 6..11, evaluated 1500" in errs[1]
    got = sw.read_sweep(out)
    assert sorted(got.column("config").to_pylist()) == list(range(3000))
    assert got.equals(want)


def test_process_chunks_partition():
    for n, count in [(10, 3), (3, 4), (1, 1), (1000, 7)]:
        parts = [list(sw.process_chunks(n, i, count)) for i in range(count)]
        assert sum(parts, []) == list(range(n))


# --- Pareto -----------------------------------------------------------------------------------------


def _brute_front(x, y):
    keep = []
    for i in range(len(x)):
        if not (np.isfinite(x[i]) and np.isfinite(y[i])):
            continue
        dominated = any(
            (x[j] <= x[i] and y[j] <= y[i] and (x[j] < x[i] or y[j] < y[i]))
            or (x[j] == x[i] and y[j] == y[i] and j < i)
            for j in range(len(x))
            if np.isfinite(x[j]) and np.isfinite(y[j])
        )
        if not dominated:
            keep.append(i)
    return keep


def test_pareto_mask_matches_brute_force():
    rng = np.random.default_rng(1)
    for _ in range(20):
        x = rng.integers(0, 8, 60).astype(float)
        y = rng.integers(0, 8, 60).astype(float)
        x[rng.integers(0, 60, 3)] = np.nan
        for mx, my in itertools.product([False, True], repeat=2):
            got = np.flatnonzero(sw.pareto_mask(x, y, mx, my)).tolist()
            assert got == _brute_front(-x if mx else x, -y if my else y)


def test_pareto_cli_front_and_png(tmp_path, capsys, big):
    import shutil

    out = tmp_path / "out"
    shutil.copytree(big[1], out)
    png, csv = tmp_path / "front.png", tmp_path / "front.csv"
    argv = ["pareto", str(out), "--x", "tokens_per_second_per_sequence:max", "--y", "joules_per_token:min"]
    assert main([*argv, "--out", str(png), "--csv", str(csv)]) == 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    t = big[2].to_pandas()
    t = t[t.feasible].reset_index(drop=True)
    want = _brute_front(-t.tokens_per_second_per_sequence.to_numpy(), t.joules_per_token.to_numpy())
    import pandas as pd

    front = pd.read_csv(csv)
    assert sorted(front.config) == sorted(t.config[want])
    assert front.tokens_per_second_per_sequence.is_monotonic_decreasing
    assert front.joules_per_token.is_monotonic_decreasing
    capsys.readouterr()
    assert main([*argv[:-1], "no_such_column"]) == 2
    assert "'no_such_column'" in capsys.readouterr().err
    (out / "chunk-00000001.parquet").unlink()
    assert main(argv) == 2
    assert "--resume" in capsys.readouterr().err


def test_manifest_records_the_spec(big):
    spec_path, ref, _ = big
    spec = sw.load_spec(spec_path)
    m = json.loads((ref / "sweep.json").read_text())
    assert (m["n_configs"], m["chunk"], m["n_chunks"]) == (3000, CHUNK, 12)
    assert m["spec_sha256"] == spec.digest() and m["spec"]["sweep"]["seed"] == 7
    meta = pq.read_schema(ref / "chunk-00000000.parquet")
    assert set(RESULT_COLUMNS) <= set(meta.names)


# --- the package's surface -----------------------------------------------------------------------


def test_area_defaults_are_the_zero_design_vector():
    """A default area config is `chip_from_design` of the zero design vector (compute and
    SRAM alike, half the DRAM dies PIM dies) with 5 stacks on the reference logic die."""
    spec = sw.parse_spec({"base": {"area.node": "N5", "chips": 1, "placement": "greedy"}})
    row = sw.Sweep(spec, chunk=1).table(0, 1).to_pylist()[0]
    assert row["area.logic_mm2"] == 814.0 and row["area.overlap"] == DEFAULT_OVERLAP
    assert (row["area.sram"], row["area.pim_share"], row["area.stacks"]) == (0.5, 0.5, 5.0)
    tech, econ = cm.tech_preset("N5"), cm.economics_preset("N5")
    design = cm.design_point(jnp.zeros(5), tech, econ, logic_area=REFERENCE_DIE_AREA)
    chip = cm.chip_from_design(design, tech, memory_efficiency=jnp.array([0.9, 1.0, 0.9]))
    w = cm.Workload(cm.model_preset("llama-3-8b"), cm.make_scenario())
    cost, _ = cm.evaluate_policy(w, chip, "greedy")
    np.testing.assert_allclose(row["seconds_per_step"], float(cost.seconds_per_step), rtol=1e-5)
    np.testing.assert_allclose(row["area.chip_usd"], float(design.chip_usd), rtol=1e-6)


@pytest.mark.parametrize(
    "section, field, value, new",
    [
        ("base", "area.budget_mm2", "814", "'area.logic_mm2'"),
        ("axes", "area.pim", "[0.0, 0.5]", "'area.pim_share'"),
        ("axes", "area.n_stacks", "[4, 5]", "'area.stacks'"),
    ],
)
def test_old_area_fields_name_the_new_one(tmp_path, capsys, section, field, value, new):
    """The single-budget model's fields are one-line errors naming file, field, value and
    the field to use, in the library and on the command line."""
    node = "['N5']" if section == "axes" else "'N5'"
    path = write_spec(tmp_path, f"[{section}]\n'area.node' = {node}\n'{field}' = {value}\n")
    with pytest.raises(cm.InputError) as e:
        sw.load_spec(path)
    message = str(e.value)
    for needle in (str(path), f"[{section}]", repr(field), f"= {value}", new):
        assert needle in message, (needle, message)
    assert "\n" not in message
    assert main(["sweep", str(path), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert new in err and err.count("\n") == 1


def test_without_pyarrow_the_store_says_how_to_install_it(tmp_path, monkeypatch, big):
    monkeypatch.setitem(sys.modules, "pyarrow", None)  # `import pyarrow` raises ImportError
    with pytest.raises(cm.InputError, match=r"pip install 'costmodel\[all\]'"):
        sw.read_sweep(big[1])
    with pytest.raises(cm.InputError, match="pyarrow"):
        sw.run_sweep(sw.parse_spec({"axes": {"batch": [1, 2]}}), tmp_path / "out")


def test_without_rich_a_run_without_a_progress_bar_works(tmp_path, monkeypatch):
    # rich comes with the `cli` extra; its submodules may be imported already.
    for name in [m for m in sys.modules if m == "rich" or m.startswith("rich.")] + ["rich"]:
        monkeypatch.setitem(sys.modules, name, None)
    spec = sw.parse_spec({"axes": {"batch": [1, 2]}})
    assert sw.run_sweep(spec, tmp_path / "out").evaluated == 2
    with pytest.raises(cm.InputError, match=r"rich.*pip install 'costmodel\[all\]'"):
        sw.run_sweep(spec, tmp_path / "out", progress=True)


def test_library_run_records_the_provenance_it_is_given(tmp_path):
    spec = sw.parse_spec({"axes": {"batch": [1, 2]}})
    sw.run_sweep(spec, tmp_path / "a")
    assert sw.read_manifest(tmp_path / "a")["provenance"] is None
    record = {"costmodel_version": cm.__version__, "inputs": {}}
    sw.run_sweep(spec, tmp_path / "b", provenance=record)
    m = sw.read_manifest(tmp_path / "b")
    assert m["provenance"] == record and m["costmodel_version"] == cm.__version__
    assert sw.read_manifest(tmp_path / "a")["costmodel_version"] == cm.__version__


def test_the_plot_moved_to_the_report_layer_with_a_warning():
    from costmodel.report.sweep_plots import plot_pareto

    with pytest.warns(DeprecationWarning, match="costmodel.report.sweep_plots"):
        assert sw.plot_pareto is plot_pareto
    with pytest.raises(AttributeError):
        sw.no_such_name  # noqa: B018
