"""The report lists every cause/corrective-action entry of an episode, with who and when in the site's zone:
a later entry never hides an earlier one (`monitor.reports.annotations.all_annotations`,
`monitor.reports.sections.annotation_cells`)."""

from __future__ import annotations

import sqlite3

from monitor.reports.annotations import Annotation, all_annotations, ensure_schema
from monitor.reports.sections import Clock, annotation_cells

T0 = 1_772_913_600.0  # 2026-03-07T20:00:00Z, 15:00 EST
EP = "acme/ph/ph_low@2026-03-07T20:00:00Z"


def test_every_entry_is_read_oldest_first() -> None:
    conn = sqlite3.connect(":memory:")
    ensure_schema(conn)
    for i, (cause, user) in enumerate((("valve left open", "j.smith"), ("valve seat worn", "a.jones"))):
        conn.execute("INSERT INTO report_annotations (episode, site, channel, rule, start, cause, action, user, "
                     "time) VALUES (?, 'acme', 'ph', 'ph_low', ?, ?, 'fixed', ?, ?)",
                     (EP, T0, cause, user, T0 + 60 * (i + 1)))
    found = all_annotations(conn, "acme")
    assert [(a.cause, a.user) for a in found[EP]] == [("valve left open", "j.smith"), ("valve seat worn", "a.jones")]
    assert all_annotations(conn, "other") == {}


def test_cells_show_each_entry_with_who_and_when_in_the_site_zone() -> None:
    clock = Clock("America/New_York")
    one = Annotation(EP, "valve left open", "valve locked out", "j.smith", T0 + 60)
    two = Annotation(EP, "valve seat worn", "valve replaced", "a.jones", T0 + 3600)
    cause, action, by = annotation_cells([one, two], clock)
    assert cause == "(1) valve left open; (2) valve seat worn"
    assert action == "(1) valve locked out; (2) valve replaced"
    assert by == "(1) j.smith, 2026-03-07 15:01 EST; (2) a.jones, 2026-03-07 16:00 EST"
    assert annotation_cells([one], clock) == ("valve left open", "valve locked out", "j.smith, 2026-03-07 15:01 EST")
    assert annotation_cells([], clock)[2] == ""
