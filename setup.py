"""Build hook for the C runtime, engine/sim/_native/core.c and the parts it includes (everything
else is declared in pyproject.toml).

The extension is required: an install without a C compiler fails here, loudly, instead of
leaving a runtime 20-100x slower behind. (A source checkout that was never built still runs,
in pure Python: `dtr-landscape traces` and `bench` then say so on their first line.)
"""

import glob
import platform

from setuptools import Extension, setup

# The neighbourhood bitsets count bits everywhere; without -mpopcnt each count is a call into
# libgcc (2% of an InceptionV4 walk). A walk's state hash is a carry-less product per changed
# word (_native/hash.h); without -mpclmul, a loop of 64 steps. Every x86-64 processor since
# 2010 has both instructions.
X86 = ["-mpopcnt", "-mpclmul"] if platform.machine().lower() in ("x86_64", "amd64") else []
# Where the building machine has the x86-64-v3 level (AVX2, BMI1/2, LZCNT, MOVBE, FMA:
# processors since 2013-2015), the runtime is built for it: the bit operations of the rows and
# the dirty marks (shifts by a register, and-not, the lowest set bit cleared) take one
# instruction each instead of two or three, and a walk of 40 executions from InceptionV4's
# 0.2005 executes 3% fewer instructions (cachegrind, tools/instructions.py), the same records.
# The binary then needs that level where it runs: a wheel is built on the machine it serves
# (make setup, the Docker image's build stage). -ffp-contract=off: no fused multiply-add may
# round the scan's estimates otherwise than the exact comparison expects.
V3_FLAGS = {"avx", "avx2", "bmi1", "bmi2", "fma", "movbe", "abm", "f16c", "sse4_2", "popcnt"}


def cpu_flags() -> set[str]:
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("flags"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


if X86 and cpu_flags() >= V3_FLAGS:
    X86 = ["-march=x86-64-v3", "-mtune=generic", "-mpclmul", "-ffp-contract=off"]

setup(
    ext_modules=[
        Extension(
            "engine.sim._native.core",
            ["engine/sim/_native/core.c"],
            depends=sorted(glob.glob("engine/sim/_native/*.h")),
            # -O3: walks 6% faster than at -O2, with the same records
            extra_compile_args=["-O3", "-Wall", "-Wno-unused-function", *X86],
        ),
    ]
)
