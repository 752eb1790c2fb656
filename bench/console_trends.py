"""The trend measurements of `bench/bench_console.py` (not a test): a week and a month of a 1-second channel,
over HTTP and in the site page, and the month's first request in the two cold cases the console has (a month
imported into a running console; a console started on a record that holds the month, after its warm-up)."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx

from bench.console_browser import BASE, browser, until
from monitor.stores.historian_db import open_for_writing
from tests.browser.harness import login
from tests.support import free_port, wait_for_port

ROOT = Path(__file__).resolve().parents[1]
WEEK = 7 * 86400
MONTH = 30 * 86400


def week_trend(client: httpx.Client, now: float, runs: int) -> dict[str, list[float]]:
    """A week of a 1-s channel: the trend API over HTTP, then the site page's "week" button in the browser."""
    out: dict[str, list[float]] = {"http": [], "browser": [], "kib": []}
    for _ in range(max(runs, 5)):
        t0 = time.perf_counter()
        window = {"channel": "ph0", "start": int(now) - WEEK, "end": int(now), "buckets": 1000}
        r = client.get("/api/sites/s000/trend", params=window)
        out["http"].append(time.perf_counter() - t0)
        assert r.status_code == 200 and sum(r.json()["total"]) >= WEEK, r.text[:200]
        out["kib"].append(len(r.content) / 1024)
    pw, b, page = browser()
    try:
        page.goto(BASE[0] + "/sites/s000")
        canvas = '.trend[data-channel="ph0"]'
        page.wait_for_selector(f"{canvas}[data-drawn]")
        for _ in range(runs):
            drawn = int(page.get_attribute(canvas, "data-drawn"))
            t0 = time.perf_counter()
            page.click('[data-range="604800"]')
            until(page, f"Number(document.querySelector('{canvas}').dataset.drawn) > {drawn}")
            out["browser"].append(time.perf_counter() - t0)
            page.click('[data-range="86400"]')
            page.wait_for_timeout(300)
    finally:
        b.close()
        pw.stop()
    return out


def month_trend(db: Path, site: Path, client: httpx.Client, now: float, runs: int) -> dict[str, list[float]]:
    """The 30-day trend of a 1-second channel (``s000/ph1``: 2,592,000 readings inserted here, outside the
    timing, beside its two recent hours): the server's answer over HTTP for 1,000 buckets, the first request
    (the month imported into the running console: the request builds the per-minute rollups of the 30 whole UTC
    days, `monitor.console.trend_rollup`) apart from the later ones (the rollups checked by one count and
    merged); then in the browser the site view's "30 days" button, from the click to the channel's chart
    redrawn with the month (every channel of the site reloads, as an operator's click does); then a second
    console started on the record (`warmed_console`)."""
    conn = open_for_writing(db, busy_timeout=30.0)
    (cid,) = conn.execute("SELECT id FROM channels WHERE site = 's000' AND channel = 'ph1'").fetchone()
    (seq,) = conn.execute("SELECT value FROM historian_meta WHERE key = 'next_seq'").fetchone()
    start = int(now) - MONTH
    conn.execute("BEGIN")
    conn.executemany("INSERT INTO readings VALUES (?, ?, ?, ?, 0, '')",  # one 13.0 spike, the rest 7..8
                     ((cid, float(start + i), seq + i, 13.0 if i == MONTH // 3 else 7.0 + (i % 5400) / 5400.0)
                      for i in range(MONTH)))
    conn.execute("UPDATE historian_meta SET value = ? WHERE key = 'next_seq'", (seq + MONTH,))
    conn.execute("COMMIT")
    conn.close()
    out: dict[str, list[float]] = {"first": [], "http": [], "browser": [], "warm_up": [], "warm_first": [],
                                   "warm_http": [], "warm_drawn": []}
    window = {"channel": "ph1", "start": start, "end": int(now), "buckets": 1000}
    for k in range(max(runs, 5) + 1):
        t0 = time.perf_counter()
        r = client.get("/api/sites/s000/trend", params=window, timeout=300)
        out["first" if k == 0 else "http"].append(time.perf_counter() - t0)
        body = r.json()
        assert r.status_code == 200 and sum(body["total"]) >= MONTH and max(body["max"]) == 13.0, r.text[:200]
    out["browser"] = month_clicks(BASE[0], runs)
    for draw in (False, True) * runs:
        warmed_console(site, window, out, draw=draw)
    return out


def month_clicks(base: str, runs: int) -> list[float]:
    """s from a click on the site view's "30 days" to the ``ph1`` chart redrawn with the month, ``runs``
    times, the page opened afresh each time."""
    out = []
    pw, b, page = browser(base)
    try:
        box = '.trend[data-channel="ph1"]'
        for _ in range(runs):
            page.goto(base + "/sites/s000")
            page.wait_for_selector(f"{box}[data-drawn]")
            until(page, "window.__trendsLoaded !== undefined")
            drawn = int(page.get_attribute(box, "data-drawn"))
            t0 = time.perf_counter()
            page.click('[data-range="2592000"]')
            until(page, f"Number(document.querySelector('{box}').dataset.drawn) > {drawn} && "
                        f"document.querySelector('{box}')._chart.trends[0].end - "
                        f"document.querySelector('{box}')._chart.trends[0].start > {MONTH - 60}", timeout=120)
            out.append(time.perf_counter() - t0)
    finally:
        b.close()
        pw.stop()
    return out


def warmed_console(site: Path, window: dict[str, object], out: dict[str, list[float]], *, draw: bool) -> None:
    """A console started on the record that holds the month (a restart, an upgrade): s from its start to the
    end of its warm-up (its log line "trend rollups warmed", `monitor.console.trends.warm`), then its first
    answer for the month and a later one over HTTP, or (``draw``) its first "30 days" click in the browser."""
    port = free_port()
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "monitor.cli", "--log-level", "INFO", "console", "--config",
                             str(site), "--port", str(port)], cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
                            stderr=subprocess.PIPE, text=True)
    warmed = threading.Event()

    def watch() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            if "trend rollups warmed" in line:
                warmed.set()

    threading.Thread(target=watch, daemon=True).start()
    try:
        wait_for_port(port, 60)
        if not warmed.wait(300):
            raise TimeoutError("the console did not warm its trend rollups")
        out["warm_up"].append(time.perf_counter() - t0)
        if draw:
            out["warm_drawn"] += month_clicks(f"http://127.0.0.1:{port}", 1)
            return
        client = login(f"http://127.0.0.1:{port}", "op")
        for k in range(2):
            t1 = time.perf_counter()
            r = client.get("/api/sites/s000/trend", params=window, timeout=300)
            out["warm_first" if k == 0 else "warm_http"].append(time.perf_counter() - t1)
            assert r.status_code == 200 and sum(r.json()["total"]) >= MONTH, r.text[:200]
        client.close()
    finally:
        proc.terminate()
        proc.wait(15)
