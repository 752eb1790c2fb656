"""Headless Chromium (Debian's, driven by Python playwright) for the console's browser tests.

Debian's ``chromium`` is used through ``executable_path``; `playwright install` (which downloads its own
browser) is never needed. Under ``CI=true`` a missing chromium fails the tests instead of skipping them.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.browser.harness import CHROMIUM_ARGS
from tests.support import require_binary

ARTIFACTS = Path(__file__).resolve().parents[1] / "artifacts"


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """Module-scoped, not session-scoped: playwright's sync API runs an event loop in this thread while it is
    open, and pytest-asyncio's tests in later modules need the thread without one."""
    path = require_binary("chromium")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=path, args=CHROMIUM_ARGS)
        try:
            yield b
        finally:
            b.close()


@pytest.fixture(scope="session")
def artifacts() -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    return ARTIFACTS
