"""The monthly pH excursion's month rolls at the first reading of the new month, whichever path judges it.

Its band used to end at the month's end only while an excursion was in progress, so with the pH in band the month
rolled at the next reading judged in full: after a gap, the measured hours between the month's start and the gap
were counted as unmeasured (and a negative piece to the month before). Which readings are judged in full depends on
the fast path, on a rewind (a late reading of another channel of the group) and on arrival order, so the month's
``unmeasured`` time (7,260 s here, the pH gap 02:59:30-05:00:30 on 1 April) came out 18,030 s in replay and live in
order, 7,260 s with the fast path off or after a six-minute-late flow reading (found by an adversarial review)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from config.loader import load_config
from config.schema import SiteConfig
from monitor.checks.engine import CheckEngine
from monitor.checks.events import EpisodeEvent
from monitor.checks.events import parse_iso as P
from tests.unit.checks_helpers import CASES, Reading, Record, live_arrivals, sample_of

FLOW = '''[[site.channel]]
id = "flow"
instrument = "m"
topic = "mh1/flow"
payload = "number"
kind = "flow"
unit = "gpm"
valid_min = 0
valid_max = 2000
max_gap = 1800

[site.rules.ph_frozen]
readings = 3

[site.permit]'''


def _case(tmp_path: Path) -> tuple[SiteConfig, list[Reading]]:
    # 401.17 monthly pH (ph max_gap 1800) + a flow channel joined to pH by ph_frozen: one group of two channels
    site = (CASES / "ph_monthly_401_17_month_with_a_gap" / "site.toml").read_text()
    (tmp_path / "site.toml").write_text(site.replace("[site.permit]", FLOW, 1))
    config = load_config(tmp_path / "site.toml")
    rows: list[Reading] = []
    t = P("2025-03-31T23:00:00Z")
    while t <= P("2025-05-01T01:00:00Z"):
        # pH frozen at 7.0 (ph_frozen open: pH in its band) across 1 April 00:00, no pH 03:00-05:00 (a 2 h gap),
        # an 8.5 h excursion on 10 April (over the month's 7 h 26 min), flow varying
        if not P("2025-04-01T03:00:00Z") < t + 30 < P("2025-04-01T05:00:00Z"):
            ph = 4.0 if P("2025-04-10T00:00:00Z") <= t < P("2025-04-10T08:30:00Z") else 7.0
            rows.append((t + 30, "ph", ph, "good"))
        rows.append((t, "flow", 10.0 + (t // 60) % 3, "good"))
        t += 60 if t < P("2025-04-01T06:00:00Z") else 1200
    return config, sorted(rows)


def _month_end(events: Sequence[EpisodeEvent]) -> list[tuple[float, float | None]]:
    return [(e.time, e.unmeasured) for e in events if e.rule == "ph_monthly_excursion" and e.event == "end"]


def test_the_months_unmeasured_time_is_the_same_in_replay_without_the_fast_path_and_live_whatever_the_order(
        tmp_path: Path) -> None:
    config, rows = _case(tmp_path)
    replay = CheckEngine.for_config(config)
    rec = Record()
    rec.record(replay.process_many(sample_of("acme", r) for r in rows))
    want = _month_end(rec.events())
    slow = _month_end(CheckEngine.for_config(config, fast=False).process_many(sample_of("acme", r) for r in rows))
    in_order, _ = live_arrivals(config, rows, [10])
    late = next(r for r in rows if r[1] == "flow" and r[0] == P("2025-03-31T23:59:00Z"))
    arr = [r for r in rows if r is not late]
    i = next(k for k, r in enumerate(arr) if r[0] >= P("2025-04-01T00:05:00Z"))
    got, engine = live_arrivals(config, [*arr[:i], late, *arr[i:]], [1])
    assert want == [(P("2025-05-01T00:00:30Z"), 7260.0)]
    assert slow == want
    assert _month_end(in_order) == want
    assert engine.counters()["rewinds"] == 1
    assert _month_end(got) == want
