"""The command line under fuzzed arguments: exit 0 or 2, one line, no traceback, no partial file.

Arguments of every subcommand are drawn from a vocabulary of valid values, typos,
out-of-range numbers (negative, zero, nan, inf, 1e400, text), missing files,
folders and garbage files, and run in-process through `costmodel.cli.main`. The
slow compute behind `optimize`, `explain`, `validate`, `calibrate`, `bench`, `run`
and `sweep` is replaced by a stub that stops the run when it is reached: what is
fuzzed is everything before it (argument parsing and input validation). `evaluate`,
`presets`, `pareto` and `import-trace` run for real, including the files they write.
A couple of subprocess checks confirm the installed entry point behaves the same.
"""

from __future__ import annotations

import atexit
import contextlib
import io as _io
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from unittest import mock

import pytest
from hypothesis import given, settings, strategies as st
from test_reliability_fuzzlib import COUNTS, FUZZ


CLI_FUZZ = settings(FUZZ, max_examples=30)
"""Fewer inputs per command than per loader: a CLI call costs ~10-100 ms."""

import costmodel.sweep as sw
from costmodel.cli import main


ROOT = Path(__file__).resolve().parents[1]
_TMP = Path(tempfile.mkdtemp(prefix="costmodel-clifuzz-"))
atexit.register(shutil.rmtree, _TMP, ignore_errors=True)


class Reached(BaseException):
    """Raised by a stubbed compute step: the arguments got past validation."""


def _stub(*args, **kwargs):
    raise Reached


def _files(folder: Path) -> set[Path]:
    return {p for p in folder.rglob("*") if p.is_file()}


def _setup() -> dict[str, str]:
    """Files the vocabulary points at: valid, garbage, missing, a folder."""
    f = {}
    (_TMP / "garbage.toml").write_bytes(b"\xff\x00 not [toml")
    (_TMP / "garbage.json").write_text("{not json")
    (_TMP / "empty.csv").write_text("")
    (_TMP / "config.json").write_text(
        json.dumps(
            {
                "num_hidden_layers": 2,
                "hidden_size": 64,
                "num_attention_heads": 4,
                "intermediate_size": 128,
                "vocab_size": 1000,
            }
        )
    )
    (_TMP / "chip.toml").write_text((ROOT / "data" / "chips.toml").read_text().split("[chips.a100-80gb-pcie]")[0])
    (_TMP / "spec.toml").write_text("[axes]\nbatch = [1, 8]\ncontext = [128, 4096]\n")
    (_TMP / "spec-typo.toml").write_text("[axes]\nbtach = [1, 8]\n")
    for name in (
        "garbage.toml",
        "garbage.json",
        "empty.csv",
        "config.json",
        "chip.toml",
        "spec.toml",
        "spec-typo.toml",
    ):
        f[name] = str(_TMP / name)
    f["missing"] = str(_TMP / "no-such-file.toml")
    f["folder"] = str(_TMP)
    f["mix"] = str(ROOT / "data" / "workloads.toml")
    f["trace"] = str(ROOT / "data" / "traces" / "cpu.csv")
    f["llama-bench"] = str(ROOT / "tests" / "test_calibration_llama_bench.json")
    f["vllm"] = str(ROOT / "tests" / "test_calibration_vllm.json")
    return f


F = _setup()
_SWEEP = _TMP / "a-sweep"


def _sweep_folder() -> str:
    """A finished two-config sweep (made once) for `pareto`."""
    if not (_SWEEP / sw.MANIFEST).exists():
        assert main(["sweep", F["spec.toml"], "--out", str(_SWEEP), "--no-progress", "--chunk", "2"]) == 0
    return str(_SWEEP)


# --- the vocabulary ------------------------------------------------------------------

