#!/bin/sh
# What the machine must provide before `make` builds anything: checked first, so a missing
# piece is named at once instead of surfacing as a compiler error or 11 browser-test errors.
# Prints one line per missing thing (on stderr) and exits 1 if anything is missing.
#
#   tools/prerequisites.sh PYTHON           what `make setup` / `make serve` need
#   tools/prerequisites.sh PYTHON browser   ... and what `make test` needs besides
set -u

python=$1
want_browser=${2:-}
missing=0

missing() {
    echo "missing: $*" >&2
    missing=1
}

# (A pyenv shim exists as a command but fails to run, so ask the interpreter itself.)
version=$("$python" -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null)
if [ -z "$version" ]; then
    missing "$python (Python 3.11-3.13); install it, or pick another: make PYTHON=python3.12 ..."
else
    case $version in
        3.11 | 3.12 | 3.13)
            # The C runtime (engine/sim/_native/core.c) is compiled by setup.py, with the
            # compiler Python was built with (or $CC) and Python's own headers.
            if ! "$python" -c 'import os, sys, sysconfig
sys.exit(not os.path.isfile(os.path.join(sysconfig.get_paths()["include"], "Python.h")))'; then
                missing "Python headers (Python.h) for $python, to build the C runtime:" \
                    "apt-get install python$version-dev"
            fi
            cc=${CC:-$("$python" -c 'import sysconfig; print(sysconfig.get_config_var("CC") or "cc")')}
            cc=${cc%% *}
            if ! command -v "$cc" >/dev/null 2>&1; then
                missing "a C compiler ($cc), to build the C runtime: apt-get install gcc"
            fi
            ;;
        *)
            missing "Python 3.11-3.13 ($python is $version); pick another: make PYTHON=python3.12 ..."
            ;;
    esac
fi

# tests/test_browser.py and `bench --dashboard` drive Debian's Chromium at this fixed path.
if [ "$want_browser" = browser ] && [ ! -x /usr/bin/chromium ]; then
    missing "Chromium at /usr/bin/chromium, for the browser tests: apt-get install chromium"
fi

# tests/test_instructions_tool.py counts instructions with cachegrind (tools/instructions.py).
if [ "$want_browser" = browser ] && ! command -v valgrind >/dev/null 2>&1; then
    missing "valgrind, for the test of tools/instructions.py: apt-get install valgrind"
fi

exit "$missing"
