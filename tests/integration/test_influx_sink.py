"""The InfluxDB sink against a real VictoriaMetrics (InfluxDB ``/api/v2/write``) on a free loopback port.

VictoriaMetrics names series ``<measurement>_<field>`` and stores numbers only (a string field arrives as 0,
which still marks the timestamp), and by default keeps duplicate samples — so a point sent twice shows up
twice in ``/api/v1/export``, which is what lets these tests see duplicates at all.

Why one module of about 530 lines: every test drives the one sink against the same server fixture and reads it
back with the same helpers; the line format, the HTTP write and the durable queue have unit tests of their
own (test_influx_lines, test_influx_writer, test_outbox).
"""

from __future__ import annotations

import asyncio
import base64
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from config.influx import AuthScheme, InfluxSettings
from monitor.sample import Quality, Sample
from monitor.stores.influx import APPEND_GROUP_BYTES, InfluxSink, InfluxStartupError
from monitor.stores.influx_lines import EventRecord
from monitor.stores.outbox import Outbox
from tests.support import PATIENCE, VictoriaMetrics

INSTRUMENTS = {("acme", "ph"): ("ph-meter", "ph"), ("acme", "flow"): ("flow meter #1", "flow")}
REPO = Path(__file__).resolve().parents[2]


_MADE: list[InfluxSink] = []


@pytest.fixture(autouse=True)
async def no_leaked_threads() -> AsyncIterator[None]:
    """Every sink a test made is closed even when the test fails; then no sink thread may be left."""
    yield
    while _MADE:
        await _MADE.pop().close()
    leaked = [t.name for t in threading.enumerate() if t.name.startswith("influx-")]
    assert leaked == [], f"sink threads left running: {leaked}"


def settings(vm: VictoriaMetrics, tmp_path: Path, **kw: Any) -> InfluxSettings:
    base: dict[str, Any] = dict(url=vm.url, bucket="pretreat", queue_path=tmp_path / "queue.sqlite",
                                flush_interval=0.05, max_backoff=0.5, timeout=2.0)
    base.update(kw)
    return InfluxSettings(**base)


def sink_for(s: InfluxSettings, **kw: Any) -> InfluxSink:
    kw.setdefault("health_interval", None)
    sink = InfluxSink(settings=s, instruments=INSTRUMENTS, **kw)
    _MADE.append(sink)
    return sink


