#!/usr/bin/env bash
# A newcomer's first run, on a fresh machine: clone the committed HEAD of this checkout
# into a temporary folder, run the README's two quick-start commands exactly as written
# (a new virtual environment, `pip install '.[all]'`, `costmodel run`; then the test suite),
# and check the main job's output (report/report.json exists and parses).
#
#   bash .ci/fresh_machine.sh            # KEEP=1 keeps the temporary clone
#
# Needs python3 >= 3.11, git and access to the package index. Uncommitted changes are
# not tested: this is what a clone of HEAD gives a newcomer.
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
work="$(mktemp -d "${TMPDIR:-/tmp}/costmodel-fresh.XXXXXX")"
if [[ "${KEEP:-0}" != 1 ]]; then trap 'rm -rf "$work"' EXIT; fi
echo "fresh machine: cloning $(git -C "$repo" rev-parse --short HEAD) into $work/costmodel"
git clone --quiet --no-hardlinks "$repo" "$work/costmodel"
cd "$work/costmodel"

commands=()
while IFS= read -r -d '' block; do commands+=("$block"); done < <(python3 "$repo/.ci/quickstart.py" README.md)
if [[ ${#commands[@]} -ne 2 ]]; then
  echo "fresh machine: expected 2 quick-start commands in README.md, found ${#commands[@]}" >&2
  exit 1
fi

for i in 0 1; do
  echo "fresh machine: quick start $((i + 1))/2: ${commands[$i]}"
  start=$SECONDS
  # A clean shell in the clone, as a newcomer's; the inner test suite must not run
  # this check again (tests/test_fresh_machine.py skips under COSTMODEL_FRESH_MACHINE_INNER).
  env -u VIRTUAL_ENV -u COSTMODEL_FRESH_MACHINE COSTMODEL_FRESH_MACHINE_INNER=1 \
    PATH="$(echo "$PATH" | tr ':' '\n' | grep -v '/\.venv/bin$' | paste -sd: -)" \
    bash -euo pipefail -c "${commands[$i]}"
  echo "fresh machine: quick start $((i + 1))/2 passed in $((SECONDS - start)) s"
  if [[ $i -eq 0 ]]; then
    python3 - <<'PY'
import json
from pathlib import Path

report = json.loads(Path("report/report.json").read_text())
assert report.get("presets"), "report.json: no preset evaluations"
assert Path("report/report.md").read_text().startswith("# costmodel"), "report.md missing or empty"
fits = sum(bool(r.get("fits")) for r in report["presets"])
print(f"fresh machine: report/report.json parses: {len(report['presets'])} preset rows, {fits} fit")
PY
  fi
done
echo "fresh machine: OK"
