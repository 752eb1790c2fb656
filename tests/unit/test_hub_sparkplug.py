"""The hub's DDATA decoding: the fast path (properties read by position when their names are in the edge's
order) gives the rows the by-name path gives for any order, and the months the rows need are gathered."""

from __future__ import annotations

import datetime as dt

from monitor.hub import sparkplug
from monitor.hub.sparkplug import DOUBLE, INT32, STRING, UINT64, Payload
from monitor.uplink import contract as c
from tests.sparkplug_load import _prop, ddata_payload

NOV_30_2359 = 1_796_083_140_000  # 2026-11-30 23:59:00 UTC, ms


def test_edge_order_and_any_order_decode_to_the_same_rows() -> None:
    rows = [("ph", NOV_30_2359, 7.25, 1), ("flow", NOV_30_2359, None, 2), ("ph", NOV_30_2359 + 61_000, 7.5, 3)]
    edge = sparkplug.decode(ddata_payload(5, rows), "t")
    assert list(edge.metrics[0].properties.keys) == sparkplug.GOOD_KEYS
    assert list(edge.metrics[1].properties.keys) == sparkplug.BAD_KEYS
    shuffled = Payload()
    for channel, t_ms, value, rseq in rows:  # the same readings, properties in another order
        m = shuffled.metrics.add()
        m.name, m.timestamp, m.datatype = channel, t_ms, DOUBLE
        _prop(m.properties, c.RSEQ, UINT64, rseq)
        if value is None:
            m.is_null = True
            _prop(m.properties, c.REASON, STRING, "timeout")
            _prop(m.properties, c.PRETREAT_QUALITY, STRING, "bad")
            _prop(m.properties, c.QUALITY, INT32, c.QUALITY_BAD)
        else:
            m.double_value = value
            _prop(m.properties, c.PRETREAT_QUALITY, STRING, "good")
            _prop(m.properties, c.QUALITY, INT32, c.QUALITY_GOOD)
    months: set[dt.datetime] = set()
    fast, refused = sparkplug.readings(edge, "e1", "acme", "t", months)
    slow, _ = sparkplug.readings(shuffled, "e1", "acme", "t")
    assert refused == [] and fast == slow
    utc = dt.UTC
    assert fast == [
        ("acme", "ph", dt.datetime(2026, 11, 30, 23, 59, tzinfo=utc), 1, 7.25, c.QUALITY_GOOD, "good", None, False,
         "e1"),
        ("acme", "flow", dt.datetime(2026, 11, 30, 23, 59, tzinfo=utc), 2, None, c.QUALITY_BAD, "bad", "timeout",
         False, "e1"),
        ("acme", "ph", dt.datetime(2026, 12, 1, 0, 0, 1, tzinfo=utc), 3, 7.5, c.QUALITY_GOOD, "good", None, False,
         "e1")]
    assert months == {dt.datetime(2026, 11, 1, tzinfo=utc), dt.datetime(2026, 12, 1, tzinfo=utc)}


def test_a_metric_without_rseq_is_refused_with_its_name() -> None:
    p = Payload()
    m = p.metrics.add()
    m.name, m.timestamp, m.datatype, m.double_value = "ph", NOV_30_2359, DOUBLE, 7.0
    _prop(m.properties, c.QUALITY, INT32, c.QUALITY_GOOD)
    rows, refused = sparkplug.readings(p, "e1", "acme", "spBv1.0/pretreat/DDATA/e1/acme")
    assert rows == [] and refused == ["spBv1.0/pretreat/DDATA/e1/acme: metric 'ph' lacks a name, a timestamp or its "
                                      "rseq property"]