NUMBERS = st.sampled_from(["-1", "0", "nan", "inf", "-inf", "1e400", "abc", "", "1e30", "0.5", "3", "1e12", "1e13"])
GOOD_NUMBERS = st.sampled_from(["1", "8", "64", "4096", "0.5", "32768"])
INTS = st.sampled_from(["-3", "0", "1", "2", "8", "1.5", "x", "", "100000", "99999999999999999999"])
PATHS = st.sampled_from(["missing", "folder", "garbage.toml", "garbage.json", "empty.csv"]).map(F.get)
MODELS = st.one_of(
    st.sampled_from(["llama-3-8b", "mixtral-8x7b", "llama3-8b", "LLAMA-3-8B", "", F["config.json"]]), PATHS
)
CHIPS = st.one_of(st.sampled_from(["h100-sxm", "groq-lpu", "hbm-pim-gpu", "h100", "", F["chip.toml"]]), PATHS)
FORMATS = st.sampled_from(["bf16", "fp8", "q4_k_m", "BF16", "int3", ""])
NODES = st.sampled_from(["N5", "N7", "n5", "N2", ""])
TEXT = st.text(max_size=8)


def _outs(suffix: str) -> st.SearchStrategy[str]:
    """An output path: a fresh file in a fresh folder, or an impossible place."""
    return st.sampled_from(["fresh", "nofolder", "folder"]).map(
        lambda kind: {"fresh": f"@OUT@/out{suffix}", "nofolder": f"@OUT@/no/such/dir/out{suffix}", "folder": "@OUT@"}[
            kind
        ]
    )


def _opt(flag: str, values) -> st.SearchStrategy[list[str]]:
    return values.map(lambda v: [flag, v])


def _flag(flag: str) -> st.SearchStrategy[list[str]]:
    return st.just([flag])


