"""Build hook for the optional C search of evicted neighbourhoods (engine/_native/regions.c).

Everything else is declared in pyproject.toml. The extension is optional: when it cannot be
compiled, the engine falls back to the same search in Python (slower, identical results).
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "engine._native.regions",
            ["engine/_native/regions.c"],
            optional=True,
            extra_compile_args=["-O2"],
        )
    ]
)
