"""Inputs that are physically impossible or outside what the data supports (issue 18).

Each class is checked in one place and every command reaches it: a model's heads
(`io.models.check_heads`), a system's chip count (`evaluation.check_layout`), fraction
vectors (`cli.args.fraction_vector`), a chip's power cap against its static power
(`io.chips.check_power`), output paths (`io.files.check_output_path`), and the CLI's
batch and context (`cli.args.add_scenario_args`). Each case asserts exit status 2 and
one stderr line naming the file or option, the field, the value and what was
expected; at least one case per class runs the CLI in a subprocess, as a user does.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from costmodel.cli import main


ROOT = Path(__file__).resolve().parents[1]

LLAMA3_8B = {
    "num_hidden_layers": 32,
    "hidden_size": 4096,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "intermediate_size": 14336,
    "vocab_size": 128256,
}


def run(args, capsys):
    """`costmodel ARGS` in-process: (exit status, stdout, stderr)."""
    code = main(args)
    out = capsys.readouterr()
    return code, out.out, out.err


def run_subprocess(args, cwd=None):
    """`costmodel ARGS` as a user runs it: (exit status, stdout, stderr)."""
    proc = subprocess.run(
        [sys.executable, "-m", "costmodel.cli", *args], capture_output=True, text=True, cwd=cwd, timeout=300
    )
    return proc.returncode, proc.stdout, proc.stderr


def one_error_line(err: str, *needles: str) -> None:
    """`err` is exactly one `costmodel: error:` line holding every needle, no traceback."""
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("costmodel: error: "), err
    assert "Traceback" not in err and "internal error" not in err
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])


def config(tmp_path: Path, name: str = "config.json", **changes) -> str:
    path = tmp_path / name
    path.write_text(json.dumps({**LLAMA3_8B, **changes}))
    return str(path)


# --- 1. model consistency: heads, KV heads, hidden size -----------------------------


def test_hf_config_heads_subprocess(tmp_path):
    path = config(tmp_path, hidden_size=4097)
    code, out, err = run_subprocess(["evaluate", "--model", path])
    assert code == 2 and out == ""
    one_error_line(err, path, "'hidden_size' = 4097", "multiple of 'num_attention_heads' (32)")


@pytest.mark.parametrize(
    "changes,needles",
    [
        ({"num_key_value_heads": 5}, ("'num_key_value_heads' = 5", "divisor of 'num_attention_heads' (32)")),
        ({"num_key_value_heads": 64}, ("'num_key_value_heads' = 64", "divisor of 'num_attention_heads' (32)")),
        ({"num_attention_heads": 0}, ("'num_attention_heads' = 0", "whole number >= 1")),
        ({"num_attention_heads": 32.5}, ("'num_attention_heads' = 32.5", "whole number >= 1")),
        ({"hidden_size": -4096}, ("'hidden_size' = -4096", "whole number >= 1")),
        ({"num_key_value_heads": 0}, ("'num_key_value_heads' = 0", "whole number >= 1")),
        ({"tie_word_embeddings": "yes"}, ("'tie_word_embeddings' = 'yes'", "true or false")),
    ],
)
def test_hf_config_heads(tmp_path, capsys, changes, needles):
    path = config(tmp_path, **changes)
    code, _, err = run(["evaluate", "--model", path], capsys)
    assert code == 2
    one_error_line(err, path, *needles)


def test_hf_config_consistent_heads_are_accepted(tmp_path, capsys):
    # head_dim given: the width need not be d_model / n_heads (Gemma-2: 16 x 256 on 3584).
    gemma = config(tmp_path, "gemma.json", hidden_size=3584, num_attention_heads=16, head_dim=256)
    # MQA (1 KV head) and MHA (as many KV heads as query heads) both divide; a tied
    # embedding given as JSON `true` is a bool, not a count.
    mqa = config(tmp_path, "mqa.json", num_key_value_heads=1, tie_word_embeddings=True)
    mha = config(tmp_path, "mha.json", num_key_value_heads=32)
    for path in (gemma, mqa, mha):
        code, out, err = run(["evaluate", "--model", path, "--json"], capsys)
        assert code == 0, err
        assert json.loads(out)["seconds_per_step"] > 0


MODEL_TOML = """n_layers = 2
d_model = 512
n_heads = 8
n_kv_heads = 2
d_ff = 1024
vocab = 1000
"""


@pytest.mark.parametrize(
    "edit,needles",
    [
        (("d_model = 512", "d_model = 500"), ("'d_model' = 500", "multiple of 'n_heads' (8)", "'head_dim'")),
        (("n_kv_heads = 2", "n_kv_heads = 3"), ("'n_kv_heads' = 3", "divisor of 'n_heads' (8)")),
        (("n_heads = 8", "n_heads = 2.5"), ("'n_heads' = 2.5", "whole number >= 1")),
    ],
)
def test_model_toml_heads(tmp_path, capsys, edit, needles):
    path = tmp_path / "model.toml"
    path.write_text(MODEL_TOML.replace(*edit))
    code, _, err = run(["evaluate", "--model", str(path)], capsys)
    assert code == 2
    one_error_line(err, str(path), *needles)


def test_model_toml_with_head_dim_need_not_divide(tmp_path, capsys):
    path = tmp_path / "model.toml"
    path.write_text(MODEL_TOML.replace("d_model = 512", "d_model = 500\nhead_dim = 64"))
    code, _, err = run(["evaluate", "--model", str(path), "--json"], capsys)
    assert code == 0, err


def test_every_model_preset_is_consistent():
    from costmodel import io

    for name in io.model_presets():
        m = io.model_preset(name)
        assert int(m.n_heads) % int(m.n_kv_heads) == 0, name


# --- 2. a system's chip count: tensor parallelism divides the heads; max_chips ------


@pytest.mark.slow
def test_chips_not_dividing_the_heads_subprocess():
    # llama-3-8b: 32 query heads, 8 KV heads; three chips lay out as TP 3 x PP 1.
    code, out, err = run_subprocess(["evaluate", "--model", "llama-3-8b", "--chips", "3"])
    assert code == 2 and out == ""
    one_error_line(err, "chips = 3", "TP 3 x PP 1", "32 query heads and 8 KV heads", "[1, 2, 4, 8]")


@pytest.mark.parametrize(
    "args,needles",
    [
        (["evaluate", "--chips", "1000"], ("chips = 1000", "max_chips", "'h100-sxm' (8)")),
        # 12 H100s would be TP 8 x PP 2 = 16: over max_chips before any layout.
        (["evaluate", "--chips", "12"], ("chips = 12", "max_chips", "(8)")),
        (["evaluate", "--chips", "5"], ("chips = 5", "TP 5 x PP 1", "[1, 2, 4, 8]")),
        (["explain", "--chips", "3"], ("chips = 3", "TP 3 x PP 1", "8 KV heads")),
        (["explain", "--chips", "1000"], ("chips = 1000", "max_chips")),
        (["explain", "--tech", "N5", "--max-chips", "4", "--chips", "8"], ("chips = 8", "'area-design' (4)")),
        (["serve", "--chips", "1000"], ("chips = 1000", "max_chips")),
        (["optimize", "--chips", "3"], ("--chips 3", "TP 3 x PP 1", "'llama-3-8b'", "8 KV heads")),
        (["optimize", "--chips", "100"], ("--chips 100", "at most 64")),
        # qwen2-7b: 28 query heads, 4 KV heads.
        (
            ["evaluate", "--model", "qwen2-7b", "--chips", "8"],
            ("chips = 8", "28 query heads and 4 KV heads", "[1, 2, 4]"),
        ),
    ],
)
def test_chip_count(capsys, args, needles):
    code, _, err = run(args, capsys)
    assert code == 2
    one_error_line(err, *needles)


def test_chip_counts_that_split_evenly_are_accepted(capsys):
    for chips in (1, 2, 4, 8):
        code, out, err = run(["evaluate", "--model", "llama-3-8b", "--chips", str(chips), "--json"], capsys)
        assert code == 0, err
        r = json.loads(out)
        assert r["tensor_parallel"] * r["pipeline_parallel"] == chips
    # serve splits three chips as TP 1 x PP 3 (a pipeline divides no heads).
    from costmodel import economics_preset
    from costmodel.serving import serve

    s = serve("llama-3-8b", "h100-sxm", economics_preset("N5"), chips=3, batches=np.array([1.0, 8.0]))
    assert s.splits == [(1, 3)]


def test_automatic_size_divides_the_heads():
    # llama-3-70b in bf16 needs three 64 GB-HBM PIM GPUs' memory: it gets four (TP 4),
    # never three-way tensor parallelism over 64 query and 8 KV heads.
    import costmodel as cm

    for model, chip, weights in (("llama-3-70b", "hbm-pim-gpu", "bf16"), ("llama-3.1-405b", "h100-sxm", "int8")):
        e = cm.evaluate(model, chip, weights=weights)
        tp = e.tensor_parallel
        assert int(e.workload.model.n_kv_heads) % tp == 0 and int(e.workload.model.n_heads) % tp == 0
        assert e.tensor_parallel * e.pipeline_parallel <= e.info.max_chips


def test_explicit_layout_is_checked():
    import costmodel as cm
    from costmodel.io import InputError

    with pytest.raises(InputError, match=r"tensor_parallel = 3 \(TP 3 x PP 1\): tensor parallelism 3"):
        cm.evaluate("llama-3-8b", "h100-sxm", tensor_parallel=3, pipeline_parallel=1)
    # A layout alone may exceed max_chips (a paper's multi-node baseline).
    e = cm.evaluate("llama-3-70b", "a100-80gb-sxm", tensor_parallel=8, pipeline_parallel=4)
    assert e.tensor_parallel * e.pipeline_parallel == 32 > e.info.max_chips


# --- 3. fraction vectors -------------------------------------------------------------


def test_split_that_does_not_sum_to_one_subprocess():
    code, out, err = run_subprocess(["explain", "--tech", "N5", "--split", "0.7,0.7,0.05"])
    assert code == 2 and out == ""
    one_error_line(
        err, "--split", "'0.7,0.7,0.05'", "3 numbers summing to 1.45", "2 shares 'compute,sram'", "--pim-share"
    )


@pytest.mark.parametrize(
    "split,needles",
    [
        ("0.7,0.7", ("'0.7,0.7'", "summing to 1.4", "summing to 1")),
        ("1.5,-0.5", ("'1.5,-0.5'", "1.5, -0.5 outside [0, 1]")),
        ("0.5,0.4", ("summing to 0.9",)),
        ("nan,1", ("nan outside [0, 1]",)),
        ("1", ("1 number summing to 1", "2 shares")),
        ("a,b", ("'a,b'", "not numbers")),
    ],
)
def test_split(capsys, split, needles):
    code, _, err = run(["explain", "--tech", "N5", "--split", split], capsys)
    assert code == 2
    one_error_line(err, "--split", *needles)
    assert "--pim-share" not in err or split == "1"


def test_fraction_vector_accepts_shares_that_sum_to_one():
    from costmodel.cli.args import fraction_vector

    parse = fraction_vector(("a", "b", "c"))
    assert parse("0.1,0.2,0.7") == (0.1, 0.2, 0.7)  # 1.0000000000000002 in floats
    assert parse("1,0,0") == (1.0, 0.0, 0.0)
    assert parse("0.3333333,0.3333333,0.3333334") == pytest.approx((1 / 3,) * 3, rel=1e-6)


# --- 4. a power cap below the static power ---------------------------------------------


CHIP = """peak_tflops_16 = 100.0
compute_efficiency = 0.8
energy_pj_per_flop = 0.5
static_power_w = 100.0
power_cap_w = 300.0
kernel_overhead_us = 2.0
link_bandwidth_GBps = 100.0
link_latency_us = 5.0
hop_latency_us = 1.0
max_chips = 8

