"""Outcome classification, bisection of rejected batches, and the retry backoff.

The write function here is a fake at our own seam (``Callable[[bytes], WriteResult]``); the same logic runs
against a real VictoriaMetrics in tests/integration/test_influx_sink.py.
"""

from __future__ import annotations

import pytest

from drivers.backoff import retries
from monitor.stores.influx_writer import Outcome, WriteResult, classify_status, deliver


class Server:
    """Rejects (400) any request containing a line in ``bad``; fails (503) from request ``outage_at`` on."""

    def __init__(self, bad: set[bytes], *, outage_at: int | None = None, partial: bool = False) -> None:
        self.bad = bad
        self.outage_at = outage_at
        self.partial = partial  # like InfluxDB 1.8 / VictoriaMetrics: lines before the bad one are written
        self.written: list[bytes] = []
        self.requests = 0

    def __call__(self, body: bytes) -> WriteResult:
        self.requests += 1
        if self.outage_at is not None and self.requests >= self.outage_at:
            return WriteResult(Outcome.UNAVAILABLE, 503, "down")
        lines = body.split(b"\n")
        for i, line in enumerate(lines):
            if line in self.bad:
                if self.partial:
                    self.written.extend(lines[:i])
                return WriteResult(Outcome.MALFORMED, 400, f"bad line {line!r}")
        self.written.extend(lines)
        return WriteResult(Outcome.OK, 204)


@pytest.mark.parametrize(("status", "outcome"), [
    (204, Outcome.OK), (200, Outcome.OK), (400, Outcome.MALFORMED), (422, Outcome.MALFORMED),
    (413, Outcome.TOO_LARGE), (401, Outcome.AUTH), (403, Outcome.AUTH), (404, Outcome.NOT_FOUND),
    (429, Outcome.UNAVAILABLE), (500, Outcome.UNAVAILABLE), (503, Outcome.UNAVAILABLE),
    (418, Outcome.UNAVAILABLE),
])
def test_status_classification(status: int, outcome: Outcome) -> None:
    assert classify_status(status) is outcome


def test_good_batch_is_one_request() -> None:
    server = Server(set())
    lines = [f"m v={i} {i}".encode() for i in range(100)]
    assert deliver(server, [b"\n".join(lines)], lambda *_: pytest.fail("nothing to quarantine")).ok
    assert server.requests == 1 and server.written == lines


@pytest.mark.parametrize("partial", [False, True])
@pytest.mark.parametrize("bad_idx", [[0], [99], [37], [3, 4, 80], list(range(0, 100, 9))])
def test_bisection_quarantines_exactly_the_bad_lines_and_writes_the_rest(bad_idx: list[int],
                                                                         partial: bool) -> None:
    lines = [f"m v={i} {i}".encode() for i in range(100)]
    bad = {lines[i] for i in bad_idx}
    server = Server(bad, partial=partial)
    quarantined: list[bytes] = []
    records = [b"\n".join(lines[:40]), b"\n".join(lines[40:])]  # spans records, as the sink sends them
    result = deliver(server, records, lambda line, res: quarantined.append(line))
    assert result.ok
    assert sorted(quarantined) == sorted(bad)
    assert set(server.written) == set(lines) - bad  # every good line written (maybe twice when partial)
    if not partial:
        assert sorted(server.written) == sorted(set(lines) - bad)  # and exactly once
    # a single bad line among 100 costs about 2·log2(100) requests, not 100
    if len(bad_idx) == 1:
        assert server.requests <= 2 * 7 + 1


def test_outage_during_bisection_stops_and_reports_it() -> None:
    lines = [f"m v={i} {i}".encode() for i in range(16)]
    server = Server({lines[9]}, outage_at=3)
    quarantined: list[bytes] = []
    result = deliver(server, [b"\n".join(lines)], lambda line, res: quarantined.append(line))
    assert result.outcome is Outcome.UNAVAILABLE and not result.ok
    assert quarantined == []  # the caller keeps the batch; the bad line is found again on retry


def test_auth_failure_is_returned_without_bisecting() -> None:
    calls: list[bytes] = []

    def refuse(body: bytes) -> WriteResult:
        calls.append(body)
        return WriteResult(Outcome.AUTH, 401, "unauthorized")

    result = deliver(refuse, [b"a 1\nb 2\nc 3"], lambda *_: pytest.fail("auth is not a bad point"))
    assert result.outcome is Outcome.AUTH and len(calls) == 1


def test_backoff_is_capped_jittered_and_resets() -> None:
    b = retries(4.0, rand=lambda: 0.0)
    assert [b.next() for _ in range(6)] == [0.25, 0.5, 1.0, 2.0, 4.0, 4.0]
    low = retries(4.0, rand=lambda: 1.0)
    assert [low.next() for _ in range(3)] == [0.125, 0.25, 0.5]  # never less than half: no hot loop
    b.reset()
    assert b.next() == 0.25
    assert b.next(hint=3.0) == 3.0  # a server's Retry-After is honoured ...
    assert b.next(hint=100.0) == 4.0  # ... up to the cap


def test_one_bad_line_in_a_whole_batch_record_is_the_only_one_quarantined() -> None:
    # The sink stores a batch as one record (one request body); a 400 splits it into its lines.
    lines = [f"m v={i} {i}".encode() for i in range(5000)]
    server = Server({lines[4321]})
    quarantined: list[bytes] = []
    assert deliver(server, [b"\n".join(lines)], lambda line, res: quarantined.append(line)).ok
    assert quarantined == [lines[4321]]
    assert server.written == lines[:4321] + lines[4322:]
    assert server.requests <= 2 * 13 + 1  # bisection: about 2·log2(5000) requests
