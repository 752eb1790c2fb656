"""A long alarm list in headless Chromium (150 active alarms at 30 sites): the table holds only the rows near the
viewport, in the list's order; the keyboard walks past the drawn rows (the window follows), selection and
"acknowledge all shown" count the whole list, scrolling draws the rows below; the stream's snapshot leaves the
normal alarms out until "show normal" is ticked."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from alarms.engine import AlarmEngine
from alarms.model import AlarmInput
from config.alarms import alarm_specs
from tests.browser.alarm_scene import wait
from tests.browser.harness import PASSWORD, console, load, write_users
from tests.support import PATIENCE

SITES, CHANNELS = 30, 5


def site_file(folder: Path) -> Path:
    parts = ['[daemon]\nhistorian = "pretreat.sqlite"\n']
    for s in range(SITES):
        parts.append(f'\n[[site]]\nid = "s{s:02d}"\ntimezone = "America/New_York"\nname = "Site {s:02d}"\n'
                     f'jurisdiction = "southeast"\n\n[[site.instrument]]\nid = "m"\ndriver = "mqtt"\n'
                     f'client_id = "s{s:02d}"\n')
        parts += [f'\n[[site.channel]]\nid = "ph{c}"\ninstrument = "m"\ntopic = "s{s:02d}/ph{c}"\npayload = "number"\n'
                  f'kind = "ph"\nunit = "pH"\nvalid_min = 0\nvalid_max = 14\n' for c in range(CHANNELS)]
    path = folder / "site.toml"
    path.write_text("".join(parts))
    return path


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    folder = tmp_path_factory.mktemp("console-long-list")
    config = load(site_file(folder))
    users = write_users(folder / "users.toml")
    now = time.time()
    channels = [(s.id, c.id) for s in config.sites for c in s.channels]
    engine = AlarmEngine(path=config.daemon.historian, alarms=alarm_specs(config.sites, config.alarms), now=now)
    try:  # raised together: all high, unacknowledged, of the same time, so the list's order is by id
        engine.apply_many([AlarmInput(time=now - 600, site=s, channel=c, rule="ph_high", active=True, value=9.5,
                                      limit=9.0, citation="§ 112-5A") for s, c in channels], now)
    finally:
        engine.close()
    order = sorted(f"{s}/{c}/ph_high" for s, c in channels)
    with console(config, users) as (base, _app):
        yield {"base": base, "order": order}


def _page(browser: Any, base: str) -> Any:
    page = browser.new_page(viewport={"width": 1400, "height": 900})
    page.goto(base + "/")
    page.fill("#username", "op")
    page.fill("#password", PASSWORD)
    page.click("#login-submit")
    page.wait_for_load_state()
    wait(lambda: page.evaluate("document.getElementById('alarm-rows').dataset.shown === '150'"), PATIENCE)
    return page


def _drawn(page: Any) -> list[str]:
    return list(page.eval_on_selector_all("#alarm-rows tr[data-alarm]", "rs => rs.map(r => r.dataset.alarm)"))


def test_only_rows_near_the_viewport_are_drawn_and_the_keyboard_walks_the_whole_list(browser: Any,
                                                                                  env: dict[str, Any]) -> None:
    page = _page(browser, env["base"])
    order = env["order"]
    wait(lambda: page.evaluate("(window.__marks || {})['alarms-widened'] >= 1"), PATIENCE)
    drawn = _drawn(page)
    assert 10 <= len(drawn) < 100 and drawn == order[:len(drawn)]
    assert "150 shown · 150 unacknowledged" in page.inner_text("#counts")
    assert page.inner_text("#ack-visible") == "Acknowledge all shown (150)"
    page.locator("body").press("j")
    for _ in range(len(drawn) + 9):  # past the drawn rows: the window follows the focus
        page.keyboard.press("j")
    target = order[len(drawn) + 9]
    page.wait_for_selector(f'#alarm-rows tr.focus[data-alarm="{target}"]')
    assert page.evaluate("document.activeElement.dataset.alarm") == target
    page.keyboard.press("x")
    wait(lambda: page.inner_text("#ack-selected") == "Acknowledge selected (1)", PATIENCE)
    page.keyboard.press("Escape")
    wait(lambda: page.inner_text("#ack-selected") == "Acknowledge selected (0)", PATIENCE)
    page.evaluate("window.scrollTo(0, document.body.scrollHeight)")
    page.wait_for_selector(f'#alarm-rows tr[data-alarm="{order[-1]}"]')
    assert order[0] not in _drawn(page)
    page.close()


def test_the_snapshot_leaves_normal_alarms_out_until_show_normal(browser: Any, env: dict[str, Any]) -> None:
    page = _page(browser, env["base"])
    assert not page.query_selector('#alarm-rows tr[data-state="normal"]')
    page.check("#show-normal")  # the stream opens again, with them: 150 pH-high, 30 sites × the others
    wait(lambda: int(page.evaluate("document.getElementById('alarm-rows').dataset.shown")) > 150, PATIENCE)
    assert "normal=1" in page.url
    page.close()
