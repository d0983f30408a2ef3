"""How outcomes look everywhere: colour AND marker shape, from the Okabe-Ito palette (safe for
colour-blind readers); imported records (source `import:...`) get the open variant."""

from __future__ import annotations

from typing import Any

from engine.sim.record import STATUSES

OUTCOMES: tuple[str, ...] = STATUSES  # ok, oom, thrashed, timeout: never merged
COLORS = {
    "ok": "#009E73",  # bluish green
    "oom": "#D55E00",  # vermillion
    "thrashed": "#E69F00",  # orange
    "timeout": "#CC79A7",  # reddish purple
}
SYMBOLS = {"ok": "circle", "oom": "x", "thrashed": "triangle-up", "timeout": "diamond"}
OTHER_COLOR = "#000000"


def symbol(status: str, imported: bool) -> str:
    base = SYMBOLS.get(status, "square")
    return f"{base}-open" if imported else base


def fmt_bytes(value: Any) -> str:
    """12,345,678 B, or an em dash for a missing value."""
    if value is None or value != value:
        return "\u2014"
    return f"{int(value):,} B"


def fmt_ratio(value: Any) -> str:
    if value is None or value != value:
        return "\u2014"
    return f"{float(value):.4f}"
