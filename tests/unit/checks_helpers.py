"""Helpers for the check-engine tests: small site files and readings, built in code (no tests here)."""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Iterable, Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path

import pytest

from config.loader import load_config
from config.schema import SiteConfig
from monitor.checks.engine import CheckEngine
from monitor.checks.events import EpisodeEvent, iso_utc, parse_iso
from monitor.checks.replay_run import replay
from monitor.checks.revisions import Revision
from monitor.cli import main
from monitor.sample import Quality, Sample

T0 = datetime(2025, 3, 3, tzinfo=UTC).timestamp()  # a Monday, well away from month ends and DST changes

KINDS = {
    "ph": ("ph", "pH", 0, 14),
    "lel": ("lel", "%LEL", 0, 100),
    "flow": ("flow", "gpm", 0, 5000),
    "temperature": ("temperature", "degC", -10, 300),
    "sampler_temperature": ("sampler_temperature", "degC", -20, 50),
    "sampler_count": ("sampler_count", "count", 0, None),
    "cod": ("concentration", "mg/l", 0, 100000),
}


def channel(cid: str, kind: str | None = None, *, unit: str | None = None, **extra: object) -> str:
    """One [[site.channel]] table on the test instrument; ``kind`` defaults from the id (see KINDS)."""
    k, u, lo, hi = KINDS[kind or cid]
    lines = [
        "[[site.channel]]",
        f'id = "{cid}"',
        'instrument = "m"',
        f'topic = "t/{cid}"',
        'payload = "number"',
        f'kind = "{k}"',
        f'unit = "{unit or u}"',
        f"valid_min = {lo}",
    ]
    if hi is not None:
        lines.append(f"valid_max = {hi}")
    lines += [f"{key} = {_toml(v)}" for key, v in extra.items()]
    return "\n".join(lines) + "\n"


def _toml(v: object) -> str:
    return f'"{v}"' if isinstance(v, str) else str(v).lower() if isinstance(v, bool) else str(v)


# Pawling item (4): a pH alarm must reach the industry and the plant operator; appended last to a Pawling site file.
PAWLING_ROUTES = (
    '\n[[site.route]]\nname = "industry"\nnotify = "log"\naudience = "industry"\n'
    '[[site.route]]\nname = "plant-operator"\nnotify = "log"\naudience = "plant_operator"\n'
    '[notify]\n[[notify.channel]]\nid = "log"\nkind = "log"\nevery_transition = false\n'
)


def site_toml(
    *channels: str,
    jurisdiction: str = "southeast",
    timezone: str = "UTC",
    extra: str = "",
    site: str = "acme",
    site_kind: str = "",
    poll_interval: float = 60.0,
) -> str:
    """A complete site file: one MQTT instrument, the given channel tables, then ``extra`` (permit, rules).
    ``site_kind`` "plant" makes it the treatment plant's influent site (the default is an industry).

    The instrument publishes every ``poll_interval`` s (a minute: the tests' rows are a minute apart), so its
    channels' ``max_gap`` is 3 × that unless a channel states one."""
    kind = f'kind = "{site_kind}"\n' if site_kind else ""
    head = (
        f'[daemon]\nhistorian = "db.sqlite"\n\n[[site]]\nid = "{site}"\njurisdiction = "{jurisdiction}"\n'
        f'timezone = "{timezone}"\n{kind}\n[[site.instrument]]\nid = "m"\ndriver = "mqtt"\nhost = "127.0.0.1"\n'
        f"poll_interval = {poll_interval}\n\n"
    )
    routes = PAWLING_ROUTES if jurisdiction == "pawling" and 'kind = "ph"' in "".join(channels) else ""
    return head + "\n".join(channels) + "\n" + extra + routes


def load(tmp_path: Path, text: str, name: str = "site.toml") -> SiteConfig:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return load_config(path)


Row = tuple[float, str, float | None, str]  # time, channel, value (None when bad), quality


def samples(rows: Iterable[Row], site: str = "acme") -> list[Sample]:
    out = []
    for t, ch, v, q in rows:
        if q == "good":
            assert v is not None
            out.append(Sample(time=t, site=site, channel=ch, value=v, unit=""))
        else:
            out.append(Sample.bad(time=t, site=site, channel=ch, unit="", quality=Quality(q), reason=q))
    return out


def live(config: SiteConfig, rows: Iterable[Row], *, fast: bool = True) -> list[EpisodeEvent]:
    engine = CheckEngine.for_config(config, fast=fast)
    return engine.process_many(samples(rows, config.sites[0].id))


def csv_text(rows: Sequence[Row], *, with_quality: bool) -> str:
    lines = ["time,channel,value" + (",quality" if with_quality else "")]
    for t, ch, v, q in rows:
        value = "" if v is None else repr(v)
        if v is not None and not math.isfinite(v) and q == "good":
            q = "bad_value"  # as the daemon records it (a replay CSV takes plain decimal numbers only)
        lines.append(f"{iso_utc(t)},{ch},{value}" + (f",{q}" if with_quality else ""))
    return "\n".join(lines) + "\n"


