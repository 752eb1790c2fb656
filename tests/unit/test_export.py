"""`pretreat readings`: exact CSV / JSON Lines output, bounds, error exits, and the parallel path."""

from __future__ import annotations

import asyncio
import csv
import io
import json
import math
import subprocess
import sys
import tempfile
from datetime import datetime
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from monitor.cli import main as cli
from monitor.export import export_readings
from monitor.export_render import CSV_HEADER
from monitor.read.times import parse_time
from monitor.sample import Quality, Sample
from monitor.stores.historian import Historian

T0 = 1_767_225_600.0  # 2026-01-01T00:00:00Z
DAY = 86_400
ROOT = Path(__file__).resolve().parents[2]


def record(path: Path, *batches: list[Sample]) -> None:
    async def go() -> None:
        h = Historian(path=path)
        await h.start()
        for batch in batches:
            h.submit(batch)
        await h.close()
        assert h.counters.samples_written == sum(map(len, batches))

    asyncio.run(go())


def good(t: float, value: float, unit: str = "pH", channel: str = "ph") -> Sample:
    return Sample(time=t, site="acme", channel=channel, value=value, unit=unit)


def bad(t: float, reason: str, quality: Quality = Quality.COMM_FAILURE) -> Sample:
    return Sample.bad(time=t, site="acme", channel="ph", unit="pH", quality=quality, reason=reason)


SAMPLES = [
    good(T0 + 0.25, 7.01),
    good(T0 + 1, 7.0),
    bad(T0 + 2.0004, 'no reply, "timeout"'),  # rounds to the whole second
    good(T0 + 3.9996, 0.1 + 0.2),  # rounds up into the next second
    bad(T0 + 4, "line one\nline two", Quality.DEVICE_EXCEPTION),
    good(T0 + DAY - 0.0006, 6.0),  # still 23:59:59.999
    good(T0 + DAY - 0.0004, 5.0),  # rounds to the next midnight: written in the next day
    good(T0 + 40 * DAY + 3661.5, -0.0),
    # a unit change makes another series of the same channel
    Sample(time=T0 + 40 * DAY + 3662, site="acme", channel="ph", value=1e-7, unit="pH, raw"),
    good(T0 * 1000, 8.0),  # a device sending milliseconds as seconds: year 57970
    good(-1e12, 9.0),  # before year 1
    Sample(time=T0 + 5, site="acme", channel="flow", value=1.0, unit="gpm"),
]

EXPECTED_CSV = CSV_HEADER + "".join(line + "\n" for line in [
    "-1000000000000.0,acme,ph,9.0,pH,good,,",
    "2026-01-01T00:00:00.250Z,acme,ph,7.01,pH,good,,",
    "2026-01-01T00:00:01Z,acme,ph,7.0,pH,good,,",
    '2026-01-01T00:00:02Z,acme,ph,,pH,comm_failure,"no reply, ""timeout""",',
    "2026-01-01T00:00:04Z,acme,ph,0.30000000000000004,pH,good,,",
    '2026-01-01T00:00:04Z,acme,ph,,pH,device_exception,"line one\nline two",',
    "2026-01-01T23:59:59.999Z,acme,ph,6.0,pH,good,,",
    "2026-01-02T00:00:00Z,acme,ph,5.0,pH,good,,",
    "2026-02-10T01:01:01.500Z,acme,ph,0.0,pH,good,,",
    '2026-02-10T01:01:02Z,acme,ph,1e-07,"pH, raw",good,,',
    "1767225600000.0,acme,ph,8.0,pH,good,,",
])


@pytest.fixture(scope="module")
def db() -> Path:
    path = Path(tempfile.mkdtemp(prefix="test-export-")) / "h.sqlite"
    record(path, SAMPLES)
    return path


def export(db: Path, **kw: object) -> str:
    out = io.StringIO()
    args: dict[str, object] = dict(site="acme", channel="ph", start=None, end=None, fmt="csv")
    args.update(kw)
    export_readings(db, out=out, **args)  # type: ignore[arg-type]
    return out.getvalue()


def test_csv_is_exact_and_parses_back(db: Path) -> None:
    text = export(db)
    assert text == EXPECTED_CSV
    rows = list(csv.DictReader(io.StringIO(text)))
    assert rows[4]["value"] == "0.30000000000000004" and float(rows[4]["value"]) == 0.1 + 0.2
    assert rows[5]["reason"] == "line one\nline two"


