"""The trend's downsampling over a real historian file (the table the historian writes): per-bucket min/max
equal the readings' whether a bucket comes from the readings or from the per-minute rollups; an episode's
peak reading is inside its bucket and listed with its time; the line is broken only where readings with a
value are more than ``max_gap`` apart (not where buckets are shorter than the poll interval); a late reading
for a rolled-up day is seen at the next request; ticks fall on local midnights and round hours across a
daylight-saving change."""

from __future__ import annotations

import sqlite3
from datetime import datetime
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from config.loader import load_config
from config.schema import SiteConfig
from monitor.checks.events import EpisodeEvent
from monitor.console import queries
from monitor.console.trend_axis import ticks, zone_label
from monitor.console.trend_rollup import Rollups
from monitor.console.trends import trend
from monitor.stores.episodes import EpisodeStore
from monitor.stores.historian_db import open_for_writing
from tests.browser.harness import ACME, write_site

DAY = 86400
T0 = 1_789_948_800.0  # a UTC midnight (2026-09-21)
DAYS = 3
HOLE = (T0 + DAY + 7200, T0 + DAY + 7230)  # 30 s without readings (max_gap of ph is 5 s)
SPIKE = T0 + 2 * DAY + 3 * 3600 + 17  # one reading of 11.9


def value(i: int) -> float:
    return 7.0 + ((i * 7919) % 1000) / 1000.0  # 7.000..7.999, scrambled: every bucket has its own min and max


def readings() -> list[tuple[float, float | None, int]]:
    """(time, value, quality) every second for three days, from 1 s before T0 (outside the first day)."""
    out: list[tuple[float, float | None, int]] = []
    for i in range(-1, DAYS * DAY):
        t = T0 + i
        if HOLE[0] < t < HOLE[1]:
            continue
        if T0 + DAY // 2 <= t < T0 + DAY // 2 + 600:
            out.append((t, None, 3))  # ten minutes of comm failures: readings without a value
        else:
            out.append((t, 11.9 if t == SPIKE else value(i), 0))
    return out


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> tuple[SiteConfig, list[tuple[float, float | None, int]]]:
    config = load_config(write_site(tmp_path_factory.mktemp("downsampling")))
    rows = readings()
    conn = open_for_writing(config.daemon.historian, busy_timeout=5.0)
    conn.execute("INSERT INTO channels (site, channel, unit) VALUES (?, 'ph', 'pH')", (ACME,))
    (cid,) = conn.execute("SELECT id FROM channels WHERE site = ? AND channel = 'ph'", (ACME,)).fetchone()
    conn.execute("BEGIN")
    conn.executemany("INSERT INTO readings VALUES (?, ?, ?, ?, ?, ?)",
                     ((cid, t, n + 1, v, q, "" if q == 0 else "timeout") for n, (t, v, q) in enumerate(rows)))
    conn.execute("UPDATE historian_meta SET value = ? WHERE key = 'next_seq'", (len(rows) + 1,))
    conn.execute("COMMIT")
    conn.close()
    store = EpisodeStore(path=config.daemon.historian)
    store.record([EpisodeEvent(SPIKE - 5, ACME, "ph", "ph_high", "start", 11.0, 9.0, "§ 112-5A(1)(c)"),
                  EpisodeEvent(SPIKE + 20, ACME, "ph", "ph_high", "end", 8.0, 9.0, "§ 112-5A(1)(c)", 11.9)])
    store.close()
    return config, rows


