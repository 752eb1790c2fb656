"""Sparkplug B payloads as the uplink encodes them, read back by the independent wire decoder
(`tests.sparkplug_wire`): metric names, datatypes, timestamps, null values, the historical flag and every
property of the contract (SPARKPLUG.md)."""

from __future__ import annotations

from pathlib import Path

from config.schema import Channel, ChannelKind
from monitor.uplink import payloads
from tests.sparkplug_wire import decode, encode_rebirth_command


def test_nbirth_and_ndeath_carry_the_session_bdseq() -> None:
    birth = decode(payloads.nbirth(bdseq=7, now=1_700_000_000.25))
    assert birth.seq == 0 and birth.timestamp == 1_700_000_000_250
    assert birth.metric("bdSeq").value == 7 and birth.metric("bdSeq").datatype == 4
    assert birth.metric("Node Control/Rebirth").value is False
    death = decode(payloads.ndeath(bdseq=7, now=1_700_000_001.0))
    assert death.seq is None and [m.name for m in death.metrics] == ["bdSeq"] and death.metrics[0].value == 7


def test_dbirth_has_every_channel_with_unit_kind_and_span() -> None:
    channels = [Channel(id="ph", site="acme", instrument="m", kind=ChannelKind.PH, unit="pH", valid_min=0.0,
                        valid_max=14.0),
                Channel(id="flow", site="acme", instrument="m", kind=ChannelKind.FLOW, unit="gpm")]
    p = decode(payloads.dbirth(channels, seq=1, now=1.0))
    assert p.seq == 1 and [m.name for m in p.metrics] == ["ph", "flow"]
    assert all(m.is_null and m.datatype == 10 for m in p.metrics)
    assert p.metric("ph").properties == {"engUnit": "pH", "kind": "ph", "engLow": 0.0, "engHigh": 14.0}
    assert p.metric("flow").properties == {"engUnit": "gpm", "kind": "flow"}


def test_ddata_readings_good_bad_stale_and_historical() -> None:
    readings: list[payloads.Reading] = [
        (41, "acme", "ph", 1_700_000_000.1234, 7.12, "good", ""),
        (42, "acme", "flow", 1_700_000_000.5, None, "comm_failure", "modbus_tcp:127.0.0.1:5020: timeout"),
        (43, "acme", "ph", 1_700_000_001.0, None, "stale", "no good reading for 3 s"),
        (44, "acme", "lel", 1_700_000_002.0, 120.0, "over_range", "above the span"),
    ]
    p = decode(payloads.ddata(readings, seq=255, now=1_700_000_003.0, historical=True, types={}))
    assert p.seq == 255 and len(p.metrics) == 4
    good, bad, stale, over = p.metrics
    assert (good.name, good.timestamp, good.value, good.is_null) == ("ph", 1_700_000_000_123, 7.12, False)
    assert good.properties == {"Quality": 192, "pretreat_quality": "good", "rseq": 41}
    assert bad.is_null and bad.value is None and bad.properties == {
        "Quality": 0, "pretreat_quality": "comm_failure", "reason": "modbus_tcp:127.0.0.1:5020: timeout",
        "rseq": 42}
    assert stale.properties["Quality"] == 500 and stale.is_null
    assert over.value == 120.0 and over.properties["Quality"] == 0  # a number, but not a good one
    assert all(m.is_historical for m in p.metrics)
    live = decode(payloads.ddata(readings[:1], seq=0, now=1.0, historical=False, types={}))
    assert not live.metrics[0].is_historical


def test_rebirth_command_is_recognised_and_garbage_is_not() -> None:
    assert payloads.rebirth_requested(encode_rebirth_command())
    assert not payloads.rebirth_requested(payloads.nbirth(bdseq=1, now=1.0))  # Rebirth = false
    assert not payloads.rebirth_requested(b"\xff\xff\xff not protobuf")


def test_revision_event_names_the_rows_it_withdrew_and_updated_and_keeps_the_history(tmp_path: Path) -> None:
    """The hub applies a revision by the edge's row ids (the seq of the episode events it has): the withdrawn
    rows, and each updated row's whole episode event; the history (changes, the transitions as JSON) is the
    edge's ``episode_revisions`` row. ``seq`` is the revision row id; the hub accepts the type."""
    import json

    from monitor.checks.events import EpisodeEvent
    from monitor.checks.revisions import Revision
    from monitor.hub.store import event_row
    from monitor.stores.episodes import EpisodeStore
    from monitor.uplink.events import episode_event, revision_event

    start = EpisodeEvent(10.0, "acme", "ph", "ph_low", "start", 4.0, 5.0, "c")
    end = EpisodeEvent(20.0, "acme", "ph", "ph_low", "end", 4.5, 5.0, "c", 4.0, "cleared", 10.0, 0.0)
    moved = EpisodeEvent(25.0, "acme", "ph", "ph_low", "end", 4.6, 5.0, "c", 3.5, "cleared", 15.0, 0.0)
    refigured = EpisodeEvent(10.0, "acme", "ph", "ph_low", "start", 3.9, 5.0, "c")
    store = EpisodeStore(path=tmp_path / "e.sqlite")
    try:
        start_id, end_id = store.record([start, end])
        assert start_id is not None and end_id is not None
        r = Revision("acme", "ph", "ph_low", (end,), (moved, refigured), 15.0, False)
        (applied,) = store.revise([r], recorded=31.0)
        stored = store._db().execute("SELECT id, changes, withdrawn, added FROM episode_revisions").fetchone()
    finally:
        store.close()
    event = revision_event(applied)
    ((moved_e, moved_id),) = applied.added
    assert event == {
        "type": "revision", "seq": stored[0], "site": "acme", "channel": "ph", "rule": "ph_low",
        "reason": r.reason, "late": 15.0, "recorded": 31.0, "changes": json.loads(stored[1]),
        "withdrawn": json.loads(stored[2]), "added": json.loads(stored[3]), "withdrawn_rows": [end_id],
        "updated": [episode_event(refigured, start_id)]}
    assert event["changes"] == r.changes() and moved_e == moved and moved_id > end_id
    assert event["updated"][0]["value"] == 3.9 and event["updated"][0]["seq"] == start_id
    node, kind, seq, site, body = event_row("e1", json.dumps(event).encode(), "t")
    assert (node, kind, seq, site) == ("e1", "revision", stored[0], "acme") and json.loads(body) == event
