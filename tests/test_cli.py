"""The command line: JSON keys, tables, and one-line errors with exit status 2."""

import json
import subprocess
import sys

import pytest

from costmodel.cli import main


def run(args, capsys):
    code = main(args)
    out = capsys.readouterr()
    return code, out.out, out.err


def test_presets_json_lists_every_required_id(capsys):
    code, out, _ = run(["presets", "--json"], capsys)
    assert code == 0
    data = json.loads(out)
    for model in [
        "llama-2-7b",
        "llama-2-13b",
        "llama-2-70b",
        "llama-3-8b",
        "llama-3-70b",
        "mixtral-8x7b",
        "qwen2-7b",
        "gemma-2-9b",
    ]:
        assert model in data["models"]
    for chip in [
        "a100-80gb-sxm",
        "a100-80gb-pcie",
        "h100-sxm",
        "h100-pcie",
        "h200-sxm",
        "b200",
        "l40s",
        "mi250x-gcd",
        "mi300x",
        "tpu-v5e",
        "tpu-v5p",
        "tpu-v6e",
        "m1-max-32c",
        "m2-max-30c",
        "m2-ultra-76c",
        "m3-max-40c",
        "m4-max-40c",
        "groq-lpu",
        "cerebras-wse3",
        "sn40l",
        "dmatrix-corsair",
        "hbm-pim-gpu",
    ]:
        assert chip in data["chips"]
    for fmt in ["f32", "bf16", "f16", "fp8", "int8", "int4", "q8_0", "q4_0", "q4_k_m"]:
        assert fmt in data["formats"]


def test_presets_table(capsys):
    code, out, _ = run(["presets"], capsys)
    assert code == 0 and "h100-sxm" in out and "gemma-2-9b" in out


def test_evaluate_json_has_the_documented_keys(capsys):
    code, out, _ = run(["evaluate", "--model", "llama-3-8b", "--chip", "h100-sxm", "--json"], capsys)
    assert code == 0
    r = json.loads(out)
    for key in [
        "seconds_per_step",
        "tokens_per_second",
        "tokens_per_second_per_sequence",
        "joules_per_token",
        "bound",
        "breakdown",
    ]:
        assert key in r
    assert r["bound"] == "memory"
    assert set(r["breakdown"]["tiers"]) == {"sram", "pim", "dram"}
    assert r["tokens_per_second"] == pytest.approx(r["tokens_per_second_per_sequence"])  # batch 1


def test_evaluate_table_and_options(capsys):
    code, out, _ = run(
        [
            "evaluate",
            "--model",
            "mixtral-8x7b",
            "--chip",
            "a100-80gb-sxm",
            "--chips",
            "2",
            "--batch",
            "8",
            "--context",
            "2048",
            "--weights",
            "q4_k_m",
            "--kv",
            "fp8",
        ],
        capsys,
    )
    assert code == 0 and "mixtral-8x7b" in out and "x2" in out


def test_evaluate_a_hugging_face_config(tmp_path, capsys):
    cfg = {
        "model_type": "llama",
        "num_hidden_layers": 4,
        "hidden_size": 512,
        "num_attention_heads": 8,
        "num_key_value_heads": 2,
        "intermediate_size": 1024,
        "vocab_size": 1000,
    }
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    code, out, _ = run(["evaluate", "--model", str(path), "--chip", "h100-sxm", "--json"], capsys)
    assert code == 0 and json.loads(out)["seconds_per_step"] > 0


BAD = [
    (["evaluate", "--model", "llama-9"], "llama-9"),
    (["evaluate", "--chip", "h900"], "h900"),
    (["evaluate", "--batch", "-4"], "-4"),
    (["evaluate", "--batch", "many"], "many"),
    (["evaluate", "--context", "nan"], "nan"),
    (["evaluate", "--weights", "q3"], "q3"),
    (["evaluate", "--prefix", "9000", "--context", "100"], "prefix"),
    (["evaluate", "--chips", "0"], "0"),
    (["evaluate", "--placement", "cache"], "cache"),
    (["frobnicate"], "frobnicate"),
    (["evaluate", "--model", "llama-3-70b", "--chip", "h100-sxm", "--chips", "1"], "do not fit"),
]


@pytest.mark.parametrize("args,needle", BAD)
def test_bad_input_is_one_line_and_exit_2(args, needle, capsys):
    code, out, err = run(args, capsys)
    assert code == 2
    assert needle in err
    assert "Traceback" not in err
    assert len(err.strip().splitlines()) == 1


def _bad_config(tmp_path, text):
    path = tmp_path / "config.json"
    path.write_text(text)
    return str(path)


@pytest.mark.parametrize(
    "text,needle",
    [
        ("{not json", "not valid JSON"),
        ("[1, 2]", "expected a JSON object"),
        ('{"hidden_size": 512}', "num_hidden_layers"),
        (
            '{"num_hidden_layers": 2, "hidden_size": 512, "num_attention_heads": 8, "intermediate_size": -5, "vocab_size": 10}',
            "-5",
        ),
        (
            '{"num_hidden_layers": "two", "hidden_size": 512, "num_attention_heads": 8, "intermediate_size": 5, "vocab_size": 10}',
            "two",
        ),
        (
            '{"num_hidden_layers": 2, "hidden_size": 512, "num_attention_heads": 8, "num_key_value_heads": 16, "intermediate_size": 5, "vocab_size": 10}',
            "num_key_value_heads",
        ),
    ],
)
def test_malformed_config_json(tmp_path, capsys, text, needle):
    path = _bad_config(tmp_path, text)
    code, _, err = run(["evaluate", "--model", path], capsys)
    assert code == 2 and needle in err and path in err and len(err.strip().splitlines()) == 1


CHIP = """
peak_tflops_16 = 100.0
compute_efficiency = 0.8
energy_pj_per_flop = 0.5
static_power_w = 50.0
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


def test_a_chip_file_is_accepted(tmp_path, capsys):
    path = tmp_path / "chip.toml"
    path.write_text(CHIP)
    code, out, _ = run(["evaluate", "--chip", str(path), "--json"], capsys)
    assert code == 0
    # 15.5 GB of weights and KV read per step over 1 TB/s x 0.9: at least 17 ms
    assert json.loads(out)["seconds_per_step"] > 15.5e9 / 0.9e12


@pytest.mark.parametrize(
    "edit,needle",
    [
        (lambda s: s.replace("peak_tflops_16 = 100.0\n", ""), "peak_tflops_16"),
        (lambda s: s.replace("static_power_w = 50.0", "static_power_w = -50.0"), "-50"),
        (lambda s: s.replace("bandwidth_GBps = 1000.0", "bandwidth_GBps = 0.0"), "bandwidth_GBps"),
        (lambda s: s.replace("efficiency = 0.9", "efficiency = 1.5"), "1.5"),
        (lambda s: s.replace("max_chips = 8", "max_chip = 8"), "max_chip"),
        (lambda s: s.replace("capacity_GB = 64.0", 'capacity_GB = "lots"'), "lots"),
        (lambda s: s + "\n[[[", "not valid TOML"),
    ],
)
def test_bad_chip_file(tmp_path, capsys, edit, needle):
    path = tmp_path / "chip.toml"
    path.write_text(edit(CHIP))
    code, _, err = run(["evaluate", "--chip", str(path)], capsys)
    assert code == 2 and needle in err and str(path) in err and len(err.strip().splitlines()) == 1


def test_console_script_exit_status():
    # The installed entry point, as a user runs it.
    proc = subprocess.run(
        [sys.executable, "-m", "costmodel.cli", "evaluate", "--batch", "-1"], capture_output=True, text=True
    )
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
