"""The layers are true: engine.sim (the simulator) < engine.landscape (store, sweeps, walks)
< engine.cli < app (the dashboard), and no import points upward.

Every module's imports are read from its source with `ast` (imports inside functions and
`if TYPE_CHECKING:` blocks count too: a lazy import is still an arrow), so the check needs
no import side effects and sees code paths a test run might not take. Alongside: the module
size limit, and every file a comment or doc cites exists.
"""

from __future__ import annotations

import ast
import re
import sys
from collections.abc import Callable
from pathlib import Path

from tests.helpers import REPO

# Lower layers first; a module may import its own layer and those before it.
LAYERS = ("engine.sim", "engine.landscape", "engine.cli", "app")
# The simulator runs anywhere Python does: the standard library, plus pyarrow for the
# --events log (engine/sim/events.py) and unmodified simrd for --backend simrd
# (engine/sim/reference.py), both imported only when used.
SIM_THIRD_PARTY = {"pyarrow", "simrd"}
# Plotting and web frameworks belong to the dashboard alone.
DASHBOARD_ONLY = {"dash", "plotly", "flask", "werkzeug", "gunicorn"}
# The one module that talks to DuckDB (the store's concurrency rules live there).
DUCKDB_MODULE = "engine.landscape.store"

# Modules that other engineers are reworking right now and that were over the limit when it
# was set; each must shrink below it and leave this list (we aim for modules under ~400
# lines, each with one job).
MAX_LINES = 450
OVER_THE_LIMIT_FOR_NOW: set[str] = set()


def _modules() -> dict[str, Path]:
    found = {}
    for root in ("engine", "app"):
        for path in sorted((REPO / root).rglob("*.py")):
            parts = list(path.relative_to(REPO).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


MODULES = _modules()


def _imports(module: str, path: Path) -> set[str]:
    """Every module name `module` imports, absolute (relative imports resolved)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                stem = ".".join(base + ([node.module] if node.module else []))
            else:
                stem = node.module or ""
            names.add(stem)
            # `from engine.sim import trace` imports engine.sim.trace
            names.update(f"{stem}.{alias.name}" for alias in node.names)
    return names


IMPORTS = {module: _imports(module, path) for module, path in MODULES.items()}


def _layer(name: str) -> int | None:
    for rank, layer in enumerate(LAYERS):
        if name == layer or name.startswith(layer + "."):
            return rank
    return None


def _top(name: str) -> str:
    return name.split(".")[0]


def _violations(check: Callable[[str, str], bool]) -> list[str]:
    out = []
    for module, names in sorted(IMPORTS.items()):
        for name in sorted(names):
            if check(module, name):
                out.append(f"{MODULES[module].relative_to(REPO)} imports {name}")
    return out


def _assert_none(violations: list[str]) -> None:
    assert not violations, "\n".join(violations)


def test_every_module_belongs_to_a_layer() -> None:
    assert "engine.sim.runtime" in MODULES and "app.server" in MODULES  # the walk found them
    homeless = [m for m in MODULES if m != "engine" and _layer(m) is None]
    assert homeless == []


def test_no_import_points_upward() -> None:
    def upward(module: str, name: str) -> bool:
        mine, theirs = _layer(module), _layer(name)
        return mine is not None and theirs is not None and theirs > mine

    _assert_none(_violations(upward))


def test_the_simulator_needs_only_the_standard_library_pyarrow_and_simrd() -> None:
    def foreign(module: str, name: str) -> bool:
        if _layer(module) != 0 or name == "engine" or name.startswith("engine."):
            return False
        top = _top(name)
        return top not in sys.stdlib_module_names and top not in SIM_THIRD_PARTY

    _assert_none(_violations(foreign))


def test_only_the_dashboard_imports_dash_plotly_or_web_servers() -> None:
    def web(module: str, name: str) -> bool:
        return _layer(module) != LAYERS.index("app") and _top(name) in DASHBOARD_ONLY

    _assert_none(_violations(web))


def test_only_the_store_imports_duckdb() -> None:
    assert "duckdb" in IMPORTS[DUCKDB_MODULE]
    _assert_none(_violations(lambda m, n: m != DUCKDB_MODULE and _top(n) == "duckdb"))


def test_modules_stay_under_the_size_limit() -> None:
    sizes = {m: len(p.read_text().splitlines()) for m, p in MODULES.items()}
    over = sorted(
        f"{MODULES[m].relative_to(REPO)}: {n} lines"
        for m, n in sizes.items()
        if n > MAX_LINES and m not in OVER_THE_LIMIT_FOR_NOW
    )
    assert not over, f"modules over {MAX_LINES} lines (split them by job): {over}"
    shrunk = sorted(m for m in OVER_THE_LIMIT_FOR_NOW if sizes.get(m, 0) <= MAX_LINES)
    assert shrunk == [], "now under the limit: remove from OVER_THE_LIMIT_FOR_NOW"


# A cited file: a path under one of the repository's folders, or a bare docs/ note's name.
CITED_PATH = re.compile(
    r"(?<![\w./-])((?:engine|app|tests|traces|docs|tools)/[\w/.-]*\w\.(?:py|c|h|md|sh|log))"
)
CITED_NOTE = re.compile(r"(?<![\w./-])([A-Z]+\.md)\b")
# Stale citations in modules other engineers are changing right now, fixed with their change.
STALE_FOR_NOW: set[tuple[str, str]] = set()
# A path with a placeholder in capitals (traces/rand-SEED.log) names a family of files.
PLACEHOLDER = re.compile(r"[A-Z]{3,}")
CITING_FILES = ("*.py", "*.md", "*.c", "*.h", "*.sh", "*.toml", "Makefile", "Dockerfile", "run")


def _citing_files() -> list[Path]:
    files: set[Path] = set()
    for pattern in CITING_FILES:
        for path in REPO.rglob(pattern):
            relative = path.relative_to(REPO).parts
            if relative[0] in {".venv", "data", ".git"} or "fixtures" in relative:
                continue
            if path == Path(__file__):  # names stale paths on purpose (STALE_FOR_NOW)
                continue
            if path.is_file() and "artifacts" not in relative:
                files.add(path)
    return sorted(files)


def test_every_cited_file_exists() -> None:
    missing: list[tuple[str, int, str]] = []
    for path in _citing_files():
        where = str(path.relative_to(REPO))
        text = path.read_text(errors="replace")
        for number, line in enumerate(text.splitlines(), start=1):
            for cited in CITED_PATH.findall(line):
                if not PLACEHOLDER.search(cited) and not (REPO / cited).exists():
                    missing.append((where, number, cited))
            for note in CITED_NOTE.findall(line):
                if not (REPO / note).exists() and not (REPO / "docs" / note).exists():
                    missing.append((where, number, note))
    stale = [f"{w}:{n}: {c}" for w, n, c in missing if (w, c) not in STALE_FOR_NOW]
    assert not stale, "\n".join(stale)
    fixed = STALE_FOR_NOW - {(w, c) for w, _, c in missing}
    assert not fixed, f"fixed: remove from STALE_FOR_NOW: {fixed}"


def test_the_command_line_starts_without_pandas_or_duckdb() -> None:
    # Every command builds the whole parser first; a subcommand module importing pandas at
    # its top (engine/cli/diverge.py once did) added a second to every `run` and walk.
    import subprocess

    probe = (
        "import sys; from engine.cli.main import build_parser; build_parser(); "
        "print(' '.join(m for m in ('pandas', 'duckdb', 'numpy', 'pyarrow', 'dash') "
        "if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], cwd=REPO, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "", f"imported at start-up: {out.stdout.strip()}"