def replayed(config: SiteConfig, text: str) -> tuple[list[dict[str, object]], str]:
    """(JSON objects written, stderr text) of replaying CSV text."""
    import json

    out, err = io.StringIO(), io.StringIO()
    stats = replay(config, io.StringIO(text), out, source="test.csv", err=err)
    err.write(stats.summary())
    return [json.loads(line) for line in out.getvalue().splitlines()], err.getvalue()


def brief(events: Iterable[EpisodeEvent]) -> list[tuple[float, str, str, str, float | None]]:
    """(seconds after T0, channel, rule, event, value): compact expectations."""
    return [(e.time - T0, e.channel, e.rule, e.event, e.value) for e in events]


REPLAY_SITE = site_toml(channel("ph"), channel("lel"))


def write_file(tmp_path: Path, name: str, text: str) -> Path:
    p = tmp_path / name
    p.write_text(text, encoding="utf-8")
    return p


def ts(offset: float) -> str:
    """The ISO 8601 UTC time ``offset`` seconds after `T0`, as a replay CSV row writes it."""
    return iso_utc(T0 + offset)


def run_replay(
    tmp_path: Path, csv_text: str, capsys: pytest.CaptureFixture[str], site: str = REPLAY_SITE, *extra: str
) -> tuple[int, list[dict[str, object]], str]:
    """`pretreat replay` in-process on ``csv_text``: its exit code, the episodes it wrote and its stderr."""
    cfg = write_file(tmp_path, "site.toml", site)
    data = write_file(tmp_path, "readings.csv", csv_text)
    out = tmp_path / "episodes.jsonl"
    code = main(["replay", "--config", str(cfg), str(data), "--output", str(out), *extra])
    err = capsys.readouterr().err
    lines = out.read_text(encoding="utf-8").splitlines() if out.exists() else []
    return code, [json.loads(x) for x in lines], err


# An episode store recorded before coverage was kept (schema version 1), with one pH episode of site "acme".
SCHEMA_1 = """CREATE TABLE episode_events (
    id INTEGER PRIMARY KEY, time REAL NOT NULL, site TEXT NOT NULL, channel TEXT NOT NULL, rule TEXT NOT NULL,
    event TEXT NOT NULL CHECK (event IN ('start', 'end')), value REAL, limit_value REAL, peak REAL,
    citation TEXT NOT NULL, data_quality INTEGER NOT NULL, UNIQUE (site, channel, rule, event, time)) STRICT;
CREATE TABLE episode_meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL) STRICT;
INSERT INTO episode_meta VALUES ('schema_version', 1);
INSERT INTO episode_events (time, site, channel, rule, event, value, limit_value, peak, citation, data_quality)
VALUES (10.0, 'acme', 'ph', 'ph_low', 'start', 4.0, 5.0, NULL, 'cite', 0),
       (20.0, 'acme', 'ph', 'ph_low', 'end', 7.0, 5.0, 3.5, 'cite', 0);
"""


# The golden cases (tests/cases/<name>/: site.toml, readings.csv), as the late-readings property and audit read them.
CASES = Path(__file__).resolve().parents[1] / "cases"
NAMES = sorted(p.name for p in CASES.iterdir() if (p / "readings.csv").exists())
Reading = tuple[float, str, float | None, str]  # time, channel, value, quality


def golden_case(name: str) -> tuple[SiteConfig, list[Reading]]:
    config = load_config(CASES / name / "site.toml")
    rows: list[Reading] = []
    with (CASES / name / "readings.csv").open(newline="", encoding="utf-8") as fh:
        for r in csv.DictReader(fh):
            q = (r.get("quality") or "good").strip().lower() or "good"
            rows.append((parse_iso(r["time"]), r["channel"], float(r["value"]) if q == "good" else None, q))
    return config, rows


def record(config: SiteConfig, rows: Sequence[Sample]) -> None:
    """Record ``rows`` with the real `Historian`, in a thread of its own (a caller may hold an event loop)."""
    import asyncio
    import threading

    from monitor.stores.historian import Historian

    async def write() -> None:
        h = Historian(path=config.daemon.historian, commit_interval=0.01)
        await h.start()
        h.submit(list(rows))
        await h.close()

    worker = threading.Thread(target=asyncio.run, args=(write(),))
    worker.start()
    worker.join()


