"""The read side on the county hub's database: an edge daemon (`pretreat run` with ``[uplink]``, our Modbus
simulator) publishes to a real mosquitto, a `pretreat hub` writes into a PostgreSQL cluster the fixture made,
and `pretreat exceedances`, `pretreat readings` and `pretreat audit` with ``--database`` must answer as they
answer on the edge's own SQLite file for that site: the same episodes, values, evidence and readings, byte for
byte; a completeness count may differ only by a reading in the same millisecond as an episode's bound (the hub
keeps reading times to the millisecond, as the Sparkplug timestamps carry them)."""

from __future__ import annotations

import argparse
import difflib
import io
import json
import math
import re
import time
from datetime import datetime
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import psycopg
import pytest

from config.loader import load_config
from monitor.cli import main
from monitor.exceedances import add_arguments as exceedance_arguments
from monitor.exceedances import run as exceedances
from monitor.stores.readonly import connect_readonly
from simulators.runner import SiteSimulator
from tests.faults.harness import SITE, DaemonProcess, SimThread
from tests.hub_support import HubProcess, count
from tests.support import Mosquitto, PostgreSQL, wait_until
from tests.uplink_support import uplink_site


def _counts_sqlite(path: Path) -> tuple[int, int]:
    conn = connect_readonly(path, timeout=10)
    try:
        return (conn.execute("SELECT count(*) FROM readings").fetchone()[0],
                conn.execute("SELECT count(*) FROM episode_events").fetchone()[0])
    finally:
        conn.close()


def _ended(path: Path) -> int:
    conn = connect_readonly(path, timeout=10)
    try:
        return int(conn.execute("SELECT count(*) FROM episode_events WHERE event = 'end'").fetchone()[0])
    finally:
        conn.close()


def _open(path: Path, channel: str) -> bool:
    """Whether the channel's stale episode is open (its latest transition a start)."""
    conn = connect_readonly(path, timeout=10)
    try:
        row = conn.execute("SELECT event FROM episode_events WHERE channel = ? AND rule = 'stale' "
                           "ORDER BY time DESC, id DESC LIMIT 1", (channel,)).fetchone()
        return row is not None and row[0] == "start"
    finally:
        conn.close()


def _counts_hub(db: PostgreSQL) -> tuple[int, int]:
    with psycopg.connect(db.url) as conn:
        return (conn.execute("SELECT count(*) FROM readings").fetchone()[0],  # type: ignore[index]
                conn.execute("SELECT count(*) FROM events WHERE type = 'episode'").fetchone()[0])  # type: ignore[index]


def _exceedances(argv: list[str], now: float) -> str:
    p = argparse.ArgumentParser()
    exceedance_arguments(p)
    out = io.StringIO()
    assert exceedances(p.parse_args(argv), out=out, now=now) == 0
    return out.getvalue()


@pytest.fixture
def county(tmp_path: Path, mosquitto: Mosquitto, postgres: PostgreSQL) -> Any:
    """One edge daemon (a served pH and flow meter, a pH meter nobody serves) and one hub, run until the edge
    has recorded episodes and the hub has stored every reading and episode event of it; the daemon stopped."""
    path, sim = uplink_site(tmp_path, mosquitto.port)
    config = load_config(path)
    hub = HubProcess(tmp_path, "hub-a", mosquitto, postgres)
    daemon = DaemonProcess(path, tmp_path / "daemon.log")
    try:
        hub.start()
        db = config.daemon.historian
        with SimThread(lambda: SiteSimulator(config=sim)):
            daemon.start()
            daemon.wait_ready()
            assert wait_until(lambda: db.exists() and _counts_sqlite(db)[0] > 300, 60, 0.2), daemon.output()[-2000:]
        # the simulator away for a while: the served channels go stale, then come back (closed episodes with
        # good readings inside their span, which completeness counts)
        assert wait_until(lambda: _open(db, "ph") and _open(db, "flow"), 60, 0.2), daemon.output()[-2000:]
        ended = _ended(db)
        with SimThread(lambda: SiteSimulator(config=sim)):
            assert wait_until(lambda: _ended(db) >= ended + 2, 60, 0.2), daemon.output()[-2000:]
            before = _counts_sqlite(db)[0]
            assert wait_until(lambda: _counts_sqlite(db)[0] > before + 100, 60, 0.2)
            assert daemon.stop() == 0
        want = _counts_sqlite(db)
        assert wait_until(lambda: _counts_hub(postgres) == want, 60, 0.2), (_counts_hub(postgres), want,
                                                                           hub.log.read_text()[-2000:])
        yield path, postgres.url
    finally:
        daemon.kill()
        hub.stop()


