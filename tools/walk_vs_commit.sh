#!/bin/sh
# The `landscape` command over ResNet-32 0.095-0.110 (the walk of issue 7's throughput bar) with
# the code of an older commit and with this checkout, interleaved, each into a fresh store:
# wall seconds of the whole command, the ratio, and whether both found the same intervals.
#   tools/walk_vs_commit.sh [REV] [ROUNDS]   (default ed0d913, the code when the bar was set; 3)
# Needs the DTR traces (DTR_LANDSCAPE_TRACES) and this checkout's .venv (make setup).
set -eu
rev=${1:-ed0d913}
rounds=${2:-3}
repo=$(cd "$(dirname "$0")/.." && pwd)
python="$repo/.venv/bin/python"
work=$(mktemp -d)
trap 'git -C "$repo" worktree remove --force "$work/old" >/dev/null 2>&1; rm -rf "$work"' EXIT
git -C "$repo" worktree add --detach --force "$work/old" "$rev" >/dev/null 2>&1
(cd "$work/old" && "$python" setup.py -q build_ext --inplace >/dev/null 2>&1)
# the command-line module moved (once the module engine.cli, now engine.cli.main)
if [ -f "$work/old/engine/cli/main.py" ]; then module=engine.cli.main; else module=engine.cli; fi
walk() { # DIR DB: the walk with the code in DIR; prints its seconds
    start=$("$python" -c 'import time; print(time.monotonic())')
    (cd "$1" && PYTHONPATH="$1" "$python" -c "import sys, runpy; sys.argv[0] = 'dtr-landscape'; runpy.run_module('$3', run_name='__main__')" \
        landscape resnet32 --from 0.095 --to 0.110 --db "$2" --json >"$2.json" 2>/dev/null) || true
    "$python" -c "import time; print(time.monotonic() - $start)"
}
i=1
while [ "$i" -le "$rounds" ]; do
    old=$(walk "$work/old" "$work/old-$i.duckdb" "$module")
    new=$(walk "$repo" "$work/new-$i.duckdb" engine.cli.main)
    "$python" - "$work/old-$i.duckdb.json" "$work/new-$i.duckdb.json" "$old" "$new" "$i" <<'PY'
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
old, new, i = float(sys.argv[3]), float(sys.argv[4]), sys.argv[5]
same = [(s["lo"], s["hi"], s["status"]) for s in a["intervals"]] == [
    (s["lo"], s["hi"], s["status"]) for s in b["intervals"]
]
print(f"round {i}: {old:.1f} s then, {new:.1f} s now: {old / new:.1f}x; "
      f"{len(b['intervals'])} intervals, the same: {same}")
PY
    i=$((i + 1))
done
