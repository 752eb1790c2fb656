"""The durable outbox: order, acknowledgement, persistence, disk budget, quarantine, single ownership."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

import pytest

from monitor.stores.outbox import Outbox, OutboxError, OutboxInUse


class Clock:
    def __init__(self, t: float = 1_000.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


def test_fifo_peek_does_not_remove_ack_does(tmp_path: Path) -> None:
    box = Outbox(path=tmp_path / "q.sqlite", budget_bytes=1 << 20)
    ids = box.append_many([(b"a", 1), ("b\nc", 2), (b"d", 1)])
    assert ids == sorted(ids) and len(set(ids)) == 3
    assert box.depth == 4
    first = box.peek(max_items=100)
    assert [r.payload for r in first] == [b"a", b"b\nc", b"d"]
    assert [r.payload for r in box.peek(max_items=100)] == [b"a", b"b\nc", b"d"]  # still there
    assert box.ack([first[0].id, first[1].id]) == 3
    assert box.depth == 1
    assert [r.payload for r in box.peek(max_items=100)] == [b"d"]
    assert box.ack([first[0].id, 999_999]) == 0  # already gone / never existed: harmless
    box.close()


def test_peek_respects_max_items_but_always_returns_one(tmp_path: Path) -> None:
    box = Outbox(path=tmp_path / "q.sqlite", budget_bytes=1 << 20)
    box.append_many([(b"big", 50), (b"x", 3), (b"y", 3), (b"z", 3)])
    assert [r.count for r in box.peek(max_items=10)] == [50]  # oversized record alone, not stuck
    rest = box.peek(max_items=7, after_id=box.peek(max_items=1)[0].id)
    assert [r.payload for r in rest] == [b"x", b"y"]
    box.close()


def test_survives_reopen_with_counts_and_order(tmp_path: Path) -> None:
    clock = Clock()
    path = tmp_path / "q.sqlite"
    box = Outbox(path=path, budget_bytes=1 << 20, clock=clock)
    box.append_many([(f"p{i}", 10) for i in range(5)])
    box.ack([box.peek(max_items=10)[0].id])
    box.close()
    clock.t += 30
    again = Outbox(path=path, budget_bytes=1 << 20, clock=clock)
    assert again.depth == 40
    assert again.stats().bytes == 8
    assert [r.payload for r in again.peek(max_items=1000)] == [b"p1", b"p2", b"p3", b"p4"]
    assert again.oldest_age() == pytest.approx(30.0)
    again.close()


def test_ids_are_not_reused_after_a_full_drain(tmp_path: Path) -> None:
    path = tmp_path / "q.sqlite"
    box = Outbox(path=path, budget_bytes=1 << 20)
    first = box.append(b"one")
    box.ack([first])
    box.close()
    box = Outbox(path=path, budget_bytes=1 << 20)
    assert box.append(b"two") > first  # a stale ack of `first` can never hit a new record
    box.close()


def test_budget_drops_oldest_first_counted_and_persisted(tmp_path: Path) -> None:
    path = tmp_path / "q.sqlite"
    box = Outbox(path=path, budget_bytes=100)
    for i in range(10):
        box.append(bytes([65 + i]) * 20, count=4)  # 20 bytes each, 4 items each
    st = box.stats()
    assert st.bytes <= 100
    assert st.records == 5
    assert st.dropped_records == 5 and st.dropped_items == 20
    assert [r.payload[:1] for r in box.peek(max_items=1000)] == [b"F", b"G", b"H", b"I", b"J"]
    assert st.fill_pct == pytest.approx(100.0)
    box.close()
    again = Outbox(path=path, budget_bytes=100)
    assert again.stats().dropped_items == 20  # the gap stays on record across restarts
    again.close()


def test_newest_record_is_kept_even_if_alone_over_budget(tmp_path: Path) -> None:
    box = Outbox(path=tmp_path / "q.sqlite", budget_bytes=10)
    box.append(b"old", count=1)
    box.append(b"x" * 50, count=7)
    assert [r.count for r in box.peek(max_items=100)] == [7]
    assert box.stats().dropped_items == 1
    box.close()


def test_oldest_age_follows_the_head_of_the_queue(tmp_path: Path) -> None:
    clock = Clock(100.0)
    box = Outbox(path=tmp_path / "q.sqlite", budget_bytes=1 << 20, clock=clock)
    assert box.oldest_age() == 0.0
    a = box.append(b"a")
    clock.t = 110.0
    box.append(b"b")
    clock.t = 125.0
    assert box.oldest_age() == pytest.approx(25.0)
    box.ack([a])
    assert box.oldest_age() == pytest.approx(15.0)
    box.close()


def test_quarantine_is_kept_with_reason_and_bounded(tmp_path: Path) -> None:
    path = tmp_path / "q.sqlite"
    box = Outbox(path=path, budget_bytes=1 << 20, quarantine_max=3)
    for i in range(5):
        box.quarantine(f"bad{i}", reason=f"HTTP 400: nope {i}")
    rows = box.quarantined()
    assert [q.payload for q in rows] == [b"bad2", b"bad3", b"bad4"]
    assert rows[-1].reason == "HTTP 400: nope 4"
    assert box.stats().quarantined_items == 5  # lifetime count, not the bounded table's size
    box.close()
    assert Outbox(path=path, budget_bytes=1 << 20).stats().quarantined_items == 5


def test_a_second_owner_is_refused_until_the_first_closes(tmp_path: Path) -> None:
    path = tmp_path / "q.sqlite"
    box = Outbox(path=path, budget_bytes=1 << 20)
    with pytest.raises(OutboxInUse, match="in use"):
        Outbox(path=path, budget_bytes=1 << 20)
    box.close()
    box.close()  # twice is fine
    Outbox(path=path, budget_bytes=1 << 20).close()


def test_newer_schema_and_garbage_files_are_clear_errors(tmp_path: Path) -> None:
    newer = tmp_path / "newer.sqlite"
    db = sqlite3.connect(newer)
    db.execute("PRAGMA user_version = 99")
    db.close()
    with pytest.raises(OutboxError, match="schema version 99"):
        Outbox(path=newer, budget_bytes=100)
    garbage = tmp_path / "garbage.sqlite"
    garbage.write_bytes(b"this is not a database" * 100)
    with pytest.raises(OutboxError, match="cannot use queue file"):
        Outbox(path=garbage, budget_bytes=100)


def test_closed_outbox_refuses_use(tmp_path: Path) -> None:
    box = Outbox(path=tmp_path / "q.sqlite", budget_bytes=100)
    box.close()
    with pytest.raises(OutboxError, match="closed"):
        box.append(b"x")


def test_concurrent_producer_and_consumer_deliver_each_item_once_in_order(tmp_path: Path) -> None:
    box = Outbox(path=tmp_path / "q.sqlite", budget_bytes=1 << 24)
    total = 3000
    received: list[int] = []

    def produce() -> None:
        for start in range(0, total, 10):
            box.append_many([(str(i), 1) for i in range(start, start + 10)])

    def consume() -> None:
        while len(received) < total:
            batch = box.peek(max_items=64)
            received.extend(int(r.payload) for r in batch)
            box.ack(r.id for r in batch)

    threads = [threading.Thread(target=produce), threading.Thread(target=consume)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert received == list(range(total))
    assert box.depth == 0 and box.stats().bytes == 0
    box.close()


def _segments(path: Path) -> list[Path]:
    return sorted(path.with_name(path.name + ".segments").glob("*.seg"))


def test_large_payloads_go_to_segment_files_that_are_deleted_when_acknowledged(tmp_path: Path) -> None:
    path = tmp_path / "q.sqlite"
    box = Outbox(path=path, budget_bytes=64 << 20)  # segment size: 4 MiB
    big = [bytes([65 + i]) * (1 << 20) for i in range(10)]  # 10 x 1 MiB
    small = b"tiny"
    box.append_many([(p, 1000) for p in big[:5]] + [(small, 1)])
    box.append_many([(p, 1000) for p in big[5:]])
    assert len(_segments(path)) == 3  # 4 + 4 + 2 MiB
    got = box.peek(max_items=100_000)
    assert [r.payload for r in got] == [*big[:5], small, *big[5:]]
    box.ack(r.id for r in got[:5])  # the first segment is fully acknowledged
    assert len(_segments(path)) == 2
    box.close()
    again = Outbox(path=path, budget_bytes=64 << 20)
    assert [r.payload for r in again.peek(max_items=100_000)] == [small, *big[5:]]
    again.ack(r.id for r in again.peek(max_items=100_000))
    assert again.depth == 0
    assert len(_segments(path)) == 1  # only the one being appended to remains
    again.close()


def test_orphan_segments_are_collected_at_start(tmp_path: Path) -> None:
    path = tmp_path / "q.sqlite"
    box = Outbox(path=path, budget_bytes=64 << 20)
    box.append(b"x" * (5 << 20))
    box.append(b"y" * (1 << 20))
    box.close()
    seg_dir = path.with_name(path.name + ".segments")
    (seg_dir / "0000000000.seg").write_bytes(b"z" * 1000)  # as if a crash left it unreferenced
    box = Outbox(path=path, budget_bytes=64 << 20)
    assert not (seg_dir / "0000000000.seg").exists()
    assert [len(r.payload) for r in box.peek(max_items=10)] == [5 << 20, 1 << 20]  # the live ones stay
    box.close()


def test_payload_bytes_missing_after_a_power_cut_are_counted_lost_not_sent(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "q.sqlite"
    box = Outbox(path=path, budget_bytes=64 << 20)
    box.append(b"a" * 100_000, count=10)
    box.append(b"b" * 100_000, count=20)
    box.append(b"small", count=1)
    box.close()
    seg = _segments(path)[0]
    with seg.open("r+b") as f:
        f.truncate(150_000)  # the second record never reached the disk
    box = Outbox(path=path, budget_bytes=64 << 20)
    assert [r.payload[:1] for r in box.peek(max_items=1000)] == [b"a", b"s"]
    st = box.stats()
    assert st.lost_items == 20 and st.items == 11
    assert "lost" in caplog.text
    box.close()


def test_budget_counts_segment_payloads_and_frees_their_files(tmp_path: Path) -> None:
    path = tmp_path / "q.sqlite"
    box = Outbox(path=path, budget_bytes=16 << 20)  # segments of 1 MiB
    for i in range(40):
        box.append(bytes([i]) * (1 << 20), count=100)
    st = box.stats()
    assert st.bytes <= 16 << 20 and st.dropped_items == 100 * (40 - st.records)
    assert box.disk_bytes() <= (16 << 20) + (2 << 20)  # budget + at most about one segment + index
    assert [r.payload[0] for r in box.peek(max_items=10_000)] == list(range(40 - st.records, 40))
    box.close()


def test_a_mark_is_committed_with_its_append_or_not_at_all(tmp_path: Path) -> None:
    path = tmp_path / "q.sqlite"
    box = Outbox(path=path, budget_bytes=1 << 20)
    assert box.mark("historian_seq") is None
    box.append_many([(b"a", 1), (b"b", 1)], marks={"historian_seq": 3})
    box.set_marks({"historian_seq": 5})
    assert box.mark("historian_seq") == 5
    with pytest.raises(TypeError):  # the mark cannot be written: the append in its transaction is undone
        box.append_many([(b"c", 1)], marks={"historian_seq": object()})  # type: ignore[dict-item]
    assert box.depth == 2 and [r.payload for r in box.peek(max_items=10)] == [b"a", b"b"]
    box.close()
    again = Outbox(path=path, budget_bytes=1 << 20)  # and both survive a reopen
    assert again.mark("historian_seq") == 5 and again.depth == 2
    again.close()
