#!/bin/sh
# Builds the project's wheel as a fresh machine (or the Docker image's build stage) does, and
# checks that it carries the C runtime and that the runtime loads:
#   1. in a fresh venv, `pip wheel --no-deps` on a copy of the source tree (no prebuilt .so);
#   2. the wheel is a platform wheel holding engine/sim/_native/core.*.so;
#   3. another fresh venv installs it (no dependencies: engine.sim needs none) and, outside
#      the source tree, engine.sim.native.available() is true.
# Usage: tools/check_build.sh [PYTHON]   (default python3.11). Prints one line per step.
set -eu

python=${1:-python3.11}
repo=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

mkdir "$work/src"
(cd "$repo" && tar -c --exclude=./.venv --exclude=./.git --exclude=./data --exclude=./build \
    --exclude='*.so' --exclude='*.egg-info' --exclude=__pycache__ --exclude=./tests/artifacts .) |
    tar -x -C "$work/src"

"$python" -m venv "$work/build"
"$work/build/bin/pip" wheel --quiet --no-deps --wheel-dir "$work/wheels" "$work/src"
wheel=$(ls "$work"/wheels/*.whl)
echo "built $(basename "$wheel")"

"$work/build/bin/python" - "$wheel" <<'PY'
import re, sys, zipfile
wheel = sys.argv[1]
if wheel.endswith("-none-any.whl"):
    sys.exit(f"{wheel}: a pure-Python wheel, without the C runtime")
names = zipfile.ZipFile(wheel).namelist()
native = [n for n in names if re.fullmatch(r"engine/sim/_native/core\..*\.so", n)]
if not native:
    sys.exit(f"{wheel}: no engine/sim/_native/core.*.so inside")
print(f"wheel holds {native[0]}")
PY

"$python" -m venv "$work/run"
"$work/run/bin/pip" install --quiet --no-deps --no-index "$wheel"
cd "$work"
"$work/run/bin/python" -c '
import sys
from engine.sim import native
print("installed:", native.backend_description())
sys.exit(not native.available())'
