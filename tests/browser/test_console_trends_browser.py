"""The site page's trends (uPlot) in headless Chromium at phone (390 × 844) and desktop (1400 × 900) size: the
chart is drawn with the site's zone named on its time axis and legend; a 9-minute pH excursion three days ago
is a marked, several-pixel-wide span in the week view; the CSV export holds exactly the buckets shown and they
agree with the readings in the historian; the PNG export is a PNG. Screenshots go to tests/artifacts/."""

from __future__ import annotations

import base64
import csv
import io
import sqlite3
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from monitor.sample import Sample
from tests.browser.harness import (
    ACME,
    ACME_PH_HIGH,
    Plant,
    browser_login,
    console,
    history,
    load,
    write_site,
    write_users,
)
from tests.support import wait_until

VIEWS = {"phone": {"width": 390, "height": 844}, "desktop": {"width": 1400, "height": 900}}
WEEK = 7 * 86400
EXCURSION_AGO = 3 * 86400  # s before the end of the history: a 9-minute excursion to pH 9.6


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    folder = tmp_path_factory.mktemp("console-trends")
    config = load(write_site(folder))
    users = write_users(folder / "users.toml")
    end = time.time() - 60
    samples = history(config, ACME, hours=WEEK / 3600, step=60.0, end=end)
    start = end - EXCURSION_AGO  # read every second from 10 minutes before to 10 minutes after
    samples = [s for s in samples if not (s.channel == "ph" and start - 600 <= s.time < start + 1140)]
    samples += [Sample(time=t, site=ACME, channel="ph", value=9.6 if start <= t < start + 540 else 7.2, unit="pH")
                for t in (start - 600 + k for k in range(1740))]
    samples.sort(key=lambda s: s.time)
    with Plant(config) as plant:
        raised = lambda: sum(t.alarm_id == ACME_PH_HIGH for t in plant.transitions)  # noqa: E731
        plant.feed(samples)
        assert wait_until(lambda: raised() >= 2, within=120)  # the excursion and the 5-hour-ago one are judged
        with console(config, users) as (base, _app):
            yield {"base": base, "db": config.daemon.historian, "excursion": (start, start + 540)}


def _readings(db: Path, a: float, b: float) -> tuple[int, float]:
    conn = sqlite3.connect(db)
    try:
        n, hi = conn.execute("SELECT COUNT(*), MAX(value) FROM readings JOIN channels ON channels.id = channel_id "
                             "WHERE site = ? AND channel = 'ph' AND time >= ? AND time < ?", (ACME, a, b)).fetchone()
        return int(n), float(hi)
    finally:
        conn.close()