def record_flow_days(config: SiteConfig, values: Sequence[float], *, now: float) -> float:
    """Record a flow reading a minute at site ``acme``: one whole UTC day per value, the last of them
    yesterday, then today's readings up to a minute before ``now`` at the first value. Returns today's UTC
    midnight."""
    midnight = now - now % 86400.0
    first = midnight - len(values) * 86400.0
    rows = [Sample(time=first + 60.0 * i, site="acme", channel="flow", value=values[i // 1440], unit="gpm")
            for i in range(len(values) * 1440)]
    rows += [Sample(time=t, site="acme", channel="flow", value=values[0], unit="gpm")
             for t in (midnight + 60.0 * i for i in range(int((now - midnight) // 60))) if t < now - 60.0]
    record(config, rows)
    return midnight


def daemon_health(config: SiteConfig, *, now: float) -> dict[str, object]:
    """The health snapshot the daemon writes once it has started: its real start-up warm-up (`Daemon._warm_up`:
    the rule state rebuilt from the record, as after any restart), then its `HealthWriter`; read back."""
    import asyncio
    import threading

    from monitor.app import Daemon
    from monitor.health import HealthWriter, health_path

    def run() -> None:
        daemon = Daemon(config=config, clock=lambda: now)
        try:
            daemon._warm_up()
            HealthWriter(path=health_path(config.daemon.historian), counters=daemon.health_counters).write()
        finally:
            daemon.episodes.close()
            asyncio.run(daemon.alarming.stop())

    worker = threading.Thread(target=run)
    worker.start()
    worker.join()
    snap: dict[str, object] = json.loads(health_path(config.daemon.historian).read_text())
    return snap


def sample_of(site: str, r: Reading) -> Sample:
    """A golden case's reading as the `Sample` a driver would make of it."""
    t, ch, v, q = r
    if q == "good":
        assert v is not None
        return Sample(time=t, site=site, channel=ch, value=v, unit="")
    return Sample.bad(time=t, site=site, channel=ch, unit="", quality=Quality(q), reason=q)


class Record:
    """The episode store's semantics: events keyed by (site, channel, rule, event, time, end reason); a revision
    withdraws, then adds; a recorded event already stored is kept, one that was withdrawn is restored with the
    figures it is recorded with (`EpisodeStore.record_events`)."""

    def __init__(self) -> None:
        self.rows: dict[tuple[str, str, str, str, float, str], tuple[EpisodeEvent, bool]] = {}

    @staticmethod
    def key(e: EpisodeEvent) -> tuple[str, str, str, str, float, str]:
        return e.site, e.channel, e.rule, e.event, e.time, e.end_reason or ""

    def record(self, events: Iterable[EpisodeEvent]) -> None:
        for e in events:
            old = self.rows.get(self.key(e))
            self.rows[self.key(e)] = (old[0] if old and not old[1] else e, False)

    def revise(self, revs: Iterable[Revision]) -> None:
        for r in revs:
            for e in r.withdrawn:
                if self.key(e) in self.rows:
                    self.rows[self.key(e)] = (self.rows[self.key(e)][0], True)
            for e in r.added:
                self.rows[self.key(e)] = (e, False)

    def events(self) -> list[EpisodeEvent]:
        return sorted((e for e, gone in self.rows.values() if not gone), key=self.key)


def live_arrivals(config: SiteConfig, arrivals: Sequence[Reading],
                  batches: Sequence[int]) -> tuple[list[EpisodeEvent], CheckEngine]:
    """The daemon's engine fed ``arrivals`` in batches of the sizes ``batches`` cycles through, revisions applied
    as the episode store applies them; readings older than its window judged again from those delivered so far
    (the historian's part). Returns the record's events and the engine."""
    engine = CheckEngine.for_config(config, live=True)
    site = config.sites[0].id
    rec = Record()
    delivered: list[Reading] = []

    def history(s: str, ch: str, start: float, end: float) -> Iterator[tuple[float, float, str | None]]:
        rows = sorted((r for r in delivered if r[1] == ch and start <= r[0] < end), key=lambda r: r[0])
        for t, _c, v, q in rows:
            yield (t, v, None) if q == "good" and v is not None else (t, math.nan, q)

    i, b = 0, 0
    while i < len(arrivals):
        n = batches[b % len(batches)]
        b += 1
        batch = arrivals[i:i + n]
        i += n
        delivered.extend(batch)
        rec.record(engine.process_many(sample_of(site, r) for r in batch))
        rec.revise(engine.drain_revisions())
        if engine.waiting_for_history:  # the daemon: once the historian has committed the batch
            engine.rejudge_from_history(history)
            rec.revise(engine.drain_revisions())
    return rec.events(), engine


def flow_and_count_trace() -> list[Reading]:
    """Three hours of a flow meter (every 10 s, above zero, then none for an hour) and the sampler count it paces
    (every 30 s, a sample every 10 minutes, then none for 40 minutes of flow: an overdue interval, then samples
    again), the fridge in band: the permit's sampling-interval rule joins flow and count in one group."""
    t0 = parse_iso("2025-03-03T08:00:00Z")
    rows: list[Reading] = []
    count = 100.0
    for k in range(0, 3 * 3600, 10):
        t = t0 + k
        if not 3600 <= k < 7200:
            rows.append((t, "flow", 12.0 + (k % 60) / 100, "good"))
        if k % 30 == 0:
            if k % 600 == 0 and not 4800 <= k < 7200 + 2400:
                count += 1
            rows.append((t, "sampler_count", count, "good"))
        if k % 300 == 0:
            rows.append((t, "fridge", 4.0, "good"))
    return rows