def _ms(iso: str | None) -> int | None:
    if iso is None:
        return None
    return round(datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp() * 1000)


def _same_ms(path: Path, row: dict[str, Any]) -> int:
    """Good readings of the episode's channel in the same millisecond as its start or end: the hub keeps times
    to the millisecond, so only these may fall on the other side of a bound there."""
    conn = connect_readonly(load_config(path).daemon.historian, timeout=10)
    try:
        times = [t for (t,) in conn.execute(
            "SELECT r.time FROM readings r JOIN channels c ON c.id = r.channel_id WHERE c.site = ? AND "
            "c.channel = ? AND r.value IS NOT NULL", (row["site"], row["channel"]))]
    finally:
        conn.close()
    bounds = {_ms(row["start"]), _ms(row["end"])} - {None}
    return sum(round(t * 1000) in bounds for t in times)


def _same_episodes(path: Path, edge: str, hub: str) -> bool:
    """Every column equal but the good-readings count (and its percentage), which may differ only by readings
    in the same millisecond as an episode's bound; returns whether the two are identical."""
    counted = ("readings_good", "completeness_pct")
    edge_rows, hub_rows = ([json.loads(x) for x in text.splitlines()] for text in (edge, hub))
    assert len(edge_rows) == len(hub_rows), (edge, hub)
    for e, h in zip(edge_rows, hub_rows, strict=True):
        for row in (e, h):  # readings in one millisecond: the hub orders them by seq, the edge by exact time
            if row.get("evidence"):
                row["evidence"] = sorted(row["evidence"], key=lambda r: (r["time"], json.dumps(r, sort_keys=True)))
        assert {k: v for k, v in e.items() if k not in counted} == {k: v for k, v in h.items() if k not in counted}
        assert abs(e["readings_good"] - h["readings_good"]) <= _same_ms(path, e), (e, h)
    return edge == hub


def test_exceedances_on_the_hub_database_equal_the_edges_file(county: Any) -> None:
    path, url = county
    now = time.time()
    base = ["--config", str(path), "--data-quality"]
    exact = _same_episodes(path, _exceedances([*base, "--format", "json"], now),
                           _exceedances([*base, "--format", "json", "--database", url], now))
    for fmt in ("csv", "table"):
        edge = _exceedances([*base, "--format", fmt], now)
        hub = _exceedances([*base, "--format", fmt, "--database", url], now)
        assert hub == edge or not exact, f"{fmt} differs:\nedge:\n{edge[:1500]}\nhub:\n{hub[:1500]}"
    rows = [json.loads(line) for line in edge_json(path, now).splitlines()]
    assert rows and any(r["readings_good"] for r in rows), json.dumps(rows)  # the test compares counted readings
    # with the evidence (every reading from an hour before to an hour after each episode, good and bad)
    base = [*base, "--format", "json", "--evidence", "--site", SITE]
    edge = _exceedances(base, now)
    assert '"evidence": [{' in edge or '"evidence":[{' in edge
    _same_episodes(path, edge, _exceedances([*base, "--database", url], now))


