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
