"""Benchmark of the alarm journal and engine (not a test; run it by hand or from `make bench`).

    .venv/bin/python bench/bench_journal.py [--runs 3] [--batched 50000] [--single 2000]

Issue 4 asks the journal to sustain at least 5,000 alarm transitions per second. Measured, median of
``--runs`` runs, each into a fresh SQLite file (WAL) in a temporary folder, printed as a markdown table with
the machine it ran on:

- journal, batched: `Journal.append_many` of transition records, 1,000 per transaction (a tick or a poll
  cycle that raises many alarms at once), ``synchronous=FULL`` (every commit reaches the disk);
- journal, one per transaction: `Journal.append`, one commit (and, with FULL, one fsync) per record: the worst
  case, where every transition arrives alone. Also with ``synchronous=NORMAL`` for comparison;
- engine, end to end: `AlarmEngine.apply_many` over 100 alarms, 100 inputs per call (one poll cycle of 100
  instruments), each input starting or ending an episode, so each makes a transition, an ``episode`` record
  and a state-row upsert, FULL; and `AlarmEngine.apply` one input per call (one commit each);
- verify: `Journal.verify` over everything the batched run wrote, records/s.

Transition payloads are realistic (site, channel, rule, states, priority, who, why, value, limit, citation).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Literal

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from alarms.engine import AlarmEngine
from alarms.journal import Entry, Journal
from alarms.model import AlarmInput, AlarmSettings, Kind, Priority, State, Transition
from bench.machine import machine

T0 = 1_767_225_600.0  # 2026-01-01T00:00:00Z
SITE = "acme-plating"




def transition(i: int) -> Entry:
    t = Transition(time=T0 + i * 0.01, alarm_id=f"{SITE}/ph{i % 100}/ph_high", kind=Kind.RAISE,
                   from_state=State.NORMAL, to_state=State.ACTIVE_UNACKED, priority=Priority.HIGH,
                   who="system", why=f"condition started at {T0 + i * 0.01:.3f}", value=9.0 + (i % 97) / 100,
                   limit=9.0, citation="Southeast § 112-5A(1)(c)")
    return Entry("transition", t.to_payload(), t.time)


def timed(fn: Callable[[Path], int]) -> tuple[float, int]:
    """(seconds, items) of one run of ``fn`` on a fresh file."""
    with tempfile.TemporaryDirectory(prefix="bench-journal-") as d:
        path = Path(d) / "journal.sqlite"
        start = time.perf_counter()
        n = fn(path)
        return time.perf_counter() - start, n


def journal_batched(n: int) -> Callable[[Path], int]:
    entries = [transition(i) for i in range(n)]

    def run(path: Path) -> int:
        j = Journal(path=path)
        for k in range(0, n, 1000):
            j.append_many(entries[k:k + 1000])
        j.close()
        return n
    return run


def journal_single(n: int, sync: Literal["FULL", "NORMAL"]) -> Callable[[Path], int]:
    entries = [transition(i) for i in range(n)]

    def run(path: Path) -> int:
        j = Journal(path=path, synchronous=sync)
        for e in entries:
            j.append(e.kind, e.payload, e.time)
        j.close()
        return n
    return run


def engine_inputs(n: int) -> list[AlarmInput]:
    """n inputs over 100 alarms; each flips its alarm's condition, so each makes exactly one transition."""
    return [AlarmInput(time=T0 + i * 0.01, site=SITE, channel=f"ph{i % 100}", rule="ph_high",
                       active=(i // 100) % 2 == 0, value=9.5 if (i // 100) % 2 == 0 else 8.0, limit=9.0,
                       citation="Southeast § 112-5A(1)(c)") for i in range(n)]


def engine_run(n: int, per_call: int) -> Callable[[Path], int]:
    inputs = engine_inputs(n)
    specs = [(SITE, f"ph{i}", "ph_high", AlarmSettings()) for i in range(100)]

    def run(path: Path) -> int:
        e = AlarmEngine(path=path, alarms=specs, now=T0)
        made = 0
        for k in range(0, n, per_call):
            batch = inputs[k:k + per_call]
            made += len(e.apply_many(batch, batch[-1].time))
        e.close()
        assert made == n, made
        return made
    return run


def verify_run(n: int) -> Callable[[Path], int]:
    fill = journal_batched(n)

    def run(path: Path) -> int:
        fill(path)
        j = Journal(path=path)
        start = time.perf_counter()
        result = j.verify()
        run.elapsed = time.perf_counter() - start  # type: ignore[attr-defined]
        j.close()
        assert result.ok and result.records == n
        return n
    return run


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--batched", type=int, default=50_000, help="records in the batched runs")
    p.add_argument("--single", type=int, default=2_000, help="records in the one-commit-per-record runs")
    a = p.parse_args()
    cases: list[tuple[str, Callable[[Path], int]]] = [
        ("journal, 1,000 per transaction, FULL", journal_batched(a.batched)),
        ("journal, 1 per transaction, FULL", journal_single(a.single, "FULL")),
        ("journal, 1 per transaction, NORMAL", journal_single(a.single, "NORMAL")),
        ("engine apply_many, 100 inputs per call, FULL", engine_run(a.batched, 100)),
        ("engine apply, 1 input per call, FULL", engine_run(a.single, 1)),
    ]
    print(f"Machine: {machine()}\n")
    print("| case | items per run | median transitions/s | runs (/s) |")
    print("|---|---:|---:|---|")
    for name, fn in cases:
        rates = []
        for _ in range(a.runs):
            secs, n = timed(fn)
            rates.append(n / secs)
        runs = ", ".join(f"{r:,.0f}" for r in rates)
        print(f"| {name} | {n:,} | {statistics.median(rates):,.0f} | {runs} |", flush=True)
    v = verify_run(a.batched)
    vrates = []
    for _ in range(a.runs):
        timed(v)
        vrates.append(a.batched / v.elapsed)  # type: ignore[attr-defined]
    print(f"| verify (records/s) | {a.batched:,} | {statistics.median(vrates):,.0f} | "
          f"{', '.join(f'{r:,.0f}' for r in vrates)} |")


if __name__ == "__main__":
    main()