[dram]
capacity_GB = 64.0
bandwidth_GBps = 1000.0
latency_ns = 400.0
energy_pj_per_byte = 20.0
efficiency = 0.9
"""


def test_power_cap_below_static_power_subprocess(tmp_path):
    path = tmp_path / "chip.toml"
    path.write_text(CHIP.replace("power_cap_w = 300.0", "power_cap_w = 50.0"))
    code, out, err = run_subprocess(["evaluate", "--chip", str(path), "--mode", "sustained"])
    assert code == 2 and out == ""
    one_error_line(err, str(path), "'power_cap_w' = 50 W", "more than field 'static_power_w' = 100 W")


@pytest.mark.parametrize("command", (["evaluate"], ["explain"], ["serve"], ["evaluate", "--mode", "sustained"]))
def test_power_cap_at_static_power(tmp_path, capsys, command):
    # A cap equal to the static power leaves nothing to run on either; every command
    # that loads the chip says so.
    path = tmp_path / "chip.toml"
    path.write_text(CHIP.replace("power_cap_w = 300.0", "power_cap_w = 100.0"))
    code, _, err = run([*command, "--chip", str(path)], capsys)
    assert code == 2
    one_error_line(err, str(path), "'power_cap_w' = 100 W", "'static_power_w' = 100 W")


def test_power_cap_above_static_power_is_accepted(tmp_path, capsys):
    path = tmp_path / "chip.toml"
    path.write_text(CHIP)
    code, out, err = run(["evaluate", "--chip", str(path), "--mode", "sustained", "--json"], capsys)
    assert code == 0, err
    r = json.loads(out)
    assert 0 < r["sustained_to_peak"] <= 1 and r["power_watts_per_chip"] <= 300.0 * (1 + 1e-3)


def test_area_design_power_cap_below_its_static_power(capsys):
    code, _, err = run(["explain", "--tech", "N5", "--power-cap", "1"], capsys)
    assert code == 2
    one_error_line(err, "area design", "'--power-cap' = 1 W", "'static_power_w' = ")


# --- 5. output paths and formats, before any work ------------------------------------


def test_plot_format_subprocess(tmp_path):
    code, out, err = run_subprocess(["evaluate", "--plot", "out.xyz"], cwd=tmp_path)
    assert code == 2 and out == ""
    one_error_line(err, "--plot out.xyz", ".png, .pdf, .svg")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    "args,needles",
    [
        (["evaluate", "--history-plot", "sram"], ("--history-plot sram", ".png")),
        (["evaluate", "--plot", "nodir/x.png"], ("--plot nodir/x.png", "folder nodir does not exist")),
        (["evaluate", "--plot", "folder.png"], ("--plot folder.png", "is a folder")),
        (["serve", "--plot", "curve.txt"], ("--plot curve.txt", ".png, .pdf")),
        (["optimize", "--plot", "nodir/c.png"], ("--plot nodir/c.png", "does not exist")),
        (["optimize", "--plot", "c.gif"], ("--plot c.gif", ".png")),
        (["validate", "--plot", "parity.xyz"], ("--plot parity.xyz", ".png")),
        (["validate", "--pim", "--plot", "nodir/p.png"], ("--plot nodir/p.png", "does not exist")),
        (["calibrate", "TRACE", "--out", "chip.json"], ("--out chip.json", ".toml")),
        (["calibrate", "TRACE", "--out", "nodir/chip.toml"], ("--out nodir/chip.toml", "does not exist")),
        (["calibrate", "TRACE", "--out", "chip.toml", "--plots", "nodir/plots"], ("--plots nodir/plots", "not exist")),
        (["calibrate", "TRACE", "--out", "chip.toml", "--plots", "afile"], ("--plots afile", "is a file")),
        (["bench", "--out", "nodir/t.csv"], ("--out nodir/t.csv", "does not exist")),
        (["bench", "--out", "t.txt"], ("--out t.txt", ".csv, .parquet")),
        (["import-trace", "vllm", "TRACE", "--model", "llama-3-8b", "--out", "t.json"], ("--out t.json", ".csv")),
    ],
)
def test_output_paths(tmp_path, monkeypatch, capsys, args, needles):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "folder.png").mkdir()
    (tmp_path / "afile").write_text("")
    trace = str(ROOT / "data" / "traces" / "cpu.csv")
    before = set(tmp_path.rglob("*"))
    code, _, err = run([trace if a == "TRACE" else a for a in args], capsys)
    assert code == 2
    one_error_line(err, *needles)
    assert set(tmp_path.rglob("*")) == before  # nothing written, not even the probe


def test_unwritable_folder(capsys):
    code, _, err = run(["evaluate", "--plot", "/proc/x.png"], capsys)
    assert code == 2
    one_error_line(err, "--plot /proc/x.png", "folder /proc is not writable")


@pytest.mark.slow
@pytest.mark.parametrize("suffix", [".png", ".PDF", ".svg"])
def test_supported_plot_formats_are_written(tmp_path, capsys, suffix):
    path = tmp_path / f"roofline{suffix}"
    code, _, err = run(["evaluate", "--plot", str(path), "--json"], capsys)
    assert code == 0, err
    assert path.stat().st_size > 0


# --- 6. --batch and --context: whole numbers on the command line ------------------------


def test_fractional_batch_subprocess():
    code, out, err = run_subprocess(["evaluate", "--batch", "1.5"])
    assert code == 2 and out == ""
    one_error_line(err, "argument --batch", "'1.5'", "whole number >= 1")


@pytest.mark.parametrize(
    "args,needles",
    [
        (["evaluate", "--batch", "0"], ("--batch", "'0'", "whole number >= 1")),
        (["explain", "--batch", "2.5"], ("--batch", "'2.5'", "whole number >= 1")),
        (["optimize", "--batch", "0.5"], ("--batch", "'0.5'")),
        (["evaluate", "--context", "-1"], ("--context", "'-1'", "whole number >= 0")),
        (["evaluate", "--context", "0.5"], ("--context", "'0.5'", "whole number >= 0")),
        (["evaluate", "--context", "inf"], ("--context", "'inf'")),
        (["evaluate", "--prefix", "1.5"], ("--prefix", "'1.5'")),
        (["evaluate", "--batch", "1e30"], ("batch = 1e+30", "<= 1e+12")),
    ],
)
def test_batch_and_context_refused(capsys, args, needles):
    code, _, err = run(args, capsys)
    assert code == 2
    one_error_line(err, *needles)


def test_whole_batch_and_context_accepted(capsys):
    code, out, err = run(["evaluate", "--batch", "1e3", "--context", "4096.0", "--json"], capsys)
    assert code == 0, err
    assert json.loads(out)["batch"] == 1000


def test_context_zero_is_a_first_step(capsys):
    # No KV history to read, but every weight is still read once per step.
    results = {}
    for context in ("0", "4096"):
        code, out, err = run(["evaluate", "--model", "llama-3-8b", "--context", context, "--json"], capsys)
        assert code == 0, err
        results[context] = json.loads(out)
    r0, r4k = results["0"], results["4096"]
    for key in ("seconds_per_step", "joules_per_token", "tokens_per_second"):
        assert math.isfinite(r0[key]) and r0[key] > 0, key
    assert r0["history"]["kv_stored_bytes"] == 0
    assert r0["breakdown"]["tiers"]["dram"]["bytes"] > 15e9  # llama-3-8b's 16 GB of bf16 weights
    assert r0["seconds_per_step"] < r4k["seconds_per_step"]
    code, out, err = run(["explain", "--context", "0", "--json"], capsys)
    assert code == 0, err
    by = json.loads(out)["elasticities_by_objective"]
    assert all(math.isfinite(v) for o in by.values() for v in o.values())


def test_python_api_takes_a_fractional_batch():
    import costmodel as cm

    t = [float(cm.evaluate("llama-3-8b", "h100-sxm", batch=b).cost.seconds_per_step) for b in (1, 1.5, 2)]
    assert t[0] <= t[1] <= t[2] and math.isfinite(t[1])


def test_load_toml_errors_name_the_file_and_a_parse_is_reused_not_shared(tmp_path, monkeypatch):
    """`load_toml`: one `InputError` line per failure (missing, folder, bad TOML, not
    UTF-8, not readable); a file read twice gives equal contents that are not the same
    object (a caller may change its copy), and a changed file is read again."""
    from costmodel.io import InputError
    from costmodel.io.files import load_toml

    good = tmp_path / "a.toml"
    good.write_text("x = [1, 2]\n")
    first = load_toml(good)
    first["x"].append(3)
    assert load_toml(good) == {"x": [1, 2]}
    good.write_text("x = [1, 5]\n")
    assert load_toml(good) == {"x": [1, 5]}
    (tmp_path / "bad.toml").write_text("x = [1,\n")
    (tmp_path / "latin.toml").write_bytes(b'x = "\xe9"\n')
    cases = {
        "missing.toml": "file not found",
        ".": "is a folder",
        "bad.toml": "not valid TOML",
        "latin.toml": "not a UTF-8",
    }
    for name, needle in cases.items():
        with pytest.raises(InputError, match=needle):
            load_toml(tmp_path / name)

    def denied(self):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(Path, "read_bytes", denied)
    with pytest.raises(InputError, match=r"a\.toml: not readable"):
        load_toml(good)
