"""Prints the README's quick-start commands: the bash blocks of its "## Quick start" section.

Each block is printed followed by a NUL byte, so a block may span lines. Used by
`.ci/fresh_machine.sh` (which runs them exactly as written) and by
`tests/test_fresh_machine.py` (which checks there are two: the main job and the tests).

    python3 .ci/quickstart.py README.md
"""

import re
import sys
from pathlib import Path


def quick_start_commands(readme: str) -> list[str]:
    """The bash code blocks of the "## Quick start" section, in order, as written."""
    parts = re.split(r"^## ", readme, flags=re.M)
    section = next((p for p in parts if p.startswith("Quick start")), None)
    if section is None:
        raise SystemExit("README: no '## Quick start' section")
    return [block.strip() for block in re.findall(r"^```bash\n(.*?)^```", section, flags=re.S | re.M)]


if __name__ == "__main__":
    path = Path(sys.argv[1] if len(sys.argv) > 1 else "README.md")
    for command in quick_start_commands(path.read_text()):
        sys.stdout.write(command + "\0")