def by_name(series: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for s in series:
        name = s["metric"]["__name__"]
        assert name not in out, f"two series named {name}: {s['metric']} / {out[name]['metric']}"
        out[name] = s
    return out


def ms(t: float) -> int:
    return round(t * 1000)


async def test_points_written_match_what_was_submitted_exactly(victoria: VictoriaMetrics,
                                                                 tmp_path: Path) -> None:
    base = round(time.time()) - 3600.0
    ph = [Sample(time=base + i * 0.5, site="acme", channel="ph", value=round(6.5 + i * 0.001, 3), unit="pH")
          if i % 25 else
          Sample.bad(time=base + i * 0.5, site="acme", channel="ph", unit="pH", quality=Quality.COMM_FAILURE,
                     reason=f"timeout #{i}")
          for i in range(500)]
    flow = [Sample(time=base + i, site="acme", channel="flow", value=100.0 + i / 8, unit="m³/h, total=x\\y")
            for i in range(300)]
    sink = sink_for(settings(victoria, tmp_path))
    await sink.start()
    for i in range(0, 500, 50):  # like polls: small batches, interleaved channels
        sink.submit(ph[i:i + 50])
        sink.submit(flow[i * 3 // 5:(i + 50) * 3 // 5])
    assert await sink.wait_drained(20)
    counters = sink.counters
    await sink.close()
    assert counters.points_sent == 800 and counters.queue_depth == 0 and counters.write_errors == 0

    good = [s for s in ph if s.good]
    bad = [s for s in ph if not s.good]
    series = by_name(victoria.wait_for_points('{__name__=~"(ph|flow)_.*"}', 2 * 800))
    assert set(series) == {"ph_value", "ph_quality", "ph_reason", "flow_value", "flow_quality"}
    assert series["ph_value"]["metric"] == {"__name__": "ph_value", "site": "acme", "channel": "ph",
                                            "instrument": "ph-meter", "unit": "pH"}
    assert series["flow_value"]["metric"]["instrument"] == "flow meter #1"
    assert series["flow_value"]["metric"]["unit"] == "m³/h, total=x\\y"  # separators and a backslash
    assert series["ph_value"]["timestamps"] == [ms(s.time) for s in good]
    assert series["ph_value"]["values"] == [s.value for s in good]
    assert series["ph_quality"]["timestamps"] == [ms(s.time) for s in ph]  # good and bad, each once
    assert series["ph_reason"]["timestamps"] == [ms(s.time) for s in bad]  # no value at a bad sample
    assert series["flow_value"]["timestamps"] == [ms(s.time) for s in flow]
    assert series["flow_value"]["values"] == [s.value for s in flow]


async def _produce(sink: InfluxSink, stop: asyncio.Event, sent: list[Sample]) -> None:
    """A simulated meter polled every 10 ms, as a driver would feed the sink."""
    i = 0
    while not stop.is_set():
        s = Sample(time=time.time(), site="acme", channel="ph", value=float(i), unit="pH")
        sink.submit([s])
        sent.append(s)
        i += 1
        await asyncio.sleep(0.01)


@pytest.mark.parametrize("outage", [3.0, pytest.param(60.0, marks=pytest.mark.slow)])
async def test_outage_every_point_arrives_once_in_order(victoria: VictoriaMetrics, tmp_path: Path,
                                                        outage: float) -> None:
    sink = sink_for(settings(victoria, tmp_path))
    await sink.start()
    stop, sent = asyncio.Event(), []
    producer = asyncio.create_task(_produce(sink, stop, sent))
    await asyncio.sleep(0.5)
    await asyncio.to_thread(victoria.stop)
    await asyncio.sleep(outage)
    during = sink.counters
    await asyncio.to_thread(victoria.start)
    await asyncio.sleep(0.5)
    stop.set()
    await producer
    assert await sink.wait_drained(30)
    after = sink.counters
    await sink.close()

    assert not during.server_up and during.write_errors >= 1
    assert during.queue_depth > 0 and during.oldest_unsent_age_s >= outage - 1.0
    assert after.server_up and after.queue_depth == 0 and after.points_sent == len(sent)
    series = by_name(victoria.wait_for_points('{__name__="ph_value"}', len(sent)))
    # every point once (VictoriaMetrics keeps duplicates, so a re-send would show), in time order
    assert series["ph_value"]["timestamps"] == [ms(s.time) for s in sent]
    assert series["ph_value"]["values"] == [s.value for s in sent]


_CHILD = r"""
import asyncio, sys
from pathlib import Path
from config.influx import InfluxSettings
from monitor.sample import Sample
from monitor.stores.influx import InfluxSink

async def main(url: str, queue: str, base: float) -> None:
    s = InfluxSettings(url=url, bucket="pretreat", queue_path=Path(queue), flush_interval=0.05,
                       max_backoff=0.5, timeout=1.0)
    sink = InfluxSink(settings=s, instruments={("acme", "ph"): ("ph-meter", "ph")}, health_interval=None)
    await sink.start()
    i = 0
    while True:
        sink.submit([Sample(time=base + (i + k) * 0.01, site="acme", channel="ph", value=float(i + k),
                            unit="pH") for k in range(10)])
        i += 10
        await sink.flush()
        print(i, flush=True)  # everything below i is in the durable queue
        await asyncio.sleep(0.005)

asyncio.run(main(sys.argv[1], sys.argv[2], float(sys.argv[3])))
"""


async def test_sigkill_during_outage_resumes_from_the_persisted_queue(victoria: VictoriaMetrics,
                                                                      tmp_path: Path) -> None:
    s = settings(victoria, tmp_path)
    base = round(time.time()) - 600.0
    await asyncio.to_thread(victoria.stop)  # the outage
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    child = await asyncio.create_subprocess_exec(
        sys.executable, "-c", _CHILD, victoria.url, str(s.queue_path), str(base),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, cwd=REPO, env=env)
    durable = 0
    try:
        assert child.stdout is not None
        async with asyncio.timeout(PATIENCE):
            while durable < 1500 and (line := await child.stdout.readline()):
                durable = int(line)
    finally:
        child.send_signal(signal.SIGKILL)
        out, err = await child.communicate()
    assert durable >= 1500, f"child made too little progress; stderr:\n{err.decode()}"
    durable = max([durable, *(int(x) for x in out.split())])
    assert child.returncode == -signal.SIGKILL

    await asyncio.to_thread(victoria.start)
    sink = sink_for(s)  # the restarted daemon, same queue file
    await sink.start()
    # read at start, not from queue_depth: the sender thread may have sent the lot by the time we look
    resumed = sink.counters.resumed_at_start
    assert await sink.wait_drained(30)
    await sink.close()
    assert resumed >= durable
    series = by_name(victoria.wait_for_points('{__name__="ph_value"}', resumed))
    values = series["ph_value"]["values"]
    assert values == [float(i) for i in range(len(values))]  # a gap-free prefix, nothing duplicated
    assert len(values) == resumed >= durable
    assert series["ph_value"]["timestamps"] == [ms(base + i * 0.01) for i in range(len(values))]


async def test_malformed_point_is_quarantined_without_blocking_the_queue(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    # VictoriaMetrics skips unparsable lines silently (204); what it rejects with a 400 is a line longer than
    # -influx.maxLineSize (256 KiB by default; measured here: 300 KB passes, 600 KB is refused), after
    # writing the lines before it (a partial write, like InfluxDB 1.8). Dedup at 1 ms makes it overwrite
    # the same series+timestamp, as InfluxDB does, so the lines the bisection re-sends do not show twice.
    vm = VictoriaMetrics(tmp_path, extra_args=("-dedup.minScrapeInterval=1ms",))
    vm.start()
    try:
        sink = sink_for(settings(vm, tmp_path))
        await sink.start()
        base = round(time.time()) - 60.0
        first = [Sample(time=base + i * 0.1, site="acme", channel="ph", value=float(i), unit="pH")
                 for i in range(100)]
        second = [Sample(time=base + 10 + i * 0.1, site="acme", channel="ph", value=float(100 + i),
                         unit="pH") for i in range(100)]
        huge = EventRecord(measurement="pretreat_note", tags={"site": "acme"},
                           fields={"text": "x" * 1_000_000}, time=base + 5)
        with caplog.at_level(logging.WARNING, logger="monitor.stores.influx"):
            sink.submit(first)
            sink.submit_events([huge])
            sink.submit(second)
            assert await sink.wait_drained(20)
        counters = sink.counters
        await sink.close()
        assert counters.quarantined == 1 and counters.queue_depth == 0
        assert counters.points_sent == 201  # acknowledged: 200 written + 1 quarantined
        box = Outbox(path=tmp_path / "queue.sqlite", budget_bytes=1 << 20)
        rows = box.quarantined()
        box.close()
        assert len(rows) == 1 and rows[0].payload.startswith(b"pretreat_note,site=acme text=\"xxx")
        assert rows[0].reason.startswith("HTTP 400") and "too long line" in rows[0].reason
        assert any("quarantined" in r.getMessage() for r in caplog.records)
        series = by_name(vm.wait_for_points('{__name__="ph_value"}', 200))
        assert series["ph_value"]["values"] == [float(i) for i in range(200)]
    finally:
        vm.stop()


@pytest.fixture
def guarded(tmp_path: Path) -> Iterator[VictoriaMetrics]:
    """VictoriaMetrics that demands HTTP Basic auth. It has no bearer-token check of its own: InfluxDB 2.x
    token checking is exercised here through auth_scheme = "basic" (the same 401 path)."""
    vm = VictoriaMetrics(tmp_path, extra_args=("-httpAuth.username=pretreat",
                                               "-httpAuth.password=correct-horse"))
    vm.start()
    try:
        yield vm
    finally:
        vm.stop()


@pytest.mark.parametrize(("scheme", "secret"), [
    (AuthScheme.BASIC, "pretreat:wrong-password"),
    (AuthScheme.TOKEN, "correct-horse"),  # a Token header where the server wants Basic: refused too
])
async def test_bad_credentials_are_a_clear_startup_error(guarded: VictoriaMetrics, tmp_path: Path,
                                                         scheme: AuthScheme, secret: str) -> None:
    token_file = tmp_path / "influx.token"
    token_file.write_text(secret + "\n")
    s = settings(guarded, tmp_path, token_file=token_file, auth_scheme=scheme)
    sink = sink_for(s)
    with pytest.raises(InfluxStartupError) as err:
        await sink.start()
    message = str(err.value)
    assert "refused the credentials (HTTP 401" in message and str(token_file) in message
    assert secret not in message and "horse" not in message
    await sink.close()
    Outbox(path=s.queue_path, budget_bytes=100).close()  # the failed start released the queue file


async def test_good_basic_credentials_write(guarded: VictoriaMetrics, tmp_path: Path) -> None:
    token_file = tmp_path / "influx.token"
    token_file.write_text("pretreat:correct-horse\n")
    sink = sink_for(settings(guarded, tmp_path, token_file=token_file, auth_scheme=AuthScheme.BASIC))
    await sink.start()
    t = round(time.time()) - 5.0
    sink.submit([Sample(time=t, site="acme", channel="ph", value=7.5, unit="pH")])
    assert await sink.wait_drained(10)
    await sink.close()
    auth = "Basic " + base64.b64encode(b"pretreat:correct-horse").decode()
    series = by_name(guarded.wait_for_points('{__name__="ph_value"}', 1, auth=auth))
    assert series["ph_value"]["values"] == [7.5] and series["ph_value"]["timestamps"] == [ms(t)]


async def test_unreachable_at_start_then_restart_resumes_the_queue(tmp_path: Path) -> None:
    vm = VictoriaMetrics(tmp_path)  # not started: nothing listens on its port
    s = settings(vm, tmp_path)
    base = round(time.time()) - 120.0
    samples = [Sample(time=base + i * 0.1, site="acme", channel="ph", value=float(i), unit="pH")
               for i in range(500)]
    first = sink_for(s)
    await first.start()  # not an error: store and forward
    assert not first.counters.server_up
    first.submit(samples[:300])
    await first.flush()
    await first.close()  # graceful stop during the outage: the queue stays on disk

    vm.start()
    try:
        second = sink_for(s)
        await second.start()
        assert second.counters.resumed_at_start == 300  # queue_depth may already be falling
        second.submit(samples[300:])
        assert await second.wait_drained(20)
        await second.close()
        series = by_name(vm.wait_for_points('{__name__="ph_value"}', 500))
        assert series["ph_value"]["values"] == [float(i) for i in range(500)]
    finally:
        vm.stop()


async def test_disk_budget_drops_oldest_counted_and_alarmed(victoria: VictoriaMetrics,
                                                             tmp_path: Path) -> None:
    alarms: list[tuple[bool, str]] = []
    s = settings(victoria, tmp_path, disk_budget_mb=0.02, alarm_threshold_pct=50.0)  # ~20 KiB of lines
    sink = sink_for(s, on_queue_alarm=lambda active, msg: alarms.append((active, msg)))
    await sink.start()
    await asyncio.to_thread(victoria.stop)
    base = round(time.time()) - 300.0
    samples = [Sample(time=base + i * 0.1, site="acme", channel="ph", value=float(i), unit="pH")
               for i in range(1000)]
    for i in range(0, 1000, 20):
        sink.submit(samples[i:i + 20])
        await sink.flush()
    await asyncio.sleep(0.05)  # let the loop run the alarm callbacks
    full = sink.counters
    assert full.dropped_over_budget > 0 and full.queue_bytes <= s.budget_bytes
    assert full.queue_depth + full.dropped_over_budget == 1000
    assert alarms[0][0] is True and "of its disk budget" in alarms[0][1]  # raised before anything dropped
    drops = [msg for active, msg in alarms if active and "dropping the oldest" in msg]
    assert len(drops) == 1  # alarmed once per episode, however many appends dropped points

    await asyncio.to_thread(victoria.start)
    assert await sink.wait_drained(20)
    await asyncio.sleep(0.05)
    assert alarms[-1][0] is False  # cleared once the queue drained
    await sink.close()
    series = by_name(victoria.wait_for_points('{__name__="ph_value"}', full.queue_depth))
    kept = series["ph_value"]["values"]
    # exactly the newest points survive: a contiguous suffix, and nothing else is missing
    assert kept == [float(i) for i in range(full.dropped_over_budget, 1000)]


async def test_health_counters_are_written_as_pretreat_health(victoria: VictoriaMetrics,
                                                             tmp_path: Path) -> None:
    sink = sink_for(settings(victoria, tmp_path), health_interval=0.1)
    await sink.start()
    sink.submit([Sample(time=time.time() - 1, site="acme", channel="ph", value=7.0, unit="pH")])
    sink.submit_health("historian", {"samples_written": 42, "write_errors": 0, "path": "/x"})
    await asyncio.sleep(0.35)
    assert await sink.wait_drained(10)
    await sink.close()
    series = victoria.wait_for_points('{__name__=~"pretreat_health_.*"}', 8)
    names = {(s["metric"]["__name__"], s["metric"]["component"]) for s in series}
    assert ("pretreat_health_samples_written", "historian") in names
    assert ("pretreat_health_path", "historian") not in names  # strings are not counters
    assert {("pretreat_health_queue_depth", "influx"), ("pretreat_health_points_sent", "influx"),
            ("pretreat_health_server_up", "influx"), ("pretreat_health_started", "influx")} <= names
    written = next(s for s in series if s["metric"]["__name__"] == "pretreat_health_samples_written")
    assert written["values"] == [42]


def _queued(path: Path) -> list[tuple[int, list[float]]]:
    """(count, values) of each record left in a closed sink's queue file, oldest first."""
    box = Outbox(path=path, budget_bytes=1 << 30)
    try:
        records = box.peek(max_items=1 << 30)
    finally:
        box.close()
    return [(r.count, [float(line.split(b"value=")[1].split(b",")[0]) for line in r.payload.split(b"\n")])
            for r in records]


def _burst(n: int) -> list[Sample]:
    base = round(time.time()) - 3600.0
    return [Sample(time=base + i * 0.01, site="acme", channel="ph", value=float(i), unit="pH") for i in range(n)]


async def test_a_burst_is_queued_as_full_batches_in_bounded_transactions(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    transactions: list[list[int]] = []  # payload sizes of each append_many call
    append = Outbox.append_many

    def spy(self: Outbox, items: Any, **kw: Any) -> list[int]:
        transactions.append([len(p) for p, _ in items])
        return append(self, items, **kw)

    monkeypatch.setattr(Outbox, "append_many", spy)
    vm = VictoriaMetrics(tmp_path)  # never started: everything stays queued
    s = settings(vm, tmp_path, batch_size=1000)
    sink = sink_for(s)
    await sink.start()
    sink.submit(_burst(30_000))  # ~3 MB of lines, more than one transaction's worth
    await sink.flush()
    await sink.close()
    records = _queued(s.queue_path)
    assert [count for count, _ in records] == [1000] * 30  # each record one full request body
    assert [v for _, values in records for v in values] == [float(i) for i in range(30_000)]
    assert len(transactions) >= 2  # a transaction closes at the first record that reaches the bound
    assert all(sum(sizes[:-1]) < APPEND_GROUP_BYTES for sizes in transactions)


async def test_a_failed_append_is_retried_in_order_without_loss_or_duplicates(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = 0
    append = Outbox.append_many

    def fail_first(self: Outbox, items: Any, **kw: Any) -> list[int]:
        nonlocal calls
        calls += 1
        if calls == 1:  # the first transaction of the burst, while the rest is still being formatted
            raise OSError(28, "No space left on device")
        return append(self, items, **kw)

    monkeypatch.setattr(Outbox, "append_many", fail_first)
    vm = VictoriaMetrics(tmp_path)
    s = settings(vm, tmp_path, batch_size=1000)
    sink = sink_for(s)
    await sink.start()
    sink.submit(_burst(30_000))
    await sink.flush()  # returns once the retry made everything durable
    counters = sink.counters
    await sink.close()
    assert counters.queue_errors == 1 and counters.pending_in_memory == 0 and counters.queue_depth == 30_000
    assert calls >= 3
    records = _queued(s.queue_path)
    assert [v for _, values in records for v in values] == [float(i) for i in range(30_000)]
    assert all(count == len(values) for count, values in records)


async def test_flush_and_wait_drained_are_woken_not_polled(victoria: VictoriaMetrics, tmp_path: Path) -> None:
    # The threads wake the event loop only when a flush()/wait_drained() waits; each must still return as
    # soon as its condition holds, not at its 0.5 s re-check (20 of those would take 10 s).
    sink = sink_for(settings(victoria, tmp_path, flush_interval=5.0))
    await sink.start()
    samples = _burst(2000)
    t0 = time.monotonic()
    for i in range(0, 1000, 100):
        sink.submit(samples[i:i + 100])
        await sink.flush()
    for i in range(1000, 2000, 100):
        sink.submit(samples[i:i + 100])
        assert await sink.wait_drained(10)
    elapsed = time.monotonic() - t0
    await sink.close()
    # woken, they take ~1 s; polled, at least 10 s: the bound between leaves room for a loaded machine
    assert elapsed < 7.0, f"20 flush/drain waits took {elapsed:.1f} s"
    series = by_name(victoria.wait_for_points('{__name__="ph_value"}', 2000))
    assert series["ph_value"]["values"] == [float(i) for i in range(2000)]


async def test_wait_drained_returns_once_the_last_batch_is_counted_as_sent(victoria: VictoriaMetrics,
                                                                          tmp_path: Path) -> None:
    """The queue reads empty as soon as the sender has removed the acknowledged batch; `points_sent` counts it a
    moment later. `wait_drained` must not return in between (CI once saw 390 of 395 points counted after it).
    The sender here pauses 1 s after each removal, longer than the waiter's 0.5 s re-check."""
    sink = sink_for(settings(victoria, tmp_path))
    await sink.start()
    outbox = sink._outbox
    assert outbox is not None
    remove = outbox.ack

    def slow_ack(ids: Any) -> int:
        n = remove(ids)
        time.sleep(1.0)
        return n

    outbox.ack = slow_ack  # type: ignore[method-assign]
    samples = _burst(50)
    sink.submit(samples)
    assert await sink.wait_drained(30)
    assert sink.counters.points_sent == 50
    await sink.close()


async def test_close_sends_what_was_submitted_last_while_the_server_is_up(victoria: VictoriaMetrics,
                                                                          tmp_path: Path) -> None:
    """A SIGTERM right after a poll: its points reach the server at close (a short, bounded drain while the
    server is up) instead of waiting in the durable queue for the next start."""
    sink = sink_for(settings(victoria, tmp_path, flush_interval=5.0))  # the writer would not wake by itself
    await sink.start()
    sink.submit([Sample(time=time.time(), site="acme", channel="ph", value=7.0, unit="pH")])
    assert await sink.wait_drained(10)  # the server is known to be up
    last = [Sample(time=time.time() + i * 0.001, site="acme", channel="ph", value=7.5, unit="pH") for i in range(5)]
    sink.submit(last)
    await sink.close()
    counters = sink.counters
    assert counters.points_sent == 6 and counters.queue_depth == 0
    series = by_name(victoria.wait_for_points('{__name__="ph_value"}', 6))
    assert series["ph_value"]["timestamps"][-5:] == [ms(s.time) for s in last]



async def test_with_a_historian_only_committed_readings_are_queued_and_lost_ones_are_re_queued_identically(
        tmp_path: Path) -> None:
    """The sink queues a reading only once the historian committed it and marks the historian seq reached;
    readings the historian committed but the sink never queued (its memory lost in a crash) are re-queued at
    the next start as the very lines the live path writes (timestamps, values, tags; bad readings too)."""
    from monitor.stores.historian import Historian
    from monitor.stores.influx_lines import SampleFormatter
    from monitor.stores.influx_recovery import MARK

    vm = VictoriaMetrics(tmp_path)  # never started: everything stays queued
    s = settings(vm, tmp_path, batch_size=100, flush_interval=0.05)
    path = tmp_path / "h.sqlite"
    base = round(time.time()) - 60.0
    samples = [Sample(time=base + i * 0.1 + 1e-4, site="acme", channel="ph", value=7 + i / 1000, unit="pH")
               if i % 7 else Sample(time=base + i * 0.1, site="acme", channel="ph", value=None, unit="pH",
                                    quality=Quality.COMM_FAILURE, reason="no reply within 0.5 s")
               for i in range(300)]
    historian = Historian(path=path, commit_interval=3600.0)  # commits only when flushed
    await historian.start()
    sink = sink_for(s)
    await sink.start(historian)
    sink.submit(samples[:100], historian.submit(samples[:100]))
    await asyncio.sleep(0.3)  # several writer wake-ups: none may queue what the historian has not committed
    assert sink.counters.pending_in_memory == 100 and sink.counters.queue_depth == 0
    await historian.flush()
    await sink.flush()
    assert sink.counters.queue_depth == 100
    historian.submit(samples[100:])  # committed by the historian; the sink's copy was in its lost memory
    await historian.close()
    await sink.close()
    box = Outbox(path=s.queue_path, budget_bytes=1 << 30)
    assert box.mark(MARK) == 101
    box.close()

    historian = Historian(path=path)
    await historian.start()
    again = sink_for(s)
    await again.start(historian)
    await again.flush()
    assert again.counters.requeued_after_crash == 200
    await again.close()
    await historian.close()
    box = Outbox(path=s.queue_path, budget_bytes=1 << 30)
    lines = [line for r in box.peek(max_items=1 << 20) for line in r.payload.split(b"\n")]
    assert box.mark(MARK) == 301
    box.close()
    live = [line.encode() for line in SampleFormatter(instruments=INSTRUMENTS).lines(samples)]
    assert [x for x in lines if not x.startswith(b"pretreat_health")] == live
