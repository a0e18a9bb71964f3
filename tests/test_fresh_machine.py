"""A newcomer's first run: the README's quick start on a fresh clone (`.ci/fresh_machine.sh`).

The full check clones the committed HEAD into a temporary folder, makes a new
virtual environment, runs the README's two quick-start commands exactly as written
and checks `report/report.json`. It takes minutes and needs the package index, so it
runs only with `COSTMODEL_FRESH_MACHINE=1` (CI sets it); the test suite it runs inside
the clone sees `COSTMODEL_FRESH_MACHINE_INNER=1` and skips it (no recursion). The
extraction of the commands is checked on every run.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from helpers import load_script


ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / ".ci" / "fresh_machine.sh"


def _quickstart():
    return load_script(ROOT / ".ci" / "quickstart.py")


def test_quick_start_commands_are_extracted_as_written():
    readme = (ROOT / "README.md").read_text()
    commands = _quickstart().quick_start_commands(readme)
    assert len(commands) == 2
    main_job, tests = commands
    assert "python3 -m venv .venv" in main_job and main_job.endswith("costmodel run")
    assert tests.endswith("python -m pytest") and ".[test]" in tests
    for command in commands:
        assert command in readme  # verbatim, not rebuilt


def test_extraction_ignores_other_sections():
    readme = (
        "# x\n\n## Quick start\n\n```bash\na\n```\n\ntext\n\n```bash\nb &&\nc\n```\n\n## Other\n\n```bash\nd\n```\n"
    )
    assert _quickstart().quick_start_commands(readme) == ["a", "b &&\nc"]


@pytest.mark.skipif(
    os.environ.get("COSTMODEL_FRESH_MACHINE") != "1" or bool(os.environ.get("COSTMODEL_FRESH_MACHINE_INNER")),
    reason="the fresh-machine check runs with COSTMODEL_FRESH_MACHINE=1 (CI), never inside itself",
)
def test_fresh_machine_quick_start():
    assert shutil.which("git") and shutil.which("python3")
    proc = subprocess.run(["bash", str(SCRIPT)], capture_output=True, text=True, timeout=3 * 3600)
    log = proc.stdout[-6000:] + "\n" + proc.stderr[-6000:]
    assert proc.returncode == 0, log
    assert "fresh machine: report/report.json parses" in proc.stdout, log
    assert "fresh machine: OK" in proc.stdout, log