def brute(rows: list[tuple[float, float | None, int]], start: float, width: float, n: int,
          rolled: tuple[float, float] = (0.0, 0.0)) -> dict[int, tuple]:
    """The buckets computed from the readings one by one; a reading inside ``rolled`` (the whole UTC days taken
    from the rollups) counts in the bucket its minute starts in."""
    out: dict[int, list] = {}
    for t, v, _q in rows:
        if not start <= t < start + n * width:
            continue
        b = int((((t // 60 * 60) if rolled[0] <= t < rolled[1] else t) - start) / width)
        m = out.setdefault(b, [None, None, 0, 0])
        m[3] += 1
        if v is not None:
            m[0] = v if m[0] is None else min(m[0], v)
            m[1] = v if m[1] is None else max(m[1], v)
            m[2] += 1
    return {b: tuple(m) for b, m in out.items()}


@pytest.mark.parametrize("start,span,buckets", [
    (T0 - 3600, DAYS * DAY, 1000),  # whole days from the rollups, the edges from the readings
    (T0 + 1234.5, 2 * DAY, 700),
    (T0 + DAY + 7000, 1200, 400),  # 3-second buckets: from the readings only
])
def test_buckets_keep_every_min_and_max(recorded: tuple[SiteConfig, list], start: float, span: float,
                                        buckets: int) -> None:
    config, rows = recorded
    conn = queries.connect(config.daemon.historian)
    cache = Rollups()
    out = trend(conn, config, config.site(ACME), "ph", start=start, end=start + span, buckets=buckets,
                now=T0 + DAYS * DAY, cache=cache)
    width = span / buckets
    days = (-(-start // DAY) * DAY, (start + span) // DAY * DAY) if width >= 120 else (0.0, 0.0)
    want = brute(rows, start, width, buckets, days)
    got = {round((t - start) / width): (lo, hi, g, n)
           for t, lo, hi, g, n in zip(out["t"], out["min"], out["max"], out["good"], out["total"], strict=True)}
    assert got == want
    assert sum(g[3] for g in got.values()) == sum(w[3] for w in want.values())
    assert max(x for x in out["max"] if x is not None) == max(w[1] for w in want.values() if w[1] is not None)
    assert min(x for x in out["min"] if x is not None) == min(w[0] for w in want.values() if w[0] is not None)
    assert (cache.built > 0) == (width >= 120 and span >= DAY)
    conn.close()


def test_rollup_buckets_equal_reading_buckets_where_minutes_align(recorded: tuple[SiteConfig, list]) -> None:
    """With buckets a whole number of minutes from a minute boundary, the rollups give exactly the buckets
    the readings give (the same min, max and counts)."""
    config, rows = recorded
    conn = queries.connect(config.daemon.historian)
    out = trend(conn, config, config.site(ACME), "ph", start=T0, end=T0 + 2 * DAY, buckets=960,
                now=T0 + DAYS * DAY, cache=Rollups())
    want = brute(rows, T0, 180.0, 960)
    got = {round((t - T0) / 180.0): (lo, hi, g, n)
           for t, lo, hi, g, n in zip(out["t"], out["min"], out["max"], out["good"], out["total"], strict=True)}
    assert got == want
    conn.close()


def test_episode_peak_is_kept_and_located(recorded: tuple[SiteConfig, list]) -> None:
    config, _rows = recorded
    conn = queries.connect(config.daemon.historian)
    out = trend(conn, config, config.site(ACME), "ph", start=T0, end=T0 + DAYS * DAY, buckets=300,
                now=T0 + DAYS * DAY, cache=Rollups())
    (ep,) = out["episodes"]
    assert (ep["peak"], ep["peak_time"]) == (11.9, SPIKE)
    b = int((SPIKE - T0) / out["bucket_s"])
    i = out["t"].index(T0 + b * out["bucket_s"])
    assert out["max"][i] == 11.9  # a one-second spike in a 14-minute bucket
    conn.close()


def test_gaps_only_where_readings_are_missing_beyond_max_gap(recorded: tuple[SiteConfig, list]) -> None:
    config, _rows = recorded
    conn = queries.connect(config.daemon.historian)
    site = config.site(ACME)
    assert site.channel("ph").max_gap == 5.0
    # 0.25-second buckets (shorter than the 1-second poll): three of four empty, yet no gap but the hole
    fine = trend(conn, config, site, "ph", start=HOLE[0] - 60, end=HOLE[1] + 60, buckets=600,
                 now=T0 + DAYS * DAY, cache=Rollups())
    assert fine["bucket_s"] == 0.25 and len(fine["t"]) == 150 - 29
    assert fine["gaps"] == [[HOLE[0], HOLE[1]]]
    # two days at 1,000 buckets (173 s each): the ten minutes of readings without a value span buckets and
    # break the line; the 30-second hole lies inside one bucket (a sixth of a pixel column): not drawn
    day = trend(conn, config, site, "ph", start=T0, end=T0 + 2 * DAY, buckets=1000, now=T0 + DAYS * DAY,
                cache=Rollups())
    assert day["gaps"] == [[T0 + DAY // 2 - 1, T0 + DAY // 2 + 600]]
    assert day["completeness"]["good"] == 2 * DAY + 1 - 600 - 29  # [start, end] closed
    bad = [t for t, g, n in zip(day["t"], day["good"], day["total"], strict=True) if g == 0]
    assert bad and all(T0 + DAY // 2 - day["bucket_s"] < t < T0 + DAY // 2 + 600 for t in bad)
    conn.close()


def copy_record(src: Path, dst: Path) -> Path:
    """A copy of the record at ``src`` (SQLite's backup: consistent whatever its journal mode)."""
    a, b = sqlite3.connect(src), sqlite3.connect(dst)
    a.backup(b)
    a.close()
    b.close()
    return dst


def test_a_late_reading_for_a_rolled_up_day_is_seen(recorded: tuple[SiteConfig, list], tmp_path: Path) -> None:
    config, _rows = recorded
    db = copy_record(config.daemon.historian, tmp_path / "copy.sqlite")
    cache = Rollups(check_every=0.0)  # the console's counts again after 30 s
    conn = queries.connect(db)
    site = config.site(ACME)
    args = {"start": T0, "end": T0 + DAYS * DAY, "buckets": 500, "now": T0 + DAYS * DAY, "cache": cache,
            "source": str(db)}
    first = trend(conn, config, site, "ph", **args)
    assert cache.built == DAYS and max(first["max"]) == 11.9
    assert trend(conn, config, site, "ph", **args)["max"] == first["max"] and cache.built == DAYS  # cached
    w = sqlite3.connect(db)
    w.execute("INSERT INTO readings VALUES (1, ?, 99999999, 13.5, 0, '')", (T0 + DAY + 100.5,))
    w.commit()
    w.close()
    late = trend(conn, config, site, "ph", **args)
    assert max(late["max"]) == 13.5 and sum(late["total"]) == sum(first["total"]) + 1
    assert cache.built == DAYS + 1  # only the changed day was rebuilt
    conn.close()


def test_ticks_on_a_spring_forward_day() -> None:
    zone = ZoneInfo("America/New_York")
    a = datetime(2026, 3, 8, tzinfo=zone).timestamp()
    b = datetime(2026, 3, 9, tzinfo=zone).timestamp()
    assert b - a == 23 * 3600
    out = ticks(a, b, "America/New_York", 560)  # 8 labels' room: 3-hour steps
    assert [x["label"] for x in out] == ["Sun 03-08", "03:00", "06:00", "09:00", "12:00", "15:00", "18:00", "21:00",
                                         "Mon 03-09"]
    assert out[1]["t"] - out[0]["t"] == 2 * 3600  # 02:00 never happened
    assert [x["midnight"] for x in out] == [True] + [False] * 7 + [True]
    assert zone_label(a, b, "America/New_York") == "EST/EDT"
    week = ticks(a - 3 * 86400, a + 4 * 86400, "America/New_York", 700)
    assert all(datetime.fromtimestamp(float(x["t"]), zone).strftime("%H:%M") in ("00:00", "12:00") for x in week)


def test_ticks_on_a_fall_back_day_name_the_repeated_hour() -> None:
    zone = ZoneInfo("America/New_York")
    a = datetime(2026, 11, 1, tzinfo=zone).timestamp()
    out = ticks(a, a + 25 * 3600, "America/New_York", 2000)  # hourly
    labels = [x["label"] for x in out]
    assert labels[:4] == ["Sun 11-01", "01:00 EDT", "01:00 EST", "02:00"] and labels[-1] == "Mon 11-02"
    assert len(out) == 26


async def test_slug_line_is_the_baseline_pretreat_rules_shows(tmp_path: Path) -> None:
    """The chart's slug line per local day: multiplier × the baseline in force that day, rebuilt from the
    historian as `pretreat rules` does (two recorded days at 12 gpm: none on the first, whose look-back is
    empty; 60 gpm from the next day on)."""
    import time as _time

    from monitor.console.trend_slug import slug_line
    from monitor.rules_cli import slug_baselines
    from monitor.sample import Sample
    from tests.unit.checks_helpers import channel, load, record, site_toml

    config = load(tmp_path, site_toml(channel("flow"), extra="[site.rules.slug]\nloading = false\n"))
    now = _time.time()
    midnight = now - now % 86400.0  # UTC midnight today (the site's zone is UTC)
    record(config, [Sample(time=midnight - 2 * 86400.0 + 60.0 * i, site="acme", channel="flow", value=12.0, unit="gpm")
              for i in range(2 * 1440 + 1)])
    site = config.site("acme")
    line = slug_line(config, site, "flow", start=midnight - 2 * 86400.0, end=now, now=now)
    assert [(x["day"], x["threshold"]) for x in line] == [(midnight - 2 * 86400.0, None), (midnight - 86400.0, 60.0),
                                                         (midnight, 60.0)]
    assert line[-1]["baseline"] == 12.0 and line[-1]["multiplier"] == 5.0 and line[-1]["unit"] == "gpm"
    assert "a slug is above 60 gpm" in slug_baselines(config, now)[("acme", "flow")]
    assert slug_line(config, site, "flow", start=now - 3600, end=now, now=now)[-1]["threshold"] == 60.0
    assert slug_line(config, site, "ph", start=now - 3600, end=now, now=now) == []  # no slug rule there
    # with the running daemon's baseline (its health snapshot): the day in progress takes it, earlier days
    # are still rebuilt from the record
    today = datetime.fromtimestamp(now, ZoneInfo("UTC")).date().isoformat()
    live = {"fixed": False, "day": today, "baseline": 20.0, "threshold": 100.0, "rests_on": []}
    both = slug_line(config, site, "flow", start=midnight - 86400.0, end=now, now=now, live=live)
    assert [(x["day"], x["threshold"], x["source"]) for x in both] == [(midnight - 86400.0, 60.0, "record"),
                                                                      (midnight, 100.0, "daemon")]


def test_the_aggregation_reads_the_primary_key_range(recorded: tuple[SiteConfig, list]) -> None:
    """Both reads of the readings (the per-bucket aggregation, a day's rollup) search the clustered
    (channel_id, time) key: no scan of the table, no sort for the rollup."""
    import monitor.console.trends as trends_module
    from monitor.console import trend_rollup

    config, _rows = recorded
    conn = sqlite3.connect(config.daemon.historian)
    plans = []
    real = conn.execute

    class Spy:
        def execute(self, sql: str, args: tuple = ()) -> sqlite3.Cursor:
            if "FROM readings" in sql and not sql.startswith("EXPLAIN"):
                plans.append(" ".join(str(r[3]) for r in real("EXPLAIN QUERY PLAN " + sql, args)))
            return real(sql, args)

    spy = Spy()
    trends_module._raw(spy, 1, T0, 60.0, T0, T0 + 3600, {})  # type: ignore[arg-type]
    trend_rollup.build_day(spy, 1, T0)  # a dense day: counted, then searched minute by minute
    assert len(plans) == 3
    assert all("USING PRIMARY KEY (channel_id=? AND time>? AND time<?)" in p for p in plans), plans
    assert "TEMP B-TREE" not in plans[2]
    conn.close()


def test_a_sparse_day_grouped_gives_the_rollup_a_dense_one_searched_gives(recorded: tuple[SiteConfig, list],
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """The two ways a day is rolled up (searched minute by minute, or its readings grouped by minute when
    they are few) give the same minute rows, so the trend is the same whichever was used."""
    from monitor.console import trend_rollup

    config, _rows = recorded
    conn = queries.connect(config.daemon.historian)
    site = config.site(ACME)
    args = {"start": T0 - 3600, "end": T0 + DAYS * DAY, "buckets": 900, "now": T0 + DAYS * DAY}
    searched = trend(conn, config, site, "ph", cache=Rollups(), **args)
    monkeypatch.setattr(trend_rollup, "SPARSE", 10**9)  # every day grouped
    grouped_cache = Rollups()
    grouped = trend(conn, config, site, "ph", cache=grouped_cache, **args)
    assert grouped == searched and grouped_cache.built == DAYS
    assert trend_rollup.build_day(conn, 1, T0 + 10 * DAY).rows.tolist() == []  # a day without readings
    conn.close()


def test_the_warm_up_rolls_up_dense_series_so_the_first_month_request_builds_nothing(
        recorded: tuple[SiteConfig, list]) -> None:
    """The console's warm-up (`trends.warm`) builds the last 30 whole UTC days of a series with a reading a
    second; a trend over those days then only merges them, with the same buckets as one built on request."""
    import threading

    from monitor.console.trends import warm

    config, _rows = recorded
    conn = queries.connect(config.daemon.historian)
    site = config.site(ACME)
    now = T0 + DAYS * DAY + 3600  # the three recorded days are the last whole ones
    cache = Rollups()
    assert warm(conn, "rec", now, threading.Event(), cache) == 30  # 3 with readings, 27 empty
    args = {"start": T0, "end": T0 + DAYS * DAY, "buckets": 500, "now": now, "source": "rec"}
    warmed = trend(conn, config, site, "ph", cache=cache, **args)
    assert cache.built == 30
    assert warmed == trend(conn, config, site, "ph", cache=Rollups(), **args)
    assert warm(conn, "rec", now, threading.Event(), cache) == 0  # nothing new to build
    stopped = Rollups()
    stop = threading.Event()
    stop.set()
    assert warm(conn, "rec", now, stop, stopped) == 0 and stopped.built == 0
    conn.close()


def test_a_sparse_series_is_neither_warmed_nor_rolled_up(recorded: tuple[SiteConfig, list],
                                                         tmp_path: Path) -> None:
    """A series with fewer than one reading per 5 s (here one per 30 s) is not warmed, and its trends
    aggregate the readings themselves (no rollup built), while the dense series beside it is warmed."""
    import threading

    from monitor.console.trends import warm

    config, _rows = recorded
    db = tmp_path / "copy.sqlite"
    src, dst = sqlite3.connect(config.daemon.historian), sqlite3.connect(db)
    src.backup(dst)
    src.close()
    dst.execute("INSERT INTO channels (id, site, channel, unit) VALUES (2, ?, 'lel', '%LEL')", (ACME,))
    dst.executemany("INSERT INTO readings VALUES (2, ?, ?, ?, 0, '')",
                    ((T0 + 30.0 * k, 10**8 + k, float(k % 7)) for k in range(DAYS * DAY // 30)))
    dst.commit()
    dst.close()
    cache = Rollups()
    conn = queries.connect(db)
    site = config.site(ACME)
    assert warm(conn, "rec", T0 + DAYS * DAY + 1, threading.Event(), cache) == 30  # the 1-s pH only
    built = cache.built
    args = {"start": T0, "end": T0 + DAYS * DAY, "buckets": 500, "now": T0 + DAYS * DAY, "source": "rec"}
    lel = trend(conn, config, site, "lel", cache=cache, **args)
    assert cache.built == built and sum(lel["total"]) == DAYS * DAY // 30 and max(lel["max"]) == 6.0
    conn.close()


def test_a_series_found_dense_by_a_request_is_rolled_up(recorded: tuple[SiteConfig, list]) -> None:
    """A series the warm-up found sparse whose window then holds a reading a second (a month imported into a
    running console): the request counts them, takes the series as dense and uses the rollups."""
    import threading

    from monitor.console.trends import warm

    config, _rows = recorded
    cache = Rollups()
    conn = queries.connect(config.daemon.historian)
    site = config.site(ACME)
    assert warm(conn, "rec", T0 + 10 * DAY, threading.Event(), cache) == 0  # found sparse
    args = {"start": T0, "end": T0 + DAYS * DAY, "buckets": 500, "now": T0 + 10 * DAY, "source": "rec"}
    first = trend(conn, config, site, "ph", cache=cache, **args)
    assert cache.built == DAYS and max(first["max"]) == 11.9
    assert first == trend(conn, config, site, "ph", cache=Rollups(), **args)
    conn.close()


def test_a_day_asked_for_by_two_threads_at_once_is_built_once(recorded: tuple[SiteConfig, list]) -> None:
    import threading

    config, _rows = recorded
    cache = Rollups()
    barrier = threading.Barrier(4)

    def ask() -> None:
        conn = queries.connect(config.daemon.historian)
        barrier.wait()
        cache.day(conn, "rec", 1, T0)
        conn.close()

    threads = [threading.Thread(target=ask) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert cache.built == 1


def test_a_late_episode_peak_is_drawn_at_once_not_after_the_count_check(recorded: tuple[SiteConfig, list],
                                                                       tmp_path: Path) -> None:
    """A late reading that makes an episode in a rolled-up day: the next trend lists the episode with its
    peak, and its band reaches that peak in the same answer (not 30 s later, at the next count check)."""
    config, _rows = recorded
    db = copy_record(config.daemon.historian, tmp_path / "late.sqlite")
    cache = Rollups()  # the console's: days counted again at most every 30 s
    conn = queries.connect(db)
    site = config.site(ACME)
    args = {"start": T0, "end": T0 + DAYS * DAY, "buckets": 500, "now": T0 + DAYS * DAY, "cache": cache,
            "source": str(db)}
    assert max(trend(conn, config, site, "ph", **args)["max"]) == 11.9  # builds the days
    assert max(trend(conn, config, site, "ph", **args)["max"]) == 11.9  # counts them: checked for 30 s
    late = T0 + DAY + 100.5
    w = sqlite3.connect(db)
    w.execute("INSERT INTO readings VALUES (1, ?, 99999999, 13.5, 0, '')", (late,))
    w.commit()
    w.close()
    store = EpisodeStore(path=db)
    store.record([EpisodeEvent(late, ACME, "ph", "ph_high", "start", 13.5, 9.0, "§ 112-5A(1)(c)"),
                  EpisodeEvent(late + 1, ACME, "ph", "ph_high", "end", 8.0, 9.0, "§ 112-5A(1)(c)", 13.5)])
    store.close()
    out = trend(conn, config, site, "ph", **args)
    assert [(e["peak"], e["peak_time"]) for e in out["episodes"]] == [(13.5, late), (11.9, SPIKE)]
    assert max(out["max"]) == 13.5
    conn.close()


def test_a_replaced_record_is_never_drawn_from_the_old_ones_rollups(recorded: tuple[SiteConfig, list],
                                                                     tmp_path: Path) -> None:
    """A daemon restarted on a fresh record (another file at the same path) whose days hold as many readings
    as the old file's (a 1-s channel: 86,400 a whole day) but other values: the trend shows the new file's
    values, not the rollups built from the old one."""
    config, rows = recorded
    db = copy_record(config.daemon.historian, tmp_path / "record.sqlite")
    cache = Rollups(check_every=0.0)  # the console's counts again after 30 s
    site = config.site(ACME)
    args = {"start": T0, "end": T0 + DAYS * DAY, "buckets": 500, "now": T0 + DAYS * DAY, "cache": cache,
            "source": str(db)}
    conn = queries.connect(db)
    old = trend(conn, config, site, "ph", **args)
    conn.close()
    assert max(old["max"]) == 11.9
    fresh = tmp_path / "fresh.sqlite"  # the same readings' times, each value 1 pH lower: no 11.9 spike
    w = open_for_writing(fresh, busy_timeout=5.0)
    w.execute("INSERT INTO channels (site, channel, unit) VALUES (?, 'ph', 'pH')", (ACME,))
    w.execute("BEGIN")
    w.executemany("INSERT INTO readings VALUES (1, ?, ?, ?, ?, ?)",
                  ((t, n + 1, None if v is None else v - 1.0, q, "" if q == 0 else "timeout")
                   for n, (t, v, q) in enumerate(rows)))
    w.execute("COMMIT")
    w.close()
    fresh.replace(db)
    conn = queries.connect(db)
    new = trend(conn, config, site, "ph", **args)
    conn.close()
    assert max(new["max"]) == 10.9
    assert new["max"] == [None if x is None else x - 1.0 for x in old["max"]]
