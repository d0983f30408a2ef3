"""Who may launch and cancel jobs: an optional shared access token.

The dashboard has no accounts. Reading it is open to anyone who can reach the port; work
that costs CPU (launching, rerunning, recording an event log) and cancelling someone's job
need the token when DTR_LANDSCAPE_TOKEN is set (the Docker image listens on 0.0.0.0, so set
it there). The token is compared on the server, in constant time, per request: the pages
read the environment when asked, so a changed token takes effect with the next request of a
restarted server, and nothing of it is sent to the browser.
"""

from __future__ import annotations

import hmac
import os
from typing import Any

TOKEN_ENV = "DTR_LANDSCAPE_TOKEN"


def token_required() -> bool:
    return bool(os.environ.get(TOKEN_ENV))


def token_problem(given: Any) -> str | None:
    """Why `given` does not allow launching or cancelling, or None when it does (always
    None when no token is set)."""
    expected = os.environ.get(TOKEN_ENV) or ""
    if not expected:
        return None
    text = "" if given is None else str(given)
    if not text:
        return "This dashboard needs its access token to launch or cancel: enter it first."
    if not hmac.compare_digest(text.encode("utf-8"), expected.encode("utf-8")):
        return "Wrong access token."
    return None