def test_json_lines_carry_the_same_rows(db: Path) -> None:
    lines = export(db, fmt="json").splitlines()
    assert lines[1] == ('{"time":"2026-01-01T00:00:00.250Z","site":"acme","channel":"ph","value":7.01,'
                        '"unit":"pH","quality":"good","reason":"","calibration":null}')
    assert lines[3] == ('{"time":"2026-01-01T00:00:02Z","site":"acme","channel":"ph","value":null,'
                        '"unit":"pH","quality":"comm_failure","reason":"no reply, \\"timeout\\"","calibration":null}')
    objs = [json.loads(line) for line in lines]
    csv_rows = list(csv.DictReader(io.StringIO(EXPECTED_CSV)))
    assert len(objs) == len(csv_rows) == 11
    for obj, row in zip(objs, csv_rows, strict=True):
        assert obj["time"] == row["time"] and obj["unit"] == row["unit"] and obj["reason"] == row["reason"]
        assert obj["value"] == (float(row["value"]) if row["value"] else None)


def test_readings_of_an_overdue_instrument_are_marked(db: Path) -> None:
    """Rows inside an overdue span say so in the calibration column, split exactly at the span's bounds (start
    inclusive, end exclusive), in CSV and JSON alike; the rest stay empty."""
    spans = ((-math.inf, T0 + 1, "no calibration recorded"), (T0 + 3.9996, T0 + DAY - 0.0004, "overdue"))
    rows = list(csv.DictReader(io.StringIO(export(db, overdue=spans))))
    assert [(r["time"], r["calibration"]) for r in rows[:8]] == [
        ("-1000000000000.0", "no calibration recorded"), ("2026-01-01T00:00:00.250Z", "no calibration recorded"),
        ("2026-01-01T00:00:01Z", ""), ("2026-01-01T00:00:02Z", ""), ("2026-01-01T00:00:04Z", "overdue"),
        ("2026-01-01T00:00:04Z", "overdue"), ("2026-01-01T23:59:59.999Z", "overdue"), ("2026-01-02T00:00:00Z", "")]
    assert rows[5]["quality"] == "device_exception" and rows[5]["reason"] == "line one\nline two"
    assert [r["calibration"] for r in rows[8:]] == ["", "", ""]
    objs = [json.loads(line) for line in export(db, fmt="json", overdue=spans).splitlines()]
    assert [o["calibration"] or "" for o in objs] == [r["calibration"] for r in rows]
    assert export(db, overdue=spans, jobs=2) == export(db, overdue=spans)


def test_infinite_values_stay_visible_and_json_stays_valid(tmp_path: Path) -> None:
    path = tmp_path / "inf.sqlite"
    record(path, [good(T0, math.inf), good(T0 + 1, -math.inf), bad(T0 + 2, "timeout"), good(T0 + 3, 1.5)])
    assert [r["value"] for r in csv.DictReader(io.StringIO(export(path)))] == ["inf", "-inf", "", "1.5"]
    assert [json.loads(line)["value"] for line in export(path, fmt="json").splitlines()] == [
        "inf", "-inf", None, 1.5]


def test_bounds_are_start_inclusive_end_exclusive(db: Path) -> None:
    text = export(db, start=T0 + 1, end=T0 + 4)
    assert [r["time"] for r in csv.DictReader(io.StringIO(text))] == [
        "2026-01-01T00:00:01Z", "2026-01-01T00:00:02Z", "2026-01-01T00:00:04Z"]  # the 3.9996 one
    assert export(db, start=T0 + DAY, end=T0 + 2 * DAY) == CSV_HEADER  # 23:59:59.9996 is before the start
    assert export(db, start=T0 + 5, end=T0 + 5) == CSV_HEADER


