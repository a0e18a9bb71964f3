"""The README's Python example and CLI examples run as written."""

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from costmodel.cli import main


README = (Path(__file__).resolve().parents[1] / "README.md").read_text()


def _blocks(lang):
    return re.findall(rf"```{lang}\n(.*?)```", README, flags=re.S)


@pytest.mark.slow
def test_python_example_runs_and_prints_a_cost(capsys):
    (code,) = [b for b in _blocks("python") if "import costmodel" in b][:1]
    exec(compile(code, "README.md", "exec"), {})
    out = capsys.readouterr().out
    assert "tok/s" in out and "J/token" in out


def _cli_examples():
    for block in _blocks("bash"):
        for line in block.splitlines():
            line = line.split("#")[0].strip()
            if line.startswith("costmodel ") and "path/to" not in line and line.split()[1] != "run":
                yield line


@pytest.mark.slow
def test_cli_examples_run_in_order(tmp_path, monkeypatch, capsys):
    # In a scratch folder (outputs land there) that sees the repository's data/.
    repo = Path(__file__).resolve().parents[1]
    (tmp_path / "data").symlink_to(repo / "data")
    monkeypatch.chdir(tmp_path)
    lines = list(_cli_examples())
    assert len(lines) >= 8
    for line in lines:
        assert main(shlex.split(line)[1:]) == 0, line
        capsys.readouterr()
    for png in ("roofline.png", "codesign.png", "front.png", "parity.png"):
        assert (tmp_path / png).stat().st_size > 1000


def test_quick_start_commands_are_two_and_name_the_main_job_and_the_tests():
    quick = README.split("## Quick start")[1].split("##")[0]
    commands = re.findall(r"```bash\n(.*?)```", quick, flags=re.S)
    assert len(commands) == 2
    assert "costmodel run" in commands[0]
    assert "pytest" in commands[1]
    ci = (Path(__file__).resolve().parents[1] / ".ci" / "run").read_text()
    assert "python -m pytest" in ci


def test_module_runs_as_a_script():
    proc = subprocess.run([sys.executable, "-m", "costmodel.cli", "presets", "--json"], capture_output=True, text=True)
    assert proc.returncode == 0
