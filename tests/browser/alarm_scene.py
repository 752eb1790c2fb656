"""The alarm list's scene, shared by its HTTP tests (tests/integration/test_console_alarm_list.py) and its browser
tests: alarms raised in a known order at two sites, and the site's local time as the console writes it."""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

from config.schema import SiteConfig
from monitor.sample import Quality, Sample
from tests.browser.harness import ACME, BOLT, BOLT_PH_HIGH, Plant
from tests.support import PATIENCE, wait_until

NY = ZoneInfo("America/New_York")
LEL = f"{ACME}/lel/lel_single"
SUCCESSIVE = f"{ACME}/lel/lel_successive"
FAULT = f"{ACME}/sampler_temperature/sensor_fault"
ACME_HIGH = f"{ACME}/ph/ph_high"


def wait(cond: Callable[[], Any], within: float = PATIENCE) -> Any:
    """`tests.support.wait_until`, giving back what ``cond`` found."""
    got: Any = None

    def check() -> Any:
        nonlocal got
        got = cond()
        return got

    assert wait_until(check, within), "condition not met in time"
    return got


def local(t: float) -> str:
    return datetime.fromtimestamp(t, NY).strftime("%Y-%m-%d %H:%M:%S %Z")


def stage(plant: Plant, config: SiteConfig) -> dict[str, float]:
    """BOLT's pH high first (the oldest); then ACME's critical LEL event, 12 %, 14 %, 1.095 %: latched and
    unacknowledged (lel_single, and lel_successive: two readings above 5 %); then a LOW sensor fault and a
    HIGH pH at ACME, both newer than the LEL event. Returns the LEL event's times (onset, peak, back)."""
    raised = lambda alarm: lambda: any(t.alarm_id == alarm for t in plant.transitions)  # noqa: E731
    plant.value(BOLT, "ph", 9.9)
    wait(raised(BOLT_PH_HIGH))
    t0 = time.time() - 10.0  # past, as readings are (the history ends a minute ago)
    times = {"onset": t0, "peak": t0 + 1.0, "back": t0 + 2.0}
    for key, v in (("onset", 12.0), ("peak", 14.0), ("back", 1.095)):
        plant.value(ACME, "lel", v, t=times[key])
    wait(lambda: any(t.alarm_id == LEL and t.to_state.value == "latched-unacknowledged" for t in plant.transitions))
    unit = config.site(ACME).channel("sampler_temperature").unit
    plant.feed([Sample.bad(time=t0 + 3.0, site=ACME, channel="sampler_temperature", unit=unit,
                           quality=Quality.OUT_OF_RANGE, reason="-40 degC is below the valid range")])
    wait(raised(FAULT))
    plant.value(ACME, "ph", 9.5, t=t0 + 4.0)
    wait(raised(ACME_HIGH))
    return times