def _audit(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = main(["audit", *argv])
    out = capsys.readouterr().out
    return code, re.sub(r"replayed in [0-9.]+ s \([0-9.]+ M/s\)", "replayed", out)


def test_audit_on_the_hub_database_equals_the_edges(county: Any, capsys: pytest.CaptureFixture[str]) -> None:
    """The same readings replayed, the same episodes recorded and found. The hub's times are whole milliseconds:
    a start or end the replay finds may only move within the millisecond a gap or duration threshold was met
    in (the edge judged microseconds); the test shows every line when anything else differs."""
    path, url = county
    edge = _audit(["--config", str(path)], capsys)
    hub = _audit(["--config", str(path), "--database", url], capsys)
    assert edge[0] == 0 and re.search(r"audit: [1-9]\d* readings replayed; [1-9]\d* episodes recorded", edge[1]), edge
    counts = r"audit: \d+ readings replayed; \d+ episodes recorded, \d+ found by the replay"
    assert re.search(counts, hub[1]).group() == re.search(counts, edge[1]).group(), (edge, hub)  # type: ignore[union-attr]
    for line in hub[1].splitlines()[:-1]:
        spans = [_ms(t) for t in re.findall(r"\d{4}-\d\d-\d\dT[\d:.]+Z", line)]
        assert line.startswith("different") and len(spans) >= 2, hub[1]
        half = len(spans) // 2  # (start[, end]) recorded, then (start[, end]) the replay finds
        for recorded, replayed in zip(spans[:half], spans[half:], strict=True):
            assert recorded is not None and replayed is not None and abs(recorded - replayed) <= 1, hub[1]


def edge_json(path: Path, now: float) -> str:
    return _exceedances(["--config", str(path), "--data-quality", "--format", "json"], now)


def _by_millisecond(text: str) -> list[str]:
    stamp = re.compile(r"\d{4}-\d\d-\d\dT[\d:.]+Z")
    lines = text.splitlines()
    return sorted(lines, key=lambda line: ((m.group() if (m := stamp.search(line)) else ""), line))


def _same_readings(path: Path, channel: str, edge: str, hub: str) -> None:
    """Line by line equal, but where the edge's reading time lies on a half millisecond: the uplink sends
    round(t * 1000) and the export rounds t's offset into its UTC day, which can break that tie the other way
    (the hub's line is then the one a millisecond later or earlier). Lines of one printed millisecond are
    compared in text order: the hub keeps whole milliseconds, so two records of one millisecond (a stale-data
    sample and a reading stamped a fraction of a millisecond apart, under load) follow their seq there and
    their microsecond times at the edge."""
    edge_lines, hub_lines = _by_millisecond(edge), _by_millisecond(hub)
    assert len(edge_lines) == len(hub_lines), (channel, len(edge_lines), len(hub_lines))
    conn = connect_readonly(load_config(path).daemon.historian, timeout=10)
    try:
        times = [t for (t,) in conn.execute("SELECT r.time FROM readings r JOIN channels c ON c.id = r.channel_id "
                                            "WHERE c.site = ? AND c.channel = ?", (SITE, channel))]
    finally:
        conn.close()
    ties = {round(t * 1000) for t in times if abs(t * 1000 - math.floor(t * 1000) - 0.5) < 1e-3}
    ties |= {m - 1 for m in ties}
    for e, h in zip(edge_lines, hub_lines, strict=True):
        if e == h:
            continue
        m = re.search(r"(\d{4}-\d\d-\d\dT[\d:.]+Z)", h)
        assert m is not None and _ms(m.group(1)) in ties and re.sub(r"T[\d:.]+Z", "", e) == re.sub(
            r"T[\d:.]+Z", "", h), (channel, e, h)


def test_readings_on_the_hub_database_equal_the_edges_file(county: Any, capsys: pytest.CaptureFixture[str]) -> None:
    path, url = county
    for channel in ("ph", "flow", "ph2"):
        for fmt in ("csv", "json"):
            args = ["readings", "--config", str(path), "--site", SITE, "--channel", channel, "--format", fmt]
            assert main(args) == 0
            edge = capsys.readouterr().out
            assert main([*args, "--database", url]) == 0
            hub = capsys.readouterr().out
            assert edge.count("\n") > 50, edge[:500]
            _same_readings(path, channel, edge, hub)
    # the hub's database alone (no site file): the same rows but the calibration column, which needs the file
    assert main(["readings", "--database", url, "--site", SITE, "--channel", "ph2"]) == 0
    alone = capsys.readouterr().out
    assert "comm_failure" in alone and alone.count("\n") > 50
    assert main(["readings", "--database", url, "--site", SITE, "--channel", "nope"]) == 2
    assert "its channels: flow, ph, ph2" in capsys.readouterr().err


def _masked(text: str) -> str:
    """The report without the journal head (the edge's at generation, the hub's at the latest seal the edge
    sent: none in this short run), and the charts' SVG without what matplotlib makes up anew for each drawing
    (its date, random ids of paths and clips); the drawn coordinates are compared."""
    text = re.sub(r"Journal head at generation[^\n]*", "Journal head", text)
    text = re.sub(r"<dc:date>[^<]*</dc:date>", "", text)
    return re.sub(r"\b([mp])[0-9a-f]{10}\b", r"\1-id", text)


def _same_text(edge: str, hub: str) -> bool:
    """Equal text, with numbers of three or more decimals (the charts' SVG coordinates) equal within 0.05 (a
    twentieth of a pixel): the hub's reading times are whole milliseconds, which moves a chart's point by a few
    thousandths of a pixel; every number the report prints has fewer decimals and must be equal."""
    split = re.compile(r"(-?\d+\.\d{3,})")
    a, b = split.split(edge), split.split(hub)
    if len(a) != len(b):
        return False
    pairs = enumerate(zip(a, b, strict=True))
    return all(x == y if i % 2 == 0 else abs(float(x) - float(y)) <= 0.05 for i, (x, y) in pairs)


def test_report_on_the_hub_database_equals_the_edges(county: Any, tmp_path: Path) -> None:
    """The periodic report of the site built from the hub's database (its readings copied, the aggregates
    rebuilt) says what the edge's report from its own file says once its aggregates are rebuilt too: every
    section, table and number of the CSV and the HTML but the journal head, for one time of generation (the
    expected readings of today count up to it); then the command line's `report --database` writes its file."""
    from monitor.progress import Progress
    from monitor.reports.cli import _hub_report
    from monitor.reports.periods import period_of_days
    from monitor.reports.schedule import write_periodic

    path, url = county
    config = load_config(path)
    conn = connect_readonly(config.daemon.historian, timeout=10)
    try:
        lo, hi = conn.execute("SELECT min(time), max(time) FROM readings").fetchone()
    finally:
        conn.close()
    tz = ZoneInfo(config.site(SITE).timezone)
    first, last = datetime.fromtimestamp(lo, tz).date(), datetime.fromtimestamp(hi, tz).date()
    period = period_of_days(config.site(SITE), first, last)
    # the hub's report is built from aggregates rebuilt from the readings; the edge's daily figures were
    # accrued live, which leaves out a reading that arrived out of time order until `report rebuild` (the
    # edge's report then says so): rebuilt here as that note asks, the two must say the same
    assert main(["report", "rebuild", "--config", str(path), "--from", first.isoformat(), "--to",
                 last.isoformat()]) == 0
    now = time.time()
    for fmt in ("csv", "html"):
        with Progress("report", unit="step", total=2) as bar:
            edge_file = write_periodic(config, config.site(SITE), period, tmp_path / "edge", now=now, formats=(fmt,),
                                       progress=bar)[0]
        with Progress("report", unit="step", total=2) as bar:
            hub_file = _hub_report(url, config, SITE, period, tmp_path / "hub", now, fmt, bar)[0]
        edge, hub = (_masked(f.read_text(encoding="utf-8")) for f in (edge_file, hub_file))
        assert "stale" in edge and "Data completeness" in edge, edge[:3000]  # the scenario's episodes are listed
        # the hub cannot know the edge's obligations store (it is not sent): its report says so
        hub = hub.replace(" (no obligations record in this monitoring database)", "")
        assert _same_text(edge, hub), "\n".join(difflib.unified_diff(edge.splitlines(), hub.splitlines(), "edge",
                                                                     "hub", lineterm=""))[:6000]
    days = [first.isoformat(), last.isoformat()]
    argv = ["report", "--config", str(path), "--site", SITE, "--from", *days[:1], "--to", days[1], "--format", "csv"]
    assert main([*argv, "--database", url, "--output", str(tmp_path / "cli.csv")]) == 0
    assert "# Data completeness" in (tmp_path / "cli.csv").read_text(encoding="utf-8")
    assert main([*argv, "--database", "mysql://x", "--output", str(tmp_path / "x.csv")]) == 2


async def test_revisions_reach_the_hub_so_its_exceedances_equal_the_edges(tmp_path: Path, mosquitto: Mosquitto,
                                                                          postgres: PostgreSQL) -> None:
    """Late readings correct episodes the edge had already sent: one retracted (its start and end withdrawn),
    one whose end moved (and whose start's figures changed), one whose end's figures changed in place. The edge's
    episode store applies them and the uplink sends what `Daemon._record_revisions` sends (`revision_events`,
    through the durable queue, to a real broker and `pretreat hub`): the hub's exceedances then equal the
    edge's, byte for byte, with the retracted episode listed as such, one end for the moved one, the new
    figures and the revision history; the audit's reading of the recorded episodes and the periodic report
    (CSV and HTML, built from the hub's copy of the site) are the same too."""
    from config.uplink import UplinkSettings
    from monitor.audit import recorded_events
    from monitor.checks.events import EpisodeEvent
    from monitor.checks.revisions import Revision
    from monitor.progress import Progress
    from monitor.reports.cli import _hub_report
    from monitor.reports.periods import period_of_days
    from monitor.reports.schedule import write_periodic
    from monitor.stores.episodes import EpisodeStore
    from monitor.stores.historian_db import open_for_writing
    from monitor.uplink.events import episode_event, revision_events
    from monitor.uplink.publisher import UplinkPublisher

    t0 = float(round(time.time()) - 7200)

    def ev(t: float, event: str, value: float, peak: float | None = None, measured: float | None = None,
           maintenance: float | None = None) -> EpisodeEvent:
        if event == "start":
            return EpisodeEvent(t0 + t, SITE, "ph", "ph_high", "start", value, 10.0, "Sec. 4.2(a)")
        return EpisodeEvent(t0 + t, SITE, "ph", "ph_high", "end", value, 10.0, "Sec. 4.2(a)", peak, "cleared",
                            measured, 0.0, maintenance=maintenance)

    a = (ev(0, "start", 10.5), ev(60, "end", 9.8, 10.9, 60.0))
    b = (ev(600, "start", 10.4), ev(660, "end", 9.9, 10.6, 60.0))
    c = (ev(1200, "start", 10.2), ev(1260, "end", 9.7, 10.3, 60.0))
    revisions = [Revision(SITE, "ph", "ph_high", a, (), t0 + 30, False),
                 Revision(SITE, "ph", "ph_high", (b[1],), (ev(720, "end", 9.6, 11.2, 120.0), ev(600, "start", 10.6)),
                          t0 + 700, False),
                 Revision(SITE, "ph", "ph_high", (c[1],), (ev(1260, "end", 9.7, 10.8, 50.0, 8.0),), t0 + 1230, False)]
    path, _sim = uplink_site(tmp_path, mosquitto.port)
    config = load_config(path)
    edge_db = config.daemon.historian
    open_for_writing(edge_db, busy_timeout=10.0).close()  # the site's file, with no readings: episodes only
    hub = HubProcess(tmp_path, "hub-r", mosquitto, postgres)
    store = EpisodeStore(path=edge_db)
    pub = UplinkPublisher(settings=UplinkSettings(host="127.0.0.1", port=mosquitto.port, node="edge-r",
                                                  flush_interval=0.05, max_backoff=0.2,
                                                  queue_path=tmp_path / "q.sqlite"), channels=[])
    try:
        hub.start()
        await pub.start()
        events = [*a, *b, *c]
        pub.submit_events(episode_event(e, i) for e, i in zip(events, store.record(events), strict=True)
                          if i is not None)
        applied = store.revise(revisions, recorded=t0 + 1800)
        pub.submit_events(revision_events(applied))
        assert await _eventually(lambda: pub.counters.queue_depth == 0 and pub.counters.events_sent == 10)
    finally:
        store.close()
        await pub.close()
    try:
        assert wait_until(lambda: count(postgres, "SELECT count(*) FROM events") == 10, 30, 0.1), \
            hub.log.read_text()[-2000:]
    finally:
        hub.stop()
    now = t0 + 3600
    for fmt in ("json", "csv", "table"):
        argv = ["--format", fmt, "--site", SITE]
        edge = _exceedances([*argv, "--db", str(edge_db)], now)
        assert _exceedances([*argv, "--database", postgres.url], now) == edge, fmt
    rows = [json.loads(line) for line in _exceedances(["--format", "json", "--db", str(edge_db)], now).splitlines()]
    assert [r["status"] for r in rows] == ["retracted", "closed", "closed"], rows
    assert [r["peak"] for r in rows[1:]] == [11.2, 10.8] and all(r["revisions"] for r in rows), rows
    assert [(r["measured_s"], r["maintenance_s"]) for r in rows[1:]] == [(120.0, None), (50.0, 8.0)], rows
    assert recorded_events(postgres.url) == recorded_events(edge_db) and len(recorded_events(edge_db)) == 4
    # the periodic report built from the hub's copy of the site says what the edge's says
    tz = ZoneInfo(config.site(SITE).timezone)
    period = period_of_days(config.site(SITE), datetime.fromtimestamp(t0, tz).date(),
                            datetime.fromtimestamp(now, tz).date())
    for fmt in ("csv", "html"):
        with Progress("report", unit="step", total=2) as bar:
            edge_file = write_periodic(config, config.site(SITE), period, tmp_path / "edge", now=now, formats=(fmt,),
                                       progress=bar)[0]
        with Progress("report", unit="step", total=2) as bar:
            hub_file = _hub_report(postgres.url, config, SITE, period, tmp_path / "hub", now, fmt, bar)[0]
        # (neither has an obligations store here: the edge's daemon never ran)
        edge_text, hub_text = (_masked(f.read_text(encoding="utf-8")) for f in (edge_file, hub_file))
        assert "2 violations of 1 rule" in edge_text, edge_text[:3000]  # the retracted episode is none
        assert _same_text(edge_text, hub_text), "\n".join(difflib.unified_diff(
            edge_text.splitlines(), hub_text.splitlines(), "edge", "hub", lineterm=""))[:6000]


async def _eventually(check: Any, within: float = 30.0) -> bool:
    import asyncio

    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if check():
            return True
        await asyncio.sleep(0.05)
    return bool(check())