def test_parse_time_accepts_offsets_z_and_dates_only() -> None:
    assert parse_time("2026-01-01T00:00:00Z") == T0
    assert parse_time("2025-12-31T19:00:00-05:00") == T0
    assert parse_time("2026-01-01T00:00:00.250+00:00") == T0 + 0.25
    assert parse_time("2026-01-01") == T0  # a date alone: midnight UTC


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = cli(["readings", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_writes_stdout_and_files(db: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(capsys, "--db", str(db), "--site", "acme", "--channel", "ph")
    assert (code, out) == (0, EXPECTED_CSV)
    target = tmp_path / "ph.jsonl"
    code, out, _ = run_cli(capsys, "--db", str(db), "--site", "acme", "--channel", "ph", "--format", "json",
                           "--from", "2026-01-01T00:00:01Z", "--to", "2026-01-01T00:00:02Z",
                           "--output", str(target))
    assert (code, out) == (0, "")
    assert [json.loads(line)["value"] for line in target.read_text().splitlines()] == [7.0]
    assert not list(tmp_path.glob("*.part"))


@pytest.mark.parametrize(("args", "message"), [
    (["--site", "other", "--channel", "ph"], "sites recorded: acme"),
    (["--site", "acme", "--channel", "phh"], "its channels: flow, ph"),
    (["--site", "acme", "--channel", "ph", "--from", "yesterday"], "'yesterday' is not a time"),
    (["--site", "acme", "--channel", "ph", "--from", "2026-01-01T05:00"], "has no UTC offset"),
    (["--site", "acme", "--channel", "ph", "--from", "2026-01-02", "--to", "2026-01-01"],
     "--from is after --to"),
])
def test_cli_usage_errors_exit_2(db: Path, capsys: pytest.CaptureFixture[str], args: list[str],
                                 message: str) -> None:
    code, out, err = run_cli(capsys, "--db", str(db), *args)
    assert code == 2 and message in err and out == ""


def test_cli_missing_db_and_config_sources(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run_cli(capsys, "--db", str(tmp_path / "nope.sqlite"), "--site", "a", "--channel", "b")
    assert code == 2 and "no historian file" in err
    site = (ROOT / "config" / "sites" / "demo.toml").read_text()
    conf = tmp_path / "site.toml"
    conf.write_text(site.replace('historian = "../../var/demo/pretreat.sqlite"', 'historian = "h.sqlite"'))
    code, _, err = run_cli(capsys, "--config", str(conf), "--site", "acme-plating", "--channel", "ph")
    assert code == 2 and "no historian file" in err and str(tmp_path / "h.sqlite") in err
    record(tmp_path / "h.sqlite",
           [Sample(time=T0, site="acme-plating", channel="flow", value=1.0, unit="gpm")])
    code, out, err = run_cli(capsys, "--config", str(conf), "--site", "acme-plating", "--channel", "ph")
    assert (code, out) == (0, CSV_HEADER) and "no readings" in err  # configured, nothing recorded yet
    code, out, err = run_cli(capsys, "--config", str(conf), "--site", "acme-plating", "--channel", "flow")
    assert (code, out) == (0, CSV_HEADER + "2026-01-01T00:00:00Z,acme-plating,flow,1.0,gpm,good,,\n")
    conf.write_text("[daemon]\nbogus = 1\n")
    code, _, err = run_cli(capsys, "--config", str(conf), "--site", "acme-plating", "--channel", "ph")
    assert code == 2 and "invalid site file" in err


def test_parallel_rendering_in_the_real_cli_matches_serial(tmp_path: Path) -> None:
    path = tmp_path / "days.sqlite"
    samples = [good(T0 + i * 60 + 0.125 * (i % 8), 7.0 + (i % 50) * 0.01) for i in range(6 * 24 * 60)]
    samples[1000] = bad(samples[1000].time, "timeout")
    record(path, samples[::2], samples[1::2])
    serial = export(path, fmt="json")
    proc = subprocess.run([sys.executable, "-m", "monitor.cli", "readings", "--db", str(path),
                           "--site", "acme", "--channel", "ph", "--format", "json", "--jobs", "2"],
                          cwd=ROOT, capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == serial and len(serial.splitlines()) == len(samples)


times = st.floats(min_value=0, max_value=4e9, allow_nan=False)
values = st.floats(allow_nan=False, allow_infinity=False)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(times, values), min_size=1, max_size=40))
def test_every_row_reads_back_within_half_a_millisecond_and_bit_exact(
        pairs: list[tuple[float, float]]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "h.sqlite"
        record(path, [good(t, v) for t, v in pairs])
        rows = list(csv.DictReader(io.StringIO(export(path))))
    expected = sorted(pairs, key=lambda p: p[0])  # stable: equal times keep arrival order
    assert len(rows) == len(expected)
    for row, (t, v) in zip(rows, expected, strict=True):
        stamp = row["time"]
        assert stamp.endswith("Z")
        parsed = datetime.fromisoformat(stamp).timestamp()
        assert abs(parsed - t) <= 0.0005 + 1e-6 * max(1.0, abs(t) / 1e9)
        assert ("." in stamp) == (round(parsed * 1000) % 1000 != 0)  # milliseconds only when fractional
        assert float(row["value"]) == v  # -0.0 is written 0.0 (documented), which compares equal
        assert v == 0 or math.copysign(1, float(row["value"])) == math.copysign(1, v)
