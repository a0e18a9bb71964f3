#!/usr/bin/env bash
# Core and sweep throughput of another checkout and of this one, measured side by side
# (alternating, three rounds each), so that a change's speed is a ratio on one machine
# at one time, not two figures from two days.
#
#   git worktree add /tmp/old a8ca339 && bash benchmarks/side_by_side.sh /tmp/old [OUT]
#
# Needs the current venv (the old checkout runs with PYTHONPATH pointing at it). Prints
# the median of the three rounds' medians for each figure and the ratio new / old.
set -euo pipefail
old="$(cd "$1" && pwd)"
new="$(cd "$(dirname "$0")/.." && pwd)"
out="${2:-$(mktemp -d)}"
mkdir -p "$out"
for round in 1 2 3; do
  for side in old new; do
    dir=$old; [[ $side == new ]] && dir=$new
    (cd "$dir" && PYTHONPATH="$dir" python benchmarks/core_bench.py --repeats 5 --json "$out/core_${side}_$round.json" >/dev/null)
    (cd "$dir" && PYTHONPATH="$dir" python benchmarks/sweep_bench.py speed --n 1000000 --loop 200 --rounds 3 >"$out/sweep_${side}_$round.txt")
  done
done
python3 - "$out" <<'PY'
import json, pathlib, statistics, sys
out = pathlib.Path(sys.argv[1])
def sweep(p):
    text = p.read_text()
    return json.loads(text[text.index("{"):])["median_configs_per_second"]
def figures(side):
    core = [json.loads((out / f"core_{side}_{r}.json").read_text()) for r in (1, 2, 3)]
    sw = [sweep(out / f"sweep_{side}_{r}.txt") for r in (1, 2, 3)]
    keys = [k for k in core[0] if k.endswith(("_10000", "_100000")) and "per_second" in k]
    f = {k: statistics.median(c[k] for c in core) for k in keys}
    f.update({k: statistics.median(s[k] for s in sw) for k in ("sweep", "sweep_parquet")})
    return f
old, new = figures("old"), figures("new")
for k in old:
    print(f"{k:45s} old {old[k]:.3g}  new {new[k]:.3g}  new/old {new[k] / old[k]:.3f}")
PY