@pytest.mark.parametrize("view", sorted(VIEWS))
def test_week_trend_in_the_site_zone_with_the_episode_marked_and_exports(browser: Any, env: dict[str, Any],
                                                                         artifacts: Path, view: str) -> None:
    page = browser_login(browser, env["base"], "op", VIEWS[view])
    page.goto(env["base"] + f"/sites/{ACME}")
    box = '.trend[data-channel="ph"]'
    page.wait_for_selector(f"{box}[data-drawn]")
    drawn = int(page.get_attribute(box, "data-drawn"))
    page.click('[data-range="604800"]')
    assert wait_until(lambda: int(page.get_attribute(box, "data-drawn")) > drawn)
    assert wait_until(lambda: page.evaluate(f"() => document.querySelector('{box}')._chart.trends[0].end - "
                                            f"document.querySelector('{box}')._chart.trends[0].start") > WEEK - 60)
    zone = datetime.now(ZoneInfo("America/New_York")).tzname()
    assert page.get_attribute(box, "data-zone") == zone
    assert f"Time ({zone})" in page.inner_text(f"{box} .u-legend")

    # the 9-minute excursion: shaded at least a few pixels wide, with its marker above it, listed in the legend
    a, b = env["excursion"]
    probe = page.evaluate("""([sel, a, b]) => {
        const box = document.querySelector(sel), u = box._chart.u, g = u.ctx, dpr = devicePixelRatio || 1;
        const x0 = u.valToPos(a, "x", true), x1 = u.valToPos(b, "x", true), mid = Math.round((x0 + x1) / 2);
        const px = (x, y) => Array.from(g.getImageData(x, y, 1, 1).data);
        const low = Math.round(u.bbox.top + u.bbox.height - 3 * dpr);
        return { width: x1 - x0, dpr, marker: px(mid, Math.round(u.bbox.top + 5 * dpr)),
                 span: [-1, 0, 1].map((d) => px(mid + Math.round(d * dpr), low)) };
    }""", [box, a, b])
    assert probe["width"] < 2 * probe["dpr"]  # 9 minutes of a week: under 2 px unless widened
    r, g, bl, alpha = probe["marker"]
    assert alpha > 200 and r > 150 and g < 100 and bl < 100, probe  # the red marker
    for r, g, bl, alpha in probe["span"]:  # the shaded span, 3 px wide at least
        assert alpha > 0 and r > g and r > bl, probe
    legend = page.inner_text(f"{box} .ep-legend")  # the latest episodes, the earlier ones counted
    assert "ph_high" in legend and "peak 9.4 pH" in legend and "earlier episodes in this window" in legend
    assert page.evaluate(f"() => document.querySelector('{box}')._chart.trends[0].episodes.some("
                         f"(e) => e.peak === 9.6 && e.start === {a} && e.end >= {b - 1})")

    # CSV: the buckets shown, and they agree with the historian's readings of the window
    with page.expect_download() as dl:
        page.click('.export-csv[data-channel="ph"]')
    rows = list(csv.DictReader(io.StringIO(Path(dl.value.path()).read_text())))
    shown = page.evaluate(f"() => {{ const d = document.querySelector('{box}')._chart.trends[0]; "
                          "return {start: d.start, end: d.end, n: d.t.length, live: d.live.length}; }")
    assert len(rows) == shown["n"] + shown["live"] and shown["n"] > 100
    count, peak = _readings(env["db"], shown["start"], shown["end"])
    assert sum(int(r["readings"]) for r in rows if r["bucket_s"] != "0") == count
    assert max(float(r["max"]) for r in rows if r["max"]) == peak == 9.6
    assert all(r["unit"] == "pH" and r["bucket_start_local"].endswith((" EST", " EDT")) for r in rows)

    with page.expect_download() as dl:
        page.click('.export-png[data-channel="ph"]')
    assert Path(dl.value.path()).read_bytes().startswith(b"\x89PNG")
    page.screenshot(path=str(artifacts / f"console-trend-week-{view}.png"), full_page=True)
    if view == "phone":  # readable axes: the plot fits the screen, the y axis labels are drawn inside it
        width = page.evaluate(f"() => document.querySelector('{box}')._chart.u.width")
        assert width <= 390
    page.close()


def test_overlay_puts_two_channels_on_one_chart_with_an_axis_per_unit(browser: Any, env: dict[str, Any],
                                                                       artifacts: Path) -> None:
    page = browser_login(browser, env["base"], "op", VIEWS["desktop"])
    page.goto(env["base"] + f"/sites/{ACME}")
    page.wait_for_selector('.trend[data-channel="ph"][data-drawn]')
    page.click(".overlay-box summary")
    page.check('[data-overlay="ph"]')
    page.check('[data-overlay="lel"]')
    box = '.trend[data-channel="overlay"]'
    page.wait_for_selector(f"{box}[data-drawn]")
    units = page.evaluate(f"() => document.querySelector('{box}')._chart.u.axes.slice(1).map((a) => a.label)")
    assert units == ["pH", "%LEL"]
    legend = page.inner_text(f"{box} .u-legend")
    assert "ph max" in legend and "lel max" in legend
    page.screenshot(path=str(artifacts / "console-trend-overlay.png"), full_page=True)
    data = page.evaluate(f"() => PTChart.png(document.querySelector('{box}'), 'overlay')")
    assert base64.b64decode(data.split(",", 1)[1]).startswith(b"\x89PNG")
    page.close()