SCENARIO = [
    _opt("--batch", st.one_of(NUMBERS, GOOD_NUMBERS)),
    _opt("--context", st.one_of(NUMBERS, GOOD_NUMBERS)),
    _opt("--prefix", st.one_of(NUMBERS, GOOD_NUMBERS)),
    _opt("--weights", FORMATS),
    _opt("--kv", FORMATS),
]
COMMANDS: dict[str, tuple[list[str], list, dict[str, str]]] = {
    # name: (fixed leading args, optional args, stubs: "module:attr" -> why)
    "evaluate": (
        [],
        [
            _opt("--model", MODELS),
            _opt("--chip", CHIPS),
            _opt("--chips", INTS),
            _opt("--placement", st.sampled_from(["dram", "greedy", "pim_kv", "sram", "dRAM"])),
            _opt("--framework", st.sampled_from(["vllm", "llama.cpp", "VLLM", ""])),
            _opt("--mode", st.sampled_from(["peak", "sustained", "max"])),
            _opt("--plot", _outs(".png")),
            _flag("--json"),
            *SCENARIO,
        ],
        {},
    ),
    "presets": ([], [_flag("--json")], {}),
    "explain": (
        [],
        [
            _opt("--model", MODELS),
            _opt("--chip", CHIPS),
            _opt("--chips", INTS),
            _opt("--tech", NODES),
            _opt("--area", st.one_of(NUMBERS, GOOD_NUMBERS)),
            _opt("--split", st.sampled_from(["0.9,0.08,0.02", "1,0,0", "0,0,0", "nan,1,1", "1,2", "a,b,c", "-1,1,1"])),
            _opt("--stacks", INTS),
            _opt("--power-cap", NUMBERS),
            _opt("--max-chips", INTS),
            _opt("--node", NODES),
            _flag("--json"),
            *SCENARIO,
        ],
        {"costmodel.explain:explain": "the elasticities"},
    ),
    "optimize": (
        [],
        [
            _opt("--model", MODELS),
            _opt("--mix", st.one_of(st.just(F["mix"]), PATHS)),
            _opt("--area-mm2", st.one_of(NUMBERS, GOOD_NUMBERS)),
            _opt("--tech", NODES),
            _opt("--stacks", INTS),
            _opt("--chips", INTS),
            _opt("--system", CHIPS),
            _opt("--objective", st.sampled_from(["latency", "energy", "cost", "speed"])),
            _opt("--power-cap", NUMBERS),
            _opt("--restarts", INTS),
            _opt("--steps", INTS),
            _opt("--seed", INTS),
            _opt("--grid-step", st.sampled_from(["0.02", "0.1", "0.3", "0", "-0.5", "nan", "0.5"])),
            _opt("--plot", _outs(".png")),
            _flag("--json"),
            _flag("--no-baseline"),
            *SCENARIO,
        ],
        {"costmodel.codesign:optimize": "Adam"},
    ),
    "sweep": (
        [],
        [
            st.one_of(st.sampled_from([F["spec.toml"], F["spec-typo.toml"]]), PATHS).map(lambda p: [p]),
            _opt("--out", _outs("")),
            _opt("--chunk", INTS),
            _flag("--resume"),
            _flag("--no-progress"),
            _opt("--num-processes", INTS),
            _opt("--process-id", INTS),
        ],
        {"costmodel.sweep:run_sweep": "the chunk loop"},
    ),
    "pareto": (
        [],
        [
            st.one_of(st.just("@SWEEP@"), PATHS).map(lambda p: [p]),
            _opt(
                "--x", st.sampled_from(["tokens_per_second:max", "joules_per_token", "batch:min", "nope", ":max", ""])
            ),
            _opt("--y", st.sampled_from(["joules_per_token:min", "seconds_per_step", "feasible", "x:up"])),
            _opt("--out", _outs(".png")),
            _opt("--csv", _outs(".csv")),
            _flag("--all"),
            _flag("--json"),
        ],
        {},
    ),
    "validate": (
        [],
        [
            _opt("--table", PATHS),
            _opt("--frameworks", PATHS),
            _opt("--plot", _outs(".png")),
            _flag("--json"),
            _flag("--serving"),
            _flag("--pim"),
        ],
        {
            "costmodel.validate:evaluate_rows": "the predictions",
            "costmodel.validate_serving:evaluate_serving_rows": "the serving predictions",
            "costmodel.validate_pim:evaluate_pim_rows": "the PIM predictions",
        },
    ),
    "import-trace": (
        [],
        [
            st.sampled_from([["llama-bench", F["llama-bench"]], ["vllm", F["vllm"]], ["vllm", F["llama-bench"]]]),
            st.sampled_from([["llama-bench"], ["vllm"], ["ollama"]]).flatmap(lambda s: PATHS.map(lambda p: [*s, p])),
            _opt("--model", MODELS),
            _opt("--weights", FORMATS),
            _opt("--kv", FORMATS),
            _opt("--out", st.one_of(_outs(".csv"), _outs(".parquet"), _outs(".txt"))),
        ],
        {},
    ),
    "calibrate": (
        [],
        [
            st.one_of(st.just(F["trace"]), PATHS).map(lambda p: [p]),
            _opt("--holdout", st.sampled_from(["decode_step", "stream", "gemm", "decode", ""])),
            _opt("--out", st.one_of(_outs(".toml"), _outs(".json"))),
            _opt("--steps", INTS),
            _opt("--dtypes", st.sampled_from(["f32", "bf16,f32", "float32", ","])),
            _opt("--memory-gb", st.one_of(NUMBERS, GOOD_NUMBERS)),
            _flag("--json"),
        ],
        {"calibration:calibrate": "the fit"},
    ),
    "bench": (
        [],
        [
            _opt("--out", st.one_of(_outs(".csv"), _outs(".parquet"), _outs(".txt"))),
            _flag("--quick"),
            _opt("--plan", st.sampled_from(["full", "quick", "gpu", "tpu", ""])),
            _opt("--device", st.sampled_from(["cpu", "cpu:0", "cpu:9", "gpu", "tpu:x", ""])),
            _opt("--threads", INTS),
            _opt("--kinds", st.sampled_from(["stream", "stream,gemv", "streams", ",", ""])),
            _flag("--no-progress"),
        ],
        {"calibration:run_bench": "the measurements"},
    ),
    "run": ([], [_opt("--out", _outs(""))], {"costmodel.report.main_job:run_main_job": "the main job"}),
    "serve": (
        [],
        [
            _opt("--model", MODELS),
            _opt("--chip", CHIPS),
            _opt("--chips", INTS),
            _opt("--tpot-ms", st.one_of(NUMBERS, GOOD_NUMBERS)),
            _opt("--ttft-ms", st.one_of(NUMBERS, GOOD_NUMBERS)),
            _opt("--prompt-tokens", st.one_of(NUMBERS, GOOD_NUMBERS)),
            _opt("--output-tokens", st.one_of(NUMBERS, GOOD_NUMBERS)),
            _opt("--chunk-tokens", st.one_of(NUMBERS, GOOD_NUMBERS)),
            _opt("--prefill-chips", INTS),
            _opt("--context", st.one_of(NUMBERS, GOOD_NUMBERS)),
            _opt(
                "--context-mix",
                st.sampled_from(
                    ["1024:0.5,8192:0.5", "1024:0.5,8192:0.6", "1024", "x:1", "0:1", "-5:1", "1e400:1", ""]
                ),
            ),
            _opt("--weights", FORMATS),
            _opt("--kv", FORMATS),
            _opt("--profile", st.sampled_from(["dense", "topk", "top-k", ""])),
            _opt("--framework", st.sampled_from(["vllm", "VLLM", ""])),
            _opt("--plot", _outs(".png")),
            _flag("--json"),
        ],
        {"costmodel.serving:serve": "the vmapped batch grid"},
    ),
}


