"""The browser side of `bench/bench_console.py` (not a test): headless Chromium (Debian's, through Playwright as
the browser tests), logged in as the operator, and the page's User Timing marks and Chromium's own counters
that the console benchmark reads."""

from __future__ import annotations

import json
import time
from typing import Any

from tests.browser.harness import CHROMIUM_ARGS, PASSWORD

WIDE = {"width": 1400, "height": 900}
BASE: list[str] = [""]  # the console's URL, set by the benchmark's main


def browser(base: str | None = None) -> Any:
    """Chromium with a page logged in as the operator at ``base`` (the benchmark's console by default)."""
    from playwright.sync_api import sync_playwright

    pw = sync_playwright().start()
    b = pw.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS)
    page = b.new_page(viewport=WIDE)
    page.goto((base or BASE[0]) + "/login")
    page.fill("#username", "op")
    page.fill("#password", PASSWORD)
    page.click("#login-submit")
    page.wait_for_load_state()
    return pw, b, page




def until(page: Any, expression: str, timeout: float = 30.0) -> None:
    """Wait until ``expression`` is true in the page (the console's CSP forbids wait_for_function's eval)."""
    deadline = time.monotonic() + timeout
    while not page.evaluate(expression):
        if time.monotonic() > deadline:
            raise TimeoutError(expression)
        time.sleep(0.01)


def span(page: Any, start: str, end: str) -> float:
    """s between the newest marks ``start`` and ``end`` of the page's User Timing (0: the navigation's start)."""
    return float(page.evaluate(
        "([a, b]) => { const t = (n) => n ? performance.getEntriesByName(n).at(-1).startTime : 0; "
        "return (t(b) - t(a)) / 1000; }", [start, end]))


def marks(page: Any, name: str) -> int:
    """How many times the page has set the mark ``name`` (`PT.mark` keeps only the newest entry)."""
    return int(page.evaluate(f"(window.__marks || {{}})['{name}'] || 0"))


def painted(page: Any, count: int, name: str = "alarms-painted") -> None:
    until(page, f"((window.__marks || {{}})['{name}'] || 0) >= {count}")


METRICS = ("ScriptDuration", "RecalcStyleDuration", "LayoutDuration", "TaskDuration")


def metrics(cdp: Any) -> dict[str, float]:
    got = {m["name"]: m["value"] for m in cdp.send("Performance.getMetrics")["metrics"]}
    return {k: got.get(k, 0.0) for k in METRICS}


TRACE = ["devtools.timeline", "disabled-by-default-devtools.timeline", "blink.user_timing"]


def main_thread_cpu(raw: bytes, start: str, end: str) -> float:
    """s of CPU time (the trace's thread clock) the page's main thread spent in the tasks between the newest
    marks ``start`` and ``end`` of a Chromium trace: on a loaded machine the wall time is mostly waiting for a
    core, this is the work."""
    doc = json.loads(raw)
    events = doc["traceEvents"] if isinstance(doc, dict) else doc
    main = {(e["pid"], e["tid"]) for e in events if e.get("name") == "thread_name"
            and e.get("args", {}).get("name") == "CrRendererMain"}
    at = {e["name"]: e["ts"] for e in sorted(events, key=lambda e: e.get("ts", 0))
          if e.get("name") in (start, end) and e.get("cat") == "blink.user_timing"}
    t0, t1 = at[start], at[end]
    return sum(e.get("tdur", 0) for e in events if e.get("ph") == "X" and e.get("name") == "RunTask"
               and (e["pid"], e["tid"]) in main and e["ts"] + e.get("dur", 0) > t0 and e["ts"] < t1) / 1e6


