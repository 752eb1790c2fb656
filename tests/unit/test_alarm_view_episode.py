"""The console's alarm row reads its episode's onset and end from the record (`monitor.console.alarm_view`): a
transition a correction after late readings withdrew is never taken for the episode's."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from monitor.checks.events import EpisodeEvent
from monitor.checks.revisions import Revision
from monitor.console.alarm_view import _episode
from monitor.stores.episodes import EpisodeStore

T0 = 1_767_571_200.0  # 2026-01-05T00:00:00Z


def ev(t: float, event: str, value: float) -> EpisodeEvent:
    return EpisodeEvent(t, "acme", "ph", "ph_low", event, value, 5.0, "Southeast § 112-5A(1)(c)")


def test_the_alarm_row_shows_the_corrected_episode(tmp_path: Path) -> None:
    db = tmp_path / "pretreat.sqlite"
    store = EpisodeStore(path=db)
    start, end, moved = ev(T0, "start", 4.2), ev(T0 + 60, "end", 7.0), ev(T0 + 90, "end", 7.1)
    later = ev(T0 + 600, "start", 4.0)
    try:
        store.record([start, end])
        store.revise([Revision("acme", "ph", "ph_low", withdrawn=(end,), added=(moved,), late=T0 + 61,
                               active=False)], recorded=T0 + 100)
        conn = sqlite3.connect(db)
        try:
            assert _episode(conn, "acme", "ph", "ph_low") == (T0, T0 + 90, 4.2, 5.0)
            store.record([later])
            store.revise([Revision("acme", "ph", "ph_low", withdrawn=(later,), added=(), late=T0 + 599,
                                   active=False)], recorded=T0 + 700)
            assert _episode(conn, "acme", "ph", "ph_low") == (T0, T0 + 90, 4.2, 5.0)  # not the retracted one
        finally:
            conn.close()
    finally:
        store.close()


def test_an_end_at_the_instant_the_latest_episode_began_is_the_one_befores(tmp_path: Path) -> None:
    """A sample clears an overdue sampling interval and is the next one's onset: the cleared end and the new
    start share an instant. While the new episode lasts, its row shows no end (it took the one before's)."""
    db = tmp_path / "pretreat.sqlite"
    store = EpisodeStore(path=db)

    def iv(t: float, event: str, reason: str | None = None) -> EpisodeEvent:
        return EpisodeEvent(t, "acme", "count", "sampler_interval", event, 101.0, 900.0, "c", None, reason)

    try:
        store.record([iv(T0, "start"), iv(T0 + 3070, "end", "cleared"), iv(T0 + 3070, "start")])
        conn = sqlite3.connect(db)
        try:
            assert _episode(conn, "acme", "count", "sampler_interval") == (T0 + 3070, None, 101.0, 900.0)
            store.record([iv(T0 + 3070, "end", "gap")])  # then the count fell silent: ended by the gap there
            assert _episode(conn, "acme", "count", "sampler_interval") == (T0 + 3070, T0 + 3070, 101.0, 900.0)
        finally:
            conn.close()
    finally:
        store.close()


def test_a_reading_committed_while_the_peak_is_read_is_seen_at_the_next_read(tmp_path: Path) -> None:
    """The peak of an ongoing episode is read incrementally: each read remembers how far it read. The peak and
    the newest reading's time were two reads, and the historian commits between them on a busy machine: a
    reading committed in between was counted as read without being seen, and the row kept the lower peak for
    as long as the console ran (seen once under `make test-loaded`). Now the newest is read first and the peak
    only up to it, so what is committed in between is read next time."""
    from typing import Any

    from monitor.console.alarm_view import _peak

    db = tmp_path / "h.sqlite"
    setup = sqlite3.connect(db, isolation_level=None)
    setup.executescript("PRAGMA journal_mode=WAL; CREATE TABLE channels (id INTEGER PRIMARY KEY, site TEXT, "
                        "channel TEXT); CREATE TABLE readings (channel_id INT, time REAL, value REAL, quality INT);"
                        "INSERT INTO channels VALUES (1, 'acme', 'ph');")
    setup.execute("INSERT INTO readings VALUES (1, ?, 9.7, 0)", (T0,))
    reader = sqlite3.connect(db, isolation_level=None)

    class Interleaved:
        """The reader's connection, with the historian's next commit landing after its second query."""

        def __init__(self) -> None:
            self.queries = 0

        def execute(self, sql: str, args: Any = ()) -> Any:
            cur = reader.execute(sql, args)
            self.queries += 1
            if self.queries == 2:
                setup.execute("INSERT INTO readings VALUES (1, ?, 9.9, 0), (1, ?, 9.6, 0)", (T0 + 0.5, T0 + 1.0))
            return cur

    key = ("acme", "ph", "ph_high", T0 - 1.0)
    try:
        first = _peak(Interleaved(), key, None, low=False)  # type: ignore[arg-type]
        assert first == (T0, 9.7)
        assert _peak(reader, key, None, low=False) == (T0 + 0.5, 9.9)
    finally:
        reader.close()
        setup.close()