@st.composite
def argvs(draw, command: str) -> list[str]:
    lead, options, _ = COMMANDS[command]
    chosen = draw(st.lists(st.sampled_from(range(len(options))), max_size=5, unique=True))
    argv = [command, *lead]
    for i in sorted(chosen):
        argv += draw(options[i])
    if draw(st.booleans()):  # a stray token: an unknown flag, a typo of one, or text
        argv.insert(draw(st.integers(1, len(argv))), draw(st.one_of(st.sampled_from(["--bacth", "--jsn", "-x"]), TEXT)))
    return argv


def run_cli(argv: list[str], stubs: dict[str, str] = {}) -> tuple[int | str, str, str, set[Path]]:
    """Runs `main(argv)` in-process; returns (code or "reached", stdout, stderr, new files)."""
    out = Path(tempfile.mkdtemp(dir=_TMP, prefix="out-"))
    argv = [a.replace("@OUT@", str(out)).replace("@SWEEP@", _sweep_folder()) for a in argv]
    o, e = _io.StringIO(), _io.StringIO()
    with contextlib.ExitStack() as stack:
        stack.enter_context(mock.patch.dict(os.environ))  # bench --threads sets XLA_FLAGS
        for target in stubs:
            module, attr = target.split(":")
            stack.enter_context(mock.patch(f"{module}.{attr}", _stub))
        stack.enter_context(contextlib.redirect_stdout(o))
        stack.enter_context(contextlib.redirect_stderr(e))
        try:
            code: int | str | None = main(argv)
        except Reached:
            code = "reached"
        except SystemExit as exit:  # argparse's help ("-h" in a token) exits 0
            code = exit.code
    written = _files(out)
    shutil.rmtree(out, ignore_errors=True)
    return code, o.getvalue(), e.getvalue(), written


def check(argv: list[str], code, stdout: str, stderr: str, written: set[Path]) -> None:
    name = argv[0] if argv[0] in COMMANDS else "(any tokens)"
    COUNTS[f"cli {name}"] += 1
    COUNTS[f"cli {name} -> {code}"] += 1
    assert "Traceback" not in stderr + stdout, (argv, stderr)
    assert "internal error" not in stderr, (argv, stderr)
    assert code in (0, 2, "reached"), (argv, code, stderr)
    if code == 2:
        lines = [line for line in stderr.splitlines() if line.strip()]
        assert len(lines) == 1 and lines[0].startswith("costmodel: error: "), (argv, stderr)
        assert not written, f"{argv}: exit 2 but wrote {sorted(map(str, written))}"
    for path in written:
        assert not path.name.endswith((".tmp",)) and not path.name.startswith("."), (argv, path)
        if path.suffix == ".json":
            json.loads(path.read_text())


@pytest.mark.slow
@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_cli_arguments_fuzz(command):
    @CLI_FUZZ
    @given(argvs(command))
    def one(argv):
        check(argv, *run_cli(argv, COMMANDS[command][2]))

    one()


@settings(FUZZ, max_examples=60)
@given(st.lists(st.one_of(st.sampled_from(sorted(COMMANDS) + ["--json", "--out", "-h2"]), TEXT), max_size=4))
def test_cli_any_tokens(argv):
    stubs = {k: v for spec in COMMANDS.values() for k, v in spec[2].items()}
    check(argv or ["(none)"], *run_cli(argv, stubs))


def test_cli_sweep_coordinator_without_process_ids_is_bad_input():
    for argv in (
        ["sweep", F["spec.toml"], "--out", "@OUT@", "--coordinator", "localhost:1"],
        [
            "sweep",
            F["spec.toml"],
            "--out",
            "@OUT@",
            "--coordinator",
            "h:1",
            "--num-processes",
            "2",
            "--process-id",
            "2",
        ],
    ):
        code, out, err, written = run_cli(argv)
        check(argv, code, out, err, written)
        assert code == 2


def test_cli_writes_real_outputs_whole():
    """The commands that write files, run for real: whole files, valid content."""
    for argv, name in (
        (["evaluate", "--plot", "@OUT@/r.png", "--json"], "r.png"),
        (["import-trace", "vllm", F["vllm"], "--model", "llama-3-8b", "--out", "@OUT@/t.csv"], "t.csv"),
        (
            ["pareto", "@SWEEP@", "--x", "tokens_per_second:max", "--y", "joules_per_token", "--csv", "@OUT@/f.csv"],
            "f.csv",
        ),
    ):
        code, out, err, written = run_cli(argv)
        check(argv, code, out, err, written)
        assert code == 0 and {p.name for p in written} == {name}, (argv, err)


# --- the installed entry point, as a user runs it --------------------------------------


def _subprocess(*args: str) -> subprocess.CompletedProcess:
    exe = shutil.which("costmodel", path=str(Path(sys.executable).parent))
    cmd = [exe, *args] if exe else [sys.executable, "-m", "costmodel.cli", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=_TMP)


@pytest.mark.slow
@pytest.mark.parametrize(
    "args",
    [
        ("evaluate", "--batch", "-1"),
        ("evaluate", "--chip", "garbage.toml"),
        ("evaluate", "--model", "llama3-8b"),
        ("sweep", "spec-typo.toml", "--out", "never-written"),
    ],
)
def test_subprocess_bad_input_exits_2_with_one_line(args):
    proc = _subprocess(*args)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.count("\n") == 1 and proc.stderr.startswith("costmodel: error: "), proc.stderr
    assert "Traceback" not in proc.stderr and not (_TMP / "never-written").exists()


@pytest.mark.slow  # reports what the fuzz above (slow) counted
def test_counts_reported(capsys):
    """How many argument lists each command took (printed with -s): every command of
    `COMMANDS` was fuzzed with at least 20, and the any-tokens test with at least 30."""
    cli = {name: n for name, n in COUNTS.items() if name.startswith("cli ")}
    if not cli:
        pytest.skip("run with the fuzz tests above (they fill the counts)")
    with capsys.disabled():
        for name, n in sorted(cli.items()):
            print(f"  {name}: {n} inputs")
    too_few = {c: cli.get(f"cli {c}", 0) for c in COMMANDS if cli.get(f"cli {c}", 0) < 20}
    assert too_few == {}, too_few
    assert cli.get("cli (any tokens)", 0) >= 30, cli.get("cli (any tokens)", 0)
